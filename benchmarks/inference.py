"""ONNX inference through the adapter on one core; prints one JSON object.

    .venv/bin/python -m benchmarks.inference [--seconds S] [--width W]

Model: a v5 MLP (two hidden layers of ``width``, default 256; tests/onnx_factory.mlp_v5),
one onnxruntime thread. States: real mid-battle states precomputed from random battles.

Figures, at batch 1 and batch 64:

* ``decisions_per_s``: ``ModelPolicy.decide_batch`` end to end (feature building included);
* ``build_inputs_ms``: building the feed (observations, action features, padding, mask);
* ``bare_run_ms``: a bare ``InferenceSession.run`` on those prebuilt inputs (same session
  options);
* ``adapter_ms``: ``decide_batch`` minus building the inputs minus the bare run, i.e. the
  adapter's own work (output checks, masking, softmax, choice, Decision objects);
* ``overhead_vs_bare_run``: ``adapter_ms / bare_run_ms``. Feature building is counted in
  neither side of this ratio (it is the same work any caller of the bare session needs).
  Target from issue 4: <= 0.25 at batch 64. ``overhead_vs_build_plus_run`` is the same
  comparison with feature building counted on both sides.

Per chunk of states the adapter (``decide_batch``) and the bare pipeline (``build_inputs``
then ``session.run``) are timed back to back, alternating which goes first; each figure is
the median over all repetitions.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path

import onnxruntime as ort

import engine
from adapters.onnx_contracts import OUTPUT_NAMES
from adapters.onnx_models import ModelPolicy, build_inputs
from engine import SplitMix64

TARGET_OVERHEAD = 0.25


def _mlp(width: int, path: Path) -> None:
    # The factory lives with the tests; it only needs onnx.helper.
    from tests.onnx_factory import mlp_v5, save
    save(mlp_v5(width, seed=0), path)


def sample_states(n: int) -> list[engine.State]:
    states: list[engine.State] = []
    seed = 0
    while len(states) < n:
        state = engine.new_battle(seed)
        rng = SplitMix64(seed)
        while not state.is_terminal and len(states) < n:
            legal = state.legal_actions()
            states.append(state.clone())
            state.apply(legal[rng.below(len(legal))])
        seed += 1
    return states


def measure(policy: ModelPolicy, states: list[engine.State], batch: int, seconds: float) -> dict:
    """Per chunk of ``batch`` states: (A) ``decide_batch``; (B) ``build_inputs`` then a bare
    ``session.run`` on them. A and B alternate which goes first, so neither gets the warmer
    caches systematically."""
    chunks = [states[i:i + batch] for i in range(0, len(states) - batch + 1, batch)]
    model = policy.model
    assert model is not None, policy.load_warning
    names = list(OUTPUT_NAMES[policy.kind])
    session, mask_dtype, kind = model.session, model.mask_dtype, policy.kind

    def bare(chunk: list[engine.State]) -> tuple[float, float]:
        t0 = time.perf_counter()
        feeds = build_inputs(kind, chunk, mask_dtype)[0]
        t1 = time.perf_counter()
        session.run(names, feeds)
        return t1 - t0, time.perf_counter() - t1

    def adapter(chunk: list[engine.State]) -> float:
        t0 = time.perf_counter()
        out = policy.decide_batch(chunk)
        elapsed = time.perf_counter() - t0
        assert len(out) == len(chunk) and all(d.warning is None for d in out)
        return elapsed

    for chunk in chunks[:3]:  # warm up
        adapter(chunk)
        bare(chunk)
    per_chunk: dict[str, list[float]] = {"decide": [], "build": [], "bare": []}
    deadline = time.perf_counter() + seconds
    turn = 0
    while time.perf_counter() < deadline:
        for chunk in chunks:
            turn += 1
            if turn % 2:
                decide_s = adapter(chunk)
                build_s, bare_s = bare(chunk)
            else:
                build_s, bare_s = bare(chunk)
                decide_s = adapter(chunk)
            per_chunk["decide"].append(decide_s)
            per_chunk["build"].append(build_s)
            per_chunk["bare"].append(bare_s)
    med = {k: statistics.median(v) for k, v in per_chunk.items()}
    adapter_s = med["decide"] - med["build"] - med["bare"]
    return {
        "batch": batch,
        "decisions_per_s": round(batch * len(per_chunk["decide"]) / sum(per_chunk["decide"]), 1),
        "decide_batch_ms": round(med["decide"] * 1e3, 4),
        "build_inputs_ms": round(med["build"] * 1e3, 4),
        "bare_run_ms": round(med["bare"] * 1e3, 4),
        "adapter_ms": round(adapter_s * 1e3, 4),
        "overhead_vs_bare_run": round(adapter_s / med["bare"], 4),
        "overhead_vs_build_plus_run": round(med["decide"] / (med["build"] + med["bare"]) - 1.0, 4),
        "model_only_decisions_per_s": round(batch / med["bare"], 1),
        "repetitions": len(per_chunk["decide"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="measuring time per batch size")
    parser.add_argument("--width", type=int, default=256)
    args = parser.parse_args()
    states = sample_states(64 * 10)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mlp_v5.onnx"
        _mlp(args.width, path)
        policy = ModelPolicy(path, "v5", seed=0)
        one = measure(policy, states[:256], 1, args.seconds)
        many = measure(policy, states, 64, args.seconds)
        size = path.stat().st_size
    legal_counts = [len(s.legal_actions()) for s in states]
    result = {
        "benchmark": "inference",
        "model": {"kind": "v5", "hidden_layers": [args.width, args.width], "file_bytes": size,
                  "intra_op_threads": 1, "inter_op_threads": 1},
        "states": {"count": len(states), "mean_legal_actions": round(statistics.mean(legal_counts), 2),
                   "max_legal_actions": max(legal_counts)},
        "batch_1": one,
        "batch_64": many,
        "overhead_definition": "adapter_ms / bare_run_ms, adapter_ms = decide_batch - build_inputs - bare run; "
                               "feature building counted in neither side",
        "target_overhead_at_batch_64": TARGET_OVERHEAD,
        "meets_target": many["overhead_vs_bare_run"] <= TARGET_OVERHEAD,
        "python": platform.python_version(),
        "onnxruntime": ort.__version__,
        "machine": platform.machine(),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
