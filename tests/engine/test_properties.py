"""Property tests of the arena-1 engine: random legal play never breaks an invariant.

Hypothesis draws the battle (seed, optional custom decks, starting player) and the choice
made at every step; after EVERY action the whole state is checked against the rules of
DESIGN section 3 and the State contract of section 4. The rules checks use an oracle of
the legal action set written independently of ``State._compute_legal``.
"""

from __future__ import annotations

import json
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import engine
from engine.native_state import NativeState
from adapters import make_baseline
from engine import ACTION_FEATURE_DIM, ACTION_SPACE_SIZE, CARD_IDS, CARDS, OBS_DIM, IllegalActionError
from engine.cards import CHARGE, GUARD

HERO_HEALTH = 30
MAX_MANA = 10
HAND_LIMIT = 8
BOARD_SLOTS = 6
DECK_SIZE = 30
MAX_TURNS = 60
END_REASONS = {"hero_defeated", "simultaneous_death", "turn_limit"}
MAX_STEPS = 400  # random play needs ~90 actions on average, ~150 at most

# Two copies of every card id, tagged so hypothesis can draw 30 of them without replacement.
_COPIES = [(card_id, k) for card_id in CARD_IDS for k in range(2)]
decks_strategy = st.lists(st.sampled_from(_COPIES), min_size=DECK_SIZE, max_size=DECK_SIZE,
                          unique=True).map(lambda picks: [card_id for card_id, _ in picks])


# ---------------------------------------------------------------------------- oracle
def expected_legal(state: engine.State) -> list[int]:
    """The legal action set, derived from the written rules (docs/playing.md 'Rules of arena-1')."""
    if state.winner is not None:
        return []
    me = state.players[state.active]
    opp = state.players[1 - state.active]
    own = [s for s in range(BOARD_SLOTS) if me.board[s] is not None]
    enemy = [s for s in range(BOARD_SLOTS) if opp.board[s] is not None]
    out = {engine.END_TURN}
    for h, card_id in enumerate(me.hand):
        card = CARDS[card_id]
        if card.cost > me.mana:
            continue
        if card.type == "creature":
            if len(own) < BOARD_SLOTS:
                out.add(engine.play_action(h, 0))
            continue
        rule = card.target
        if rule == "none":
            out.add(engine.play_action(h, 0))
        if rule in ("any_character",):
            out.add(engine.play_action(h, 1))
        if rule in ("enemy_hero", "any_character"):
            out.add(engine.play_action(h, 2))
        if rule in ("friendly_creature", "any_creature", "any_character"):
            out.update(engine.play_action(h, 3 + s) for s in own)
        if rule in ("enemy_creature", "any_creature", "any_character"):
            out.update(engine.play_action(h, 9 + s) for s in enemy)
    guards = [s for s in enemy if opp.board[s].keywords & GUARD]
    targets = [1 + s for s in guards] if guards else [0] + [1 + s for s in enemy]
    for s in own:
        c = me.board[s]
        ready = not c.sick or bool(c.keywords & CHARGE)
        if c.attack > 0 and not c.attacked and ready:
            out.update(engine.attack_action(s, t) for t in targets)
    return sorted(out)


# ---------------------------------------------------------------------------- invariants
class Ledger:
    """Follows the events to account for every card of both decks."""

    def __init__(self, state: engine.State, conserve: bool = True) -> None:
        self.conserve = conserve  # False for positions crafted through from_dict
        self.left_hand = [[], []]  # card ids played from hand
        self.burned = [[], []]
        self.summons = [0, 0]
        self.deaths = [0, 0]
        self.deck_plus_hand = [len(p.deck) + len(p.hand) for p in state.players]
        self.deck_lists = [sorted(deck) for deck in state.decks]
        self.record(state.last_events)

    def record(self, events: list[dict]) -> None:
        for e in events:
            if e["type"] == "play":
                self.left_hand[e["player"] - 1].append(e["card_id"])
            elif e["type"] == "burn":
                self.burned[e["player"] - 1].append(e["card_id"])
            elif e["type"] == "summon":
                self.summons[e["player"] - 1] += 1
            elif e["type"] == "death":
                self.deaths[e["player"] - 1] += 1


def check_invariants(state: engine.State, events: list[dict], ledger: Ledger, before_turn: int) -> None:
    p1, p2 = state.players
    # --- heroes, mana, hand, board
    for i, p in enumerate(state.players):
        who = f"player {i + 1}"
        assert p.hp <= HERO_HEALTH, f"{who} hero health {p.hp} > {HERO_HEALTH}"
        assert 0 <= p.mana <= p.max_mana <= MAX_MANA, f"{who} mana {p.mana}/{p.max_mana}"
        assert len(p.hand) <= HAND_LIMIT, f"{who} hand of {len(p.hand)}"
        assert len(p.board) == BOARD_SLOTS
        creatures = [c for c in p.board if c is not None]
        assert len(creatures) <= BOARD_SLOTS
        for c in creatures:
            assert CARDS[c.card_id].type == "creature"
            assert c.attack >= 0, f"{who} creature {c} has negative attack"
            assert 0 < c.health <= c.max_health, f"{who} creature {c}: health outside 1..max_health"
            assert 0 < c.uid < state.next_uid
        assert p.fatigue >= 0 and (p.fatigue == 0 or not p.deck), f"{who} fatigue {p.fatigue} with a deck left"
        # Card conservation: every card of the deck list is in the deck, the hand, or has left
        # the hand by a play, or was burned.
        if ledger.conserve:
            accounted = sorted(p.deck + p.hand + ledger.left_hand[i] + ledger.burned[i])
            assert accounted == ledger.deck_lists[i], f"{who}: cards not conserved"
            assert len(creatures) == ledger.summons[i] - ledger.deaths[i], f"{who}: board does not match summons/deaths"
        assert len(p.deck) + len(p.hand) <= ledger.deck_plus_hand[i], f"{who}: deck + hand grew"
        ledger.deck_plus_hand[i] = len(p.deck) + len(p.hand)
    uids = [c.uid for p in state.players for c in p.board if c is not None]
    assert len(uids) == len(set(uids)), "creature uids are not unique"
    # --- mana follows the turn counter: the active player has started player_turn turns
    assert 1 <= state.turn <= MAX_TURNS
    me, other = state.players[state.active], state.players[1 - state.active]
    assert me.max_mana == min(MAX_MANA, (state.turn + 1) // 2), "active max_mana does not follow the turn"
    assert other.max_mana == min(MAX_MANA, state.turn // 2), "waiting max_mana does not follow the turn"
    assert state.turn >= before_turn
    # --- terminal status
    dead = [p1.hp <= 0, p2.hp <= 0]
    turn_limit_hit = any(e["type"] == "end_turn" and e["turn"] == MAX_TURNS for e in events)
    over_events = [e for e in events if e["type"] == "game_over"]
    if state.is_terminal:
        assert state.to_move is None
        assert state.end_reason in END_REASONS
        assert len(over_events) <= 1
        if state.end_reason == "hero_defeated":
            assert dead.count(True) == 1
            assert state.winner == (2 if dead[0] else 1)
        elif state.end_reason == "simultaneous_death":
            assert dead == [True, True] and state.winner == 0
        else:
            assert not any(dead) and state.winner == 0 and state.turn == MAX_TURNS
    else:
        assert state.to_move in (1, 2) and state.to_move == state.active + 1
        assert state.winner is None and state.end_reason is None
        assert not any(dead), f"a hero is at {p1.hp}/{p2.hp} health but the battle goes on"
        assert not turn_limit_hit, "turn 60 ended but the battle goes on"
        assert not over_events
    if any(dead) or turn_limit_hit:
        assert state.is_terminal
    # --- legal actions and mask
    legal = state.legal_actions()
    mask = state.legal_action_mask()
    assert isinstance(mask, np.ndarray) and mask.dtype == bool and mask.shape == (ACTION_SPACE_SIZE,)
    assert legal == sorted(set(legal)), "legal_actions is not ascending and unique"
    assert set(np.flatnonzero(mask).tolist()) == set(legal)
    assert all(type(a) is int for a in legal)
    if state.is_terminal:
        assert legal == [] and not mask.any()
    else:
        assert legal and engine.END_TURN in legal
    assert legal == expected_legal(state), "legal actions differ from the rules"
    # --- observations and action features
    for player in (1, 2):
        obs = state.observation(player)
        assert obs.shape == (OBS_DIM,) and obs.dtype == np.float32
        assert np.isfinite(obs).all() and obs.min() >= -1.0 and obs.max() <= 1.0, f"observation({player}) unbounded"
    feats = state.action_features()
    assert feats.shape == (len(legal), ACTION_FEATURE_DIM) and feats.dtype == np.float32
    assert np.isfinite(feats).all()
    if len(legal):
        assert feats.min() >= -1.0 and feats.max() <= 1.0
    # --- events are JSON data
    json.dumps(events)


def check_clone_independent(state: engine.State) -> None:
    """A clone equals the original; acting on it or mutating it leaves the original alone."""
    before = state.to_dict()
    before_legal = state.legal_actions()
    copy = state.clone()
    assert copy.to_dict() == before and copy.legal_actions() == before_legal
    if not copy.is_terminal:
        copy.apply(copy.legal_actions()[-1])
    if isinstance(copy, NativeState):  # the native backend refuses every edit, with what to do instead
        p = copy.players[0]
        for edit in (lambda: p.hand.append(CARD_IDS[0]), p.deck.clear, lambda: p.board.__setitem__(0, None),
                     lambda: setattr(p, "hp", p.hp - 5), lambda: setattr(copy, "turn", copy.turn + 1)):
            with pytest.raises(AttributeError, match="read-only on the native engine core"):
                edit()
    else:
        for p in copy.players:
            p.hand.append(CARD_IDS[0])
            p.deck.clear()
            p.board[0] = None
            p.hp -= 5
            p.mana = 0
        copy.turn += 1
    assert state.to_dict() == before, "mutating a clone changed the original"
    assert state.legal_actions() == before_legal


def play_checked(state: engine.State, choose, max_steps: int = MAX_STEPS, clone_every: int = 1) -> engine.State:
    ledger = Ledger(state)
    check_invariants(state, state.last_events, ledger, 1)
    for step in range(max_steps):
        if state.is_terminal:
            break
        legal = state.legal_actions()
        action = choose(state, legal)
        turn = state.turn
        events = state.apply(action)
        assert events is state.last_events or events == state.last_events
        assert isinstance(events, list) and events, "apply returned no events"
        ledger.record(events)
        check_invariants(state, events, ledger, turn)
        if step % clone_every == 0:
            check_clone_independent(state)
    return state


# ---------------------------------------------------------------------------- properties
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(seed=st.integers(min_value=-(2 ** 64), max_value=2 ** 64),
       starting_player=st.sampled_from([None, 1, 2]),
       decks=st.one_of(st.none(), st.tuples(decks_strategy, decks_strategy)),
       end_turn_weight=st.sampled_from([0, 0, 1, 40]),
       data=st.data())
def test_random_legal_play_keeps_every_invariant(seed, starting_player, decks, end_turn_weight, data):
    """end_turn_weight adds extra choices that mean END_TURN: 40 makes long, quiet battles that
    run into fatigue and the turn limit."""
    p1_deck, p2_deck = decks if decks is not None else (None, None)
    state = engine.new_battle(seed, p1_deck, p2_deck, starting_player=starting_player)
    if starting_player is not None:
        assert state.starting_player == starting_player

    def choose(_state, legal):
        i = data.draw(st.integers(0, len(legal) - 1 + end_turn_weight), label="choice")
        return legal[i] if i < len(legal) else engine.END_TURN

    play_checked(state, choose, clone_every=4)


@pytest.mark.parametrize("seed", range(12))
def test_full_random_battles_reach_a_valid_end(seed):
    policies = [make_baseline("random", 1000 + seed), make_baseline("random", 2000 + seed)]
    state = play_checked(engine.new_battle(seed), lambda s, _legal: policies[s.to_move - 1].act(s),
                         max_steps=2000, clone_every=7)
    assert state.is_terminal and state.end_reason in END_REASONS


@pytest.mark.parametrize("seed", [3, 4])
def test_full_greedy_battles_reach_a_valid_end(seed):
    greedy = make_baseline("greedy")
    state = play_checked(engine.new_battle(seed), lambda s, _legal: greedy.act(s), max_steps=2000, clone_every=5)
    assert state.is_terminal and state.end_reason == "hero_defeated"


@pytest.mark.parametrize("starting_player", [1, 2])
def test_only_ending_turns_is_a_turn_limit_draw_after_fatigue(starting_player):
    """Nobody acts: 60 turns pass, both take fatigue, hands burn, and the battle is a draw."""
    state = play_checked(engine.new_battle(5, starting_player=starting_player),
                         lambda s, legal: engine.END_TURN, max_steps=MAX_TURNS + 1)
    assert state.is_terminal and state.winner == 0 and state.end_reason == "turn_limit" and state.turn == MAX_TURNS
    first, second = state.players[starting_player - 1], state.players[2 - starting_player]
    # The starting player drew 3 + 27 (turns 1..27), then fatigue 1+2+3; the other 4 + 26, then 1+2+3+4.
    assert (first.fatigue, first.hp) == (3, 24)
    assert (second.fatigue, second.hp) == (4, 20)
    assert len(first.hand) == len(second.hand) == HAND_LIMIT and not first.deck and not second.deck
    with pytest.raises(IllegalActionError):
        state.apply(engine.END_TURN)


def test_every_legal_action_applies_and_every_other_is_refused_unchanged():
    """Along a whole battle, try all 163 ids at every step on clones."""
    for seed in (11,):
        policy = make_baseline("random", seed)
        state = engine.new_battle(seed)
        while not state.is_terminal:
            legal = set(state.legal_actions())
            snapshot = state.canonical_json()
            for a in range(ACTION_SPACE_SIZE):
                probe = state.clone()
                if a in legal:
                    probe.apply(a)
                else:
                    with pytest.raises(IllegalActionError):
                        probe.apply(a)
                    assert probe.canonical_json() == snapshot, f"refused action {a} changed the state"
                    assert set(probe.legal_actions()) == legal
            assert state.canonical_json() == snapshot
            state.apply(policy.act(state))
        for a in range(ACTION_SPACE_SIZE):
            with pytest.raises(IllegalActionError):
                state.apply(a)


def _crafted(mutate) -> engine.State:
    """A real battle moved to a precise position through to_dict/from_dict."""
    d = engine.new_battle(1, starting_player=1).to_dict()
    mutate(d)
    return engine.State.from_dict(d)


def test_simultaneous_death_is_a_draw():
    cataclysm = next(c.id for c in CARDS.values() if c.effect == "area_damage" and c.scope == "all_characters")

    def mutate(d):
        for p in d["players"]:
            p["hero_health"] = CARDS[cataclysm].amount
            p["max_mana"] = p["mana"] = MAX_MANA
        d["players"][0]["hand"] = [cataclysm]
        d["turn"] = 20

    state = _crafted(mutate)
    assert state.to_move == 1
    ledger = Ledger(state, conserve=False)
    events = state.apply(engine.play_action(0, 0))
    ledger.record(events)
    check_invariants(state, events, ledger, 20)
    assert (state.winner, state.end_reason) == (0, "simultaneous_death")
    assert [e["type"] for e in events][-1] == "game_over"


def test_lethal_spell_ends_the_battle_for_the_caster():
    bolt = next(c.id for c in CARDS.values() if c.effect == "damage" and c.target == "enemy_hero")

    def mutate(d):
        d["players"][1]["hero_health"] = CARDS[bolt].amount
        d["players"][0]["hand"] = [bolt]
        d["players"][0]["max_mana"] = d["players"][0]["mana"] = 5
        d["players"][1]["max_mana"] = 4
        d["turn"] = 9

    state = _crafted(mutate)
    ledger = Ledger(state, conserve=False)
    events = state.apply(engine.play_action(0, 2))
    ledger.record(events)
    check_invariants(state, events, ledger, 9)
    assert (state.winner, state.end_reason, state.to_move) == (1, "hero_defeated", None)
