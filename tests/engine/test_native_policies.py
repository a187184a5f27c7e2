"""The native core's policy half (issue 26, DESIGN 16): ``engine_native.from_state``, the
greedy and random baselines and the search actor over a baseline, against the Python
reference (adapters/baselines.py, adapters/search.py) decision by decision.

Skipped only when engine_native is not built; under `make test` (RLHF_REQUIRE_NATIVE=1) a
missing build is a failure. Bigger runs: benchmarks/engine_native.py --verify-greedy/--verify-search."""

from __future__ import annotations

import dataclasses

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import engine
from engine import reference
from engine.native_link import view_card_rows
from adapters.baselines import GreedyPolicy, RandomPolicy, evaluate
from adapters.search import (
    SearchPolicy,
    determinize,
    information_set,
    information_set_digest,
)
from engine import SplitMix64
from tests.native_helpers import require_native

engine_native = require_native()


def continue_both(py: engine.State, seed: int, where: str) -> int:
    """Converts ``py`` with from_state, then plays both to the end with the same seeded random
    actions: identical legal actions, events and state hashes at every step. Returns the steps."""
    nat = engine_native.from_state(py)
    assert nat.to_dict() == py.to_dict() and nat.state_hash() == py.state_hash(), f"{where}: from_state differs"
    assert nat.last_events == []
    rng, steps = SplitMix64(seed), 0
    while not py.is_terminal:
        legal = py.legal_actions()
        assert nat.legal_actions() == legal, f"{where} +{steps}: legal actions differ"
        action = legal[rng.below(len(legal))]
        assert nat.apply(action) == py.apply(action), f"{where} +{steps}: events differ"
        assert nat.state_hash() == py.state_hash(), f"{where} +{steps}: state hashes differ"
        steps += 1
    assert (nat.is_terminal, nat.winner, nat.end_reason, nat.turn) == (True, py.winner, py.end_reason, py.turn)
    return steps


# ------------------------------------------------------------------ from_state
def test_from_state_along_random_battles_continues_identically():
    """States taken at every stage of 150 random battles (the opening, the middle, the last
    move, the end), each converted and played on to the end on both engines."""
    rng, steps = SplitMix64(26), 0
    for seed in range(150):
        py = reference.new_battle(seed)
        cut = rng.below(120)
        for _ in range(cut):
            if py.is_terminal:
                break
            legal = py.legal_actions()
            py.apply(legal[rng.below(len(legal))])
        steps += continue_both(py, seed, f"seed {seed} after {cut} steps")
    assert steps > 3000


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(-2**70, 2**70), p1=st.integers(0, 2**64 - 1), start=st.sampled_from([None, 1, 2]),
       cut=st.integers(0, 150))
def test_hypothesis_from_state_keeps_seed_decks_and_generator(seed, p1, start, cut):
    py = reference.new_battle(seed, engine.random_deck(SplitMix64(p1)), None, start)
    rng = SplitMix64(p1)
    for _ in range(cut):
        if py.is_terminal:
            break
        legal = py.legal_actions()
        py.apply(legal[rng.below(len(legal))])
    nat = engine_native.from_state(py)
    assert (nat.seed, nat.decks, nat.starting_player, nat.next_uid) == \
        (py.seed, tuple(map(tuple, py.decks)), py.starting_player, py.next_uid)
    continue_both(py, p1, f"seed {seed}")


def test_from_state_refuses_what_the_core_cannot_hold_and_non_states():
    data = reference.new_battle(3).to_dict()
    data["players"][0]["hero_health"] = -2**60  # from_dict has no lower bound on hero health
    extreme = reference.from_dict(data)
    with pytest.raises(engine.StateFormatError, match="outside the native engine core's range"):
        engine_native.from_state(extreme)
    with pytest.raises(TypeError, match="needs a Python engine.State, got dict"):
        engine_native.from_state(data)
    with pytest.raises(TypeError, match="needs a Python engine.State, got State"):
        engine_native.from_state(engine_native.new_battle(1))
    for call in (engine_native.greedy_act, lambda s: engine_native.evaluate(s, 1),
                 lambda s: engine_native.search(s, 1, 8, "greedy")):
        with pytest.raises(TypeError, match="needs an engine.State or an engine_native.State, got dict"):
            call(data)
    state = reference.new_battle(3)
    with pytest.raises(ValueError, match="player must be 1 or 2"):
        engine_native.evaluate(state, 3)
    with pytest.raises(ValueError, match="rollout policy is 'greedy' or 'random'"):
        engine_native.search(state, 1, 8, "checkpoint")
    with pytest.raises(ValueError, match="needs a battle that is not over"):
        engine_native.search(finished_battle(), 1, 8, "greedy")


def finished_battle() -> engine.State:
    state = reference.new_battle(5)
    while not state.is_terminal:
        state.apply(state.legal_actions()[-1])
    return state


# ------------------------------------------------------------------ the baselines
def greedy_battle(seed: int, opponent: str, p1_deck=None, p2_deck=None, start=None) -> tuple[int, str]:
    """A battle stepped on both engines: player 1 greedy, player 2 greedy or random (its own
    generator on each side). The Python reference policy moves the Python state, the core's the
    native state; the actions, evaluations and state hashes must agree at every step."""
    py = reference.new_battle(seed, p1_deck, p2_deck, start)
    nat = engine_native.new_battle(seed, p1_deck, p2_deck, start)
    random_policy, nat_rng = RandomPolicy(seed), SplitMix64(seed)
    greedy, steps = GreedyPolicy(), 0
    while not py.is_terminal:
        if py.to_move == 1 or opponent == "greedy":
            action = greedy._act_reference(py)
            assert engine_native.greedy_act(nat) == action, f"seed {seed} step {steps}: greedy actions differ"
        else:
            action = random_policy.act(py)
            assert engine_native.random_act(nat, nat_rng) == action and nat_rng.state == random_policy.rng.state, \
                f"seed {seed} step {steps}: random actions differ"
        player = py.to_move
        assert engine_native.evaluate(nat, player) == evaluate(py, player), f"seed {seed} step {steps}"
        py.apply(action)
        nat.apply(action)
        assert nat.state_hash() == py.state_hash(), f"seed {seed} step {steps}: state hashes differ"
        steps += 1
    for player in (1, 2):  # the terminal values (win, loss, draw)
        assert engine_native.evaluate(nat, player) == evaluate(py, player)
    return steps, py.state_hash()


def test_500_greedy_battles_agree_at_every_step():
    """250 greedy-vs-greedy and 250 greedy-vs-random battles; play_greedy_battles, the core's
    own loop, ends each greedy-vs-greedy battle in the same state. (More in
    benchmarks/engine_native.py --verify-greedy.)"""
    seeds = list(range(250))
    finals = [greedy_battle(seed, "greedy") for seed in seeds]
    got = engine_native.play_greedy_battles(seeds, hashes=True)
    assert [(s, h) for s, h in zip(got["steps"], got["state_hash"])] == finals
    assert sum(steps for steps, _ in finals) > 10_000  # about 68 steps a battle: the battles were played
    assert sum(greedy_battle(seed, "random")[0] for seed in range(250, 500)) > 7_000


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(-2**70, 2**70), p1=st.integers(0, 2**64 - 1), p2=st.integers(0, 2**64 - 1),
       start=st.sampled_from([None, 1, 2]), opponent=st.sampled_from(["greedy", "random"]))
def test_hypothesis_greedy_battles_agree(seed, p1, p2, start, opponent):
    decks = [engine.random_deck(SplitMix64(d)) for d in (p1, p2)]
    greedy_battle(seed, opponent, decks[0], decks[1], start)


def test_greedy_policy_act_uses_the_core_on_the_native_backend_with_the_same_actions(monkeypatch):
    """GreedyPolicy.act (the wired API) under EXTRAARENA_ENGINE=native and =python, on Python states."""
    greedy = GreedyPolicy()
    for backend_name in ("native", "python"):
        monkeypatch.setenv("EXTRAARENA_ENGINE", backend_name)
        assert engine.backend.name() == backend_name
        for seed in range(20):
            state = reference.new_battle(seed)
            while not state.is_terminal:
                action = greedy.act(state)
                assert action == greedy._act_reference(state), f"{backend_name} seed {seed}"
                state.apply(action)
    monkeypatch.setenv("EXTRAARENA_ENGINE", "native")
    data = mid_battle_dict(9)
    data["players"][0]["fatigue"] = 10**20  # beyond the core's integers: the Python reference plays
    extreme = reference.from_dict(data)
    assert greedy.act(extreme) == greedy._act_reference(extreme)


def mid_battle_dict(seed: int) -> dict:
    state, greedy = reference.new_battle(seed), GreedyPolicy()
    for _ in range(20):
        state.apply(greedy._act_reference(state))
    return state.to_dict()


# ------------------------------------------------------------------ the search teacher
def search_battle(monkeypatch, seed: int, rollout: type, sims: int = 8) -> int:
    """search:<rollout>?sims=N against greedy, the search seated as player 1 or 2 by the seed's
    parity. At every search decision the same state is decided by one SearchPolicy on the
    Python backend and another on the native one: the same action, value, action values and
    visits, and (random rollouts) the same rollout generator state after. Returns the decisions."""
    searchers = {name: SearchPolicy(rollout(seed), sims, seed) for name in ("python", "native")}
    state, greedy, seat, decisions = reference.new_battle(seed), GreedyPolicy(), 1 + seed % 2, 0
    while not state.is_terminal:
        if state.to_move != seat:
            state.apply(greedy.act(state))
            continue
        made = {}
        for name, searcher in searchers.items():
            monkeypatch.setenv("EXTRAARENA_ENGINE", name)
            d = searcher.decide(state)
            made[name] = (d.action_id, d.value, d.outputs, getattr(searcher.rollout, "rng", SplitMix64(0)).state)
        assert made["native"] == made["python"], f"seed {seed} decision {decisions}"
        state.apply(made["native"][0])
        decisions += 1
    return decisions


def test_50_search_teacher_battles_decide_identically(monkeypatch):
    """search:baseline:greedy?sims=8 against greedy: the issue's 50 teacher battles."""
    assert sum(search_battle(monkeypatch, seed, GreedyPolicy) for seed in range(50)) > 1000


def test_random_rollout_search_carries_the_rollout_generator_across_decisions(monkeypatch):
    assert sum(search_battle(monkeypatch, seed, RandomPolicy, sims=12) for seed in range(100, 104)) > 60


def test_search_act_in_the_core_derives_the_same_seed_from_its_own_digest():
    """arena::SearchAct (the digest and the seed in C++, what an in-core opponent calls) equals
    SearchPolicy(seed=actor_seed).decide, for actor seeds across the 64-bit range."""
    rng = SplitMix64(8)
    for seed in range(12):
        state = random_state(seed, 10 + rng.below(60))
        if state.is_terminal or len(state.legal_actions()) < 2:
            continue
        actor_seed = rng.next_u64()
        want = SearchPolicy(GreedyPolicy(), 8, actor_seed)._search(
            state, state.legal_actions(), state.to_move,
            SplitMix64(engine.derive_seed(actor_seed, f"search:{information_set_digest(state, state.to_move)}")))
        assert engine_native._core._search_act(state, actor_seed, 8, "greedy", None)[:3] == want
    forced = reference.new_battle(1)
    while len(forced.legal_actions()) != 1:
        forced.apply(forced.legal_actions()[-1])
    decision = SearchPolicy(GreedyPolicy(), 8, 5).decide(forced)
    assert engine_native._core._search_act(forced, 5, 8, "greedy", None)[:3] == \
        (decision.action_id, decision.outputs["visits"], decision.outputs["action_values"]) == (0, [0], [None])


def random_state(seed: int, steps: int) -> engine.State:
    state, rng = reference.new_battle(seed), SplitMix64(seed)
    for _ in range(steps):
        if state.is_terminal:
            break
        legal = state.legal_actions()
        state.apply(legal[rng.below(len(legal))])
    return state


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**64 - 1), deck=st.integers(0, 2**64 - 1), steps=st.integers(0, 100),
       sims=st.integers(1, 16), search_seed=st.integers(0, 2**64 - 1))
def test_hypothesis_search_decisions_agree(seed, deck, steps, sims, search_seed):
    state, rng = reference.new_battle(seed, None, engine.random_deck(SplitMix64(deck))), SplitMix64(deck)
    for _ in range(steps):
        if state.is_terminal:
            break
        legal = state.legal_actions()
        state.apply(legal[rng.below(len(legal))])
    if state.is_terminal or len(state.legal_actions()) < 2:  # decide never searches a forced move
        return
    python = SearchPolicy(GreedyPolicy(), sims, 0)._search(state, state.legal_actions(), state.to_move,
                                                          SplitMix64(search_seed))
    assert engine_native.search(state, search_seed, sims, "greedy") == python


# ------------------------------------------------------------------ determinization and the digest
def test_determinize_and_the_digest_agree_on_states_after_every_event_type():
    """Random battles until every event type has happened; at every step, for both players: the
    information-set JSON byte for byte, its digest, and the determinized world and generator."""
    seen: set[str] = set()
    rng, seed, checked = SplitMix64(1), 0, 0
    while len(seen) < 16 or seed < 40:
        state, policy = reference.new_battle(seed), SplitMix64(seed)
        while not state.is_terminal:
            legal = state.legal_actions()
            seen.update(e["type"] for e in state.apply(legal[policy.below(len(legal))]))
            for player in (1, 2):
                info = orjson.dumps(information_set(state, player), option=orjson.OPT_SORT_KEYS)
                assert engine_native._core._information_set_json(state, player) == info
                assert engine_native.information_set_digest(state, player) == information_set_digest(state, player)
                if not state.is_terminal and rng.below(4) == 0:
                    a, b = SplitMix64(checked), SplitMix64(checked)
                    assert engine_native.determinize(state, player, a).to_dict() == \
                        determinize(state, player, b).to_dict() and a.state == b.state
                checked += 1
        seed += 1
        assert seed < 400, f"event types never seen: {sorted(set(EVENT_TYPES) - seen)}"
    assert seen == set(EVENT_TYPES)


EVENT_TYPES = ("fatigue", "burn", "draw", "turn_start", "end_turn", "game_over", "damage", "heal", "ward_broken",
               "death", "play", "summon", "buff", "keyword_granted", "keyword_removed", "attack")


def test_the_digest_escapes_names_as_orjson_does_and_the_view_holds_no_floats(monkeypatch):
    """Card names with non-ASCII, quotes, backslashes and control characters (the core takes
    each card's orjson text at import; here it is rebuilt from a patched pool). The view holds
    no float (so no float formatting can differ): a float appearing in it fails here first."""
    state = random_state(3, 40)
    ids = {c.card_id for p in state.players for c in p.board if c is not None} | set(state.players[0].hand)
    assert len(ids) >= 3
    names = ['Ünïcödé "quoted" \\ back', "tab\tnew\nline \x00\x1f \x7f", "☃ 𝄞 \u2028 \ud7ff ’"]
    try:
        for i, card_id in enumerate(sorted(ids)):
            monkeypatch.setitem(engine.CARDS, card_id, dataclasses.replace(engine.CARDS[card_id],
                                                                           name=names[i % len(names)]))
        engine_native._core._set_view_cards(view_card_rows())
        for player in (1, 2):
            info = information_set(state, player)
            if player == 1:  # it sees its hand and both boards: every patched card
                assert set(names) <= set(leaves(info)), "the patched names are in the view"
            assert engine_native._core._information_set_json(state, player) == \
                orjson.dumps(info, option=orjson.OPT_SORT_KEYS)
            assert engine_native.information_set_digest(state, player) == information_set_digest(state, player)
    finally:
        monkeypatch.undo()
        engine_native._core._set_view_cards(view_card_rows())
    assert engine_native.information_set_digest(state, 1) == information_set_digest(state, 1)

    assert not [v for v in leaves(information_set(random_state(4, 60), 1)) if isinstance(v, float)]


def leaves(value):
    """Every scalar in a JSON-like value."""
    if isinstance(value, dict):
        for v in value.values():
            yield from leaves(v)
    elif isinstance(value, list):
        for v in value:
            yield from leaves(v)
    else:
        yield value
