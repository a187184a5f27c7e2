"""Compact traces (extrarlhf/runtime/trace_files.py, DESIGN 6.1): a series asked for them stores
turns/actions as zstd of the same bytes; every reader gets the plain bytes, the catalog digests
are the plain ones, a dataset materialized from them is the plain group's, damage is reported,
and a battle converts in place both ways."""

from __future__ import annotations

import hashlib

import pyarrow.parquet as pq
import zstandard
import pytest

from extrarlhf.datasets.materialize import materialize_v5_dataset
from extrarlhf.runtime import trace_files
from extrarlhf.runtime.series import run_series
from extrarlhf.runtime.sessions import SessionStore, check_sessions
from extrarlhf.core.errors import InvalidArgument


def _files(store: SessionStore, group: str) -> dict[str, dict[str, bytes]]:
    out = {}
    for entry in store.read_catalog(group):
        if entry["status"] == "finished":
            v5 = store.battle_dir(group, entry["battle_id"]) / "v5"
            out[entry["battle_id"]] = {name: trace_files.read(v5, name) for name in trace_files.TRACE_FILES}
    return out


@pytest.fixture(scope="module")
def groups(tmp_path_factory):
    root = tmp_path_factory.mktemp("sessions")
    for group, compact in (("plain", False), ("packed", True)):
        run_series(root, group, 4, p1_model="search:baseline:greedy?sims=4", seed=3, compact_traces=compact)
    return root


def test_a_compact_series_stores_zstd_of_the_same_bytes_with_the_plain_digests(groups) -> None:
    store = SessionStore(groups)
    plain, packed = _files(store, "plain"), _files(store, "packed")
    assert len(plain) == len(packed) == 4
    for (plain_id, a), (packed_id, b) in zip(sorted(plain.items()), sorted(packed.items())):
        for name in trace_files.COMPACT_FILES:  # the same battle: only the ids (named after the group) differ
            assert a[name].replace(plain_id.encode(), packed_id.encode()) == b[name], name
    stored = sorted(p.name for p in (groups / "packed" / "battles").glob("*/v5/*"))
    assert set(stored) == {"meta.jsonl", "turns.jsonl.zst", "actions.jsonl.zst"}
    plain_bytes = sum(p.stat().st_size for p in (groups / "plain" / "battles").glob("*/v5/*"))
    packed_bytes = sum(p.stat().st_size for p in (groups / "packed" / "battles").glob("*/v5/*"))
    assert packed_bytes * 5 < plain_bytes, (packed_bytes, plain_bytes)
    for entry in store.read_catalog("packed"):
        if entry["status"] == "finished":
            for name, data in packed[entry["battle_id"]].items():
                assert entry["files"][name] == hashlib.sha256(data).hexdigest()
    assert check_sessions(groups) == []
    ref = next(r for r in store.battles("packed") if r.status == "finished")
    assert len(list(ref.decisions())) == ref.entry["decisions"] and len(list(ref.turns())) == ref.entry["turns"]


def test_a_dataset_of_a_compact_group_has_the_rows_of_the_plain_one(groups, tmp_path) -> None:
    out = {}
    for group in ("plain", "packed"):
        result = materialize_v5_dataset(group, name=f"ds-{group}", sessions_dir=groups, datasets_dir=tmp_path)
        folder = tmp_path / f"ds-{group}" / f"v{result['version']}"
        out[group] = pq.read_table(folder / "decisions.parquet").drop(["battle_id", "group"])
    assert out["plain"].equals(out["packed"])


def test_damage_to_a_compact_file_is_reported_and_a_battle_converts_both_ways(groups, tmp_path) -> None:
    import shutil

    root = tmp_path / "copy"
    shutil.copytree(groups, root)
    store = SessionStore(root)
    entries = [e for e in store.read_catalog("packed") if e["status"] == "finished"]
    v5 = store.battle_dir("packed", entries[0]["battle_id"]) / "v5"
    before = {name: trace_files.read(v5, name) for name in trace_files.TRACE_FILES}
    assert trace_files.expand_battle(v5) == 2 and not trace_files.is_compact(v5)
    assert {name: (v5 / name).read_bytes() for name in trace_files.TRACE_FILES} == before
    assert trace_files.compact_battle(v5) == 2 and trace_files.is_compact(v5)
    assert {name: trace_files.read(v5, name) for name in trace_files.TRACE_FILES} == before
    assert check_sessions(root) == []
    packed = v5 / "actions.jsonl.zst"
    data = bytearray(packed.read_bytes())
    data[len(data) // 2] ^= 0xFF
    packed.write_bytes(bytes(data))
    with pytest.raises(trace_files.CompactFileError, match="does not decompress"):
        trace_files.read(v5, "actions.jsonl")
    problems = check_sessions(root)
    assert len(problems) == 1 and "actions.jsonl.zst is stored compact but does not decompress" in problems[0]["message"]


def test_compact_traces_must_be_a_boolean(tmp_path) -> None:
    with pytest.raises(InvalidArgument, match="compact_traces must be true or false, got 'yes'"):
        run_series(tmp_path, "g", 1, compact_traces="yes")  # type: ignore[arg-type]
    assert not (tmp_path / "g").exists()


def test_a_group_expands_and_compacts_back_with_its_catalog_unchanged(tmp_path) -> None:
    import shutil

    from extrarlhf.runtime.trace_forms import convert_group

    root = tmp_path / "s"
    run_series(root, "g", 3, seed=5)
    store = SessionStore(root)
    catalog = (root / "g" / "catalog.jsonl").read_bytes()
    before = _files(store, "g")
    expanded = convert_group(root, "g", compact=False)
    assert (expanded["converted"], expanded["files"], expanded["skipped"]) == (3, 6, [])
    assert expanded["bytes_after"] > 5 * expanded["bytes_before"]
    assert all(not trace_files.is_compact(b.path / "v5") for b in store.battles("g"))
    assert _files(store, "g") == before and check_sessions(root) == []
    again = convert_group(root, "g", compact=False)
    assert (again["converted"], again["unchanged"]) == (0, 3)
    # a damaged battle is reported and left as it is; the others convert
    victim = next(store.battles("g"))
    (victim.path / "v5" / "actions.jsonl").unlink()
    (victim.path / "v5" / "actions.jsonl.zst").write_bytes(b"\x28\xb5\x2f\xfd garbage")
    packed = convert_group(root, "g", compact=True)
    assert packed["converted"] == 2 and [s["battle_id"] for s in packed["skipped"]] == [victim.battle_id]
    assert "not an intact trace" in packed["skipped"][0]["reason"]
    assert (victim.path / "v5" / "turns.jsonl").is_file()  # nothing of the damaged battle was rewritten
    assert (root / "g" / "catalog.jsonl").read_bytes() == catalog
    shutil.rmtree(victim.path)


def test_the_cli_cats_expands_and_refuses_what_is_not_a_trace(tmp_path) -> None:
    import subprocess
    import sys
    from pathlib import Path

    root = tmp_path / "s"
    run_series(root, "g", 2, seed=6)
    battle = next(SessionStore(root).battles("g"))
    plain = trace_files.read(battle.path / "v5", "actions.jsonl")

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "extrarlhf", *args], capture_output=True, timeout=300,
                              cwd=Path(__file__).resolve().parents[2])

    for name in ("actions.jsonl", "actions.jsonl.zst"):
        done = cli("sessions", "cat", str(battle.path / "v5" / name))
        assert done.returncode == 0 and done.stdout == plain, done.stderr
    done = cli("sessions", "expand", "g", "--sessions-dir", str(root))
    assert done.returncode == 0 and b"2 of 2 battles now plain" in done.stdout, done.stderr
    assert (battle.path / "v5" / "actions.jsonl").read_bytes() == plain
    refused = cli("sessions", "cat", str(battle.path / "v5" / "notes.txt"))
    assert refused.returncode == 2 and b"is not a trace file" in refused.stderr and b"Traceback" not in refused.stderr
    missing = cli("sessions", "compact", "nope", "--sessions-dir", str(root))
    assert missing.returncode == 2 and b"not_found" in missing.stderr


def test_decoding_reads_declared_frames_whole_and_refuses_anything_else(tmp_path) -> None:
    from pathlib import Path

    import zstandard

    path = Path("v5/actions.jsonl.zst")
    one = trace_files.encode({"actions.jsonl": b"a" * 1000}, True)["actions.jsonl.zst"]
    assert trace_files.decode(path, one) == b"a" * 1000
    # two frames (not what the writer makes): both are read, as zstdcat does
    assert trace_files.decode(path, one + one) == b"a" * 2000
    empty = trace_files.encode({"actions.jsonl": b""}, True)["actions.jsonl.zst"]
    assert trace_files.decode(path, empty) == b""  # a battle without decisions
    cases = {b"": "is empty", b"not zstd": "does not decompress", one[:-5]: "is truncated",
             one + one[:-3]: "is truncated", one[:20] + b"\0" * 3 + one[23:]: "does not decompress",
             zstandard.ZstdCompressor(write_content_size=False).compress(b"b" * 500): "without a declared size"}
    for damaged, message in cases.items():
        with pytest.raises(trace_files.CompactFileError, match=message):
            trace_files.decode(path, damaged)
    big = zstandard.ZstdCompressor().compress(b"\0" * (trace_files.MAX_PLAIN_BYTES + 1))
    with pytest.raises(trace_files.CompactFileError, match="more than 256 MiB"):
        trace_files.decode(path, big)


def _recompressed(v5, level: int) -> None:
    """Store turns and actions again as zstd of the same plain bytes at another level."""
    for name in trace_files.COMPACT_FILES:
        packed = v5 / (name + trace_files.SUFFIX)
        plain = trace_files.read(v5, name)
        packed.write_bytes(zstandard.ZstdCompressor(level=level, write_content_size=True).compress(plain))


def test_a_compact_battle_s_line_carries_the_stored_files_digest_and_a_rebuilt_line_is_the_same(groups) -> None:
    store = SessionStore(groups)
    for group, compact in (("plain", False), ("packed", True)):
        for entry in store.read_catalog(group):
            if entry["status"] != "finished":
                continue
            v5 = store.battle_dir(group, entry["battle_id"]) / "v5"
            if compact:
                stored = {f"{n}.zst": (v5 / f"{n}.zst").read_bytes() for n in trace_files.COMPACT_FILES}
                inner = b"".join(hashlib.sha256(stored[f"{n}.zst"]).digest() for n in trace_files.COMPACT_FILES)
                assert entry["compact_sha256"] == hashlib.sha256(inner).hexdigest()
            else:
                assert "compact_sha256" not in entry
            rebuilt = store.rebuild_entry(group, entry["battle_id"])
            assert {"schema_version": entry["schema_version"], **rebuilt} == entry


def test_materialize_hashes_the_stored_bytes_when_they_are_as_written_and_the_plain_ones_otherwise(
        groups, tmp_path, monkeypatch) -> None:
    """A compact battle whose stored files match its ``compact_sha256`` is read without hashing
    its plain bytes; recompressed (same plain bytes) it is checked against ``files`` and gives
    the same rows; changed plain bytes are refused by that digest whatever the shortcut says."""
    import shutil

    from extrarlhf.datasets import battles
    from extrarlhf.core.errors import IntegrityError

    root = tmp_path / "copy"
    shutil.copytree(groups, root)
    store = SessionStore(root)
    entries = [e for e in store.read_catalog("packed") if e["status"] == "finished"]
    first = store.battle_dir("packed", entries[0]["battle_id"])
    plain_bytes = sum(len(trace_files.read(first / "v5", n)) for n in trace_files.COMPACT_FILES)
    hashed: list[int] = []
    real = hashlib.sha256

    def counting(data=b""):
        hashed.append(len(data))
        return real(data)

    monkeypatch.setattr(battles.hashlib, "sha256", counting)
    args = ("packed", entries[0]["battle_id"], entries[0]["index"], first, entries[0]["files"])
    fast = battles.battle_rows(*args, entries[0]["compact_sha256"])
    assert sum(hashed) < plain_bytes / 5, (sum(hashed), plain_bytes)  # the meta, the stored files, the start state
    hashed.clear()
    slow = battles.battle_rows(*args, None)
    assert sum(hashed) > plain_bytes
    assert fast["battle"] == slow["battle"] and fast["features"] == slow["features"]
    monkeypatch.undo()

    def decisions(name: str):
        result = materialize_v5_dataset("packed", name=name, sessions_dir=root, datasets_dir=tmp_path / "ds")
        return pq.read_table(tmp_path / "ds" / name / f"v{result['version']}" / "decisions.parquet")

    before = decisions("before")
    _recompressed(first / "v5", 19)  # the same plain bytes, other stored bytes: the shortcut does not apply
    assert decisions("recompressed").equals(before)
    assert check_sessions(root) == []  # a stale compact_sha256 is not a problem: check reads the plain digests
    plain = trace_files.read(first / "v5", "actions.jsonl")
    changed = plain.replace(b'"decision_index":0', b'"decision_index":0 ', 1)
    (first / "v5" / "actions.jsonl.zst").write_bytes(zstandard.ZstdCompressor(level=5).compress(changed))
    with pytest.raises(IntegrityError, match=r"actions.jsonl.zst: sha256 .* does not match its catalog digest"):
        decisions("changed")
    assert [p.name for p in (tmp_path / "ds" / "changed").iterdir()] == [".publish.lock"]  # nothing published
