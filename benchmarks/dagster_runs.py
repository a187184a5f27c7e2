"""Dagster run and sensor costs (issue 16, items 9 and 10); prints JSON.

- ``executors``: wall time of one real ``campaign_loop`` run (launched with ``execute_job``
  on a persistent temp instance, so the job's executor really runs: a subprocess per step
  for the multiprocess ones) per executor: ``in_process``, ``multiprocess`` (Dagster's
  default: spawn), ``multiprocess_forkserver`` (forkserver, the code location preloaded)
  and the executor ``campaign_loop`` ships with (``shipped``). Each run collects a fresh
  group with the same config; the ratio to in-process is the figure.
- ``sensor``: ``session_groups_sensor`` tick times at 10 and 1,000 groups (copies of one
  real group): the first tick (every group new; at most ``max_runs_per_tick`` requested),
  a tick with nothing changed, and a tick after one group grew.

Usage: ``python -m benchmarks.dagster_runs [--only executors|sensor] [--battles N]``.
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")

import dagster as dg  # noqa: E402

EXECUTORS = ("in_process", "multiprocess", "multiprocess_forkserver", "shipped")


def _executor(name: str) -> dg.ExecutorDefinition | None:
    if name == "in_process":
        return dg.in_process_executor
    if name == "multiprocess":
        return dg.multiprocess_executor
    if name == "multiprocess_forkserver":
        return dg.multiprocess_executor.configured(
            {"start_method": {"forkserver": {"preload_modules": ["extrarlhf_assets.definitions"]}}})
    return None  # shipped: the job as defined


def campaign_job(executor: str) -> dg.JobDefinition:
    """Reconstructor (run in every step process): campaign_loop with the named executor."""
    from extrarlhf_assets.definitions import defs
    from extrarlhf_assets.defs.training.jobs import campaign_loop

    if executor == "shipped":
        return defs.resolve_job_def("campaign_loop")
    job = dg.define_asset_job("campaign_loop", selection=campaign_loop.selection, executor_def=_executor(executor))
    return dg.Definitions(assets=list(defs.assets), asset_checks=list(defs.asset_checks), jobs=[job],
                          resources=defs.resources).resolve_job_def("campaign_loop")


def _run_config(battles: int) -> dict:
    return {"ops": {
        "battle_sessions": {"config": {"n_battles": battles, "seed": 0}},
        "v5_policy_checkpoint": {"config": {"epochs": 5, "seed": 0}},
        "policy_benchmark": {"config": {"incumbent": "baseline:random", "n_pairs": 100, "baseline_pairs": 4,
                                        "seed": 0}},
        "promoted_policy": {"config": {"require_current_incumbent": False}}}}


def bench_executors(battles: int) -> dict:
    out = {}
    root = Path(tempfile.mkdtemp(prefix="extrarlhf-bench-exec-"))
    try:
        for d in ("sessions", "datasets", "checkpoints"):
            os.environ[f"RLHF_{d.upper()}_DIR"] = str(root / d)
        (root / "home").mkdir()
        (root / "home" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
        os.environ["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[1]),
                                                   os.environ.get("PYTHONPATH", "")])
        with dg.DagsterInstance.local_temp(str(root / "home")) as instance:
            for name in EXECUTORS:
                group = f"bench-{name.replace('_', '-')}"
                instance.add_dynamic_partitions("session_groups", [group])
                recon = dg.build_reconstructable_job("benchmarks.dagster_runs", "campaign_job",
                                                     reconstructable_kwargs={"executor": name})
                t0 = time.perf_counter()
                with dg.execute_job(recon, instance=instance, run_config=_run_config(battles),
                                    tags={"dagster/partition": group}, raise_on_error=False) as result:
                    elapsed = time.perf_counter() - t0
                    out[name] = {"seconds": round(elapsed, 2), "success": result.success,
                                 "steps": len({e.step_key for e in result.all_events if e.step_key})}
                print(f"{name}: {out[name]}", file=sys.stderr, flush=True)
        base = out["in_process"]["seconds"]
        for name in EXECUTORS:
            out[name]["vs_in_process"] = round(out[name]["seconds"] / base, 2)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return {"battles": battles, "cpus": os.cpu_count(), "runs": out}


def _tick(instance, sessions, cursor):
    from extrarlhf_assets.defs.collection.sensors import session_groups_sensor

    ctx = dg.build_sensor_context(instance=instance, cursor=cursor, resources={"sessions": sessions})
    t0 = time.perf_counter()
    result = session_groups_sensor(ctx)
    return time.perf_counter() - t0, result


def bench_sensor(counts=(10, 1000)) -> dict:
    from extrarlhf.runtime.series import run_series
    from extrarlhf_assets.resources import SessionsResource

    out = {}
    root = Path(tempfile.mkdtemp(prefix="extrarlhf-bench-sensor-"))
    try:
        run_series(root / "seed", "seed", 3, seed=1, checkpoints_dir=root / "checkpoints")
        for n in counts:
            sessions_dir = root / f"s{n}"
            for i in range(n):
                shutil.copytree(root / "seed" / "seed", sessions_dir / f"g{i:05d}")
            sessions = SessionsResource(sessions_dir=str(sessions_dir), settle_seconds=0)
            instance = dg.DagsterInstance.ephemeral()
            first, result = _tick(instance, sessions, None)
            requested, cursor, ticks_to_all = len(result.run_requests), result.cursor, 1
            while len(result.run_requests) == sessions.max_runs_per_tick:
                _, result = _tick(instance, sessions, cursor)
                cursor, ticks_to_all = result.cursor, ticks_to_all + 1
            unchanged = [_tick(instance, sessions, cursor)[0] for _ in range(5)]
            catalog = sessions_dir / "g00000" / "catalog.jsonl"
            touched = catalog.stat().st_mtime_ns - 10**9
            os.utime(catalog, ns=(touched, touched))  # one group looks changed: read and hashed again
            changed, _ = _tick(instance, sessions, cursor)
            out[str(n)] = {"first_tick_s": round(first, 4), "first_tick_requests": requested,
                           "max_runs_per_tick": sessions.max_runs_per_tick, "ticks_to_request_all": ticks_to_all,
                           "unchanged_tick_s_median": round(statistics.median(unchanged), 4),
                           "one_changed_tick_s": round(changed, 4)}
            print(f"sensor {n}: {out[str(n)]}", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", choices=("executors", "sensor"))
    p.add_argument("--battles", type=int, default=60, help="battles collected by each campaign_loop run")
    args = p.parse_args(argv)
    report = {}
    if args.only in (None, "sensor"):
        report["sensor"] = bench_sensor()
    if args.only in (None, "executors"):
        report["executors"] = bench_executors(args.battles)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
