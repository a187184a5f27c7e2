"""Codename leases and the shared file helpers, exercised with real subprocesses (no mocks)."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from extrarlhf.core import fileio
from extrarlhf.core.errors import RLHFError
from extrarlhf.runtime import codenames
from extrarlhf.runtime.codenames import CodenameError

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def _run(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=30, check=True,
    )


_SPAWNED: list[subprocess.Popen[str]] = []


def _spawn(code: str, *args: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        cwd=ROOT, env=ENV, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    _SPAWNED.append(proc)
    return proc


@pytest.fixture(autouse=True)
def _reap_children():
    """Every spawned child is gone and its pipes closed after each test (no leaked processes or fds)."""
    yield
    while _SPAWNED:
        proc = _SPAWNED.pop()
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None and not stream.closed:
                stream.close()


# Child: claim argv[2] for group argv[3] in sessions dir argv[1], print "ok <pid>" or
# "taken <code>", then stay alive until stdin closes (or exit at once if argv[4] == "exit").
HOLDER = """
    import os, sys
    from extrarlhf.runtime import codenames
    sessions, name, group, mode = sys.argv[1:5]
    try:
        codenames.claim(sessions, name, group)
        print("ok", os.getpid(), flush=True)
    except codenames.CodenameError as exc:
        print("taken", exc.code, flush=True)
    if mode != "exit":
        sys.stdin.read()
"""


def _raw(sessions: Path) -> dict:
    return json.loads((sessions / "agents_index.json").read_text(encoding="utf-8"))


def _start_holder(sessions: Path, name: str, group: str) -> subprocess.Popen[str]:
    proc = _spawn(HOLDER, str(sessions), name, group, "stay")
    line = proc.stdout.readline().split()
    assert line == ["ok", str(proc.pid)], (line, proc.stderr.read() if line == [] else "")
    return proc


def _finish(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.stdin.close()
        proc.wait(timeout=10)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None and not stream.closed:
            stream.close()


# ----------------------------------------------------------------------------- codenames


def test_claim_records_a_complete_lease(tmp_path: Path) -> None:
    lease = codenames.claim(tmp_path, "Falcon", "g1")
    assert lease["codename"] == "Falcon" and lease["group"] == "g1"
    assert lease["owner_pid"] == os.getpid()
    assert lease["owner_start_time"] == codenames.process_start_time(os.getpid())
    assert isinstance(lease["owner_start_time"], int)
    assert lease["stale_after_s"] == 300.0
    for field in ("claimed_at", "heartbeat_at"):
        ts = datetime.fromisoformat(lease[field])
        assert ts.utcoffset() == timedelta(0)
        assert abs((datetime.now(timezone.utc) - ts).total_seconds()) < 5
    raw = _raw(tmp_path)
    assert raw == {"schema_version": 1, "leases": {"Falcon": lease}}
    assert codenames.list_leases(tmp_path) == [lease]
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_exited_child_is_reaped_on_next_list_and_claim(tmp_path: Path) -> None:
    out = _run(HOLDER, str(tmp_path), "Ghost", "g1", "exit").stdout.split()
    assert out[0] == "ok"
    child_pid = int(out[1])
    # The stale lease is still on disk until someone reads the index...
    assert _raw(tmp_path)["leases"]["Ghost"]["owner_pid"] == child_pid
    assert codenames.list_leases(tmp_path) == []
    assert _raw(tmp_path)["leases"] == {}  # ...and the reap was persisted.

    _run(HOLDER, str(tmp_path), "Ghost", "g2", "exit")
    lease = codenames.claim(tmp_path, "Ghost", "g3")  # claim reaps the exited child's lease itself
    assert lease["owner_pid"] == os.getpid() and lease["group"] == "g3"


def test_sigkilled_child_is_reaped_even_before_its_parent_waits(tmp_path: Path) -> None:
    proc = _start_holder(tmp_path, "Raven", "g1")
    try:
        assert [lease["owner_pid"] for lease in codenames.list_leases(tmp_path)] == [proc.pid]
        os.kill(proc.pid, signal.SIGKILL)
        # Not waited for yet: the child is a zombie, os.kill(pid, 0) still succeeds, yet it must be reaped.
        deadline = time.monotonic() + 5
        reaped: list[dict] = []
        while not reaped and time.monotonic() < deadline:
            reaped = codenames.reap(tmp_path)
            time.sleep(0.01)
        assert [r["owner_pid"] for r in reaped] == [proc.pid]
        assert "gone" in reaped[0]["reap_reason"]
    finally:
        proc.kill()
        proc.wait(timeout=10)
        _finish(proc)
    assert codenames.claim(tmp_path, "Raven", "g1")["owner_pid"] == os.getpid()


def test_live_child_blocks_claimants_until_it_is_gone(tmp_path: Path) -> None:
    proc = _start_holder(tmp_path, "Otter", "series-a")
    try:
        with pytest.raises(CodenameError) as info:
            codenames.claim(tmp_path, "Otter", "series-b")
        assert info.value.code == "codename_taken"
        msg = str(info.value)
        assert "'Otter'" in msg and "'series-a'" in msg and f"pid {proc.pid}" in msg
        assert "stale in" in msg
        # Another process is refused too, and the holder's lease is untouched.
        assert _run(HOLDER, str(tmp_path), "Otter", "series-c", "exit").stdout.split() == ["taken", "codename_taken"]
        assert [(l["owner_pid"], l["group"]) for l in codenames.list_leases(tmp_path)] == [(proc.pid, "series-a")]
        # A different codename is free.
        codenames.claim(tmp_path, "Beaver", "series-b")
    finally:
        _finish(proc)
    assert proc.returncode == 0
    assert codenames.claim(tmp_path, "Otter", "series-b")["owner_pid"] == os.getpid()


def test_stale_heartbeat_is_reaped_and_heartbeat_keeps_a_lease_alive(tmp_path: Path) -> None:
    codenames.claim(tmp_path, "Short", "g1", stale_after_s=0.5)
    codenames.claim(tmp_path, "Kept", "g1", stale_after_s=0.5)
    time.sleep(0.3)
    codenames.heartbeat(tmp_path, "Kept")
    time.sleep(0.3)
    # Owner (this process) is alive, but Short's heartbeat is older than 0.5 s.
    assert [lease["codename"] for lease in codenames.list_leases(tmp_path)] == ["Kept"]
    with pytest.raises(CodenameError) as info:
        codenames.heartbeat(tmp_path, "Short")
    assert info.value.code == "not_held"


def test_old_heartbeat_written_on_disk_is_reaped(tmp_path: Path) -> None:
    lease = codenames.claim(tmp_path, "Old", "g1", stale_after_s=60)
    codenames.claim(tmp_path, "Fresh", "g1", stale_after_s=60)
    raw = _raw(tmp_path)
    raw["leases"]["Old"]["heartbeat_at"] = (datetime.now(timezone.utc) - timedelta(seconds=61)).isoformat()
    fileio.atomic_write_json(tmp_path / "agents_index.json", raw)
    reaped = codenames.reap(tmp_path)
    assert [r["codename"] for r in reaped] == ["Old"]
    assert reaped[0]["claimed_at"] == lease["claimed_at"] and "heartbeat" in reaped[0]["reap_reason"]
    assert list(_raw(tmp_path)["leases"]) == ["Fresh"]
    assert codenames.reap(tmp_path) == []


def test_recycled_pid_is_detected_by_start_time(tmp_path: Path) -> None:
    codenames.claim(tmp_path, "Reborn", "g1")
    raw = _raw(tmp_path)
    raw["leases"]["Reborn"]["owner_start_time"] -= 1  # same live pid, but "another" process
    fileio.atomic_write_json(tmp_path / "agents_index.json", raw)
    reaped = codenames.reap(tmp_path)
    assert [r["codename"] for r in reaped] == ["Reborn"] and "recycled" in reaped[0]["reap_reason"]


def test_reclaim_by_same_owner_is_idempotent_but_other_group_refused(tmp_path: Path) -> None:
    first = codenames.claim(tmp_path, "Same", "g1", stale_after_s=10)
    time.sleep(0.01)
    again = codenames.claim(tmp_path, "Same", "g1", stale_after_s=20)
    assert again["claimed_at"] == first["claimed_at"]
    assert again["heartbeat_at"] > first["heartbeat_at"] and again["stale_after_s"] == 20.0
    with pytest.raises(CodenameError) as info:
        codenames.claim(tmp_path, "Same", "g2")
    assert info.value.code == "codename_taken" and "'g1'" in str(info.value) and "release" in str(info.value)
    assert [l["group"] for l in codenames.list_leases(tmp_path)] == ["g1"]


def test_concurrent_claims_from_eight_processes_exactly_one_wins(tmp_path: Path) -> None:
    go = tmp_path / "go"
    racer = """
        import os, sys, time
        from extrarlhf.runtime import codenames
        sessions, go = sys.argv[1:3]
        while not os.path.exists(go):
            time.sleep(0.001)
        try:
            codenames.claim(sessions, "Prize", "g-%d" % os.getpid())
            print("won", flush=True)
        except codenames.CodenameError as exc:
            print("lost", exc.code, flush=True)
        sys.stdin.read()  # stay alive so the winner's lease stays live while the others try
    """
    sessions = tmp_path / "sessions"
    procs = [_spawn(racer, str(sessions), str(go)) for _ in range(8)]
    try:
        time.sleep(0.3)  # let them all start and spin on the start flag
        go.touch()
        results = {p.pid: p.stdout.readline().split() for p in procs}
        winners = [pid for pid, r in results.items() if r == ["won"]]
        assert len(winners) == 1, results
        assert sorted(r for pid, r in results.items() if pid not in winners) == [["lost", "codename_taken"]] * 7
        leases = codenames.list_leases(sessions)
        assert [(l["owner_pid"], l["group"]) for l in leases] == [(winners[0], f"g-{winners[0]}")]
    finally:
        for p in procs:
            _finish(p)


def test_release_rules(tmp_path: Path) -> None:
    assert codenames.release(tmp_path, "Nobody") is False
    assert codenames.release(tmp_path / "missing-dir", "Nobody") is False
    assert not (tmp_path / "missing-dir").exists()
    proc = _start_holder(tmp_path, "Mine", "g1")
    try:
        with pytest.raises(CodenameError) as info:
            codenames.release(tmp_path, "Mine")
        assert info.value.code == "not_owner"
        assert f"pid {proc.pid}" in str(info.value) and "'g1'" in str(info.value)
        with pytest.raises(CodenameError) as info:
            codenames.heartbeat(tmp_path, "Mine")
        assert info.value.code == "not_owner"
        assert [l["owner_pid"] for l in codenames.list_leases(tmp_path)] == [proc.pid]
    finally:
        _finish(proc)
    codenames.claim(tmp_path, "Mine", "g1")
    assert codenames.release(tmp_path, "Mine") is True
    assert codenames.release(tmp_path, "Mine") is False
    assert _raw(tmp_path) == {"schema_version": 1, "leases": {}}


@pytest.mark.parametrize(
    ("content", "code"),
    [
        (b'{"schema_version": 99, "leases": {}}\n', "unsupported_schema"),
        (b'{"leases": {}}\n', "unsupported_schema"),
        (b'{"schema_version": 1, "leases": {"A": {"codena', "corrupt_index"),
        (b"", "corrupt_index"),
        (b"\xff\xfe garbage", "corrupt_index"),
        (b'["not", "an", "object"]', "corrupt_index"),
        (b'{"schema_version": 1, "leases": {"A": {"codename": "A"}}}', "corrupt_index"),
    ],
)
def test_unknown_schema_or_corrupt_index_is_refused_and_left_byte_identical(
    tmp_path: Path, content: bytes, code: str
) -> None:
    index = tmp_path / "agents_index.json"
    index.write_bytes(content)
    operations = [
        lambda: codenames.claim(tmp_path, "Any", "g1"),
        lambda: codenames.heartbeat(tmp_path, "Any"),
        lambda: codenames.release(tmp_path, "Any"),
        lambda: codenames.list_leases(tmp_path),
        lambda: codenames.reap(tmp_path),
    ]
    for op in operations:
        with pytest.raises(CodenameError) as info:
            op()
        assert info.value.code == code
        assert str(index) in str(info.value)
        if code == "corrupt_index":
            assert "delete it" in str(info.value)
        else:
            assert "schema_version" in str(info.value)
        assert index.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agents_index.json", "agents_index.json.lock"]


@pytest.mark.parametrize(
    "codename", ["", "1abc", "_abc", "-abc", "a b", "a/b", "a.b", "A" * 49, "é", "abc\n", None, 7]
)
def test_invalid_codenames_refused(tmp_path: Path, codename: object) -> None:
    with pytest.raises(CodenameError) as info:
        codenames.claim(tmp_path, codename, "g1")  # type: ignore[arg-type]
    assert info.value.code == "invalid_argument" and "codename" in str(info.value)
    assert isinstance(info.value, ValueError)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("group", ["", ".hidden", "a..b", "a/b", "../x", "a b", "g" * 65, "g\x00", None])
def test_invalid_groups_refused(tmp_path: Path, group: object) -> None:
    with pytest.raises(RLHFError) as info:
        codenames.claim(tmp_path, "Valid", group)  # type: ignore[arg-type]
    assert info.value.code == "invalid_argument" and "group" in str(info.value)
    assert list(tmp_path.iterdir()) == []


def test_valid_edge_names_accepted(tmp_path: Path) -> None:
    codenames.claim(tmp_path, "A" * 48, "9" + "g" * 63)
    codenames.claim(tmp_path, "z-_9", "a.b-c_d")
    assert len(codenames.list_leases(tmp_path)) == 2


def test_invalid_numbers_refused(tmp_path: Path) -> None:
    for kw in ({"stale_after_s": 0}, {"stale_after_s": float("nan")}, {"stale_after_s": -1},
               {"owner_pid": 0}, {"owner_pid": True}, {"owner_pid": "12"}):
        with pytest.raises(CodenameError) as info:
            codenames.claim(tmp_path, "Num", "g1", **kw)
        assert info.value.code == "invalid_argument"
    dead = _run("import os; print(os.getpid())").stdout.strip()
    with pytest.raises(CodenameError) as info:
        codenames.claim(tmp_path, "Num", "g1", owner_pid=int(dead))
    assert info.value.code == "invalid_argument" and "not a live process" in str(info.value)


def test_claim_on_behalf_of_a_live_worker_pid(tmp_path: Path) -> None:
    proc = _spawn("import sys; sys.stdin.read()")
    try:
        lease = codenames.claim(tmp_path, "Worker", "g1", owner_pid=proc.pid)
        assert lease["owner_start_time"] == codenames.process_start_time(proc.pid)
        with pytest.raises(CodenameError):
            codenames.release(tmp_path, "Worker")  # this process is not the owner
        assert codenames.heartbeat(tmp_path, "Worker", owner_pid=proc.pid)["heartbeat_at"] >= lease["heartbeat_at"]
    finally:
        _finish(proc)
    assert codenames.list_leases(tmp_path) == []  # worker exited -> reaped


def test_hold_releases_on_success_and_on_exception(tmp_path: Path) -> None:
    with codenames.hold(tmp_path, "Held", "g1", stale_after_s=30) as lease:
        assert lease["stale_after_s"] == 30.0
        assert [l["codename"] for l in codenames.list_leases(tmp_path)] == ["Held"]
    assert codenames.list_leases(tmp_path) == []

    with pytest.raises(RuntimeError, match="boom"):
        with codenames.hold(tmp_path, "Held", "g1"):
            assert len(codenames.list_leases(tmp_path)) == 1
            raise RuntimeError("boom")
    assert codenames.list_leases(tmp_path) == []
    assert _raw(tmp_path)["leases"] == {}


def test_list_on_missing_sessions_dir_creates_nothing(tmp_path: Path) -> None:
    assert codenames.list_leases(tmp_path / "nope") == []
    assert codenames.reap(tmp_path / "nope") == []
    assert not (tmp_path / "nope").exists()


# ----------------------------------------------------------------------------- fileio


def test_atomic_write_json_format_and_no_temp_files(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    fileio.atomic_write_json(target, {"b": 1, "a": ["é", 2]})
    assert target.read_text(encoding="utf-8") == '{\n  "a": [\n    "é",\n    2\n  ],\n  "b": 1\n}\n'
    fileio.atomic_write_json(target, {"c": 3})
    assert json.loads(target.read_text(encoding="utf-8")) == {"c": 3}
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]
    assert (target.stat().st_mode & 0o777) != 0o600  # not the private mode of the temp file


def test_atomic_write_json_failure_keeps_old_content(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    fileio.atomic_write_json(target, {"ok": True})
    before = target.read_bytes()
    with pytest.raises(TypeError):
        fileio.atomic_write_json(target, {"a": list(range(1000)), "z": {"deep": object()}})
    assert target.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_atomic_write_bytes_removes_temp_when_replace_fails(tmp_path: Path) -> None:
    target = tmp_path / "is_a_dir"
    target.mkdir()
    (target / "keep").write_text("x")
    with pytest.raises(OSError):
        fileio.atomic_write_bytes(target, b"data")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["is_a_dir"]
    assert (target / "keep").read_text() == "x"
    with pytest.raises(TypeError):
        fileio.atomic_write_bytes(tmp_path / "f", "not bytes")  # type: ignore[arg-type]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["is_a_dir"]


def test_locked_excludes_other_processes(tmp_path: Path) -> None:
    target = tmp_path / "data.json"
    child = _spawn(
        """
        import sys
        from extrarlhf.core import fileio
        with fileio.locked(sys.argv[1]):
            print("locked", flush=True)
            sys.stdin.read()
        """,
        str(target),
    )
    try:
        assert child.stdout.readline().strip() == "locked"
        lock_file = tmp_path / "data.json.lock"
        assert lock_file.exists() and fileio.lock_path(target) == lock_file
        fd = os.open(lock_file, os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    finally:
        _finish(child)
    with fileio.locked(target):  # free again once the child is gone
        pass


def test_append_line_locked_concurrent_writers_produce_whole_lines(tmp_path: Path) -> None:
    target = tmp_path / "catalog.jsonl"
    writer = """
        import json, sys
        from extrarlhf.core import fileio
        path, wid = sys.argv[1], int(sys.argv[2])
        for i in range(150):
            fileio.append_line_locked(path, json.dumps({"w": wid, "i": i, "pad": "x" * (5000 + 37 * i)}))
    """
    procs = [_spawn(writer, str(target), str(w)) for w in range(6)]
    for p in procs:
        p.stdin.close()
        assert p.wait(timeout=30) == 0, p.stderr.read()
    raw = target.read_bytes()
    assert raw.endswith(b"\n")
    records = [json.loads(line) for line in raw.decode("utf-8").splitlines()]
    assert len(records) == 6 * 150
    for w in range(6):
        assert [r["i"] for r in records if r["w"] == w] == list(range(150))  # in order, none lost or torn
    assert all(len(r["pad"]) == 5000 + 37 * r["i"] for r in records)


def test_append_line_locked_heals_a_torn_tail_and_rejects_multiline(tmp_path: Path) -> None:
    target = tmp_path / "log.jsonl"
    fileio.append_line_locked(target, '{"n": 1}')
    fileio.append_line_locked(target, '{"n": 2}\n')
    with open(target, "ab") as fh:
        fh.write(b'{"n": 3, "tor')  # a writer killed mid-line
    fileio.append_line_locked(target, '{"n": 4}')
    assert target.read_bytes() == b'{"n": 1}\n{"n": 2}\n{"n": 3, "tor\n{"n": 4}\n'
    with pytest.raises(ValueError):
        fileio.append_line_locked(target, "a\nb")
    assert target.read_bytes().endswith(b'{"n": 4}\n')


def test_atomic_write_chunks_writes_the_concatenation_or_nothing(tmp_path: Path) -> None:
    target = tmp_path / "lines"
    small, large = [b"x" * 700 + b"\n"] * 3000, b"y" * (3 << 20)  # several buffers' worth, and one over a buffer
    fileio.atomic_write_chunks(target, iter(small + [large] + small))
    assert target.read_bytes() == b"".join(small) + large + b"".join(small)

    def failing():
        yield from small
        raise OSError("the catalog could not be read")

    with pytest.raises(OSError, match="could not be read"):
        fileio.atomic_write_chunks(target, failing())
    assert target.read_bytes() == b"".join(small) + large + b"".join(small)
    assert [p.name for p in tmp_path.iterdir()] == ["lines"]
