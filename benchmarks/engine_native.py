"""The native engine core (engine_native) against the Python engine; prints one JSON object.

    .venv/bin/python -m benchmarks.engine_native [--seconds S] [--rounds R] [--verify-battles N]

Figures, per CPU-second of this process (time.process_time, so other work on the machine is
not counted), best of R interleaved rounds, with the ratios native / Python:

* random full battles stepped inside the core (``engine_native.play_random_battles``: no
  Python per step) against the Python engine's random battles (benchmarks/engine.py's
  ``random_steps``: the same battles, seed for seed);
* per-step Python calls (``legal_actions`` + ``apply``) on a native state against the Python
  engine, in the same loop; the action is ``legal[k % len(legal)]`` with ``k`` from a fixed
  table of random integers (``python_calls_*``), and, as in ``random_steps``, from
  ``SplitMix64.below`` (``splitmix_loop_*``: that pure-Python draw, about 0.8 us, is a third
  of a native step and dilutes the ratio).

Then ``--verify-battles`` seeds (default 10,000) are played both ways and every final state
hash, winner, turn and step count must agree (issue 26's 10,000-battle differential run; the
per-step comparison of 2,000 battles is in tests/engine/test_native_differential.py).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time

import engine
from benchmarks.engine import random_steps
from engine import SplitMix64

try:
    import engine_native
except ImportError as exc:  # no compiler at make setup: nothing to measure
    engine_native = None
    NATIVE_MISSING = str(exc)


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


def verify(battles: int) -> dict:
    """Play seeds 0..battles-1 in the core and on the Python engine; every result must agree."""
    got = engine_native.play_random_battles(range(battles), hashes=True)
    mismatches = []
    for seed in range(battles):
        state, rng, steps = engine.new_battle(seed), SplitMix64(seed), 0
        while not state.is_terminal:
            legal = state.legal_actions()
            state.apply(legal[rng.below(len(legal))])
            steps += 1
        if (got["state_hash"][seed], got["winner"][seed], got["turn"][seed], got["steps"][seed]) != \
                (state.state_hash(), state.winner, state.turn, steps):
            mismatches.append(seed)
    return {"battles": battles, "steps": sum(got["steps"]), "identical": not mismatches,
            "mismatched_seeds": mismatches[:20]}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=2.0, help="CPU seconds per figure and round")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the best is reported")
    parser.add_argument("--verify-battles", type=int, default=10_000, help="battles compared both ways (0: none)")
    args = parser.parse_args()
    if engine_native is None:
        print(json.dumps({"skipped": f"engine_native is not built ({NATIVE_MISSING}); run make setup"}))
        return 0
    runs = {
        "python_random": (random_steps, 10_000),
        "core_random": (core_random_steps, 1000),
        "python_calls_python": (lambda seed: table_steps(engine, seed), 20_000),
        "python_calls_native": (lambda seed: table_steps(engine_native, seed), 20_000),
        "splitmix_loop_python": (random_steps, 30_000),
        "splitmix_loop_native": (native_random_steps, 30_000),
    }
    figures: dict[str, list[float]] = {name: [] for name in runs}
    for r in range(args.rounds):
        for name, (fn, first_seed) in runs.items():
            figures[name].append(_rate(fn, args.seconds, first_seed + 1000 * r))
    best = {name: max(values) for name, values in figures.items()}
    out = {
        "python": platform.python_version(),
        "seconds_per_figure": args.seconds,
        "rounds": args.rounds,
        "steps_per_cpu_s": {name: round(value) for name, value in best.items()},
        "ratios": {
            "random_battles_in_core_vs_python": round(best["core_random"] / best["python_random"], 1),
            "python_calls_native_vs_python": round(best["python_calls_native"] / best["python_calls_python"], 2),
            "splitmix_loop_native_vs_python": round(best["splitmix_loop_native"] / best["splitmix_loop_python"], 2),
        },
        "targets": {"random_battles_in_core_vs_python": 50, "python_calls_native_vs_python": 5},
    }
    if args.verify_battles:
        start = time.process_time()
        out["verify"] = verify(args.verify_battles)
        out["verify"]["cpu_s"] = round(time.process_time() - start, 1)
    print(json.dumps(out, indent=1))
    return 0 if out.get("verify", {}).get("identical", True) else 1


if __name__ == "__main__":
    sys.exit(main())
