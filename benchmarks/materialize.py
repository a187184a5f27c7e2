"""Dataset materialization throughput and memory; prints one JSON object.

    .venv/bin/python -m benchmarks.materialize [--sizes 200,800] [--repeats 3] [--workers N] [--p1 SPEC]

For each size, a session group of that many battles (``--p1``, default ``baseline:greedy``,
against ``baseline:greedy``) is collected into a temp dir, then, each in a fresh subprocess and best of ``--repeats``:

- ``materialize_v5_dataset`` of the group (full path: trace hashing, parsing, replay with
  action features, Parquet writing, validation before publication, manifest): decisions/s;
- pyarrow's own JSON reader (``pyarrow.json.read_json``) on the same ``actions.jsonl`` files
  (as the series stores them: ``actions.jsonl.zst``, which pyarrow decompresses by its
  extension, as materialize does; ``--plain-traces`` collects plain files), one call per file, with an explicit schema of the fields the decisions table takes from
  them (ids, turn, player, actor, state hash, observation, legal action ids, chosen action,
  rationale; other fields ignored - its type inference cannot read the files as they are,
  because event fields change type between events): decisions/s;
- peak resident memory (``ru_maxrss``) of the materializing process and of its largest worker,
  read when materialize returns (before the Minari export that a one-worker run adds);
- for reference, the same materialization on one process, and the engine's share alone:
  replaying the battles and computing the action features of every legal set (work any
  materialization must do per decision, in pure Python).

Targets (issue 6): materialization at least 0.5x pyarrow's reader; peak memory flat across
sizes (largest/smallest main-process peak at most 1.25).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _child_materialize(sessions: str, group: str, workers: int | None) -> dict:
    from extrarlhf.datasets.materialize import materialize_v5_dataset  # imported before the clock starts

    with tempfile.TemporaryDirectory(prefix="bench-ds-") as tmp:
        start, cpu = time.perf_counter(), time.process_time()
        result = materialize_v5_dataset([group], "bench", sessions_dir=sessions, datasets_dir=tmp, workers=workers)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        # the peaks so far are materialize's: read before the Minari export, which holds more
        peaks = {"peak_rss_mb_main": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                 "peak_rss_mb_workers": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}
        minari = _minari(tmp) if workers == 1 else None
    return {"seconds": seconds, "decisions": result["row_counts"]["decisions"],
            "cpu_seconds": cpu if workers == 1 else None, "battles": result["row_counts"]["battles"], **(minari or {}),
            **peaks}


def _action_files(sessions: str, group: str) -> list[str]:
    """Each battle's stored actions file, plain or compact."""
    return sorted(glob.glob(os.path.join(sessions, group, "battles", "*", "v5", "actions.jsonl")) +
                  glob.glob(os.path.join(sessions, group, "battles", "*", "v5", "actions.jsonl.zst")))


def _minari(datasets: str) -> dict | None:
    """The Minari export of the dataset just built (one episode per battle and seat): CPU seconds."""
    try:
        import minari  # noqa: F401 - the optional extra
    except ModuleNotFoundError:
        return None
    from extrarlhf.datasets.offline_rl import export_minari

    os.environ["MINARI_DATASETS_PATH"] = os.path.join(datasets, "minari")
    cpu = time.process_time()
    result = export_minari("bench", "bench/episodes-v0", datasets_dir=datasets)
    return {"minari_cpu_seconds": time.process_time() - cpu, "minari_episodes": result["episodes"]}


def _child_pyarrow(sessions: str, group: str) -> dict:
    import pyarrow as pa
    import pyarrow.json as pj

    actor = pa.struct([(k, pa.string()) for k in ("type", "spec", "kind", "weights_hash", "codename")])
    schema = pa.schema([
        ("battle_id", pa.string()), ("decision_index", pa.int64()), ("turn", pa.int64()), ("player", pa.int64()),
        ("actor", actor), ("state_hash_before", pa.string()),
        ("observation", pa.struct([("obs_version", pa.int64()), ("data", pa.string())])),
        ("legal_actions", pa.list_(pa.struct([("action_id", pa.int64())]))), ("action_id", pa.int64()),
        ("rationale", pa.string())])
    options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
    files = _action_files(sessions, group)
    start, cpu = time.perf_counter(), time.process_time()
    rows = sum(pj.read_json(f, parse_options=options).num_rows for f in files)
    return {"seconds": time.perf_counter() - start, "decisions": rows, "cpu_seconds": time.process_time() - cpu}


def _child_engine(sessions: str, group: str) -> dict:
    """The engine's share alone: replay every battle and compute the action features of each
    legal set (what materialization must do per decision, whatever else it does)."""
    import orjson

    import engine

    battles = []
    from extrarlhf.runtime import trace_files

    for path in _action_files(sessions, group):
        data = trace_files.read(Path(path).parent, "actions.jsonl")
        records = [orjson.loads(line) for line in data.splitlines() if line.strip()]
        battles.append((records[0]["state_before"], [r["action_id"] for r in records]))
    start = time.perf_counter()
    rows = 0
    for state_dict, actions in battles:
        state = engine.State.from_dict(state_dict)
        for action in actions:
            state.action_features(state.legal_actions())
            state.apply(action)
            rows += 1
    return {"seconds": time.perf_counter() - start, "decisions": rows}


def _run_child(*args: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "benchmarks.materialize", "--child", *args], cwd=ROOT,
                          capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="200,800", help="battles per size, comma-separated")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=None, help="materialization workers (default: automatic)")
    parser.add_argument("--plain-traces", action="store_true", help="collect plain .jsonl traces (default: compact)")
    parser.add_argument("--p1", default="baseline:greedy",
                        help="player 1 of the collected battles, e.g. 'search:baseline:greedy?sims=32' for the "
                             "teacher battles issue 50 names (player 2 is baseline:greedy)")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, sessions, group, *rest = args.child
        if kind == "materialize":
            out = _child_materialize(sessions, group, int(rest[0]) if rest and rest[0] != "auto" else None)
        elif kind == "engine":
            out = _child_engine(sessions, group)
        else:
            out = _child_pyarrow(sessions, group)
        print(json.dumps(out))
        return

    from extrarlhf.runtime.series import run_series

    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-sessions-") as tmp:
        for n in sizes:
            group = f"bench-{n}"
            run_series(tmp, group, n, p1_model=args.p1, opponent="baseline:greedy", seed=0,
                       max_workers=min(2, os.cpu_count() or 1), compact_traces=not args.plain_traces)
            workers = "auto" if args.workers is None else str(args.workers)
            mats, singles, arrows, engines = [], [], [], []
            for _ in range(args.repeats):  # interleaved, so background load hits all alike
                mats.append(_run_child("materialize", tmp, group, workers))
                singles.append(_run_child("materialize", tmp, group, "1"))
                arrows.append(_run_child("pyarrow", tmp, group))
                engines.append(_run_child("engine", tmp, group))

            def rate(runs: list[dict]) -> float:
                best = min(runs, key=lambda r: r["seconds"])
                return best["decisions"] / best["seconds"]

            best_mat = min(mats, key=lambda r: r["seconds"])
            mat_rate, arrow_rate = rate(mats), rate(arrows)
            rows.append({
                "battles": n, "decisions": best_mat["decisions"],
                "materialize_decisions_per_s": round(mat_rate, 1),
                "materialize_1_process_decisions_per_s": round(rate(singles), 1),
                "pyarrow_read_json_decisions_per_s": round(arrow_rate, 1),
                "engine_replay_and_action_features_only_decisions_per_s": round(rate(engines), 1),
                "ratio_vs_pyarrow": round(mat_rate / arrow_rate, 3),
                # per CPU-second of one process (issue 50): materialize and pyarrow's reader on the same files
                "materialize_1_process_cpu_ms_per_battle": round(1000 * min(r["cpu_seconds"] for r in singles) / n, 3),
                "pyarrow_read_json_cpu_ms_per_battle": round(1000 * min(r["cpu_seconds"] for r in arrows) / n, 3),
                "ratio_vs_pyarrow_per_cpu": round(min(r["cpu_seconds"] for r in arrows) /
                                                  min(r["cpu_seconds"] for r in singles), 3),
                "minari_cpu_ms_per_episode": (round(1000 * min(r["minari_cpu_seconds"] for r in singles) /
                                                    singles[0]["minari_episodes"], 3)
                                              if singles[0].get("minari_episodes") else None),
                "peak_rss_mb_main": round(max(r["peak_rss_mb_main"] for r in mats), 1),
                "peak_rss_mb_workers": round(max(r["peak_rss_mb_workers"] for r in mats), 1),
            })
    small, large = rows[0], rows[-1]
    figures = {
        "benchmark": "materialize",
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "workers": args.workers or "auto",
        "repeats": args.repeats,
        "matchup": f"{args.p1} vs baseline:greedy",
        "traces": "plain" if args.plain_traces else "compact",
        "sizes": rows,
        "ratio_vs_pyarrow": large["ratio_vs_pyarrow"],
        "memory_growth_main": round(large["peak_rss_mb_main"] / small["peak_rss_mb_main"], 3),
        "memory_growth_workers": round(large["peak_rss_mb_workers"] / max(small["peak_rss_mb_workers"], 1e-9), 3)
        if small["peak_rss_mb_workers"] else None,
        "targets": {"ratio_vs_pyarrow": 0.5, "memory_growth_max": 1.25},
    }
    figures["targets_met"] = (figures["ratio_vs_pyarrow"] >= 0.5 and figures["memory_growth_main"] <= 1.25)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
