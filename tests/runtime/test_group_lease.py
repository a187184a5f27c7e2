"""One series owner per group (issue 14, item 4): a lease per group (``<group>/lease.json``)
refuses a second runner at once with the owner's identity -- two real ``collect`` processes, two
series in one process, an interactive battle, a repair -- and a SIGKILLed owner's lease is
reaped so the next run proceeds."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from extrarlhf.core.errors import RLHFError
from extrarlhf.runtime import ownership
from extrarlhf.runtime.match import start_match
from extrarlhf.runtime.series import run_series
from extrarlhf.runtime.sessions import SessionStore, check_sessions

ROOT = Path(__file__).resolve().parents[2]
SPECS = {"p1_model": "baseline:random", "opponent": "baseline:random"}


def expect_error(code: str, fn, *args: Any, **kwargs: Any) -> RLHFError:
    with pytest.raises(RLHFError) as info:
        fn(*args, **kwargs)
    assert info.value.code == code, f"code {info.value.code!r} != {code!r}: {info.value}"
    return info.value


def collect(root: Path, group: str, battles: int, *extra: str, **kw: Any) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "extrarlhf", "collect", "--group", group, "--battles",
                             str(battles), "--p1-model", "baseline:random", "--opponent", "baseline:random",
                             "--sessions-dir", str(root), *extra], cwd=ROOT, **kw)


def wait_for(predicate, what: str, proc: subprocess.Popen | None = None, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None:
            assert proc.poll() is None, f"the owner exited early ({proc.returncode})"
        if predicate():
            return
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def finished_lines(root: Path, group: str) -> int:
    path = root / group / "catalog.jsonl"
    return path.read_bytes().count(b'"status":"finished"') if path.exists() else 0


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def write_lease(root: Path, group: str, **fields: Any) -> dict[str, Any]:
    now = ownership._iso(ownership._now())
    lease = {"schema_version": 1, "group": group, "purpose": "series", "owner_pid": os.getpid(),
             "owner_start_time": None, "owner_host": socket.gethostname(), "codename": None,
             "token": "f" * 32, "claimed_at": now, "heartbeat_at": now, "stale_after_s": 60.0, **fields}
    (root / group).mkdir(parents=True, exist_ok=True)
    (root / group / "lease.json").write_text(json.dumps(lease))
    return lease


# --------------------------------------------------------------------------- two real processes
def test_a_second_collect_is_refused_at_once_and_a_killed_owners_lease_is_reaped(tmp_path: Path) -> None:
    root = tmp_path / "s"
    owner = collect(root, "shared", 200_000, "--codename", "Owner1", stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for(lambda: finished_lines(root, "shared") >= 20, "the owner to play 20 battles", owner)
        lease = json.loads((root / "shared" / "lease.json").read_text())
        assert (lease["owner_pid"], lease["codename"], lease["purpose"]) == (owner.pid, "Owner1", "series")

        # a second runner (another process) is refused at once, naming the owner
        started = time.monotonic()
        second = collect(root, "shared", 50, "--codename", "Owner2", stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
        out, err = second.communicate(timeout=120)
        assert second.returncode == 2, (out, err)
        assert err.startswith("error [group_busy]") and "Traceback" not in err
        assert f"pid {owner.pid} on host {socket.gethostname()}" in err and "codename Owner1" in err
        assert time.monotonic() - started < 60  # refused, not waiting for the owner to finish
        assert owner.poll() is None  # the owner goes on

        # in this process too: run_series, an interactive battle and a repair are refused
        error = expect_error("group_busy", run_series, root, "shared", 10, **SPECS)
        assert error.owner["owner_pid"] == owner.pid and error.owner["codename"] == "Owner1"
        assert "token" not in error.owner
        expect_error("group_busy", start_match, SessionStore(root), "shared", "llm", "baseline:random")
        store = SessionStore(root)
        assert ownership.current_owner(store, "shared")["owner_pid"] == owner.pid
    finally:
        if owner.poll() is None:
            os.killpg(owner.pid, signal.SIGKILL)
        owner.wait(timeout=30)
    assert owner.returncode == -signal.SIGKILL

    # the dead owner's lease is reaped: the next run proceeds and completes what it asks for
    assert ownership.current_owner(SessionStore(root), "shared") is None
    done = {e["index"] for e in SessionStore(root).read_catalog("shared") if e["status"] == "finished"}
    result = run_series(root, "shared", 60, **SPECS)
    # the killed owner may have left one trace without its catalog line, at any index (the owner runs
    # past 60 meanwhile): the resume rebuilds that line, which counts in `repaired` whatever its index
    assert result["ran"] <= len(set(range(60)) - done) <= result["ran"] + result["repaired"]
    statuses = [e["status"] for e in SessionStore(root).read_catalog("shared") if e["index"] < 60]
    assert statuses == ["finished"] * 60
    assert not (root / "shared" / "lease.json").exists()  # released at the end


def test_two_series_in_one_process_never_share_a_group(tmp_path: Path) -> None:
    root = tmp_path / "s"
    inside, go_on = threading.Event(), threading.Event()
    outcome: dict[str, Any] = {}

    def slow_progress(done: int, total: int) -> None:
        inside.set()
        assert go_on.wait(60)

    def first() -> None:
        try:
            outcome["result"] = run_series(root, "g", 3, progress=slow_progress, codename="First", **SPECS)
        except BaseException as exc:  # noqa: BLE001 - reported below
            outcome["error"] = exc

    thread = threading.Thread(target=first)
    thread.start()
    try:
        assert inside.wait(60)
        error = expect_error("group_busy", run_series, root, "g", 3, **SPECS)
        assert error.owner["owner_pid"] == os.getpid() and error.owner["codename"] == "First"
        assert "pid" in str(error) and "codename First" in str(error)
        run_series(root, "other", 1, **SPECS)  # another group is free
    finally:
        go_on.set()
        thread.join(60)
    assert "error" not in outcome, outcome.get("error")
    assert outcome["result"]["ran"] == 3
    again = run_series(root, "g", 3, **SPECS)  # released: the group is free again
    assert (again["ran"], again["skipped"]) == (0, 3)


def test_a_lease_of_a_dead_or_recycled_pid_or_a_stale_heartbeat_is_reaped(tmp_path: Path) -> None:
    root = tmp_path / "s"
    store = SessionStore(root)
    write_lease(root, "g", owner_pid=dead_pid())
    assert ownership.current_owner(store, "g") is None
    assert run_series(root, "g", 1, **SPECS)["ran"] == 1
    write_lease(root, "g", owner_start_time=1)  # this pid, but another start time: a recycled pid
    assert ownership.current_owner(store, "g") is None
    with ownership.acquire(store, "g", heartbeat=False) as lease:
        assert "recycled" in lease.reaped["reap_reason"]
    old = "2020-01-01T00:00:00.000000+00:00"
    write_lease(root, "g", owner_host="elsewhere.example", heartbeat_at=old)  # another host: by heartbeat only
    with ownership.acquire(store, "g", heartbeat=False) as lease:
        assert "heartbeat" in lease.reaped["reap_reason"]


def test_a_live_lease_of_another_host_is_respected_and_named(tmp_path: Path) -> None:
    root = tmp_path / "s"
    write_lease(root, "g", owner_host="gpu-7.example", owner_pid=4242, codename="Remote")
    error = expect_error("group_busy", run_series, root, "g", 1, **SPECS)
    assert "pid 4242 on host gpu-7.example (codename Remote)" in str(error)
    assert not (root / "g" / "manifest.json").exists()  # nothing was created


def test_a_damaged_lease_is_reported_and_never_overwritten(tmp_path: Path) -> None:
    root = tmp_path / "s"
    (root / "g").mkdir(parents=True)
    (root / "g" / "lease.json").write_text('{"schema_version": 1, "owner_pid": "x"')
    error = expect_error("corrupt_record", run_series, root, "g", 1, **SPECS)
    assert "lease.json" in str(error) and "delete the file if no series is running" in str(error)
    assert (root / "g" / "lease.json").read_text() == '{"schema_version": 1, "owner_pid": "x"'
    write_lease(root, "g", owner_pid="12")
    error = expect_error("corrupt_record", run_series, root, "g", 1, **SPECS)
    assert error.details["field"] == "owner_pid"


def test_the_owner_heartbeats_and_a_lost_lease_is_noticed(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "s")
    lease = ownership.acquire(store, "g", stale_after_s=0.6)
    try:
        first = json.loads(store.lease_path("g").read_text())["heartbeat_at"]
        time.sleep(1.0)  # longer than stale_after_s: alive only thanks to the heartbeat thread
        current = ownership.current_owner(store, "g")
        assert current is not None and current["heartbeat_at"] > first
        expect_error("group_busy", ownership.acquire, store, "g")
        # someone reaped it and took over: the heartbeat notices
        write_lease(tmp_path / "s", "g", token="0" * 32)
        assert lease.heartbeat() is False and lease.lost
    finally:
        assert lease.release() is False  # not ours any more: left alone
    assert json.loads(store.lease_path("g").read_text())["token"] == "0" * 32


def test_a_repair_is_refused_while_a_series_owns_the_group(tmp_path: Path) -> None:
    root = tmp_path / "s"
    run_series(root, "g", 2, **SPECS)
    (root / "g" / "summary.json").write_text("{}")
    store = SessionStore(root)
    with ownership.acquire(store, "g"):
        problems = check_sessions(root, repair=True)
        assert [(p["code"], p["repaired"]) for p in problems] == [("corrupt_record", False), ("group_busy", False)]
        assert f"pid {os.getpid()}" in problems[1]["message"]
    assert (root / "g" / "summary.json").read_text() == "{}"
    [problem] = check_sessions(root, repair=True)
    assert problem["repaired"] is True
