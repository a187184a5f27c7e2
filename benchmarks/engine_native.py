"""The native engine core (engine_native) against the Python engine; prints one JSON object.

    .venv/bin/python -m benchmarks.engine_native [--seconds S] [--rounds R] [--verify-battles N]
        [--verify-greedy N] [--verify-search N]

Figures, per CPU-second of this process (time.process_time, so other work on the machine is
not counted), best of R interleaved rounds, with the ratios native / Python:

* the public engine API (``public_api_*``): ``engine.new_battle(seed)`` then, at every step,
  ``legal_actions()``, ``apply(legal[k % len(legal)])`` and ``observation(1)``, the loop a user
  writes, with ``EXTRAARENA_ENGINE=python`` and ``=native`` (on the native backend the state is
  an ``engine.State`` stepped in the core: engine/native_state.py). Issue 48's target: >= 5x;

* random full battles stepped inside the core (``engine_native.play_random_battles``: no
  Python per step) against the Python engine's random battles (benchmarks/engine.py's
  ``random_steps``: the same battles, seed for seed);
* per-step Python calls (``legal_actions`` + ``apply``) on a native state against the Python
  engine, in the same loop; the action is ``legal[k % len(legal)]`` with ``k`` from a fixed
  table of random integers (``python_calls_*``), and, as in ``random_steps``, from
  ``SplitMix64.below`` (``splitmix_loop_*``: that pure-Python draw, about 0.8 us, is a third
  of a native step and dilutes the ratio);
* greedy-vs-greedy battles (``greedy_*``, battles/CPU-s): the Python reference
  (GreedyPolicy on the Python engine, ``EXTRAARENA_ENGINE=python``) against whole battles in
  the core (``engine_native.play_greedy_battles``);
* search teacher decisions (``search_*``, decisions/CPU-s): ``SearchPolicy(GreedyPolicy(), 32)``
  deciding the same 48 states from greedy battles (a whole cycle per call, so every figure
  averages the same states), on the Python backend and on the native
  one (the Python API: the digest, the seed and the Decision in Python, the search in the core),
  and ``search_in_core`` (arena::SearchAct: the digest too in C++, what an in-core opponent
  runs). Every decision both backends made on the same state must agree (``search_verified``).

Then ``--verify-battles`` random battles (default 10,000; issue 26's differential run) are
stepped on both engines side by side, comparing at every step the legal actions, the events,
the state hash and the observation and action-feature bytes, and the core's own loop must end
each in the same state (tests/engine/test_native_differential.py steps 2,000 battles and
test_native_features.py 300 the same way in the suite);
``--verify-greedy`` greedy-vs-greedy battles (default 1,000) likewise, and ``--verify-search``
teacher battles (``search:baseline:greedy?sims=8`` against greedy, default 50) decide
identically at every decision on both backends (tests/engine/test_native_policies.py runs
500 greedy and 50 teacher battles step by step).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
import time

import engine
from adapters import GreedyPolicy, SearchPolicy
from benchmarks.engine import random_steps
from benchmarks.improve import greedy_states
from engine import SplitMix64, features, reference
from engine import backend as engine_backend

engine_native = engine_backend.load_native()  # registered with engine whatever EXTRAARENA_ENGINE says


_DRAWS = [SplitMix64(7).below(1 << 30) for _ in range(1 << 12)]


def table_steps(module, seed: int) -> int:
    """A random battle on ``module`` (engine or engine_native), actions drawn from _DRAWS."""
    state = module.new_battle(seed)
    steps = 0
    while not state.is_terminal:
        legal = state.legal_actions()
        state.apply(legal[_DRAWS[steps & 4095] % len(legal)])
        steps += 1
    return steps


def public_api_steps(seed: int) -> int:
    """The public API's loop on whichever backend is selected: engine.new_battle, then
    legal_actions + apply + observation(1) at every step (actions from _DRAWS)."""
    state = engine.new_battle(seed)
    steps = 0
    while not state.is_terminal:
        legal = state.legal_actions()
        state.apply(legal[_DRAWS[steps & 4095] % len(legal)])
        state.observation(1)
        steps += 1
    return steps


def on_backend(name: str, fn):
    def run(seed: int) -> int:
        with backend(name):
            return fn(seed)
    return run


def native_random_steps(seed: int) -> int:
    """random_steps on a native state: Python calls legal_actions and apply at every step."""
    return random_steps(seed, engine_native.new_battle)


def _rate(fn, seconds: float, start_seed: int) -> float:
    """Steps per CPU-second of ``fn(seed) -> steps`` over consecutive seeds for ``seconds``."""
    done, seed, start = 0, start_seed, time.process_time()
    while True:
        done += fn(seed)
        seed += 1
        elapsed = time.process_time() - start
        if elapsed >= seconds:
            return done / elapsed


def core_random_steps(seed: int, batch: int = 200) -> int:
    return sum(engine_native.play_random_battles(range(seed * batch, (seed + 1) * batch))["steps"])


@contextlib.contextmanager
def backend(name: str):
    """EXTRAARENA_ENGINE=name inside the block (engine.backend reads it at every lookup)."""
    before = os.environ.get("EXTRAARENA_ENGINE")
    os.environ["EXTRAARENA_ENGINE"] = name
    try:
        yield
    finally:
        if before is None:
            del os.environ["EXTRAARENA_ENGINE"]
        else:
            os.environ["EXTRAARENA_ENGINE"] = before


def python_greedy_battle(seed: int) -> tuple[int, str]:
    """new_battle(seed) played by GreedyPolicy on both sides on the Python engine: (steps, final hash)."""
    state, greedy, steps = reference.new_battle(seed), GreedyPolicy(), 0
    with backend("python"):
        while not state.is_terminal:
            state.apply(greedy.act(state))
            steps += 1
    return steps, state.state_hash()


def core_greedy_battles(seed: int, batch: int = 20) -> int:
    return len(engine_native.play_greedy_battles(range(seed * batch, (seed + 1) * batch))["steps"])


SEARCH_SIMS = 32
SEARCH_CYCLE = 48  # states one search figure call decides: every figure averages the same states
_STATES: list[engine.State] = []
_PY_STATES: list[engine.State] = []  # the same states on the Python engine
_DECISIONS: dict[str, dict[tuple[int, int], tuple]] = {"python": {}, "native": {}}


def search_cycle(name: str, k: int) -> int:
    """SearchPolicy(greedy, 32, seed=k) decides every state of the cycle on backend ``name``;
    the decisions are recorded for the comparison."""
    states = _STATES if name == "native" else _PY_STATES
    with backend(name):
        for i, state in enumerate(states):
            d = SearchPolicy(GreedyPolicy(), SEARCH_SIMS, k).decide(state)
            _DECISIONS[name][k, i] = (d.action_id, d.value, d.outputs)
    return len(_STATES)


def core_search_cycle(k: int) -> int:
    for state in _STATES:
        engine_native._core._search_act(state, k, SEARCH_SIMS, "greedy", None)
    return len(_STATES)


def verify_greedy(battles: int) -> dict:
    got = engine_native.play_greedy_battles(range(battles), hashes=True)
    mismatches = [seed for seed in range(battles)
                  if (got["steps"][seed], got["state_hash"][seed]) != python_greedy_battle(seed)]
    return {"battles": battles, "steps": sum(got["steps"]), "identical": not mismatches,
            "mismatched_seeds": mismatches[:20]}


def verify_search(battles: int, sims: int = 8) -> dict:
    """search:baseline:greedy?sims=8 against greedy, both backends deciding every search move."""
    mismatches, decisions, greedy = [], 0, GreedyPolicy()
    for seed in range(battles):
        searchers = {name: SearchPolicy(GreedyPolicy(), sims, seed) for name in ("python", "native")}
        state, seat = reference.new_battle(seed), 1 + seed % 2
        while not state.is_terminal:
            if state.to_move != seat:
                state.apply(greedy.act(state))
                continue
            made = {}
            for name, searcher in searchers.items():
                with backend(name):
                    d = searcher.decide(state)
                made[name] = (d.action_id, d.value, d.outputs)
            if made["python"] != made["native"]:
                mismatches.append((seed, decisions))
            state.apply(made["python"][0])
            decisions += 1
    return {"battles": battles, "sims": sims, "decisions": decisions, "identical": not mismatches,
            "mismatched": mismatches[:20]}


def verify(battles: int) -> dict:
    """Seeds 0..battles-1 with seeded random actions, a Python and a native state side by side:
    at every step the legal actions (the mask), the events, the state hash, both players'
    observation bytes and the legal actions' feature bytes must agree; then the core's own
    loop (play_random_battles) must end each battle in the same state."""
    got = engine_native.play_random_battles(range(battles), hashes=True)
    mismatches, steps = [], 0
    for seed in range(battles):
        py, nat, rng = reference.new_battle(seed), engine_native.new_battle(seed), SplitMix64(seed)
        while True:
            legal = py.legal_actions()
            with backend("python"):
                want = (legal, py.state_hash(), [features.observation(py, p).tobytes() for p in (1, 2)],
                        features.action_features(py, legal).tobytes() if legal else b"")
            have = (nat.legal_actions(), nat.state_hash(), [nat.observation(p).tobytes() for p in (1, 2)],
                    nat.action_features(legal).tobytes() if legal else b"")
            if have != want:
                mismatches.append((seed, steps))
                break
            if py.is_terminal:
                break
            action = legal[rng.below(len(legal))]
            if py.apply(action) != nat.apply(action):
                mismatches.append((seed, steps))
                break
            steps += 1
        if (got["state_hash"][seed], got["winner"][seed], got["turn"][seed]) != \
                (py.state_hash(), py.winner, py.turn):
            mismatches.append((seed, "play_random_battles"))
    return {"battles": battles, "steps": steps, "identical": not mismatches, "mismatched": mismatches[:20]}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=2.0, help="CPU seconds per figure and round")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the best is reported")
    parser.add_argument("--verify-battles", type=int, default=10_000, help="battles compared both ways (0: none)")
    parser.add_argument("--verify-greedy", type=int, default=1000, help="greedy battles compared both ways (0: none)")
    parser.add_argument("--verify-search", type=int, default=50, help="teacher battles compared both ways (0: none)")
    args = parser.parse_args()
    if engine_native is None:
        print(json.dumps({"skipped": "engine_native is not built; make setup (or pip install of the checkout) builds it"}))
        return 0
    runs = {
        "public_api_python": (on_backend("python", public_api_steps), 50_000),
        "public_api_native": (on_backend("native", public_api_steps), 50_000),
        "python_random": (lambda seed: random_steps(seed, reference.new_battle), 10_000),
        "core_random": (core_random_steps, 1000),
        "python_calls_python": (lambda seed: table_steps(reference, seed), 20_000),
        "python_calls_native": (lambda seed: table_steps(engine_native, seed), 20_000),
        "splitmix_loop_python": (lambda seed: random_steps(seed, reference.new_battle), 30_000),
        "splitmix_loop_native": (native_random_steps, 30_000),
        "greedy_python": (lambda seed: python_greedy_battle(seed) and 1, 40_000),
        "greedy_core": (core_greedy_battles, 5_000),
        "search_python": (lambda k: search_cycle("python", k), 0),
        "search_native": (lambda k: search_cycle("native", k), 0),
        "search_in_core": (core_search_cycle, 0),
    }
    _STATES[:] = greedy_states(SEARCH_CYCLE)
    _PY_STATES[:] = [reference.from_dict(state.to_dict()) for state in _STATES]
    figures: dict[str, list[float]] = {name: [] for name in runs}
    for r in range(args.rounds):
        for name, (fn, first_seed) in runs.items():
            figures[name].append(_rate(fn, args.seconds, first_seed + 1000 * r))
    best = {name: max(values) for name, values in figures.items()}
    compared = sorted(set(_DECISIONS["python"]) & set(_DECISIONS["native"]))
    search_identical = bool(compared) and all(_DECISIONS["python"][k] == _DECISIONS["native"][k] for k in compared)
    out = {
        "python": platform.python_version(),
        "seconds_per_figure": args.seconds,
        "rounds": args.rounds,
        "steps_per_cpu_s": {name: round(value) for name, value in best.items() if not name.startswith(("greedy", "search"))},
        "greedy_battles_per_cpu_s": {name: round(best[name], 1) for name in ("greedy_python", "greedy_core")},
        "search_decisions_per_cpu_s": {"sims": SEARCH_SIMS, **{name: round(best[name], 1) for name in
                                       ("search_python", "search_native", "search_in_core")}},
        "search_verified": {"decisions_compared": len(compared), "identical": search_identical},
        "ratios": {
            "greedy_battles_in_core_vs_python": round(best["greedy_core"] / best["greedy_python"], 1),
            "search_decisions_native_vs_python": round(best["search_native"] / best["search_python"], 1),
            "search_decisions_in_core_vs_python": round(best["search_in_core"] / best["search_python"], 1),
            "random_battles_in_core_vs_python": round(best["core_random"] / best["python_random"], 1),
            "public_api_native_vs_python": round(best["public_api_native"] / best["public_api_python"], 2),
            "python_calls_native_vs_python": round(best["python_calls_native"] / best["python_calls_python"], 2),
            "splitmix_loop_native_vs_python": round(best["splitmix_loop_native"] / best["splitmix_loop_python"], 2),
        },
        "targets": {"public_api_native_vs_python": 5, "random_battles_in_core_vs_python": 50,
                    "python_calls_native_vs_python": 5,
                    "greedy_battles_in_core_vs_python": 50, "search_decisions_native_vs_python": 30},
    }
    if args.verify_battles:
        start = time.process_time()
        out["verify"] = verify(args.verify_battles)
        out["verify"]["cpu_s"] = round(time.process_time() - start, 1)
    for key, count, check in (("verify_greedy", args.verify_greedy, verify_greedy),
                              ("verify_search", args.verify_search, verify_search)):
        if count:
            start = time.process_time()
            out[key] = check(count)
            out[key]["cpu_s"] = round(time.process_time() - start, 1)
    print(json.dumps(out, indent=1))
    identical = [out[k]["identical"] for k in ("verify", "verify_greedy", "verify_search") if k in out]
    return 0 if all(identical) and search_identical else 1


if __name__ == "__main__":
    sys.exit(main())
