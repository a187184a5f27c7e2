"""The shipped card pool, card-definition validation and deck rules (DESIGN section 3:
40-60 cards, 30-card decks with at most 2 copies; section 4: seeded default decks)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Callable

import pytest

import engine
from engine import CardPoolError, DeckError

POOL_FILE = Path(engine.__file__).with_name("cards.json")
RAW_POOL: list[dict[str, Any]] = json.loads(POOL_FILE.read_text(encoding="utf-8"))["cards"]

CREATURE = {"id": 99, "name": "Test Beast", "type": "creature", "cost": 2, "attack": 2, "health": 3,
            "keywords": ["guard"]}
SPELL = {"id": 98, "name": "Test Bolt", "type": "spell", "cost": 1, "effect": "damage",
         "target": "any_character", "amount": 2}
BUFF = {"id": 97, "name": "Test Buff", "type": "spell", "cost": 1, "effect": "buff",
        "target": "friendly_creature", "attack": 1, "health": 1}
GRANT = {"id": 96, "name": "Test Grant", "type": "spell", "cost": 1, "effect": "grant_keyword",
         "target": "friendly_creature", "keyword": "ward"}
AREA = {"id": 95, "name": "Test Quake", "type": "spell", "cost": 3, "effect": "area_damage",
        "target": "none", "amount": 2, "scope": "all_creatures"}


def sample_deck() -> list[int]:
    """A valid 30-card deck: two copies of the first 15 pool ids."""
    return [cid for cid in engine.CARD_IDS[:15] for _ in range(2)]


# ---------------------------------------------------------------------------- shipped pool

def test_shipped_pool_size_and_unique_ids_and_names() -> None:
    assert 40 <= len(RAW_POOL) <= 60
    assert len({c["id"] for c in RAW_POOL}) == len(RAW_POOL)
    assert len({c["name"] for c in RAW_POOL}) == len(RAW_POOL)
    assert len(engine.CARDS) == len(RAW_POOL)
    assert engine.CARD_IDS == tuple(sorted(c["id"] for c in RAW_POOL))


def test_shipped_pool_parses_and_round_trips_to_its_json() -> None:
    parsed = engine.parse_card_pool(copy.deepcopy(RAW_POOL))
    assert parsed == engine.CARDS
    # to_json lists keywords in the canonical engine.KEYWORDS order; compare them as sets
    def norm(record: dict[str, Any]) -> dict[str, Any]:
        return {**record, "keywords": set(record["keywords"])} if "keywords" in record else record

    assert [norm(engine.CARDS[c["id"]].to_json()) for c in RAW_POOL] == [norm(c) for c in RAW_POOL]
    assert engine.load_card_pool() == engine.CARDS


def test_shipped_pool_covers_every_keyword_effect_target_rule_and_scope() -> None:
    """The rules promise these mechanics; the pool must be able to exercise each of them."""
    cards = engine.CARDS.values()
    keywords = {k for c in cards if c.is_creature for k in engine.cards.mask_to_keywords(c.keywords)}
    assert keywords == set(engine.KEYWORDS)
    spells = [c for c in cards if not c.is_creature]
    assert {c.effect for c in spells} == set(engine.cards.EFFECTS)
    assert {c.target for c in spells} == set(engine.cards.TARGET_RULES)
    assert {c.scope for c in spells if c.effect == "area_damage"} == set(engine.cards.AREA_SCOPES)


def test_shipped_pool_fits_deck_rules() -> None:
    """Two copies of every card must be enough to fill a 30-card deck."""
    assert len(engine.CARDS) * engine.MAX_COPIES >= engine.DECK_SIZE
    assert all(0 <= c.cost <= 10 for c in engine.CARDS.values())
    assert all(c.health >= 1 for c in engine.CARDS.values() if c.is_creature)


# ---------------------------------------------------------------------------- bad card definitions

def _set(base: dict, **changes: Any) -> Callable[[], list[Any]]:
    def build() -> list[Any]:
        record = {**copy.deepcopy(base), **changes}
        return [copy.deepcopy(CREATURE), record] if record.get("id") != CREATURE["id"] else [record]
    return build


def _drop(base: dict, field: str) -> Callable[[], list[Any]]:
    def build() -> list[Any]:
        record = copy.deepcopy(base)
        del record[field]
        return [record]
    return build


_BAD_CARDS: list[tuple[str, Callable[[], list[Any]], list[str]]] = [
    ("unknown type", _set(CREATURE, type="artifact"),
     ["card 99 (Test Beast)", "field 'type' must be 'creature' or 'spell', got 'artifact'"]),
    ("negative cost", _set(CREATURE, cost=-1), ["card 99 (Test Beast)", "field 'cost' must be within 0..10, got -1"]),
    ("cost too high", _set(SPELL, cost=11), ["card 98 (Test Bolt)", "field 'cost' must be within 0..10, got 11"]),
    ("zero health", _set(CREATURE, health=0), ["card 99 (Test Beast)", "field 'health' must be within 1..12"]),
    ("missing attack", _drop(CREATURE, "attack"), ["card 99 (Test Beast)", "field 'attack' must be an integer"]),
    ("missing name", _drop(CREATURE, "name"), ["card 99", "field 'name' must be a non-empty string"]),
    ("missing id", _drop(CREATURE, "id"), ["card #0 in the pool", "field 'id' must be an integer"]),
    ("missing spell amount", _drop(SPELL, "amount"), ["card 98 (Test Bolt)", "needs field(s) ['amount']"]),
    ("missing scope", _drop(AREA, "scope"), ["card 95 (Test Quake)", "needs field(s) ['scope']"]),
    ("unknown keyword", _set(CREATURE, keywords=["flying"]),
     ["card 99 (Test Beast)", "field 'keywords' must be a list drawn from", "'flying'"]),
    ("keywords not a list", _set(CREATURE, keywords="guard"), ["card 99 (Test Beast)", "field 'keywords'"]),
    ("repeated keyword", _set(CREATURE, keywords=["ward", "ward"]), ["card 99 (Test Beast)", "repeats a keyword"]),
    ("bool attack", _set(CREATURE, attack=True),
     ["card 99 (Test Beast)", "field 'attack' must be an integer, got True"]),
    ("bool cost", _set(SPELL, cost=False), ["card 98 (Test Bolt)", "field 'cost' must be an integer, got False"]),
    ("float amount", _set(SPELL, amount=2.0), ["card 98 (Test Bolt)", "field 'amount' must be an integer, got 2.0"]),
    ("string id", _set(CREATURE, id="99"), ["card '99' (Test Beast)", "field 'id' must be an integer, got '99'"]),
    ("unknown creature field", _set(CREATURE, flavor="grr"),
     ["card 99 (Test Beast)", "unknown field(s) for a creature: ['flavor']"]),
    ("unknown spell field", _set(SPELL, keywords=[]),
     ["card 98 (Test Bolt)", "unknown field(s) for effect 'damage': ['keywords']"]),
    ("unknown effect", _set(SPELL, effect="teleport"),
     ["card 98 (Test Bolt)", "field 'effect' must be one of", "'teleport'"]),
    ("unknown target", _set(SPELL, target="everyone"),
     ["card 98 (Test Bolt)", "field 'target' must be one of", "'everyone'"]),
    ("draw with a target", _set(SPELL, effect="draw", target="enemy_hero"),
     ["card 98 (Test Bolt)", "effect 'draw' cannot use target rule 'enemy_hero'"]),
    ("heal the enemy hero", _set(SPELL, effect="heal", target="enemy_hero"),
     ["card 98 (Test Bolt)", "effect 'heal' cannot use target rule 'enemy_hero'"]),
    ("damage with no target", _set(SPELL, target="none"),
     ["card 98 (Test Bolt)", "effect 'damage' cannot use target rule 'none'"]),
    ("area scope", _set(AREA, scope="everyone"),
     ["card 95 (Test Quake)", "field 'scope' must be one of", "'everyone'"]),
    ("granted keyword", _set(GRANT, keyword="flying"),
     ["card 96 (Test Grant)", "field 'keyword' must be one of", "'flying'"]),
    ("empty buff", _set(BUFF, attack=0, health=0), ["card 97 (Test Buff)", "a buff must change attack or health"]),
    ("negative buff health", _set(BUFF, health=-1), ["card 97 (Test Buff)", "field 'health' must be within 0..12"]),
    ("duplicate id", lambda: [copy.deepcopy(CREATURE), {**SPELL, "id": 99}],
     ["card 99 (Test Bolt)", "duplicate card id 99 (already used by Test Beast)"]),
    ("duplicate name", lambda: [copy.deepcopy(CREATURE), {**SPELL, "name": "Test Beast"}],
     ["card 98 (Test Beast)", "duplicate card name 'Test Beast'"]),
    ("not an object", lambda: [copy.deepcopy(CREATURE), "Test Bolt"],
     ["card #1 in the pool", "a card definition must be a JSON object, got str"]),
]


@pytest.mark.parametrize(("build", "fragments"), [c[1:] for c in _BAD_CARDS], ids=[c[0] for c in _BAD_CARDS])
def test_parse_card_pool_rejects_bad_definitions(build: Callable[[], list[Any]], fragments: list[str]) -> None:
    with pytest.raises(CardPoolError) as err:
        engine.parse_card_pool(build())
    message = str(err.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"


@pytest.mark.parametrize("records", [[], {}, None, "cards"])
def test_parse_card_pool_rejects_a_non_list_or_empty_pool(records: Any) -> None:
    with pytest.raises(CardPoolError, match="the card pool must be a non-empty list of card definitions"):
        engine.parse_card_pool(records)


def test_parse_card_pool_accepts_each_template() -> None:
    """The templates used above are valid, so each failure is due to its one change."""
    pool = engine.parse_card_pool([CREATURE, SPELL, BUFF, GRANT, AREA])
    assert sorted(pool) == [95, 96, 97, 98, 99]
    assert pool[99].keywords == engine.cards.KEYWORD_BIT["guard"]
    assert (pool[97].buff_attack, pool[97].buff_health) == (1, 1)


def test_load_card_pool_rejects_wrong_header_and_unreadable_file(tmp_path: Path) -> None:
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"schema_version": 1, "ruleset": "arena-2", "cards": RAW_POOL}))
    with pytest.raises(CardPoolError, match="expected an object with schema_version 1 and ruleset 'arena-1'"):
        engine.load_card_pool(wrong)
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(CardPoolError, match="cannot read card pool"):
        engine.load_card_pool(broken)
    with pytest.raises(CardPoolError, match="cannot read card pool"):
        engine.load_card_pool(tmp_path / "missing.json")


# ---------------------------------------------------------------------------- decks

def test_validate_deck_accepts_a_valid_deck_as_a_tuple() -> None:
    deck = sample_deck()
    assert engine.validate_deck(deck) == tuple(deck)
    assert engine.validate_deck(iter(deck)) == tuple(deck)


@pytest.mark.parametrize(("deck", "message"), [
    (sample_deck()[:29], "deck must have exactly 30 cards, got 29"),
    (sample_deck() + [engine.CARD_IDS[20]], "deck must have exactly 30 cards, got 31"),
    ([], "deck must have exactly 30 cards, got 0"),
    (sample_deck()[:-1] + [999], "deck has card id(s) [999] that are not in the arena-1 pool"),
    (sample_deck()[:-2] + [0, -5], "deck has card id(s) [-5, 0] that are not in the arena-1 pool"),
    (sample_deck()[:-1] + ["33"], "deck must contain integer card ids; got '33'"),
    (sample_deck()[:-1] + [33.0], "deck must contain integer card ids; got 33.0"),
    (sample_deck()[:-1] + [True], "deck must contain integer card ids; got True"),
    (sample_deck()[:-1] + [None], "deck must contain integer card ids; got None"),
    ("1,2,3", "deck must be a list of 30 card ids, got str"),
    (None, "deck must be a list of 30 card ids, got NoneType"),
    (30, "deck must be a list of 30 card ids, got int"),
], ids=["29 cards", "31 cards", "empty", "unknown id", "zero and negative ids", "str id", "float id",
        "bool id", "None id", "string deck", "None deck", "int deck"])
def test_validate_deck_errors(deck: Any, message: str) -> None:
    with pytest.raises(DeckError) as err:
        engine.validate_deck(deck)
    assert message in str(err.value)


def test_validate_deck_three_copies_names_the_card() -> None:
    firebolt = next(c.id for c in engine.CARDS.values() if c.name == "Firebolt")
    deck = [cid for cid in engine.CARD_IDS if cid != firebolt][:27] + [firebolt] * 3
    with pytest.raises(DeckError) as err:
        engine.validate_deck(deck, "p1_deck")
    assert str(err.value) == (f"p1_deck has 3 copies of card {firebolt} (Firebolt); at most 2 are allowed")


def test_validate_deck_takes_any_order_and_int_subclasses_as_before() -> None:
    """A valid deck of plain ints is checked in one sort (the fast path); a third copy anywhere
    in the list, or ids of an int subclass, give what the step-by-step checks give."""
    import enum
    import random

    rng = random.Random(5)
    for _ in range(200):
        deck = sample_deck()
        rng.shuffle(deck)
        assert engine.validate_deck(deck) == tuple(deck)
        third = deck[:29] + [deck[rng.randrange(29)]]
        if max(third.count(c) for c in third) > 2:
            rng.shuffle(third)
            with pytest.raises(DeckError, match="copies of card"):
                engine.validate_deck(third)
    Ids = enum.IntEnum("Ids", {f"c{c}": c for c in set(sample_deck())})
    wrapped = [Ids(c) for c in sample_deck()]
    assert engine.validate_deck(wrapped) == tuple(wrapped)


def test_new_battle_reports_which_deck_is_bad() -> None:
    with pytest.raises(DeckError, match=r"^p2_deck must have exactly 30 cards, got 29"):
        engine.new_battle(1, p1_deck=sample_deck(), p2_deck=sample_deck()[:29])


def test_deck_id_is_order_independent_and_content_sensitive() -> None:
    deck = sample_deck()
    ident = engine.deck_id(deck)
    assert ident.startswith("d-") and len(ident) == 18 and int(ident[2:], 16) >= 0
    assert engine.deck_id(list(reversed(deck))) == ident
    assert engine.deck_id(tuple(deck[1::2] + deck[::2])) == ident
    other = deck[:-1] + [engine.CARD_IDS[-1]]
    assert engine.deck_id(other) != ident


def test_deck_id_refuses_an_invalid_deck() -> None:
    with pytest.raises(DeckError, match="must have exactly 30 cards"):
        engine.deck_id(sample_deck()[:10])


# ---------------------------------------------------------------------------- default decks

@pytest.mark.parametrize("seed", [0, 1, 42, 2**40 + 3])
def test_default_decks_are_valid_and_deterministic(seed: int) -> None:
    a = engine.new_battle(seed)
    b = engine.new_battle(seed)
    assert a.to_dict() == b.to_dict()
    assert a.state_hash() == b.state_hash()
    for deck in a.decks:
        assert engine.validate_deck(deck) == tuple(deck)
        assert len(deck) == engine.DECK_SIZE
    assert a.decks[0] != a.decks[1]


def test_default_decks_and_starting_player_depend_on_the_seed() -> None:
    battles = [engine.new_battle(seed) for seed in range(20)]
    assert len({engine.deck_id(b.decks[0]) for b in battles}) == 20
    assert {b.starting_player for b in battles} == {1, 2}


@pytest.mark.parametrize("seed", [0, 7, 123456])
def test_passing_the_default_decks_explicitly_gives_the_identical_battle(seed: int) -> None:
    default = engine.new_battle(seed)
    explicit = engine.new_battle(seed, p1_deck=list(default.decks[0]), p2_deck=list(default.decks[1]),
                                 starting_player=default.starting_player)
    assert explicit.to_dict() == default.to_dict()
    assert explicit.last_events == default.last_events
    for _ in range(6):  # and they stay identical as the battle goes on
        action = default.legal_actions()[-1]
        assert default.apply(action) == explicit.apply(action)
    assert explicit.to_dict() == default.to_dict()
