"""The card pool of ruleset arena-1: loaded from ``cards.json`` and validated at load.

A bad definition is a :class:`CardPoolError` naming the card and the field at fault.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from .errors import CardPoolError

KEYWORDS = ("guard", "charge", "ward", "drain", "lethal", "breakthrough")
KEYWORD_BIT = {name: 1 << i for i, name in enumerate(KEYWORDS)}
GUARD, CHARGE, WARD, DRAIN, LETHAL, BREAKTHROUGH = (KEYWORD_BIT[k] for k in KEYWORDS)

EFFECTS = ("damage", "heal", "buff", "grant_keyword", "remove_keyword", "draw", "area_damage")
TARGET_RULES = ("none", "friendly_creature", "enemy_creature", "any_creature", "enemy_hero", "any_character")
AREA_SCOPES = ("enemy_creatures", "all_creatures", "all_characters")

# Which target rules make sense for each effect, and which extra fields it needs.
_EFFECT_TARGETS = {
    "damage": {"enemy_creature", "any_creature", "enemy_hero", "any_character"},
    "heal": {"friendly_creature", "any_creature", "any_character"},
    "buff": {"friendly_creature", "enemy_creature", "any_creature"},
    "grant_keyword": {"friendly_creature", "enemy_creature", "any_creature"},
    "remove_keyword": {"friendly_creature", "enemy_creature", "any_creature"},
    "draw": {"none"},
    "area_damage": {"none"},
}
_EFFECT_FIELDS = {
    "damage": {"amount"},
    "heal": {"amount"},
    "buff": {"attack", "health"},
    "grant_keyword": {"keyword"},
    "remove_keyword": {"keyword"},
    "draw": {"amount"},
    "area_damage": {"amount", "scope"},
}
_CREATURE_FIELDS = {"id", "name", "type", "cost", "attack", "health", "keywords"}
_SPELL_BASE_FIELDS = {"id", "name", "type", "cost", "effect", "target"}

MAX_COST = 10
MAX_STAT = 12


def keywords_to_mask(names: Iterable[str]) -> int:
    mask = 0
    for name in names:
        mask |= KEYWORD_BIT[name]
    return mask


_MASK_NAMES = tuple(tuple(name for name in KEYWORDS if mask & KEYWORD_BIT[name]) for mask in range(1 << len(KEYWORDS)))


def mask_to_keywords(mask: int) -> list[str]:
    """Keyword names of a bitmask, in KEYWORDS order."""
    return list(_MASK_NAMES[mask])


@dataclass(frozen=True, slots=True)
class Card:
    id: int
    name: str
    type: str  # "creature" | "spell"
    cost: int
    attack: int = 0
    health: int = 0
    keywords: int = 0  # bitmask of KEYWORD_BIT
    effect: str | None = None
    target: str = "none"
    amount: int = 0
    buff_attack: int = 0
    buff_health: int = 0
    keyword: str | None = None  # keyword granted or removed
    scope: str | None = None  # area_damage scope

    @property
    def is_creature(self) -> bool:
        return self.type == "creature"

    def to_json(self) -> dict[str, Any]:
        """The card as it appears in ``cards.json`` (stable JSON form)."""
        out: dict[str, Any] = {"id": self.id, "name": self.name, "type": self.type, "cost": self.cost}
        if self.is_creature:
            out.update(attack=self.attack, health=self.health, keywords=mask_to_keywords(self.keywords))
            return out
        out.update(effect=self.effect, target=self.target)
        if self.effect == "buff":
            out.update(attack=self.buff_attack, health=self.buff_health)
        elif self.effect in ("grant_keyword", "remove_keyword"):
            out["keyword"] = self.keyword
        else:
            out["amount"] = self.amount
            if self.scope:
                out["scope"] = self.scope
        return out

    def text(self) -> str:
        """Short rules text, e.g. ``3/2 charge`` or ``deal 2 damage to any character``."""
        if self.is_creature:
            kws = " ".join(mask_to_keywords(self.keywords))
            return f"{self.attack}/{self.health}" + (f" {kws}" if kws else "")
        who = self.target.replace("_", " ")
        if self.effect == "damage":
            return f"deal {self.amount} damage to {who}"
        if self.effect == "heal":
            return f"restore {self.amount} health to {who}"
        if self.effect == "buff":
            return f"give {who} {self.buff_attack:+d}/{self.buff_health:+d}"
        if self.effect == "grant_keyword":
            return f"give {who} {self.keyword}"
        if self.effect == "remove_keyword":
            return f"remove {self.keyword} from {who}"
        if self.effect == "draw":
            return f"draw {self.amount} card" + ("s" if self.amount != 1 else "")
        return f"deal {self.amount} damage to {self.scope.replace('_', ' ')}"


def _fail(record: Any, index: int, message: str) -> CardPoolError:
    if isinstance(record, dict) and "id" in record:
        who = f"card {record.get('id')!r}" + (f" ({record['name']})" if isinstance(record.get("name"), str) else "")
    else:
        who = f"card #{index} in the pool"
    return CardPoolError(f"{who}: {message}")


def _int_field(record: dict, index: int, field: str, lo: int, hi: int) -> int:
    value = record.get(field)
    if not isinstance(value, int) or isinstance(value, bool):
        raise _fail(record, index, f"field {field!r} must be an integer, got {value!r}")
    if not lo <= value <= hi:
        raise _fail(record, index, f"field {field!r} must be within {lo}..{hi}, got {value}")
    return value


def parse_card(record: Any, index: int = 0) -> Card:
    """Validate one card definition and build a :class:`Card`."""
    if not isinstance(record, dict):
        raise _fail(record, index, f"a card definition must be a JSON object, got {type(record).__name__}")
    card_id = _int_field(record, index, "id", 1, 10_000)
    name = record.get("name")
    if not isinstance(name, str) or not name.strip():
        raise _fail(record, index, "field 'name' must be a non-empty string")
    kind = record.get("type")
    if kind not in ("creature", "spell"):
        raise _fail(record, index, f"field 'type' must be 'creature' or 'spell', got {kind!r}")
    cost = _int_field(record, index, "cost", 0, MAX_COST)
    if kind == "creature":
        unknown = set(record) - _CREATURE_FIELDS
        if unknown:
            raise _fail(record, index, f"unknown field(s) for a creature: {sorted(unknown)}")
        attack = _int_field(record, index, "attack", 0, MAX_STAT)
        health = _int_field(record, index, "health", 1, MAX_STAT)
        kws = record.get("keywords")
        if not isinstance(kws, list) or any(k not in KEYWORD_BIT for k in kws):
            raise _fail(record, index, f"field 'keywords' must be a list drawn from {list(KEYWORDS)}, got {kws!r}")
        if len(set(kws)) != len(kws):
            raise _fail(record, index, f"field 'keywords' repeats a keyword: {kws!r}")
        return Card(card_id, name, kind, cost, attack=attack, health=health, keywords=keywords_to_mask(kws))

    effect = record.get("effect")
    if effect not in _EFFECT_TARGETS:
        raise _fail(record, index, f"field 'effect' must be one of {list(EFFECTS)}, got {effect!r}")
    target = record.get("target")
    if target not in TARGET_RULES:
        raise _fail(record, index, f"field 'target' must be one of {list(TARGET_RULES)}, got {target!r}")
    if target not in _EFFECT_TARGETS[effect]:
        raise _fail(record, index, f"effect {effect!r} cannot use target rule {target!r}; "
                                   f"allowed: {sorted(_EFFECT_TARGETS[effect])}")
    expected = _SPELL_BASE_FIELDS | _EFFECT_FIELDS[effect]
    missing = expected - set(record)
    if missing:
        raise _fail(record, index, f"effect {effect!r} needs field(s) {sorted(missing)}")
    unknown = set(record) - expected
    if unknown:
        raise _fail(record, index, f"unknown field(s) for effect {effect!r}: {sorted(unknown)}")
    fields: dict[str, Any] = {}
    if effect == "buff":
        fields["buff_attack"] = _int_field(record, index, "attack", -MAX_STAT, MAX_STAT)
        fields["buff_health"] = _int_field(record, index, "health", 0, MAX_STAT)
        if fields["buff_attack"] == 0 and fields["buff_health"] == 0:
            raise _fail(record, index, "a buff must change attack or health")
    elif effect in ("grant_keyword", "remove_keyword"):
        keyword = record["keyword"]
        if keyword not in KEYWORD_BIT:
            raise _fail(record, index, f"field 'keyword' must be one of {list(KEYWORDS)}, got {keyword!r}")
        fields["keyword"] = keyword
    else:
        fields["amount"] = _int_field(record, index, "amount", 1, MAX_STAT)
        if effect == "area_damage":
            if record["scope"] not in AREA_SCOPES:
                raise _fail(record, index, f"field 'scope' must be one of {list(AREA_SCOPES)}, got {record['scope']!r}")
            fields["scope"] = record["scope"]
    return Card(card_id, name, kind, cost, effect=effect, target=target, **fields)


def parse_card_pool(records: Any) -> dict[int, Card]:
    """Validate a list of card definitions; ids and names must be unique."""
    if not isinstance(records, list) or not records:
        raise CardPoolError("the card pool must be a non-empty list of card definitions")
    pool: dict[int, Card] = {}
    names: set[str] = set()
    for index, record in enumerate(records):
        card = parse_card(record, index)
        if card.id in pool:
            raise _fail(record, index, f"duplicate card id {card.id} (already used by {pool[card.id].name})")
        if card.name in names:
            raise _fail(record, index, f"duplicate card name {card.name!r}")
        pool[card.id] = card
        names.add(card.name)
    return pool


def load_card_pool(path: str | Path | None = None) -> dict[int, Card]:
    """Load and validate a card pool file (default: the pool shipped with the engine)."""
    path = Path(path) if path is not None else Path(__file__).with_name("cards.json")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise CardPoolError(f"cannot read card pool {path}: {exc}") from None
    if not isinstance(doc, dict) or doc.get("schema_version") != 1 or doc.get("ruleset") != "arena-1":
        raise CardPoolError(f"{path}: expected an object with schema_version 1 and ruleset 'arena-1'")
    return parse_card_pool(doc.get("cards"))


CARDS: dict[int, Card] = load_card_pool()
CARD_IDS: tuple[int, ...] = tuple(sorted(CARDS))
