"""Fuzzing the native core's boundary (issue 26): mutated state dicts to ``State.from_dict``,
arbitrary values to ``apply`` and arbitrary arguments to ``new_battle``. Both engines must
give the same outcome, the same exception (type and message) or equal states that then play
on identically, and the interpreter must never crash (``make sanitize`` runs this file under
AddressSanitizer + UBSan, where an out-of-bounds read or undefined behaviour aborts).

The one allowed difference is the documented one (test_native_differential.py): a state the
Python engine loads but the native core cannot hold (an integer beyond +-2**48, an end_reason
the rules never produce) is refused by the native core with a message saying so."""

from __future__ import annotations

import copy
import math
import re
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import engine
from engine import reference
from engine import SplitMix64
from engine.native_link import checked_dict
from tests.engine.test_native_differential import engine_native, finished, mid_battle, step_both

FUZZ = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
NATIVE_LIMIT_NOTE = "native engine core"  # in each of the native core's own refusals


def result_of(call: Callable[[Any], Any], module: Any) -> Any:
    """What ``call(module)`` does: any exception as (type name, message), else the state's to_dict
    (or the plain result). Any exception, not only EngineError: both must fail the same way."""
    try:
        result = call(module)
    except Exception as exc:  # noqa: BLE001 - the comparison is the point
        return type(exc).__name__, str(exc)
    return result.to_dict() if hasattr(result, "to_dict") else result


def assert_same_result(call: Callable[[Any], Any]) -> Any:
    want = result_of(call, engine)
    got = result_of(call, engine_native)
    if isinstance(got, tuple) and not isinstance(want, tuple) and NATIVE_LIMIT_NOTE in got[1]:
        assert got[0] == "StateFormatError", got  # the documented refusal of a state beyond the core
        return None
    assert got == want
    return want


# ------------------------------------------------------------------ mutated state dicts
def battle_with_board() -> engine.State:
    """A mid-battle state with creatures on both boards (so board paths get mutated too)."""
    for seed in range(50):
        state = mid_battle(seed, 40)
        if not state.is_terminal and all(any(c is not None for c in p.board) for p in state.players):
            return state
    raise AssertionError("no seed in 0..49 has creatures on both boards after 40 random steps")


BASES = [reference.new_battle(3).to_dict(), mid_battle(6, 30).to_dict(), battle_with_board().to_dict(),
         finished().to_dict()]

BAD_INTS = [-2**70, -2**64, -2**63 - 1, -2**48 - 1, -2**48, -2**31, -1, 0, 1, 2, 3, 6, 7, 10, 11, 29, 30, 31, 99,
            163, 200, 2**31, 2**48, 2**48 + 1, 2**53 + 1, 2**63, 2**64, 2**64 + 1, 10**30]
BAD_CARD_IDS = [0, -1, 33, 34, 999, 2**15, 2**40, 2**70, True, False, None, "1", 1.0, [1], {"id": 1}]
UNICODE_STRINGS = ["arena-1", "ａｒｅｎａ-1", "arena\u20111", "arena-1\u0301", "", " ", "\x00", "🃏", "guard",
                   "Guard", "GUARD", "guárd", "ｇｕａｒｄ", "hero_defeated", "hérо_defeated", "0123456789abcdef",
                   "０１２３４５６７８９ａｂｃｄｅｆ", "0x0123456789abcd", " 0123456789abcde", "0123_4567_89ab_cdef",
                   "-123456789abcdef", "f" * 40, "١٢٣٤٥٦٧٨٩٠١٢٣٤٥٦"]
scalars = st.one_of(st.none(), st.booleans(), st.sampled_from(BAD_INTS), st.integers(-2**70, 2**70),
                    st.floats(allow_nan=True), st.sampled_from(UNICODE_STRINGS), st.text(max_size=8))
garbage = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner) |
                       st.dictionaries(st.text(max_size=5) | st.integers(-3, 3), inner, max_size=3), max_leaves=10)


def places(node: Any, out: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """Every (container, key or index) in a state dict, depth first."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, child in items:
        out.append((node, key))
        places(child, out)
    return out


def card_lists(data: dict) -> list[list]:
    lists = [d for d in data.get("decks", []) if isinstance(d, list)] if isinstance(data.get("decks"), list) else []
    for p in data.get("players", []) if isinstance(data.get("players"), list) else []:
        if isinstance(p, dict):
            lists += [p[k] for k in ("deck", "hand") if isinstance(p.get(k), list)]
    return lists


def creatures(data: dict) -> list[dict]:
    found = []
    for p in data.get("players", []) if isinstance(data.get("players"), list) else []:
        if isinstance(p, dict) and isinstance(p.get("board"), list):
            found += [c for c in p["board"] if isinstance(c, dict)]
    return found


def inconsistent(data: dict, pick: int) -> None:
    """One edit that keeps every field well typed but breaks a relation the rules keep."""
    c = creatures(data)
    p = data["players"][pick % 2] if isinstance(data.get("players"), list) and len(data["players"]) == 2 else {}
    edits: list[Callable[[], None]] = [
        lambda: c and c[0].update(health=c[0]["max_health"] + 5),          # health above max_health
        lambda: len(c) > 1 and c[1].update(uid=c[0]["uid"]),              # two creatures, one uid
        lambda: data.update(next_uid=1),                                  # next uid already used
        lambda: data.update(active_player=3 - data["active_player"]),    # turn parity broken
        lambda: data.update(turn=engine.MAX_TURNS),                       # last turn
        lambda: data.update(winner=1, end_reason="hero_defeated"),       # over, with heroes alive
        lambda: data.update(winner=None, end_reason=None),                # a finished battle reopened
        lambda: isinstance(p, dict) and p.update(hand=[1] * 10),          # a full hand of one card
        lambda: isinstance(p, dict) and p.update(deck=[], fatigue=7),     # empty deck, deep fatigue
        lambda: isinstance(p, dict) and p.update(hero_health=-5),         # a dead hero mid-battle
        lambda: isinstance(p, dict) and p.update(hero_health=2**47, fatigue=2**47),  # near the core's range
        lambda: isinstance(p, dict) and p.update(deck=[33] * 30),         # 30 copies of one spell
        lambda: c and c[0].update(attack=2**47, keywords=["guard", "guard", "ward"]),
        lambda: c and c[0].update(sick=1, attacked="yes"),                # truthy non-bools
        lambda: c and c[0].update(keywords={"guard": 0}),                 # a dict of keywords
        lambda: isinstance(p, dict) and isinstance(p.get("board"), list) and p["board"].__setitem__(
            0, {"uid": 10**6, "card_id": 1, "attack": 0, "health": 1, "max_health": 1, "keywords": [],
                "sick": False, "attacked": True}),
    ]
    try:
        edits[pick % len(edits)]()
    except (KeyError, TypeError, IndexError, AttributeError):
        pass  # an earlier mutation removed or retyped what this edit relates


@st.composite
def mutated_dicts(draw: Any) -> dict:
    data = copy.deepcopy(draw(st.sampled_from(BASES)))
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["replace", "huge", "delete", "extra", "length", "card", "unicode",
                                     "inconsistent"]))
        spots = places(data, [])
        node, key = spots[draw(st.integers(0, len(spots) - 1))]
        if kind == "replace":
            node[key] = draw(garbage)
        elif kind == "huge":  # an integer field far out of range, either way
            ints = [(n, k) for n, k in spots if type(n[k]) is int] or [(node, key)]
            node, key = ints[draw(st.integers(0, len(ints) - 1))]
            node[key] = draw(st.sampled_from([-1, 2**48 + 1, -2**48 - 1, 2**63, 2**64, -2**64, 10**30]))
        elif kind == "delete":
            dicts = [(n, k) for n, k in spots if isinstance(n, dict)]
            node, key = dicts[draw(st.integers(0, len(dicts) - 1))]
            del node[key]
        elif kind == "extra":
            dicts = [data] + [n for n, _ in spots if isinstance(n, dict)]
            dicts[draw(st.integers(0, len(dicts) - 1))][draw(st.text(max_size=6))] = draw(garbage)
        elif kind == "length":
            lists = [n for n, _ in spots if isinstance(n, list)]
            target = lists[draw(st.integers(0, len(lists) - 1))]
            how = draw(st.sampled_from(["append", "pop", "double", "clear"]))
            if how == "append":
                target.append(draw(st.sampled_from([1, 33, None]) | garbage))
            elif how == "pop" and target:
                target.pop(draw(st.integers(0, len(target) - 1)))
            elif how == "double":
                target.extend(copy.deepcopy(target))
            else:
                target.clear()
        elif kind == "card":
            lists = card_lists(data)
            target = lists[draw(st.integers(0, len(lists) - 1))] if lists else []
            bad = draw(st.sampled_from(BAD_CARD_IDS))
            if target and draw(st.booleans()):
                target[draw(st.integers(0, len(target) - 1))] = bad
            elif creatures(data):
                creatures(data)[0]["card_id"] = bad
        elif kind == "unicode":
            strings = [(n, k) for n, k in spots if isinstance(n[k], str)] or [(node, key)]
            node, key = strings[draw(st.integers(0, len(strings) - 1))]
            node[key] = draw(st.sampled_from(UNICODE_STRINGS) | st.text(max_size=20))
        elif isinstance(data, dict):
            inconsistent(data, draw(st.integers(0, 10**6)))
        if not isinstance(data, dict) or not data:
            break
    return data


@settings(FUZZ, max_examples=200)
@given(data=mutated_dicts(), choices=st.lists(st.integers(0, 10**6), max_size=12))
def test_mutated_state_dicts_load_or_fail_alike_and_play_on_alike(data, choices):
    loaded = assert_same_result(lambda m: m.State.from_dict(copy.deepcopy(data)))
    if not isinstance(loaded, dict):
        return
    py, nat = reference.from_dict(copy.deepcopy(data)), engine_native.State.from_dict(copy.deepcopy(data))
    assert nat.state_hash() == py.state_hash()
    for i, choice in enumerate(choices):
        legal = py.legal_actions()
        assert nat.legal_actions() == legal
        if not legal:
            break
        action = legal[choice % len(legal)]
        want = result_of(lambda _: py.apply(action), None)
        if isinstance(want, tuple):  # the reference itself fails on this odd state: the same way
            assert result_of(lambda _: nat.apply(action), None) == want, f"step {i}"
            break
        assert nat.apply(action) == want, f"step {i}: events of action {action} differ"
        assert nat.to_dict() == py.to_dict() and nat.state_hash() == py.state_hash(), f"step {i}"


def test_the_mutations_reach_every_kind_of_outcome():
    """The generator is not vacuous: over a fixed sample it makes loads, Python-engine errors and
    native-range refusals (otherwise the property above would test nothing)."""
    seen = {"loaded": 0, "error": 0, "native refusal": 0}

    @settings(FUZZ, max_examples=100, database=None, derandomize=True)
    @given(data=mutated_dicts())
    def sample(data):
        want = result_of(lambda m: m.State.from_dict(copy.deepcopy(data)), engine)
        got = result_of(lambda m: m.State.from_dict(copy.deepcopy(data)), engine_native)
        if isinstance(got, tuple) and NATIVE_LIMIT_NOTE in got[1]:
            seen["native refusal"] += 1
        else:
            seen["error" if isinstance(want, tuple) else "loaded"] += 1

    sample()
    assert all(count > 0 for count in seen.values()), seen


# ------------------------------------------------------------------ apply
ACTION_VALUES = st.one_of(
    st.integers(-2**70, 2**70), st.integers(-3, engine.ACTION_SPACE_SIZE + 3), st.booleans(), st.none(),
    st.floats(allow_nan=True), st.text(max_size=4), st.binary(max_size=3), st.lists(st.integers(0, 5), max_size=2),
    st.integers(0, 200).map(np.int64), st.integers(0, 255).map(np.uint8), st.integers(-128, 127).map(np.int8),
    st.integers(0, 2**64 - 1).map(np.uint64), st.floats(0, 200).map(np.float32),
    st.integers(0, 162).map(lambda a: np.array(a)), st.integers(0, 162).map(lambda a: np.array([a])),
    st.integers(0, 162).map(str), st.just(np.bool_(True)), st.just(math.inf), st.just(complex(1, 0)),
)


@settings(FUZZ, max_examples=150)
@given(base=st.integers(0, len(BASES) - 1), action=ACTION_VALUES)
def test_any_value_to_apply_fails_or_plays_alike_and_a_refusal_changes_nothing(base, action):
    py, nat = reference.from_dict(BASES[base]), engine_native.State.from_dict(BASES[base])
    want = result_of(lambda _: py.apply(action), None)
    got = result_of(lambda _: nat.apply(action), None)
    assert got == want
    if isinstance(want, tuple):
        assert want[0] == "IllegalActionError"  # a clear engine error, never a TypeError or a crash
        assert nat.to_dict() == py.to_dict() == BASES[base]
    else:
        assert nat.to_dict() == py.to_dict()


# ------------------------------------------------------------------ new_battle
GOOD_DECK = list(engine.random_deck(SplitMix64(1)))
deck_args = st.one_of(
    st.none(), st.just(GOOD_DECK), st.just(tuple(GOOD_DECK)), st.just(np.array(GOOD_DECK)),
    st.lists(st.sampled_from(engine.CARD_IDS), min_size=28, max_size=32),          # length and copy counts
    st.lists(st.sampled_from(BAD_CARD_IDS[:8] + list(engine.CARD_IDS)), min_size=30, max_size=30),
    st.integers(0, 29).flatmap(lambda i: st.sampled_from(BAD_CARD_IDS).map(
        lambda bad: GOOD_DECK[:i] + [bad] + GOOD_DECK[i + 1:])),                   # one bad card id
    st.just({c: 1 for c in GOOD_DECK}), st.just(set(GOOD_DECK)), st.just(range(1, 31)),
    scalars, st.text(max_size=31),
)
seed_args = st.one_of(
    st.integers(-2**130, 2**130), st.sampled_from(BAD_INTS), st.booleans(), st.none(), st.floats(allow_nan=True),
    st.text(max_size=5), st.integers(0, 2**64 - 1).map(np.uint64), st.integers(-2**63, 2**63 - 1).map(np.int64),
    st.integers(-128, 127).map(np.int8), st.just(np.float64(3.0)), st.just(np.array(3)), st.just([3]),
)
start_args = st.one_of(st.none(), st.sampled_from([0, 1, 2, 3, -1, 1.0, 2.0, 1.5, True, "1", np.int64(2), np.int8(1),
                                                   np.float32(1.0), 2**64 + 1]), st.integers(-5, 5))


@settings(FUZZ, max_examples=150)
@given(seed=seed_args, p1=deck_args, p2=deck_args, start=start_args)
def test_any_arguments_to_new_battle_fail_or_start_alike(seed, p1, p2, start):
    result = assert_same_result(lambda m: m.new_battle(seed, p1, p2, start))
    if isinstance(result, tuple):
        assert result[0] in ("StateFormatError", "DeckError"), result  # the engine's clear errors only


# ------------------------------------------------------------------ every field of a live state
# A Python engine.State's slots are writable: a user (or a bug) can set any field to anything.
# Every native entry point must then give the reference's verdict: the StateFormatError that
# reference.from_dict gives for the state's to_dict (or the core's documented refusal of what it
# cannot hold), or, where the reference accepts the state, exactly what the same entry point
# gives on the state rebuilt from that dict. Never a crash (make sanitize runs this under ASan).
PLAYER_FIELDS = ("hp", "max_mana", "mana", "fatigue", "deck", "hand", "board")
STATE_FIELDS = ("seed", "decks", "starting_player", "rng", "players", "active", "turn", "next_uid", "winner",
                "end_reason")
CREATURE_FIELDS = ("uid", "card_id", "attack", "health", "max_health", "keywords", "sick", "attacked")
field_values = st.one_of(garbage, st.sampled_from(BAD_INTS), st.integers(-3, 64),
                         st.sampled_from(["hero_defeated", "turn_limit", SplitMix64(5), (1, 2), [[1] * 30] * 2]))


def entry_points(engine_native: Any) -> dict[str, Callable[[Any], Any]]:
    """Each native entry point that takes a state, as a call returning plain data."""
    return {
        "from_state": lambda s: engine_native.from_state(s).to_dict(),
        "greedy_act": engine_native.greedy_act,
        "evaluate": lambda s: engine_native.evaluate(s, 1),
        "random_act": lambda s: engine_native.random_act(s, SplitMix64(3)),
        "determinize": lambda s: engine_native.determinize(s, 2, SplitMix64(4)).to_dict(),
        "digest": lambda s: engine_native.information_set_digest(s, 1),
        "search": lambda s: engine_native.search(s, 11, 4, "greedy"),
    }


def verdict(call: Callable[[Any], Any], state: Any) -> Any:
    try:
        return call(state)
    except Exception as exc:  # noqa: BLE001 - the comparison is the point
        return type(exc).__name__, str(exc)


@settings(FUZZ, max_examples=250)
@given(base=st.integers(0, len(BASES) - 1), data=st.data())
def test_any_value_in_any_field_of_a_live_state_gets_the_references_verdict(base, data):
    state = reference.from_dict(copy.deepcopy(BASES[base]))
    where = data.draw(st.sampled_from(["state", "player", "creature", "rng"]))
    value = data.draw(field_values)
    if where == "state":
        setattr(state, data.draw(st.sampled_from(STATE_FIELDS)), value)
    elif where == "player":
        setattr(state.players[data.draw(st.integers(0, 1))], data.draw(st.sampled_from(PLAYER_FIELDS)), value)
    elif where == "rng":
        state.rng.state = value
    else:
        board = state.players[data.draw(st.integers(0, 1))].board
        slot = data.draw(st.integers(0, 5))
        field = data.draw(st.sampled_from(CREATURE_FIELDS))
        board[slot] = (board[slot] or engine.Creature(9, 1, 1, 1, 1, 0, False, False))._replace(**{field: value})
    try:
        normalized = checked_dict(state)
        expected_state = engine_native.State.from_dict(normalized)
    except engine.StateFormatError as exc:
        for name, call in entry_points(engine_native).items():
            got = verdict(call, state)
            assert got[0] == "StateFormatError" and got[1] == str(exc), (name, got, str(exc))
        return
    for name, call in entry_points(engine_native).items():
        on_rebuilt = (lambda s: s.to_dict()) if name == "from_state" else call
        assert verdict(call, state) == verdict(on_rebuilt, expected_state), name


def test_live_state_edits_that_crashed_the_interpreter_are_refused_with_the_references_message():
    """The findings of issue 48: an edited active seat, mana or turn reached the core unchecked."""
    for field, value, message in (("active", 3, "active_player = 4 is outside 1..2"),
                                  ("active", -1, "active_player = 0 is outside 1..2"),
                                  ("active", 1000, "active_player = 1001 is outside 1..2"),
                                  ("active", 2**40 + 1, "active_player = 1099511627778 is outside 1..2"),
                                  ("starting_player", 9, "starting_player = 9 is outside 1..2"),
                                  ("turn", 2**47, f"turn = {2**47} is outside 0..60")):
        state = reference.new_battle(1)
        setattr(state, field, value)
        for name, call in entry_points(engine_native).items():
            with pytest.raises(engine.StateFormatError, match=re.escape(message)):
                call(state)
    state = reference.new_battle(1)
    state.players[0].mana = 2**40 + 3
    with pytest.raises(engine.StateFormatError, match=re.escape(f"players[0].mana = {2**40 + 3} is outside 0..")):
        engine_native.greedy_act(state)


# ------------------------------------------------------------------ every other argument of every entry point
any_arg = st.one_of(garbage, st.sampled_from(BAD_INTS), st.integers(-3, 5000), st.just(np.int64(2)),
                    st.just(np.array([1, 2])), st.just(SplitMix64(7)), st.sampled_from(["greedy", "random", "search"]))
CALLS: dict[str, Callable[..., Any]] = {
    "evaluate": lambda m, s, a, b: m.evaluate(s, a),
    "determinize": lambda m, s, a, b: m.determinize(s, a, b),
    "random_act": lambda m, s, a, b: m.random_act(s, a),
    "digest": lambda m, s, a, b: m.information_set_digest(s, a),
    "information_set_json": lambda m, s, a, b: m._core._information_set_json(s, a),
    "search": lambda m, s, a, b: m.search(s, a, b if isinstance(b, int) and not isinstance(b, bool) and 0 < b <= 64
                                          else b if not isinstance(b, int) else 2, "greedy"),
    "search_rollout": lambda m, s, a, b: m.search(s, 1, 2, a, b),
    "search_act": lambda m, s, a, b: m._core._search_act(s, a, 2, "random", b),
    "observation": lambda m, s, a, b: m.from_state(s).observation(a),
    "action_features": lambda m, s, a, b: m.from_state(s).action_features(a),
    "player_fields": lambda m, s, a, b: m.from_state(s).player_fields(a),
    "describe_actions": lambda m, s, a, b: m.describe_actions(m.from_state(s), a if isinstance(a, list) else [a, b]),
    "action_json": lambda m, s, a, b: m.action_json(m.from_state(s), a, b),
    "apply_core": lambda m, s, a, b: m.from_state(s).apply(a),
    "concat_columns": lambda m, s, a, b: m.concat_columns([(3, 1, b"\x05", a, b"abc"), (2, 0, None, a, b)]
                                                         if isinstance(a, (bytes, type(None))) else a, 1),
    "concat_columns_items": lambda m, s, a, b: m.concat_columns([(1, 0, None, None, b"ab"), a], b),
    "replay_features": lambda m, s, a, b: m.from_state(s).replay_features(a if isinstance(a, list) else [a, b]),
    "greedy_until": lambda m, s, a, b: m.from_state(s).greedy_until(a) if hasattr(m.State, "greedy_until") else None,
    "play_random_battles": lambda m, s, a, b: m.play_random_battles(a if isinstance(a, list) else [a]),
    "batch": lambda m, s, a, b: m.batch.BattleBatch(a if isinstance(a, int) and not isinstance(a, bool) and a < 64
                                                    else a if not isinstance(a, int) else 2, b),
    "batch_step": lambda m, s, a, b: _batch_step(m, a),
    "model_inputs": lambda m, s, a, b: m.model_inputs(a if isinstance(a, list) else [m.from_state(s), a, b]),
    "model_inputs_states": lambda m, s, a, b: m.model_inputs([m.from_state(s)] * (a if isinstance(a, int)
                                                              and not isinstance(a, bool) and 0 < a < 300 else 1)),
}


def _batch_step(m: Any, actions: Any) -> Any:
    batch = m.batch.BattleBatch(3, "baseline:greedy")
    batch.reset(5)
    return batch.step(actions)


@settings(FUZZ, max_examples=300)
@given(name=st.sampled_from(sorted(CALLS)), base=st.integers(0, len(BASES) - 1), a=any_arg, b=any_arg)
def test_any_argument_to_any_entry_point_is_a_python_error_or_a_result_never_a_crash(name, base, a, b):
    """Out-of-range players, seeds, generator states, simulation counts, rollout names, action
    ids, batch sizes and action arrays: a clear Python exception or a result (make sanitize runs
    this under ASan + UBSan, where an out-of-bounds access or undefined behaviour aborts)."""
    state = reference.from_dict(copy.deepcopy(BASES[base]))
    try:
        CALLS[name](engine_native, state, a, b)
    except (TypeError, ValueError, OverflowError, IndexError, engine.EngineError) as exc:
        assert str(exc), f"{name}: {type(exc).__name__} without a message"
