"""materialize_v5_dataset on real session output: every row traced back to the trace files and
the engine, exclusions with reasons, the manifest, streaming row groups, determinism across
worker counts, and integrity failures of the source."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import engine
from extrarlhf.datasets import list_datasets, materialize_v5_dataset, validate_dataset
from extrarlhf.datasets.materialize import READ_CHUNK
from extrarlhf.datasets.tables import SCHEMAS
from extrarlhf.runtime.sessions import SessionStore
from tests.trace_helpers import read_trace, write_trace
from tests.datasets_helpers import (GREEDY, HUMAN, RANDOM, copy_sessions, expect_error, read_manifest, sha256,
                                    shared_sessions)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, Path]:
    datasets = tmp_path_factory.mktemp("mat") / "datasets"
    result = materialize_v5_dataset([GREEDY, RANDOM, HUMAN], "mixed", sessions_dir=shared_sessions(),
                                    datasets_dir=datasets, row_group_rows=300, workers=1)
    return datasets, result, Path(result["path"])


def test_result_and_layout(built) -> None:
    datasets, result, folder = built
    assert result["dataset_id"] == "mixed/v1" and result["version"] == 1 and result["replaced"] is False
    assert folder == (datasets / "mixed" / "v1").resolve()
    assert sorted(p.name for p in folder.iterdir()) == ["battles.parquet", "decisions.parquet", "excluded.parquet",
                                                        "manifest.json", "turns.parquet"]
    assert not [p for p in (datasets / "mixed").iterdir() if p.name.startswith((".tmp-", ".old-", ".trash-"))]
    assert validate_dataset("mixed", datasets_dir=datasets)["valid"] is True


def test_only_finished_clean_battles_are_in_the_training_tables(built) -> None:
    _, result, folder = built
    store = SessionStore(shared_sessions())
    eligible, excluded = {}, {}
    for group in (GREEDY, RANDOM, HUMAN):
        for e in store.read_catalog(group):
            clean = e["status"] == "finished" and not e["degraded"] and not e.get("omniscient_peeks")
            (eligible if clean else excluded)[e["battle_id"]] = e
    battles = pq.read_table(folder / "battles.parquet").to_pydict()
    assert sorted(battles["battle_id"]) == sorted(eligible)
    assert set(battles["status"]) == {"finished"} and not any(battles["degraded"])
    rows = pq.read_table(folder / "excluded.parquet").to_pylist()
    reasons = {r["battle_id"]: r["reason"] for r in rows}
    assert sorted(reasons) == sorted(excluded)
    human = {e["battle_id"]: e for e in store.read_catalog(HUMAN)}
    by_reason = Counter(reasons[b] for b in human if b in reasons)
    assert by_reason == {"abandoned": 1, "degraded": 1, "omniscient_peek": 1, "unfinished": 1}
    assert all(r["detail"] for r in rows)
    assert result["exclusions"] == {"count": 4, "by_reason": dict(sorted(by_reason.items())), "table": "excluded"}
    decisions = pq.read_table(folder / "decisions.parquet", columns=["battle_id"]).column("battle_id").to_pylist()
    assert set(decisions) == set(eligible) and not set(decisions) & set(excluded)
    assert len(decisions) == sum(e["decisions"] for e in eligible.values())
    turns = pq.read_table(folder / "turns.parquet", columns=["battle_id"]).column("battle_id").to_pylist()
    assert len(turns) == sum(e["turns"] for e in eligible.values())


def test_every_decision_row_matches_its_trace_and_the_engine(built) -> None:
    _, _, folder = built
    store = SessionStore(shared_sessions())
    table = pq.read_table(folder / "decisions.parquet")
    assert table.schema == SCHEMAS["decisions"]
    rows = {(r["battle_id"], r["decision_index"]): r for r in table.to_pylist()}
    checked = 0
    for group in (GREEDY, RANDOM, HUMAN):
        for battle in store.battles(group, statuses=("finished",)):
            meta = battle.meta()
            if meta["degraded"] or meta.get("omniscient_peeks"):
                continue
            winner = meta["result"]["winner"]
            for d in battle.decisions():
                row = rows[(battle.battle_id, d["decision_index"])]
                legal = [a["action_id"] for a in d["legal_actions"]]
                assert row["legal_action_ids"] == legal
                assert row["action_id"] == d["action_id"] == legal[row["action_index"]]
                obs = np.frombuffer(base64.b64decode(d["observation"]["data"]), dtype="<f4")
                assert np.array_equal(np.asarray(row["observation"], dtype=np.float32), obs)
                expected = engine.State.from_dict(d["state_before"]).action_features(legal)
                assert np.array_equal(np.asarray(row["legal_action_features"], dtype=np.float32), expected)
                assert (row["turn"], row["player"], row["group"]) == (d["turn"], d["player"], group)
                assert row["actor_type"] == d["actor"]["type"] and row["actor_spec"] == d["actor"]["spec"]
                other = meta["actors"]["p2" if d["player"] == 1 else "p1"]
                assert row["opponent_type"] == other["type"] and row["opponent_spec"] == other["spec"]
                own, opp = ("p1", "p2") if d["player"] == 1 else ("p2", "p1")
                assert row["own_deck_id"] == meta["deck_ids"][own] and row["opponent_deck_id"] == meta["deck_ids"][opp]
                assert row["battle_tag"] == meta["battle_tag"] and row["rationale"] == d["rationale"]
                assert row["state_hash_before"] == d["state_hash_before"] and row["obs_version"] == engine.OBS_VERSION
                assert row["winner"] == winner
                assert row["outcome"] == (0 if winner == 0 else (1 if winner == d["player"] else -1))
                checked += 1
    assert checked == table.num_rows
    # the human group's rationales made it through
    assert any(r["rationale"] and r["rationale"].startswith("I trade first") for r in rows.values())


def test_battles_and_turns_rows(built) -> None:
    _, _, folder = built
    store = SessionStore(shared_sessions())
    battles = {r["battle_id"]: r for r in pq.read_table(folder / "battles.parquet").to_pylist()}
    for group in (GREEDY, HUMAN):
        for entry in store.read_catalog(group):
            if entry["battle_id"] not in battles:
                continue
            row = battles[entry["battle_id"]]
            meta = store.battle(group, entry["battle_id"]).meta()
            assert (row["seed"], row["winner"], row["turns"], row["decisions"]) == (
                meta["seed"], meta["result"]["winner"], meta["result"]["turns"], meta["result"]["decisions"])
            assert row["p1_deck"] == meta["decks"]["p1"] and row["p2_deck_id"] == meta["deck_ids"]["p2"]
            assert row["actions_sha256"] == entry["files"]["actions.jsonl"] and row["replay_verified"] is True
            assert row["p1_type"] == meta["actors"]["p1"]["type"] and row["p2_spec"] == meta["actors"]["p2"]["spec"]
    turns = pq.read_table(folder / "turns.parquet").to_pylist()
    for t in turns[:50]:
        assert hashlib.sha256(t["state_start_json"].encode()).hexdigest() == t["state_start_hash"]
        assert hashlib.sha256(t["state_end_json"].encode()).hexdigest() == t["state_end_hash"]
        assert engine.State.from_dict(json.loads(t["state_end_json"])).state_hash() == t["state_end_hash"]
    per_battle = Counter(t["battle_id"] for t in turns)
    assert all(per_battle[b] == r["turns"] for b, r in battles.items())


def test_manifest(built) -> None:
    datasets, result, folder = built
    m = read_manifest(folder)
    assert (m["dataset_id"], m["name"], m["version"], m["kind"], m["schema_version"]) == (
        "mixed/v1", "mixed", 1, "v5_decisions", 2)
    assert m["obs_version"] == engine.OBS_VERSION and m["obs_dim"] == engine.OBS_DIM
    assert m["action_feature_dim"] == engine.ACTION_FEATURE_DIM
    assert m["code_version"]["engine"] == engine.ENGINE_VERSION and m["code_version"]["extrarlhf"]
    assert m["created_at"].endswith("Z")
    groups = {g["group"]: g for g in m["sources"]["groups"]}
    assert sorted(groups) == [GREEDY, HUMAN, RANDOM]
    for name, g in groups.items():
        assert g["catalog_sha256"] == sha256(shared_sessions() / name / "catalog.jsonl")
    assert groups[HUMAN]["by_status"] == {"abandoned": 1, "finished": 4, "unfinished": 1}
    for table, info in m["tables"].items():
        path = folder / info["file"]
        assert info["sha256"] == m["files"][info["file"]] == sha256(path)
        assert info["rows"] == m["row_counts"][table] == pq.ParquetFile(path).metadata.num_rows
        assert [c["name"] for c in info["columns"]] == SCHEMAS[table].names
        assert all(c["description"] and c["type"] for c in info["columns"])
    assert m["row_counts"] == result["row_counts"]
    r = m["readiness"]
    assert r["training_ready_scope"] == "v5_policy_only" and r["training_ready"] == r["v5_policy_training_ready"]
    assert r["evidence"]["eligible_battles"] == m["row_counts"]["battles"]
    assert r["evidence"]["eligible_decisions"] == m["row_counts"]["decisions"]
    assert r["metronome_ready"] is False and r["timestamp_ready"] is False and r["training_ready_standard"] is False


def test_row_groups_are_written_incrementally(built) -> None:
    """Streaming: row groups of about row_group_rows decisions, each flushed as it filled."""
    _, _, folder = built
    meta = pq.ParquetFile(folder / "decisions.parquet").metadata
    sizes = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    assert meta.num_row_groups >= 5
    # a row group closes at the first chunk boundary (8 battles, < 1200 decisions) after 300 rows
    assert all(300 <= n < 300 + 1200 for n in sizes[:-1]) and sizes[-1] <= 300 + 1200


def test_same_bytes_whatever_the_workers(tmp_path: Path) -> None:
    one = materialize_v5_dataset([GREEDY], "d", sessions_dir=shared_sessions(), datasets_dir=tmp_path / "a",
                                 workers=1)
    for workers in (2, 3):
        other = materialize_v5_dataset([GREEDY], "d", sessions_dir=shared_sessions(),
                                       datasets_dir=tmp_path / str(workers), workers=workers)
        for name in ("decisions.parquet", "turns.parquet", "battles.parquet", "excluded.parquet"):
            assert sha256(Path(one["path"]) / name) == sha256(Path(other["path"]) / name), (workers, name)


def test_a_materialize_worker_reads_traces_without_importing_pyarrow() -> None:
    """Its task (READ_CHUNK) reads traces into rows; the caller makes the Arrow batches. pyarrow (and
    the pandas it imports on a first pa.array) would cost each worker about 0.3 CPU-s to start."""
    module = READ_CHUNK.partition(":")[0]
    script = f"import sys, extrarlhf.core.procpool_worker, {module}; print(sorted(m for m in ('pyarrow', 'pandas') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr[-2000:]


def test_materializing_imports_no_pandas(tmp_path: Path) -> None:
    """pa.array and Array.to_numpy import pandas on a first call (0.15 CPU-s, and with its own
    imports about 0.3 s of a CLI run): the tables are built from buffers instead, and this
    process's dataset is the one the suite's other tests check byte for byte."""
    script = ("import sys; from extrarlhf.datasets import materialize_v5_dataset; "
              f"materialize_v5_dataset([{GREEDY!r}], 'd', sessions_dir={str(shared_sessions())!r}, "
              f"datasets_dir={str(tmp_path)!r}, workers=1); print('pandas' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "False", done.stderr[-2000:]
    reference = materialize_v5_dataset([GREEDY], "d", sessions_dir=shared_sessions(), datasets_dir=tmp_path / "r",
                                       workers=1)
    for name in ("decisions.parquet", "turns.parquet", "battles.parquet", "excluded.parquet"):
        assert sha256(tmp_path / "d" / "v1" / name) == sha256(Path(reference["path"]) / name), name


FLAT_CASES = [
    (["a", "bé", None, ""], pa.string()), ([], pa.string()), ([1, -2, None, 127], pa.int8()), ([1, 2], pa.int16()),
    ([2**40, None], pa.int64()), ([True, False, None] * 3, pa.bool_()), ([list(range(30)), tuple(range(30))],
                                                                          pa.list_(pa.int16(), 30)),
]
FLAT_REFUSED = [([1, True], pa.int8()), ([300], pa.int8()), (["a", 1], pa.string()), (["\ud800"], pa.string()),
                ([[1] * 29], pa.list_(pa.int16(), 30)), ([2**70], pa.int64()), ([None], pa.list_(pa.int16(), 30))]


@pytest.mark.parametrize("values,typ", FLAT_CASES + FLAT_REFUSED, ids=[f"{t}-{i}" for i, (_, t) in
                                                                       enumerate(FLAT_CASES + FLAT_REFUSED)])
def test_flat_arrays_are_what_pa_array_makes_and_refuse_what_it_refuses(values: list, typ: pa.DataType) -> None:
    from extrarlhf.datasets.row_batches import flat_array

    def outcome(build):
        try:
            array = build(values, typ)
        except Exception as exc:  # noqa: BLE001 - the same error, whichever builds it
            return type(exc), str(exc)
        return array, array.nbytes, array.null_count

    ours, theirs = outcome(flat_array), outcome(pa.array)
    if isinstance(theirs[0], pa.Array):
        assert ours[0].equals(theirs[0]) and ours[1:] == theirs[1:]
    else:
        assert ours == theirs


@pytest.mark.parametrize("local", [False, True])
def test_the_worker_pool_yields_in_order_and_reports_a_dead_worker(local: bool) -> None:
    """Chunks come back in order whoever ran them; a worker process that dies (here: a task it
    cannot even unpack) fails the map with a clear error instead of hanging."""
    from extrarlhf.core.procpool import WorkerPool
    from extrarlhf.datasets.battles import read_battles

    store = SessionStore(shared_sessions())
    tasks = [(GREEDY, b.battle_id, b.entry["index"], str(b.path), b.entry["files"], b.entry.get("compact_sha256"))
             for b in store.battles(GREEDY)]
    chunks = [tasks[i:i + 2] for i in range(0, len(tasks), 2)]
    with WorkerPool(2, READ_CHUNK) as pool:
        got = list(pool.map(iter(chunks), local=read_battles if local else None))
    assert [chunk for chunk, _ in got] == chunks
    assert all(outcomes == [("ok", None)] * len(chunk) for chunk, (outcomes, _) in got)
    assert [[r["battle"]["battle_id"] for r in rows] for _, (_, rows) in got] == [[t[1] for t in c] for c in chunks]
    with pytest.raises(RuntimeError, match=r"worker process \d+ \(extrarlhf.datasets.battles:read_battles\) died \(exit code"):
        with WorkerPool(1, READ_CHUNK) as pool:
            list(pool.map(iter([chunks[0], [("not a task",)], *chunks[1:]]), local=read_battles if local else None))


def test_a_tampered_trace_stops_the_materialization(tmp_path: Path) -> None:
    sessions = copy_sessions(tmp_path / "sessions")
    store = SessionStore(sessions)
    victim = list(store.battles(GREEDY))[3]
    actions = write_trace(victim.path, "actions.jsonl",
                          read_trace(victim.path, "actions.jsonl").replace(b'"turn":1,', b'"turn":2,', 1))
    datasets = tmp_path / "datasets"
    err = expect_error("integrity_error", materialize_v5_dataset, [GREEDY], "t", sessions_dir=sessions,
                       datasets_dir=datasets)
    assert str(actions) in str(err) and "catalog digest" in str(err) and "exclude_corrupt" in str(err)
    assert [p.name for p in (datasets / "t").iterdir()] == [".publish.lock"]  # nothing published, no temp left
    assert list_datasets(datasets_dir=datasets)["datasets"] == []
    result = materialize_v5_dataset([GREEDY], "t", sessions_dir=sessions, datasets_dir=datasets,
                                    exclude_corrupt=True)
    excluded = pq.read_table(Path(result["path"]) / "excluded.parquet").to_pylist()
    assert [(r["battle_id"], r["reason"]) for r in excluded] == [(victim.battle_id, "integrity")]
    assert "catalog digest" in excluded[0]["detail"]
    assert result["row_counts"]["battles"] == 23


def test_an_illegal_recorded_action_is_an_integrity_error(tmp_path: Path) -> None:
    """A trace whose bytes match the catalog but whose chosen action is not legal (a writer bug)."""
    sessions = copy_sessions(tmp_path / "sessions")
    store = SessionStore(sessions)
    victim = list(store.battles(GREEDY))[0]
    lines = read_trace(victim.path, "actions.jsonl").splitlines(keepends=True)
    record = json.loads(lines[0])
    bad = next(a for a in range(engine.ACTION_SPACE_SIZE) if a not in [x["action_id"] for x in record["legal_actions"]])
    lines[0] = lines[0].replace(f'"action_id":{record["action_id"]},"action"'.encode(),
                                f'"action_id":{bad},"action"'.encode(), 1)
    write_trace(victim.path, "actions.jsonl", b"".join(lines))
    # re-record the digest (of the plain bytes), as a buggy writer would have
    catalog = store.group_dir(GREEDY) / "catalog.jsonl"
    text = catalog.read_text().replace(victim.entry["files"]["actions.jsonl"],
                                       hashlib.sha256(b"".join(lines)).hexdigest())
    catalog.write_text(text)
    err = expect_error("integrity_error", materialize_v5_dataset, [GREEDY], "t", sessions_dir=sessions,
                       datasets_dir=tmp_path / "datasets")
    assert f"chosen action {bad} is not among the legal actions" in str(err)


def test_refusals(tmp_path: Path) -> None:
    sessions = shared_sessions()
    err = expect_error("not_found", materialize_v5_dataset, ["nope"], "x", sessions_dir=sessions,
                       datasets_dir=tmp_path)
    assert "nope" in str(err)
    expect_error("invalid_argument", materialize_v5_dataset, [GREEDY, GREEDY], "x", sessions_dir=sessions,
                 datasets_dir=tmp_path)
    expect_error("invalid_argument", materialize_v5_dataset, [], "x", sessions_dir=sessions, datasets_dir=tmp_path)
    expect_error("invalid_argument", materialize_v5_dataset, ["../g"], "x", sessions_dir=sessions,
                 datasets_dir=tmp_path)
    expect_error("invalid_argument", materialize_v5_dataset, [GREEDY], "x", sessions_dir=sessions,
                 datasets_dir=tmp_path, workers=0)
    expect_error("invalid_argument", materialize_v5_dataset, [GREEDY], "x", sessions_dir=sessions,
                 datasets_dir=tmp_path, policy={"min_v5_battles": -1})
    expect_error("invalid_argument", materialize_v5_dataset, [GREEDY], "x", sessions_dir=sessions,
                 datasets_dir=tmp_path, policy={"min_bogus": 1})
    assert not (tmp_path / "x").exists()


def test_the_document_names_every_column_manifest_field_and_failure_code(built) -> None:
    from extrarlhf.datasets.tables import TABLES
    from tests.datasets_helpers import ROOT

    text = (ROOT / "docs" / "data-format.md").read_text(encoding="utf-8")
    section = text[text.index("## 10. Datasets"):]
    for table, columns in TABLES.items():
        assert f"#### `{table}`" in section, table
        for name, *_ in columns:
            assert f"| `{name}` |" in section, (table, name)
    _, _, folder = built
    for key in read_manifest(folder):
        assert f"`{key}`" in section, key
    import re

    import extrarlhf.datasets.validate as v
    for code in set(re.findall(r'report\.add\("([a-z_]+)"', Path(v.__file__).read_text())):
        assert f"`{code}`" in section, code


def _rewrite(store: SessionStore, victim, name: str, edit) -> Path:
    """Rewrite one trace file of ``victim`` with ``edit(lines) -> lines`` and re-record its
    digest in the catalog, as a buggy writer would have: the bytes match, the content is wrong.
    Returns the file's logical path (messages about its records name it, with plain line numbers)."""
    old = hashlib.sha256(read_trace(victim.path, name)).hexdigest()
    data = b"".join(edit(read_trace(victim.path, name).splitlines(keepends=True)))
    write_trace(victim.path, name, data)
    catalog = store.group_dir(GREEDY) / "catalog.jsonl"
    catalog.write_text(catalog.read_text().replace(old, hashlib.sha256(data).hexdigest()))
    return victim.path / "v5" / name


def _second_line(change):
    return lambda lines: [lines[0], change(lines[1]), *lines[2:]]


WRITER_BUGS = {
    "not_json": ("actions.jsonl", _second_line(lambda line: line[:40] + b"\n"), "line 2 is not valid JSON (Input data was truncated)"),
    "wrong_type": ("actions.jsonl", _second_line(lambda line: line.replace(b'"turn":', b'"turn":"x",' b'"_":', 1)),
                   "line 2: Expected `int`, got `str` - at `$.turn`"),
    "missing_field": ("actions.jsonl", _second_line(lambda line: line.replace(b'"player":', b'"_player":', 1)),
                      "line 2: Object missing required field `player`"),
    "state_not_its_hash": ("actions.jsonl", _second_line(lambda line: line.replace(b'"next_uid":', b'"next_uid":9', 1)),
                           "decision 1: state_before does not match its recorded state_hash_before"),
    "bad_observation": ("actions.jsonl", _second_line(lambda line: line.replace(b'"data":"', b'"data":"!', 1)),
                        "decision 1: observation data is not the base64 of 476 float32 values"),
    "turn_state_not_its_hash": ("turns.jsonl", _second_line(lambda line: line.replace(b'"next_uid":', b'"next_uid":9', 1)),
                                "turns.jsonl line 2: state_start does not match its recorded state_start_hash"),
}


@pytest.mark.parametrize("case", sorted(WRITER_BUGS))
def test_a_trace_whose_content_is_wrong_is_an_integrity_error(tmp_path: Path, case: str) -> None:
    """Bytes that match the catalog but records that do not hold up: each named precisely, nothing
    published; with exclude_corrupt the battle is excluded with that message."""
    name, edit, message = WRITER_BUGS[case]
    sessions = copy_sessions(tmp_path / "sessions")
    store = SessionStore(sessions)
    victim = list(store.battles(GREEDY))[2]
    path = _rewrite(store, victim, name, edit)
    datasets = tmp_path / "datasets"
    err = expect_error("integrity_error", materialize_v5_dataset, [GREEDY], "t", sessions_dir=sessions,
                       datasets_dir=datasets)
    assert str(path) in str(err) and message in str(err), str(err)
    assert list_datasets(datasets_dir=datasets)["datasets"] == []
    result = materialize_v5_dataset([GREEDY], "t", sessions_dir=sessions, datasets_dir=datasets,
                                    exclude_corrupt=True, workers=2)
    excluded = pq.read_table(Path(result["path"]) / "excluded.parquet").to_pylist()
    assert [(r["battle_id"], r["reason"]) for r in excluded] == [(victim.battle_id, "integrity")]
    assert message in excluded[0]["detail"]


def test_a_reformatted_trace_gives_the_same_rows(tmp_path: Path) -> None:
    """Embedded states need not be byte-canonical: a trace re-serialized with other key order and
    spacing (same values) materializes to exactly the same tables."""
    sessions = copy_sessions(tmp_path / "sessions")
    store = SessionStore(sessions)
    victim = list(store.battles(GREEDY))[1]

    def reformat(lines: list[bytes]) -> list[bytes]:
        out = []
        for line in lines:
            record = json.loads(line)
            out.append(json.dumps(dict(reversed(list(record.items()))), indent=None, separators=(", ", ": "))
                       .encode() + b"\n")
        return out

    before = materialize_v5_dataset([GREEDY], "a", sessions_dir=sessions, datasets_dir=tmp_path / "a", workers=1)
    for name in ("actions.jsonl", "turns.jsonl"):
        _rewrite(store, victim, name, reformat)
    after = materialize_v5_dataset([GREEDY], "a", sessions_dir=sessions, datasets_dir=tmp_path / "b", workers=1)
    for table in ("decisions", "turns"):
        assert (pq.read_table(Path(before["path"]) / f"{table}.parquet")
                .equals(pq.read_table(Path(after["path"]) / f"{table}.parquet"))), table


def test_a_failing_chunk_iterator_is_raised_in_order_not_hung():
    """The caller's iterator runs on the pool's threads too: its error reaches the caller after
    the chunks before it (a database read dropping mid-export must not hang the map)."""
    import threading

    from extrarlhf.core.procpool import map_chunks

    def items():
        yield from range(24)
        raise RuntimeError("the source failed at item 24")

    outcome: dict = {}

    def run() -> None:
        seen = []
        try:
            for chunk, _result in map_chunks(items(), 2, 8, task="builtins:len"):
                seen.append(chunk)
        except RuntimeError as exc:
            outcome["error"], outcome["seen"] = str(exc), seen

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout=60)
    assert not thread.is_alive(), "the map hung"
    assert outcome["error"] == "the source failed at item 24"
    assert [c[0] for c in outcome["seen"]] == [0, 8, 16]
