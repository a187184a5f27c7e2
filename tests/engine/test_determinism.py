"""Determinism of arena-1 (DESIGN section 3, last rule; section 4): the same (seed, decks,
starting player, actions) give a byte-identical trajectory in any process, whatever the
global random state or PYTHONHASHSEED; serialization is lossless mid-battle; replays and
seeded policies reproduce themselves."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import engine
from adapters import make_baseline

REPO = Path(__file__).resolve().parents[2]

# The trajectory code, run both in this process (exec) and in fresh interpreters.
TRAJECTORY_SOURCE = r'''
import hashlib, json
import engine
from adapters import make_baseline

def trajectory(seed, starting_player=None, policies=("random", "random"), between_steps=None):
    """Play a whole battle with seeded baselines; return (sha256 of the serialized
    trajectory, actions, state hashes). Every state's canonical JSON, every event list and
    both observations go into the digest."""
    state = engine.new_battle(seed, starting_player=starting_player)
    players = [make_baseline(name, seed * 10 + i) for i, name in enumerate(policies)]
    digest = hashlib.sha256()

    def record(action, events):
        digest.update(f"{action}\n".encode())
        digest.update(state.canonical_json().encode() + b"\n")
        digest.update(json.dumps(events, sort_keys=True, separators=(",", ":")).encode() + b"\n")
        for p in (1, 2):
            digest.update(state.observation(p).tobytes())

    record(None, state.last_events)
    actions, hashes = [], [state.state_hash()]
    step = 0
    while not state.is_terminal:
        if between_steps is not None:
            between_steps(step)
        action = players[state.to_move - 1].act(state)
        events = state.apply(action)
        record(action, events)
        actions.append(action)
        hashes.append(state.state_hash())
        step += 1
    digest.update(f"{state.winner}:{state.end_reason}:{state.turn}".encode())
    return digest.hexdigest(), actions, hashes

if __name__ == "__main__":
    import sys
    cases = json.loads(sys.argv[1])
    print(json.dumps([trajectory(*case)[0] for case in cases]))
'''

_NS: dict = {}
exec(compile(TRAJECTORY_SOURCE, "<trajectory>", "exec"), _NS)
trajectory = _NS["trajectory"]

CASES = [[7, None, ["random", "random"]], [8, 2, ["random", "random"]], [9, 1, ["greedy", "random"]]]


def _run_in_subprocess(hash_seed: str) -> list[str]:
    env = dict(os.environ)
    env["PYTHONHASHSEED"] = hash_seed
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    proc = subprocess.run([sys.executable, "-c", TRAJECTORY_SOURCE, json.dumps(CASES)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"trajectory subprocess failed:\n{proc.stderr}"
    return json.loads(proc.stdout)


def test_trajectories_are_byte_identical_across_processes_and_hash_seeds():
    a = _run_in_subprocess("0")
    b = _run_in_subprocess("2718281")
    here = [trajectory(*case)[0] for case in CASES]
    assert a == b, "two interpreters with different PYTHONHASHSEED played different trajectories"
    assert a == here, "a fresh interpreter and this one played different trajectories"
    assert len(set(here)) == len(CASES), "different seeds gave the same trajectory"


def test_different_seed_or_starting_player_gives_a_different_trajectory():
    base, base_actions, base_hashes = trajectory(7)
    assert trajectory(7) == (base, base_actions, base_hashes)
    assert trajectory(70)[0] != base
    seeded_start = engine.new_battle(7).starting_player
    assert trajectory(7, 3 - seeded_start)[0] != base
    assert trajectory(7, seeded_start)[0] == base, "the seeded starting player, passed explicitly, changed the battle"


def test_global_random_state_changes_nothing_and_is_not_consumed():
    reference = trajectory(21)

    def perturb(step: int) -> None:
        random.seed(step * 7919 + 1)
        random.random()
        np.random.seed(step + 17)
        np.random.random(5)

    random.seed(123456)
    np.random.seed(654321)
    assert trajectory(21, between_steps=perturb) == reference

    random.seed(99)
    np.random.seed(99)
    py_state, np_state = random.getstate(), np.random.get_state()
    trajectory(22, policies=("greedy", "random"))
    assert random.getstate() == py_state, "the engine or a baseline consumed Python's global random generator"
    after = np.random.get_state()
    assert after[0] == np_state[0] and np.array_equal(after[1], np_state[1]) and after[2:] == np_state[2:], \
        "the engine or a baseline consumed numpy's global random generator"


def _json_roundtrip(state: engine.State) -> engine.State:
    return engine.State.from_dict(json.loads(json.dumps(state.to_dict())))


@pytest.mark.parametrize("seed", [31, 32])
def test_from_dict_mid_battle_continues_identically(seed):
    _, actions, hashes = trajectory(seed)
    state = engine.new_battle(seed)
    for k in range(len(actions) + 1):
        restored = _json_roundtrip(state)
        assert restored.canonical_json() == state.canonical_json()
        assert restored.to_dict()["rng_state"] == state.to_dict()["rng_state"]
        # the generator itself continues the same stream
        assert restored.clone().rng.next_u64() == state.clone().rng.next_u64()
        assert restored.legal_actions() == state.legal_actions()
        assert (restored.is_terminal, restored.winner, restored.end_reason, restored.to_move) == \
               (state.is_terminal, state.winner, state.end_reason, state.to_move)
        for p in (1, 2):
            assert np.array_equal(restored.observation(p), state.observation(p))
        if k % 5 == 0 or k == len(actions):  # continue the restored copy to the end
            follow = [restored.state_hash()]
            for a in actions[k:]:
                restored.apply(a)
                follow.append(restored.state_hash())
            assert follow == hashes[k:], f"state restored at step {k} diverged after restoring"
            assert restored.is_terminal
        if k < len(actions):
            state.apply(actions[k])
            assert state.state_hash() == hashes[k + 1]


def test_replaying_a_recorded_action_list_reproduces_every_hash():
    for seed, policies in ((41, ("random", "random")), (42, ("greedy", "greedy"))):
        _, actions, hashes = trajectory(seed, policies=policies)
        recorded = engine.new_battle(seed)
        start, decks = recorded.starting_player, recorded.to_dict()["decks"]
        # The default decks, passed explicitly, give the very same battle (docs/playing.md).
        for replay in (engine.new_battle(seed), engine.new_battle(seed, decks[0], decks[1], starting_player=start)):
            got = [replay.state_hash()]
            for a in actions:
                replay.apply(a)
                got.append(replay.state_hash())
            assert got == hashes
            assert replay.is_terminal
        assert all(h1 != h2 for h1, h2 in zip(hashes, hashes[1:])), "an action left the state hash unchanged"


def test_random_baseline_with_the_same_seed_makes_the_same_choices():
    def choices(policy_seed: int, seed: int = 51) -> list[int]:
        state = engine.new_battle(seed)
        mover = make_baseline("random", policy_seed)
        other = make_baseline("random", 999)
        out = []
        while not state.is_terminal:
            policy = mover if state.to_move == 1 else other
            out.append(policy.act(state))
            state.apply(out[-1])
        return out

    assert choices(5) == choices(5)
    assert choices(5) != choices(6)

    # the same seeded policy, asked about the same position, answers the same
    state = engine.new_battle(52)
    for _ in range(10):
        state.apply(make_baseline("random", 1).act(state))
    picks = {make_baseline("random", 77).act(state.clone()) for _ in range(5)}
    assert len(picks) == 1


def test_greedy_is_deterministic_and_does_not_touch_the_state():
    state = engine.new_battle(61)
    greedy = make_baseline("greedy")
    while not state.is_terminal:
        before = state.canonical_json()
        a = greedy.act(state)
        assert state.canonical_json() == before, "greedy.act mutated the state it was given"
        assert make_baseline("greedy", 12345).act(state) == a
        state.apply(a)


def test_state_hash_is_sha256_of_canonical_json():
    import hashlib

    state = engine.new_battle(71)
    state.apply(state.legal_actions()[-1])
    text = state.canonical_json()
    assert state.state_hash() == hashlib.sha256(text.encode()).hexdigest()
    assert json.loads(text) == state.to_dict()
    assert text == json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))


def test_numpy_integer_seed_is_the_same_battle():
    assert engine.new_battle(np.int64(7)).state_hash() == engine.new_battle(7).state_hash()
    assert engine.new_battle(np.uint32(7), starting_player=2).state_hash() == \
        engine.new_battle(7, starting_player=2).state_hash()
