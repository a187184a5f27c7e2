"""Series stop when asked and die with their parent (issue 13, item 1): a cancelled series stops
at a chunk boundary, releases its codename and resumes later; the worker processes of a
killed CLI ``collect`` exit within a second; ``max_workers`` is capped to the machine."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from extrarlhf.core.procs import machine_workers, pid_alive
from extrarlhf.runtime import codenames
from extrarlhf.runtime.series import run_series
from extrarlhf.runtime.sessions import SessionStore

ROOT = Path(__file__).resolve().parents[2]


def _children(pid: int) -> set[int]:
    """Every descendant of ``pid`` (from /proc)."""
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        parent = frontier.pop()
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat", "rb") as fh:
                        raw = fh.read()
                except OSError:
                    continue
                ppid = int(raw[raw.rfind(b")") + 2:].split()[1])
                if ppid == parent and int(entry) not in found:
                    found.add(int(entry))
                    frontier.add(int(entry))
    return found


def test_a_cancelled_series_stops_releases_its_codename_and_resumes(tmp_path):
    seen: list[int] = []
    result = run_series(tmp_path, "cancel-me", 200, p1_model="baseline:random", opponent="baseline:random",
                        seed=5, max_workers=2, codename="Stopper", progress=lambda done, total: seen.append(done),
                        cancel=lambda: bool(seen) and seen[-1] >= 16)
    assert result["cancelled"] is True and 16 <= result["ran"] < 200 and result["remaining"] == 200 - result["ran"]
    assert codenames.list_leases(tmp_path) == []
    store = SessionStore(tmp_path)
    statuses = [e["status"] for e in store.read_catalog("cancel-me")]
    assert statuses.count("finished") == result["ran"]
    assert result["summary"]["by_status"]["finished"] == result["ran"]
    again = run_series(tmp_path, "cancel-me", 200, p1_model="baseline:random", opponent="baseline:random", seed=5,
                       max_workers=2, codename="Stopper")
    assert again["cancelled"] is False and again["skipped"] == result["ran"] and again["ran"] == 200 - result["ran"]
    assert again["summary"]["by_status"]["finished"] == 200


def test_the_codename_is_free_again_after_a_cancel(tmp_path):
    run_series(tmp_path, "g1", 40, p1_model="baseline:random", opponent="baseline:random", max_workers=1,
               codename="Solo", cancel=lambda: True)
    lease = codenames.claim(tmp_path, "Solo", "g2")  # would raise codename_taken if the lease stayed
    assert lease["codename"] == "Solo"
    codenames.release(tmp_path, "Solo")


def test_max_workers_is_capped_to_the_machine(tmp_path):
    result = run_series(tmp_path, "capped", 48, p1_model="baseline:random", opponent="baseline:random",
                        max_workers=64)
    assert result["max_workers"] == 64 and result["workers"] == min(machine_workers(), 3)
    assert result["summary"]["by_status"]["finished"] == 48


def test_workers_die_with_a_killed_collect(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "extrarlhf", "collect", "--group", "orphans", "--battles", "5000",
                             "--p1-model", "baseline:random", "--opponent", "baseline:random", "--workers", "2",
                             "--sessions-dir", str(tmp_path)], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    catalog = tmp_path / "orphans" / "catalog.jsonl"
    deadline = time.monotonic() + 60
    while not (catalog.exists() and catalog.stat().st_size > 20_000):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    children = _children(proc.pid)
    assert len(children) >= 2  # the forkserver and its workers
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 3
    while any(pid_alive(p) for p in children) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in children if pid_alive(p)], "worker processes outlived their parent"
    size = catalog.stat().st_size
    time.sleep(1.0)
    assert catalog.stat().st_size == size  # nothing more is written


def test_a_cancelled_materialization_and_benchmark_publish_nothing(tmp_path):
    from extrarlhf.core.errors import Cancelled
    from extrarlhf.datasets import materialize_v5_dataset
    from extrarlhf.policies.benchmarking import benchmark_models

    run_series(tmp_path / "sessions", "src", 24, p1_model="baseline:random", opponent="baseline:random")
    calls: list[int] = []

    def cancel() -> bool:
        calls.append(1)
        return True

    try:
        materialize_v5_dataset(["src"], "ds", sessions_dir=tmp_path / "sessions", datasets_dir=tmp_path / "datasets",
                               cancel=cancel)
    except Cancelled as exc:
        assert exc.code == "cancelled" and "nothing" in str(exc)
    else:
        raise AssertionError("the materialization was not cancelled")
    assert calls and not list((tmp_path / "datasets" / "ds").glob("v*"))
    try:
        benchmark_models("baseline:random", "baseline:greedy", n_pairs=40, checkpoints_dir=tmp_path / "checkpoints",
                         cancel=lambda: True)
    except Cancelled as exc:
        assert "no report" in str(exc)
    else:
        raise AssertionError("the benchmark was not cancelled")
    assert not list((tmp_path / "checkpoints").rglob("*.json"))
