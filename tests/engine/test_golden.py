"""Golden playthroughs: replay tests/golden/*.json and demand every state hash and every
policy choice still match. Regenerate ONLY after a deliberate change: `make golden`."""

from __future__ import annotations

import copy

import pytest

import engine
from tests import golden

NAMES = sorted(golden.CASES)


def test_every_case_has_a_modest_golden_file_and_no_file_is_orphaned():
    on_disk = sorted(p.stem for p in golden.GOLDEN_DIR.glob("*.json"))
    assert on_disk == NAMES, f"golden files {on_disk} do not match the cases {NAMES}. {golden.REGENERATE_HINT}"
    assert len(NAMES) >= 5
    kinds = {tuple(n for n, _ in case["policies"]) for case in golden.CASES.values()}
    assert ("random", "random") in kinds and ("greedy", "greedy") in kinds
    for name in NAMES:
        assert golden.path_of(name).stat().st_size < 100_000


@pytest.mark.parametrize("name", NAMES)
def test_golden_file_describes_its_case(name):
    doc = golden.load(name)
    case = golden.CASES[name]
    assert doc["format"] == golden.FORMAT_VERSION
    assert doc["ruleset"] == engine.RULESET
    assert (doc["seed"], doc["starting_player"]) == (case["seed"], case["starting_player"])
    assert [[p["baseline"], p["seed"]] for p in doc["policies"]] == case["policies"]
    assert len(doc["actions"]) == len(doc["state_hashes"]) > 0
    assert doc["final"]["end_reason"] in ("hero_defeated", "simultaneous_death", "turn_limit")


@pytest.mark.parametrize("name", NAMES)
def test_replay_reproduces_every_state_hash(name):
    problems = golden.replay_problems(golden.load(name))
    assert not problems, "\n".join(problems) + "\n" + golden.REGENERATE_HINT


@pytest.mark.parametrize("name", NAMES)
def test_policies_still_choose_the_recorded_actions(name):
    problems = golden.policy_problems(golden.load(name))
    assert not problems, ("\n".join(problems) + "\nA baseline policy now plays differently. "
                          + golden.REGENERATE_HINT)


def test_a_corrupted_hash_is_reported_at_its_step():
    doc = copy.deepcopy(golden.load(NAMES[0]))
    doc["state_hashes"][10] = "0" * 64
    problems = golden.replay_problems(doc)
    assert len(problems) == 1 and "first diverging step 10 " in problems[0]


def test_a_changed_action_is_reported_at_its_step():
    doc = copy.deepcopy(golden.load("greedy_vs_greedy_seed3"))
    state = engine.new_battle(doc["seed"], starting_player=doc["starting_player"])
    step = 0
    while len(state.legal_actions()) < 2:  # the first real choice
        state.apply(doc["actions"][step])
        step += 1
    doc["actions"][step] = next(a for a in state.legal_actions() if a != doc["actions"][step])
    assert f"first diverging step {step} " in golden.replay_problems(doc)[0]
    policy = golden.policy_problems(doc)
    assert len(policy) == 1 and f"changed its choice at step {step} " in policy[0] and "baseline:greedy" in policy[0]


def test_check_mode_passes_on_the_committed_files():
    assert golden.main(["check"]) == 0
