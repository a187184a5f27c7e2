"""The batched API and the vector env against the Python engine, one process; prints one JSON object.

    PYTHONPATH=native:. .venv/bin/python -m benchmarks.vector_env [--seconds S] [--rounds R] [--num-envs N]

Figures, per CPU-second of this process (``time.process_time``), medians of interleaved rounds
(each ratio against its own round's Python figure):

* ``python_engine_steps_per_s``: benchmarks.engine's ``random_steps`` on the Python engine
  (``legal_actions`` + ``apply``, both sides random).
* ``batch_random``: ``engine_native.batch.BattleBatch(N, "baseline:random")`` stepped with a
  masked random learner action per battle (chosen with numpy from the returned masks, as a
  learner samples), observations + masks returned each step. Learner steps and engine
  actions (the learner's and the opponent's moves: the unit of the Python engine's steps)
  per CPU-second, of the whole loop and of the ``step`` calls alone (``api_``: the learner's
  sampling excluded), each with its ratio to the Python engine (issue 26's target: >= 20).
* ``single_env_greedy_python``: ``ArenaGymEnv(opponent="baseline:greedy")`` on the Python
  engine (EXTRAARENA_ENGINE=python), a masked random learner: learner steps/CPU-s (the issue's
  7.8k). ``vector_env_greedy``: ``ArenaVectorEnv(N, opponent="baseline:greedy")`` on the native
  core, the same learner vectorized; ``ratio_single_env`` (target >= 20).
* ``vector_env_checkpoint``: ``ArenaVectorEnv(N, opponent=<a registered v5 checkpoint>)`` (a
  ``ReferenceBatch``: checkpoints are played in Python, their inference in onnxruntime), the
  same masked random learner, learner steps/CPU-s: ``new`` evaluates the battles whose opponent
  is to move with one model call per decision round (issue 48: the feed built by the core in
  one call, rows run in 2-4 runs of similar widths); ``old`` is the same env
  with ``batched_opponents=False``, one ``ArenaGymEnv.step`` per battle and one run per
  opponent decision, as before; ``ratio`` (target >= 5). The checkpoint is
  tests/onnx_factory.mlp_v5(width=``--checkpoint-width``, default 32, seed 0), registered in a
  temporary registry.
* ``features``: microseconds per state along 40 random battles (Python engine states): the
  Python code against ``engine_native.from_state`` + the core's, for one observation, the
  legal actions' features and a batch ``observations`` (why engine.features uses the core
  for the last two only).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time

import numpy as np

import engine
from benchmarks.engine import _timed, random_steps
from benchmarks.engine_native import backend
from engine import SplitMix64, features, reference
from engine import backend as engine_backend

engine_native = engine_backend.load_native()  # registered with engine whatever EXTRAARENA_ENGINE says


def _rate(fn, seconds: float) -> float:
    done, elapsed = _timed(fn, seconds, time.process_time)
    return done / elapsed


def _masked_random(mask: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One uniformly random legal id per row of ``mask`` (every row has one), vectorized."""
    rows, cols = np.nonzero(mask)  # row-major: each row's legal ids, ascending
    counts = np.bincount(rows, minlength=len(mask))
    return cols[np.cumsum(counts) - counts + rng.integers(counts)]


def batch_rates(num_envs: int, opponent: str, seconds: float) -> dict[str, float]:
    """BattleBatch stepped with masked random learner actions: learner steps and engine actions
    (learner + opponent) per CPU-second, of the whole loop and of the ``step`` calls alone."""
    batch = engine_native.batch.BattleBatch(num_envs, opponent=opponent)
    out, rng = batch.reset(0), np.random.default_rng(0)
    steps, in_step, start = 0, 0.0, time.process_time()
    first_actions = batch.actions_applied
    while True:
        actions = _masked_random(out["mask"], rng)
        t0 = time.process_time()
        out = batch.step(actions)
        t1 = time.process_time()
        in_step += t1 - t0
        steps += num_envs
        if t1 - start >= seconds:
            break
    total, actions_applied = t1 - start, batch.actions_applied - first_actions
    return {"learner_steps_per_s": steps / total, "api_learner_steps_per_s": steps / in_step,
            "engine_actions_per_s": actions_applied / total, "api_engine_actions_per_s": actions_applied / in_step}


def vector_env_rate(num_envs: int, opponent: str, seconds: float) -> float:
    from extrarlhf.envs import ArenaVectorEnv

    env = ArenaVectorEnv(num_envs, opponent=opponent)
    assert env.backend == "native"
    env.reset(seed=0)
    rng = np.random.default_rng(0)

    def chunk(_: int) -> int:
        for _ in range(20):
            env.step(_masked_random(env.action_masks(), rng))
        return 20 * num_envs

    return _rate(chunk, seconds)


def checkpoint_registry(root: str, width: int) -> str:
    """A registry in ``root`` holding tests/onnx_factory's v5 MLP as ``mlp-v5``; its directory."""
    from extrarlhf.checkpoints.registry import CheckpointRegistry
    from tests.onnx_factory import mlp_v5, save  # the factory lives with the tests; it only needs onnx.helper

    model = save(mlp_v5(width, seed=0), os.path.join(root, "mlp-v5.onnx"))
    CheckpointRegistry(os.path.join(root, "checkpoints")).register("mlp-v5", model, "v5")
    return os.path.join(root, "checkpoints")


def checkpoint_env_rate(num_envs: int, checkpoints_dir: str, batched: bool, seconds: float) -> float:
    """ArenaVectorEnv against the ``mlp-v5`` checkpoint: learner steps per CPU-second, with the
    opponents evaluated together (``batched``) or one battle and one decision at a time."""
    from extrarlhf.envs import ArenaVectorEnv, ReferenceBatch

    env = ArenaVectorEnv(num_envs, opponent="mlp-v5", checkpoints_dir=checkpoints_dir)
    assert isinstance(env._batch, ReferenceBatch)
    env._batch.batched_opponents = batched
    env.reset(seed=0)
    rng = np.random.default_rng(0)

    def chunk(_: int) -> int:
        for _ in range(5):
            env.step(_masked_random(env.action_masks(), rng))
        return 5 * num_envs

    return _rate(chunk, seconds)


def single_env_rate(opponent: str, seconds: float) -> float:
    from extrarlhf.envs import ArenaGymEnv

    env, rng = ArenaGymEnv(opponent=opponent), SplitMix64(0)

    def episode(i: int) -> int:
        _, info = env.reset(seed=i)
        steps, done = 0, False
        while not done:
            legal = info["action_mask"].nonzero()[0]
            _, _, done, _, info = env.step(int(legal[rng.below(len(legal))]))
            steps += 1
        return steps

    return _rate(episode, seconds)


def _python_engine(fn, *args):
    """``fn(*args)`` with EXTRAARENA_ENGINE=python (the backend is looked up per call)."""
    with backend("python"):
        return fn(*args)


def feature_costs() -> dict[str, float]:
    states = []
    for seed in range(40):
        s, rng = reference.new_battle(seed), SplitMix64(seed)  # Python states: the conversion is measured
        while not s.is_terminal:
            states.append(s.clone())
            legal = s.legal_actions()
            s.apply(legal[rng.below(len(legal))])
    items = [(s, s.active + 1) for s in states]
    conv = engine_native.from_state
    native = [(engine.State.from_dict(s.to_dict()), p) for s, p in items]  # engine.State on the core (issue 48)

    def us(fn) -> float:
        best = min(_once(fn) for _ in range(5))
        return round(best / len(states) * 1e6, 2)

    def _once(fn) -> float:
        start = time.process_time()
        fn()
        return time.process_time() - start

    def py_features(s):
        return features.action_feature_parts(s, s.legal_actions(), [])

    return {
        "states": len(states),
        "observation_python_us": _python_engine(us, lambda: [features.observation(s, p) for s, p in items]),
        "observation_native_state_us": us(lambda: [s.observation(p) for s, p in native]),
        "action_features_native_state_us": us(lambda: [s.action_features() for s, _ in native]),
        "observation_native_us": us(lambda: [conv(s).observation(p) for s, p in items]),
        "action_features_python_us": _python_engine(us, lambda: [features.action_features(s, s.legal_actions())
                                                                 for s in states]),
        "action_features_native_us": us(lambda: [conv(s).action_features(s.legal_actions()) for s in states]),
        "observations_batch_python_us": _python_engine(us, lambda: features.observations(items)),
        "observations_batch_native_us": us(lambda: features.observations(items)),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=2.0, help="minimum CPU time per figure and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--num-envs", type=int, default=256)
    parser.add_argument("--checkpoint-width", type=int, default=32, help="hidden width of the v5 MLP checkpoint")
    args = parser.parse_args()
    if engine_native is None:
        print(json.dumps({"skipped": "engine_native is not built; make setup (or pip install of the checkout) builds it"}))
        return 0
    n = args.num_envs
    rounds: list[dict[str, float]] = []
    scratch = tempfile.TemporaryDirectory()
    checkpoints = checkpoint_registry(scratch.name, args.checkpoint_width)
    for _ in range(args.rounds):  # interleaved, so a load change on a shared machine hits both sides
        py = _python_engine(_rate, random_steps, args.seconds)
        row = {"python_engine": py, **batch_rates(n, "baseline:random", args.seconds)}
        row["single_env_greedy_python"] = _python_engine(single_env_rate, "baseline:greedy", args.seconds)
        row["vector_env_greedy"] = vector_env_rate(n, "baseline:greedy", args.seconds)
        for key in ("learner_steps_per_s", "api_learner_steps_per_s", "engine_actions_per_s",
                    "api_engine_actions_per_s"):
            row[f"ratio_{key}"] = row[key] / py
        row["ratio_vector"] = row["vector_env_greedy"] / row["single_env_greedy_python"]
        row["checkpoint_old"] = checkpoint_env_rate(n, checkpoints, False, args.seconds)
        row["checkpoint_new"] = checkpoint_env_rate(n, checkpoints, True, args.seconds)
        row["ratio_checkpoint"] = row["checkpoint_new"] / row["checkpoint_old"]
        rounds.append(row)
    scratch.cleanup()
    med = {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}
    batch = {key: round(med[key]) for key in ("learner_steps_per_s", "api_learner_steps_per_s",
                                              "engine_actions_per_s", "api_engine_actions_per_s")}
    batch.update({f"ratio_{key}": round(med[f"ratio_{key}"], 1) for key in list(batch)})
    out = {
        "benchmark": "vector_env", "python": platform.python_version(), "machine": platform.machine(),
        "rounds": args.rounds, "num_envs": n, "unit": "per CPU-second of this process",
        "python_engine_steps_per_s": round(med["python_engine"]),
        "batch_random": {**batch, "target": "ratio >= 20 (the issue's Python-engine steps are engine actions)",
                         "target_met": {key: med[f"ratio_{key}"] >= 20 for key in batch if not key.startswith("ratio")}},
        "single_env_greedy_python_steps_per_s": round(med["single_env_greedy_python"]),
        "vector_env_greedy": {"learner_steps_per_s": round(med["vector_env_greedy"]),
                              "ratio_single_env": round(med["ratio_vector"], 1), "target": 20,
                              "target_met": med["ratio_vector"] >= 20},
        "vector_env_checkpoint": {"checkpoint": f"tests.onnx_factory.mlp_v5(width={args.checkpoint_width}, seed=0)",
                                  "old_learner_steps_per_s": round(med["checkpoint_old"]),
                                  "new_learner_steps_per_s": round(med["checkpoint_new"]),
                                  "ratio": round(med["ratio_checkpoint"], 2), "target": 5,
                                  "target_met": med["ratio_checkpoint"] >= 5},
        "features": feature_costs(),
    }
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
