"""What one small partition run costs beyond its steps (issue 52 item 3); prints JSON.

A run worker is a fresh process (``dagster api execute_run``, started by the code server) that
imports Dagster and the project, loads the code location, then executes the run's steps. Each
phase is timed in fresh processes, ``--repeat`` times (medians; wall and CPU seconds):

- ``process_start``: ``python -c pass``;
- ``import_dagster``: ``python -c "import dagster"`` (a floor no project change removes);
- ``definitions_load``: ``python -c "import extrarlhf_assets.definitions"`` (Dagster included);
- ``run``: a real run of one 2-battle session-group partition, ``dagster asset materialize
  --select battle_sessions --partition G`` on a temporary SQLite home (a process that imports,
  loads the definitions, creates and executes the run in process, as a worker does), with the
  run's own times from its event log: ``run_s`` (RUN_START to RUN_SUCCESS), ``step_s`` (the
  ``battle_sessions`` step) and ``overhead_s`` = the whole command's wall time minus ``step_s``.

``--top`` also lists the slowest top-level imports of the definitions (``python -X importtime``).
The machine's load makes wall times noisy; CPU seconds (user + system of the child) are steadier.

Usage: ``python -m benchmarks.dagster_overhead [--repeat 3] [--battles 2] [--root DIR] [--top 8]``
(``--root``: the source tree to measure, e.g. an older checkout, default this one).
"""

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _timed(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of ``cmd`` run to completion; fails loudly on a non-zero exit."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:4])} ... failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _median(pairs: list[tuple[float, float]]) -> dict[str, float]:
    return {"wall_s": round(statistics.median(p[0] for p in pairs), 3),
            "cpu_s": round(statistics.median(p[1] for p in pairs), 3)}


def _env(root: Path, work: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RLHF_", "DAGSTER_"))}
    env.update({"PYTHONPATH": str(root), "DAGSTER_HOME": str(work / "home"), "RLHF_SESSIONS_DIR": str(work / "sessions"),
                "RLHF_DATASETS_DIR": str(work / "datasets"), "RLHF_CHECKPOINTS_DIR": str(work / "checkpoints")})
    return env


def top_imports(root: Path, work: Path, n: int) -> list[dict]:
    """The ``n`` slowest imports directly under ``extrarlhf_assets.definitions`` (cumulative)."""
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", "import extrarlhf_assets.definitions"],
                         env=_env(root, work), cwd=work, capture_output=True, text=True, check=True)
    rows = [(int(m.group(2)), len(m.group(3)), m.group(4)) for m in
            (re.match(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)", line) for line in out.stderr.splitlines()) if m]
    top = sorted((r for r in rows if r[1] <= 3), reverse=True)[:n]
    return [{"module": name, "cumulative_s": round(us / 1e6, 3)} for us, _, name in top]


def partition_run(root: Path, work: Path, group: str, battles: int) -> dict[str, float]:
    """One real run of ``battle_sessions`` for a new ``group`` of ``battles`` battles."""
    import dagster as dg

    env = _env(root, work)
    home = work / "home"
    home.mkdir(exist_ok=True)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\nnux:\n  enabled: false\n")
    with dg.DagsterInstance.from_config(str(home)) as instance:
        instance.add_dynamic_partitions("session_groups", [group])
    config = {"ops": {"battle_sessions": {"config": {"n_battles": battles, "seed": 1}}}}
    wall, cpu = _timed([str(BIN / "dagster"), "asset", "materialize", "-m", "extrarlhf_assets.definitions",
                        "--select", "battle_sessions", "--partition", group, "--config-json", json.dumps(config)],
                       env, work)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        run = instance.get_runs(dg.RunsFilter(tags={"dagster/partition": group}), limit=1)[0]
        times = {}
        for entry in instance.all_logs(run.run_id):
            kind = entry.dagster_event.event_type.name if entry.dagster_event else None
            if kind in ("RUN_START", "RUN_SUCCESS", "STEP_START", "STEP_SUCCESS") and entry.step_key in (None, "battle_sessions"):
                times.setdefault(kind, entry.timestamp)
    if run.status != dg.DagsterRunStatus.SUCCESS:
        raise SystemExit(f"the run of {group} did not succeed: {run.status}")
    step = times["STEP_SUCCESS"] - times["STEP_START"]
    return {"wall_s": wall, "cpu_s": cpu, "run_s": times["RUN_SUCCESS"] - times["RUN_START"], "step_s": step,
            "overhead_s": wall - step}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--battles", type=int, default=2)
    p.add_argument("--root", type=Path, default=ROOT, help="the source tree measured (default: this one)")
    p.add_argument("--top", type=int, default=8, help="slowest imports listed (0: none)")
    args = p.parse_args(argv)
    root = args.root.resolve()
    with tempfile.TemporaryDirectory(prefix="dagster-overhead-") as tmp:
        work = Path(tmp)
        env = _env(root, work)
        phases = {
            "process_start": [sys.executable, "-c", "pass"],
            "import_dagster": [sys.executable, "-c", "import dagster"],
            "definitions_load": [sys.executable, "-c", "import extrarlhf_assets.definitions"],
        }
        out: dict = {"root": str(root), "repeat": args.repeat, "battles": args.battles,
                     "load_avg_1m": round(os.getloadavg()[0], 2), "cpus": os.cpu_count()}
        for name, cmd in phases.items():
            out[name] = _median([_timed(cmd, env, work) for _ in range(args.repeat)])
        runs = [partition_run(root, work, f"overhead-{i}", args.battles) for i in range(args.repeat)]
        out["run"] = {k: round(statistics.median(r[k] for r in runs), 3) for k in runs[0]}
        out["run"]["overhead_fraction"] = round(out["run"]["overhead_s"] / out["run"]["wall_s"], 3)
        if args.top:
            out["top_imports"] = top_imports(root, work, args.top)
        out["load_avg_1m_end"] = round(os.getloadavg()[0], 2)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
