"""L1 series (extrarlhf.runtime.series.run_series): determinism across worker counts, resume, seeds,
group conflicts, codename leases, progress, and crash safety under a real SIGKILL."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import engine
from extrarlhf.core.errors import RLHFError
from extrarlhf.runtime import codenames, trace_files
from extrarlhf.runtime.codenames import CodenameError
from extrarlhf.runtime.match import start_match
from extrarlhf.runtime.replay import replay_battle
from extrarlhf.runtime.series import CHUNK, run_series, series_seed
from extrarlhf.runtime.sessions import FINAL_STATUSES, TRACE_FILES, SessionStore, battle_id_for
from tests.trace_helpers import all_traces, counting_parses, read_text

ROOT = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------- helpers
def files_on_disk(root: Path) -> dict[str, bytes]:
    if not root.exists():
        return {}
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.name.endswith(".lock")}


def raw_catalog(root: Path, group: str) -> list[dict[str, Any]]:
    path = root / group / "catalog.jsonl"
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            pass  # a torn line from a killed writer
    return out


def expect_error(code: str, fn, *args, **kwargs) -> RLHFError:
    with pytest.raises(RLHFError) as info:
        fn(*args, **kwargs)
    assert info.value.code == code, f"code {info.value.code!r} != {code!r}: {info.value}"
    return info.value


def trace_bytes(store: SessionStore, group: str, battle_id: str) -> dict[str, bytes]:
    return all_traces(store.battle_dir(group, battle_id))


def meta_without_audit(data: bytes) -> dict[str, Any]:
    meta = json.loads(data)
    assert meta["audit"]["not_a_label"] is True
    meta.pop("audit")
    return meta


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def assert_one_final_line_per_battle(root: Path, group: str) -> None:
    finals = Counter(e["battle_id"] for e in raw_catalog(root, group) if e["status"] in FINAL_STATUSES)
    assert finals and max(finals.values()) == 1, f"duplicated final lines: {finals.most_common(3)}"


# --------------------------------------------------------------------------- determinism across workers
def test_one_and_two_workers_give_identical_traces(tmp_path: Path) -> None:
    n = 6
    stores = {}
    for workers in (1, 2):
        root = tmp_path / f"w{workers}"
        result = run_series(root, "g", n, p1_model="baseline:greedy", opponent="baseline:random", seed=123,
                            max_workers=workers)
        assert result["ran"] == n and result["skipped"] == 0
        assert result["summary"]["by_status"]["finished"] == n
        stores[workers] = SessionStore(root)
    cat1 = stores[1].read_catalog("g")
    cat2 = stores[2].read_catalog("g")
    assert len(cat1) == len(cat2) == n
    assert {e["battle_id"] for e in cat1} == {e["battle_id"] for e in cat2}
    by_id2 = {e["battle_id"]: e for e in cat2}
    for e1 in cat1:
        e2 = by_id2[e1["battle_id"]]
        b1 = trace_bytes(stores[1], "g", e1["battle_id"])
        b2 = trace_bytes(stores[2], "g", e1["battle_id"])
        assert b1["actions.jsonl"] == b2["actions.jsonl"]
        assert b1["turns.jsonl"] == b2["turns.jsonl"]
        assert meta_without_audit(b1["meta.jsonl"]) == meta_without_audit(b2["meta.jsonl"])
        # the catalog is the same except the meta hash (meta carries the audit timings)
        for e, b in ((e1, b1), (e2, b2)):
            assert e["files"] == {name: sha(b[name]) for name in TRACE_FILES}
        strip = lambda e: {**e, "files": {k: v for k, v in e["files"].items() if k != "meta.jsonl"}}  # noqa: E731
        assert strip(e1) == strip(e2)
    s1, s2 = stores[1].compute_summary("g"), stores[2].compute_summary("g")
    for key in ("by_status", "results", "decisions", "eligible_battles", "distinct_decks", "battle_tags"):
        assert s1[key] == s2[key], key


# --------------------------------------------------------------------------- resume
def test_resume_plays_only_what_is_missing(tmp_path: Path) -> None:
    root = tmp_path / "s"
    store = SessionStore(root)
    first = run_series(root, "g", 3, seed=5)
    assert (first["ran"], first["skipped"]) == (3, 0)
    snapshot = {e["battle_id"]: trace_bytes(store, "g", e["battle_id"]) for e in store.read_catalog("g")}
    lines = (root / "g" / "catalog.jsonl").read_bytes()

    calls: list[tuple[int, int]] = []
    again = run_series(root, "g", 3, seed=5, progress=lambda d, t: calls.append((d, t)))
    assert (again["ran"], again["skipped"]) == (0, 3)
    assert (root / "g" / "catalog.jsonl").read_bytes() == lines, "a no-op resume must not append lines"
    assert calls in ([], [(0, 0)])

    fewer = run_series(root, "g", 2, seed=5)
    assert (fewer["ran"], fewer["skipped"]) == (0, 2)

    more = run_series(root, "g", 5, seed=5)
    assert (more["ran"], more["skipped"]) == (2, 3)
    entries = store.read_catalog("g")
    assert [e["index"] for e in entries] == [0, 1, 2, 3, 4]
    assert all(e["status"] == "finished" for e in entries)
    assert_one_final_line_per_battle(root, "g")
    statuses = Counter(e["status"] for e in raw_catalog(root, "g"))
    assert statuses == {"started": 5, "finished": 5}
    for battle_id, files in snapshot.items():
        assert trace_bytes(store, "g", battle_id) == files, "a finished battle was rewritten"
    assert store.read_manifest("g")["seeds"] == {"mode": "series", "base_seed": 5, "n_battles": 5}
    assert more["summary"]["by_status"]["finished"] == 5
    assert json.loads((root / "g" / "summary.json").read_text())["by_status"]["finished"] == 5


def test_seeds_follow_series_seed(tmp_path: Path) -> None:
    root = tmp_path / "s"
    run_series(root, "g", 4, seed=77)
    run_series(root, "h", 2, seed=78)
    store = SessionStore(root)
    entries = store.read_catalog("g")
    seeds = [series_seed(77, i) for i in range(4)]
    assert len(set(seeds)) == 4 and all(0 <= s <= 2**63 - 1 for s in seeds)
    assert [e["seed"] for e in entries] == seeds
    assert [e["battle_id"] for e in entries] == [battle_id_for("g", i, s) for i, s in enumerate(seeds)]
    for e in entries:
        meta = store.battle("g", e["battle_id"]).meta()
        assert meta["seed"] == e["seed"] and meta["index"] == e["index"]
        fresh = engine.new_battle(e["seed"])
        assert meta["decks"] == {"p1": list(fresh.decks[0]), "p2": list(fresh.decks[1])}
        assert meta["starting_player"] == fresh.starting_player
    assert [e["seed"] for e in store.read_catalog("h")] == [series_seed(78, i) for i in range(2)]
    assert series_seed(78, 0) != series_seed(77, 0)


# --------------------------------------------------------------------------- conflicts and bad input
def test_other_base_seed_or_configuration_is_a_group_conflict(tmp_path: Path) -> None:
    root = tmp_path / "s"
    run_series(root, "g", 2, seed=1)
    before = files_on_disk(root)
    for kwargs in ({"seed": 2}, {"opponent": "baseline:random"}, {"p1_model": "baseline:random"}):
        err = expect_error("group_conflict", run_series, root, "g", 2, **{"seed": 1, **kwargs})
        assert "another group" in str(err)
    assert files_on_disk(root) == before
    # an explicit group (battles started one by one) is not a series
    start_match(SessionStore(root), "explicit", "rl", opponent="baseline:greedy", p1_model="baseline:greedy",
                seed=3)
    before = files_on_disk(root)
    expect_error("group_conflict", run_series, root, "explicit", 2)
    assert files_on_disk(root) == before


@pytest.mark.parametrize("kwargs, code", [
    ({"n_battles": 0}, "invalid_argument"),
    ({"n_battles": -3}, "invalid_argument"),
    ({"n_battles": 2.0}, "invalid_argument"),
    ({"n_battles": True}, "invalid_argument"),
    ({"n_battles": "2"}, "invalid_argument"),
    ({"n_battles": 1_000_001}, "invalid_argument"),
    ({"max_workers": 0}, "invalid_argument"),
    ({"max_workers": 65}, "invalid_argument"),
    ({"max_workers": 1.0}, "invalid_argument"),
    ({"max_workers": True}, "invalid_argument"),
    ({"max_workers": None}, "invalid_argument"),
    ({"seed": -1}, "invalid_argument"),
    ({"seed": 2**63}, "invalid_argument"),
    ({"seed": 0.5}, "invalid_argument"),
    ({"seed": False}, "invalid_argument"),
    ({"group": "a/b"}, "invalid_argument"),
    ({"group": ".."}, "invalid_argument"),
    ({"group": ""}, "invalid_argument"),
    ({"opponent": "baseline:nope"}, "unknown_spec"),
    ({"p1_model": "ckpt:nope"}, "unknown_spec"),
    ({"codename": "bad name!"}, "invalid_argument"),
])
def test_invalid_series_arguments_are_refused_before_writing(tmp_path: Path, kwargs: dict, code: str) -> None:
    root = tmp_path / "sessions"
    args = {"group": "g", "n_battles": 2, **kwargs}
    group, n = args.pop("group"), args.pop("n_battles")
    err = expect_error(code, run_series, root, group, n, **args)
    assert str(err)
    assert not (root / "g").exists() and not (root / "g" / "manifest.json").exists()
    assert files_on_disk(tmp_path) == {}


# --------------------------------------------------------------------------- codenames and progress
def test_codename_claimed_during_series_released_after_and_recorded(tmp_path: Path) -> None:
    root = tmp_path / "s"
    seen: list[list[dict]] = []
    calls: list[tuple[int, int]] = []

    def progress(done: int, total: int) -> None:
        calls.append((done, total))
        seen.append(codenames.list_leases(root))

    result = run_series(root, "g", 4, seed=9, max_workers=2, codename="Falcon", progress=progress)
    assert result["ran"] == 4 and result["codename"] == "Falcon"
    assert seen and all(len(leases) == 1 for leases in seen)
    lease = seen[0][0]
    assert lease["codename"] == "Falcon" and lease["group"] == "g" and lease["owner_pid"] == os.getpid()
    assert codenames.list_leases(root) == []
    # progress: (done, total) with a fixed total, never decreasing, ending at total
    assert calls[-1] == (4, 4)
    assert all(t == 4 for _, t in calls)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)
    # the codename is recorded in the manifest, the catalog and the traces
    store = SessionStore(root)
    assert store.read_manifest("g")["codename"] == "Falcon"
    for ref in store.battles("g"):
        assert ref.entry["codename"] == "Falcon"
        meta = ref.meta()
        assert meta["codename"] == "Falcon" and meta["actors"]["p1"]["codename"] == "Falcon"
        assert meta["actors"]["p2"]["codename"] is None
        assert meta["battle_tag"] == "rl-vs-bot"


def test_progress_single_worker_counts_every_battle(tmp_path: Path) -> None:
    calls: list[tuple[int, int]] = []
    run_series(tmp_path / "s", "g", 3, progress=lambda d, t: calls.append((d, t)))
    assert calls == [(1, 3), (2, 3), (3, 3)]


def test_the_summary_is_written_less_often_when_writing_it_is_slow(tmp_path: Path, monkeypatch) -> None:
    """A series writes the summary every SUMMARY_EVERY_S, or less often when the write took more
    than SUMMARY_SHARE of that time (a slow disk, a huge group); the codename's heartbeat keeps
    its period; the last write, at the end, is always made."""
    from extrarlhf.runtime import series

    writes: list[float] = []
    beats: list[float] = []
    write = SessionStore.write_summary

    def slow_write(self, group, policy=None, live=None):
        writes.append(time.monotonic())
        time.sleep(0.05)  # a write of 0.05 s: with a share of 5%, the next one waits 1 s
        return write(self, group, policy, live)

    monkeypatch.setattr(SessionStore, "write_summary", slow_write)
    monkeypatch.setattr(series, "SUMMARY_EVERY_S", 0.0)
    monkeypatch.setattr(codenames, "heartbeat", lambda root, name: beats.append(time.monotonic()))
    started = time.monotonic()
    result = run_series(tmp_path / "s", "g", 40, p1_model="baseline:random", opponent="baseline:random",
                        max_workers=1, codename="Slowpoke")
    took = time.monotonic() - started
    assert result["ran"] == 40 and result["summary"]["battles"] == 40
    assert len(beats) >= 39  # every battle, as SUMMARY_EVERY_S is 0
    # without the share, one write a battle: 40 writes; with it, one a second at most, plus the last
    assert len(writes) <= took / 1.0 + 2, (len(writes), took)
    assert SessionStore(tmp_path / "s").read_summary("g")["battles"] == 40


def test_a_resume_with_nothing_to_play_parses_each_catalog_line_once(tmp_path: Path, monkeypatch) -> None:
    """The reconcile's one pass gives the manifest check, the battles already finished and the
    series' live index (six passes over the catalog before: 124 CPU-s at 10^6 battles); the
    summary it writes is still the catalog's."""
    root = tmp_path / "s"
    run_series(root, "g", 8, p1_model="baseline:random", opponent="baseline:random")
    count = counting_parses(monkeypatch)
    result = run_series(root, "g", 8, p1_model="baseline:random", opponent="baseline:random")
    assert (result["ran"], result["skipped"]) == (0, 8)
    assert count[0] == 16  # two lines a battle, each parsed once
    monkeypatch.undo()
    store = SessionStore(root)
    assert {k: v for k, v in result["summary"].items() if k != "updated_at"} == \
        {k: v for k, v in store.compute_summary("g").items() if k != "updated_at"}


def test_codename_released_when_the_series_fails(tmp_path: Path) -> None:
    root = tmp_path / "s"

    def boom(done: int, total: int) -> None:
        assert codenames.list_leases(root)[0]["codename"] == "Raven"
        raise RuntimeError("progress display broke")

    with pytest.raises(RuntimeError, match="progress display broke"):
        run_series(root, "g", 3, codename="Raven", progress=boom)
    assert codenames.list_leases(root) == []
    # the battle that completed before the failure is kept (its chunk-mates were cut off); the series resumes
    store = SessionStore(root)
    assert sorted(e["status"] for e in store.read_catalog("g")) == ["finished", "unfinished", "unfinished"]
    result = run_series(root, "g", 3, codename="Raven")
    assert (result["ran"], result["skipped"]) == (2, 1)
    assert codenames.list_leases(root) == []

    # a group conflict after the claim also releases it
    expect_error("group_conflict", run_series, root, "g", 3, seed=99, codename="Raven")
    assert codenames.list_leases(root) == []


def test_codename_taken_by_a_live_process_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "s"
    root.mkdir()
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        codenames.claim(root, "Owl", "elsewhere", owner_pid=other.pid)
        with pytest.raises(CodenameError) as info:
            run_series(root, "g", 2, codename="Owl")
        assert info.value.code == "codename_taken"
        assert not (root / "g").exists()
        leases = codenames.list_leases(root)
        assert [(l["codename"], l["group"], l["owner_pid"]) for l in leases] == [("Owl", "elsewhere", other.pid)]
    finally:
        other.kill()
        other.wait()


# --------------------------------------------------------------------------- crash safety (real SIGKILL)
def _wait_for_finished(catalog: Path, proc: subprocess.Popen, at_least: int, timeout: float = 60.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"collect exited early with {proc.returncode}"
        if catalog.exists():
            count = catalog.read_bytes().count(b'"status":"finished"')
            if count >= at_least:
                return count
        time.sleep(0.005)
    raise AssertionError(f"fewer than {at_least} finished battles after {timeout}s")


def _kill_group(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


@pytest.mark.parametrize("workers", [1, 2])
def test_sigkill_mid_series_leaves_a_readable_resumable_group(tmp_path: Path, workers: int) -> None:
    root = tmp_path / "sessions"
    group, n = "crash", 200
    codename = f"Crash{workers}"
    log = open(tmp_path / "collect.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "extrarlhf", "collect", "--group", group, "--battles", str(n),
         "--sessions-dir", str(root), "--workers", str(workers), "--codename", codename],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait_for_finished(root / group / "catalog.jsonl", proc, at_least=5)
    finally:
        if proc.poll() is None:
            _kill_group(proc)
        log.close()
    assert proc.returncode == -signal.SIGKILL, (tmp_path / "collect.log").read_text()

    # nothing keeps writing after the kill (workers died with the process group)
    catalog_path = root / group / "catalog.jsonl"
    frozen = catalog_path.read_bytes()
    time.sleep(0.3)
    assert catalog_path.read_bytes() == frozen

    # the group is readable
    store = SessionStore(root)
    assert store.list_groups() == [group]
    manifest = store.read_manifest(group)
    assert manifest["seeds"] == {"mode": "series", "base_seed": 0, "n_battles": n}
    entries = store.read_catalog(group)
    summary = store.compute_summary(group)
    statuses = Counter(e["status"] for e in entries)
    assert set(statuses) <= {"finished", "unfinished"}, statuses
    finished = [e for e in entries if e["status"] == "finished"]
    unfinished = [e for e in entries if e["status"] == "unfinished"]
    assert len(finished) >= 5 and len(finished) < n
    assert len(unfinished) <= workers * CHUNK  # each worker plays a chunk of battles side by side
    assert summary["by_status"]["finished"] == len(finished)
    assert summary["by_status"]["unfinished"] == len(unfinished)
    assert summary["battles"] == len(entries)
    if workers == 1 and unfinished:  # one chunk at a time: the cut-off battles are all in the last chunk
        first_cut = min(e["index"] for e in unfinished)
        assert max(e["index"] for e in unfinished) < (first_cut // CHUNK + 1) * CHUNK
        assert all(e["index"] < (first_cut // CHUNK + 1) * CHUNK for e in finished)
    assert_one_final_line_per_battle(root, group)

    # every finished battle is intact: hashes match the catalog and replay reproduces
    before = {}
    for e in finished:
        files = trace_bytes(store, group, e["battle_id"])
        assert e["files"] == {name: sha(files[name]) for name in TRACE_FILES}
        report = replay_battle(store, group, e["battle_id"])
        assert report["reproduces"], report["first_divergence"]
        before[e["battle_id"]] = files
    # in-progress battles are marked, with only a started line and no readable trace
    raw = raw_catalog(root, group)
    for e in unfinished:
        assert {r["status"] for r in raw if r["battle_id"] == e["battle_id"]} == {"started"}
        assert e["winner"] is None and e["decisions"] is None
        expect_error("not_found", store.battle, group, e["battle_id"])

    # no half-written folder is visible: temp folders are hidden, every other one is complete
    known = {e["battle_id"] for e in entries}
    for child in (root / group / "battles").iterdir():
        if child.name.startswith(".tmp-"):
            continue
        assert child.name in known, f"unexpected folder {child.name}"
        # a series stores turns and actions compact (trace_files.py), meta plain
        assert sorted(p.name for p in (child / "v5").iterdir()) == sorted(
            trace_files.stored_name(name, True) for name in TRACE_FILES)
        for name in TRACE_FILES:
            for line in read_text(child, name).splitlines():
                json.loads(line)
    for e in finished:
        assert (root / group / "battles" / e["battle_id"]).is_dir()

    # the dead owner's codename lease is reaped
    assert codenames.list_leases(root) == []

    # a battle killed between its trace's rename and its final catalog line has an intact trace: the
    # resume rebuilds its line from the trace and never plays it again (issue 14)
    traced = {e["battle_id"]: trace_bytes(store, group, e["battle_id"]) for e in unfinished
              if (root / group / "battles" / e["battle_id"]).is_dir()}

    # resume: plays the rest, duplicates nothing, finishes everything
    result = run_series(root, group, n, max_workers=workers, codename=codename)
    assert result["repaired"] == len(traced)
    assert result["ran"] == n - len(finished) - len(traced) and result["skipped"] == len(finished) + len(traced)
    for battle_id, files in traced.items():
        assert trace_bytes(store, group, battle_id) == files, "an intact trace was played over"
    entries = store.read_catalog(group)
    assert [e["index"] for e in entries] == list(range(n))
    assert all(e["status"] == "finished" for e in entries)
    assert_one_final_line_per_battle(root, group)
    assert result["summary"]["by_status"]["finished"] == n and result["summary"]["by_status"]["unfinished"] == 0
    battle_dirs = list((root / group / "battles").iterdir())
    assert not [d.name for d in battle_dirs if d.name.startswith(".tmp-")], "stale temp folders left"
    assert sorted(d.name for d in battle_dirs) == sorted(e["battle_id"] for e in entries)
    for battle_id, files in before.items():
        assert trace_bytes(store, group, battle_id) == files, "a battle finished before the kill was rewritten"
    assert codenames.list_leases(root) == []

    # battles cut off by the kill and replayed on resume equal an uninterrupted run
    if unfinished:
        upto = max(e["index"] for e in unfinished) + 1
        ref_root = tmp_path / "reference"
        run_series(ref_root, group, upto, max_workers=1, codename=codename)
        ref = SessionStore(ref_root)
        for e in unfinished:
            a = trace_bytes(store, group, e["battle_id"])
            b = trace_bytes(ref, group, e["battle_id"])
            assert a["actions.jsonl"] == b["actions.jsonl"] and a["turns.jsonl"] == b["turns.jsonl"]


# --------------------------------------------------------------------------- issue 24: an edited manifest
def _edit_opponent(root: Path, group: str, spec: str) -> None:
    path = root / group / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["configuration"]["opponent"]["spec"] = spec
    path.write_text(json.dumps(manifest))


def test_a_resume_refuses_a_group_whose_manifest_was_edited_after_its_battles(tmp_path: Path) -> None:
    """Issue 24: a group played against greedy whose manifest then names random. Before the fix a
    resume asking for random added random battles beside the greedy ones (and `materialize`
    published them all under one configuration)."""
    from extrarlhf.datasets import materialize_v5_dataset

    root = tmp_path / "s"
    run_series(root, "g", 4, p1_model="baseline:greedy", opponent="baseline:greedy")
    _edit_opponent(root, "g", "baseline:random")
    before = files_on_disk(root / "g")
    error = expect_error("manifest_mismatch", run_series, root, "g", 8, p1_model="baseline:greedy",
                         opponent="baseline:random")
    message = str(error)
    assert "session group 'g'" in message and "edited after they were played" in message
    assert "'baseline:greedy'" in message and "'baseline:random'" in message and "nothing was played" in message
    assert "Restore manifest.json from a backup" in message and "another group" in message
    assert error.details == {"path": str(root / "g" / "manifest.json"), "line": None,
                             "field": "configuration.opponent.spec"}
    after = files_on_disk(root / "g")
    # only the asked size may differ (written before the traces are read); no battle was added
    assert {k for k in after if k != "manifest.json"} == {k for k in before if k != "manifest.json"}
    assert all(after[k] == before[k] for k in before if k != "manifest.json")
    assert [e["status"] for e in SessionStore(root).read_catalog("g")] == ["finished"] * 4
    # a materialization is refused alike: one configuration per group, the one its battles record
    error = expect_error("manifest_mismatch", materialize_v5_dataset, ["g"], "d", sessions_dir=root,
                         datasets_dir=tmp_path / "datasets", workers=1)
    assert "nothing was materialized" in str(error)
    assert not (tmp_path / "datasets" / "d").exists()


def test_a_model_opponent_swapped_in_the_manifest_is_caught_from_the_catalog_alone(tmp_path: Path) -> None:
    """The catalog lines carry the battles' weights hashes: a manifest that names another model
    disagrees with every line, not only with the traces read."""
    from extrarlhf.checkpoints.registry import CheckpointRegistry
    from tests import onnx_factory

    checkpoints = tmp_path / "checkpoints"
    CheckpointRegistry(checkpoints).register("m", onnx_factory.save(onnx_factory.v5_model(), tmp_path / "m.onnx"))
    root = tmp_path / "s"
    run_series(root, "g", 2, p1_model="baseline:greedy", opponent="m", checkpoints_dir=checkpoints)
    path = root / "g" / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["configuration"]["opponent"]["weights_hash"] = "0" * 64
    path.write_text(json.dumps(manifest))
    store = SessionStore(root)
    entries = store.read_catalog("g")
    found = store.configuration_mismatches("g", manifest["configuration"], entries, sample=0)
    assert [m[:2] for m in found] == [(e["battle_id"], "weights_hashes") for e in entries]


def test_battles_played_while_the_model_file_was_broken_do_not_count_as_an_edited_manifest(tmp_path: Path) -> None:
    """A degraded battle records the weights hash of the file it found (here another model's): that
    is not a manifest edit, and the series resumes once the file is restored."""
    from extrarlhf.checkpoints.registry import CheckpointRegistry
    from tests import onnx_factory

    checkpoints = tmp_path / "checkpoints"
    path = CheckpointRegistry(checkpoints).register(
        "m", onnx_factory.save(onnx_factory.v5_model(), tmp_path / "m.onnx")).path
    good = path.read_bytes()
    onnx_factory.save(onnx_factory.v5_model(value_bias=1.0), path)  # other weights: hash_mismatch, degraded
    root = tmp_path / "s"
    run_series(root, "g", 2, p1_model="baseline:greedy", opponent="m", checkpoints_dir=checkpoints)
    assert all(e["degraded"] for e in SessionStore(root).read_catalog("g"))
    path.write_bytes(good)
    result = run_series(root, "g", 4, p1_model="baseline:greedy", opponent="m", checkpoints_dir=checkpoints)
    assert result["ran"] == 2
    from extrarlhf.runtime.sessions import check_sessions
    assert check_sessions(root) == []
