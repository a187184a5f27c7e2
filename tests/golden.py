"""Golden playthroughs of ruleset arena-1: fixed seeds, fixed starting players, fixed policies.

Each case is played from ``engine.new_battle`` and written to ``tests/golden/<name>.json``
with the full action list and the state hash after every action. ``tests/test_golden.py``
replays them, so any change to the rules, the card pool, the deck/shuffle streams, the
serialized state or the baseline policies shows up as a diverging step.

    python -m tests.golden regenerate   # after a DELIBERATE rule/policy change (= make golden)
    python -m tests.golden check        # exit 1 and say where a golden file diverges
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import engine
from adapters import make_baseline

GOLDEN_DIR = Path(__file__).resolve().with_name("golden")
FORMAT_VERSION = 1
REGENERATE_HINT = ("If this change to the rules or policies was deliberate, run `make golden` "
                   "(python -m tests.golden regenerate) and commit tests/golden/*.json; otherwise it is a regression.")

# name -> battle seed, starting player, and the policy of each player as [baseline name, policy seed].
CASES: dict[str, dict[str, Any]] = {
    "random_vs_random_seed1": {"seed": 1, "starting_player": 1, "policies": [["random", 101], ["random", 102]]},
    "random_vs_random_seed2": {"seed": 2, "starting_player": 2, "policies": [["random", 201], ["random", 202]]},
    "greedy_vs_greedy_seed3": {"seed": 3, "starting_player": 1, "policies": [["greedy", 0], ["greedy", 0]]},
    "greedy_vs_greedy_seed4": {"seed": 4, "starting_player": 2, "policies": [["greedy", 0], ["greedy", 0]]},
    "greedy_vs_random_seed5": {"seed": 5, "starting_player": 1, "policies": [["greedy", 0], ["random", 502]]},
}


def make_policies(case: dict[str, Any]) -> list:
    return [make_baseline(name, policy_seed) for name, policy_seed in case["policies"]]


def play(name: str) -> dict[str, Any]:
    """Play one golden case and return the document written to disk."""
    case = CASES[name]
    state = engine.new_battle(case["seed"], starting_player=case["starting_player"])
    policies = make_policies(case)
    initial = state.state_hash()
    actions: list[int] = []
    hashes: list[str] = []
    while not state.is_terminal:
        action = int(policies[state.to_move - 1].act(state))
        state.apply(action)
        actions.append(action)
        hashes.append(state.state_hash())
    return {
        "format": FORMAT_VERSION,
        "name": name,
        "ruleset": engine.RULESET,
        "engine_version": engine.ENGINE_VERSION,
        "state_schema_version": engine.STATE_SCHEMA_VERSION,
        "seed": case["seed"],
        "starting_player": case["starting_player"],
        "policies": [{"player": i + 1, "baseline": n, "seed": s} for i, (n, s) in enumerate(case["policies"])],
        "initial_state_hash": initial,
        "actions": actions,
        "state_hashes": hashes,  # state_hashes[i] is the hash after actions[i]
        "final": {"winner": state.winner, "end_reason": state.end_reason, "turn": state.turn,
                  "hero_health": [p.hp for p in state.players]},
    }


def path_of(name: str) -> Path:
    return GOLDEN_DIR / f"{name}.json"


def dump(doc: dict[str, Any]) -> str:
    """Compact but diff-friendly: one line per hash, the action list on one line."""
    head = {k: v for k, v in doc.items() if k not in ("actions", "state_hashes")}
    lines = json.dumps(head, indent=1, sort_keys=True)[:-2]
    lines += ',\n "actions": ' + json.dumps(doc["actions"])
    lines += ',\n "state_hashes": [\n' + ",\n".join(f'  "{h}"' for h in doc["state_hashes"]) + "\n ]\n}\n"
    assert json.loads(lines) == doc
    return lines


def load(name: str) -> dict[str, Any]:
    return json.loads(path_of(name).read_text(encoding="utf-8"))


def regenerate() -> list[Path]:
    GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
    written = []
    for stale in GOLDEN_DIR.glob("*.json"):
        if stale.stem not in CASES:
            stale.unlink()
    for name in CASES:
        path = path_of(name)
        path.write_text(dump(play(name)), encoding="utf-8")
        written.append(path)
    return written


def first_divergence(expected: list[Any], got: list[Any]) -> int | None:
    for i, (a, b) in enumerate(zip(expected, got)):
        if a != b:
            return i
    return None if len(expected) == len(got) else min(len(expected), len(got))


def replay_problems(doc: dict[str, Any]) -> list[str]:
    """Replay a golden document's actions from new_battle; describe every mismatch (empty = fine)."""
    name = doc.get("name", "?")
    problems = []
    if doc.get("ruleset") != engine.RULESET:
        problems.append(f"{name}: recorded for ruleset {doc.get('ruleset')!r}, engine plays {engine.RULESET!r}")
    state = engine.new_battle(doc["seed"], starting_player=doc["starting_player"])
    if state.state_hash() != doc["initial_state_hash"]:
        problems.append(f"{name}: the initial state (seed {doc['seed']}) differs before any action: decks, "
                        f"shuffle, opening draws or the state format changed")
        return problems
    for i, (action, want) in enumerate(zip(doc["actions"], doc["state_hashes"])):
        description = state.describe_action(action) if 0 <= action < engine.ACTION_SPACE_SIZE else "?"
        try:
            state.apply(action)
        except engine.IllegalActionError as exc:
            problems.append(f"{name}: step {i}: recorded action {action} ({description}) is now illegal: {exc}")
            return problems
        if state.state_hash() != want:
            problems.append(f"{name}: first diverging step {i} (turn {state.turn}): after action {action} "
                            f"({description}) the state hash is {state.state_hash()[:16]}..., recorded {want[:16]}...")
            return problems
    final = doc["final"]
    got = {"winner": state.winner, "end_reason": state.end_reason, "turn": state.turn,
           "hero_health": [p.hp for p in state.players]}
    if len(doc["actions"]) != len(doc["state_hashes"]):
        problems.append(f"{name}: {len(doc['actions'])} actions but {len(doc['state_hashes'])} state hashes")
    if not state.is_terminal:
        problems.append(f"{name}: after all {len(doc['actions'])} recorded actions the battle is not over")
    if got != final:
        problems.append(f"{name}: final result {got}, recorded {final}")
    return problems


def policy_problems(doc: dict[str, Any]) -> list[str]:
    """Re-ask the recorded policies along the recorded battle; report the first changed choice."""
    name = doc.get("name", "?")
    spec = [[p["baseline"], p["seed"]] for p in doc["policies"]]
    policies = [make_baseline(n, s) for n, s in spec]
    state = engine.new_battle(doc["seed"], starting_player=doc["starting_player"])
    for i, recorded in enumerate(doc["actions"]):
        mover = state.to_move
        chosen = int(policies[mover - 1].act(state))
        if chosen != recorded:
            return [f"{name}: policy baseline:{spec[mover - 1][0]} (player {mover}) changed its choice at step {i} "
                    f"(turn {state.turn}): now {chosen} ({state.describe_action(chosen)}), recorded {recorded} "
                    f"({state.describe_action(recorded)})"]
        try:
            state.apply(recorded)
        except engine.IllegalActionError as exc:
            return [f"{name}: step {i}: recorded action {recorded} is now illegal, the policies cannot be "
                    f"checked further: {exc}"]
    return []


def check() -> list[str]:
    problems = []
    on_disk = {p.stem for p in GOLDEN_DIR.glob("*.json")}
    for missing in sorted(set(CASES) - on_disk):
        problems.append(f"{missing}: golden file {path_of(missing)} is missing")
    for extra in sorted(on_disk - set(CASES)):
        problems.append(f"{extra}: golden file has no case in tests/golden.py CASES")
    for name in sorted(set(CASES) & on_disk):
        doc = load(name)
        problems += replay_problems(doc) or policy_problems(doc)
    return problems


def main(argv: list[str]) -> int:
    mode = argv[0] if argv else "check"
    if mode == "regenerate":
        for path in regenerate():
            doc = json.loads(path.read_text(encoding="utf-8"))
            print(f"wrote {path} ({len(doc['actions'])} actions, {path.stat().st_size} bytes, "
                  f"winner {doc['final']['winner']} by {doc['final']['end_reason']})")
        return 0
    if mode == "check":
        problems = check()
        for line in problems:
            print(line)
        if problems:
            print(REGENERATE_HINT)
            return 1
        print(f"{len(CASES)} golden playthroughs match")
        return 0
    print("usage: python -m tests.golden [check|regenerate]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
