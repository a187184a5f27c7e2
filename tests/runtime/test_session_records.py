"""Damaged session records (issue 14, items 1 and 3): every reader of a catalog line, a group
manifest and summary.json names the file, line and field; nothing acts on a damaged record; a
resume never plays over an intact trace (it rebuilds the line from the trace, or stops with the
reason); check_sessions lists every problem and repairs what is provably safe."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any, Callable

import pytest

from extrarlhf.checkpoints.registry import CheckpointRegistry
from extrarlhf.core.errors import RLHFError
from extrarlhf.runtime.match import start_match
from extrarlhf.runtime.series import run_series
from extrarlhf.runtime.sessions import TRACE_FILES, SessionStore, check_sessions
from tests.trace_helpers import read_trace, trace_path, write_trace
from tests import onnx_factory

SPECS = {"p1_model": "baseline:random", "opponent": "baseline:random"}


# --------------------------------------------------------------------------- helpers
def expect_error(code: str, fn: Callable, *args: Any, **kwargs: Any) -> RLHFError:
    with pytest.raises(RLHFError) as info:
        fn(*args, **kwargs)
    assert info.value.code == code, f"code {info.value.code!r} != {code!r}: {info.value}"
    assert "Traceback" not in str(info.value)
    return info.value


def catalog_lines(root: Path, group: str) -> list[str]:
    return (root / group / "catalog.jsonl").read_text(encoding="utf-8").splitlines()


def write_lines(root: Path, group: str, lines: list[str], newline_at_end: bool = True) -> None:
    (root / group / "catalog.jsonl").write_text("\n".join(lines) + ("\n" if newline_at_end else ""),
                                                encoding="utf-8")


def final_line_number(lines: list[str], battle_index: int) -> int:
    """1-based number of the final catalog line of battle ``battle_index``."""
    for number, line in enumerate(lines, 1):
        entry = json.loads(line)
        if entry["index"] == battle_index and entry["status"] != "started":
            return number
    raise AssertionError(f"no final line for battle {battle_index}")


def trace_state(root: Path, group: str, battle_id: str) -> dict[str, tuple[bytes, int]]:
    """Bytes and inode of each trace file (an inode change means the file was rewritten)."""
    battle = root / group / "battles" / battle_id
    return {name: (read_trace(battle, name), os.stat(trace_path(battle, name)).st_ino) for name in TRACE_FILES}


def series(root: Path, group: str = "g", n: int = 4, **kw: Any) -> dict[str, Any]:
    return run_series(root, group, n, **{**SPECS, **kw})


# --------------------------------------------------------------------------- the case
def test_a_damaged_middle_line_is_reported_and_a_resume_never_replays_the_intact_trace(tmp_path: Path) -> None:
    """Issue 14 item 1, reproduced: the final line of battle 1 (a middle line) is damaged. Before
    the fix, the battle silently became `unfinished` and a resume re-played it, replacing its
    intact trace on disk."""
    root = tmp_path / "s"
    series(root)
    store = SessionStore(root)
    battle = store.read_catalog("g")[1]
    lines = catalog_lines(root, "g")
    number = final_line_number(lines, 1)
    assert 1 < number < len(lines)  # a middle line
    original = json.loads(lines[number - 1])
    lines[number - 1] = lines[number - 1][:40]  # cut in the middle of the record
    write_lines(root, "g", lines)
    before = trace_state(root, "g", battle["battle_id"])

    # readers name the file and the line, and read nothing past it
    for reader in (store.read_catalog, store.compute_summary):
        error = expect_error("corrupt_record", reader, "g")
        assert error.details == {"path": str(root / "g" / "catalog.jsonl"), "line": number, "field": None}
        assert f"catalog.jsonl line {number}" in str(error) and "not valid JSON" in str(error)

    # check_sessions lists the damaged line and the trace it can rebuild the line from
    problems = check_sessions(root)
    assert [(p["code"], p["line"], p["repairable"], p["repaired"]) for p in problems] == [
        ("corrupt_record", number, True, False), ("uncatalogued_trace", None, True, False)]
    assert problems[1]["path"] == str(root / "g" / "battles" / battle["battle_id"])
    assert catalog_lines(root, "g")[number - 1] == lines[number - 1]  # read-only

    # the resume rebuilds the line from the trace: nothing is played, the trace is untouched
    result = series(root)
    assert (result["ran"], result["skipped"], result["repaired"], result["dropped_lines"]) == (0, 4, 1, 1)
    assert trace_state(root, "g", battle["battle_id"]) == before
    entries = store.read_catalog("g")
    assert [e["status"] for e in entries] == ["finished"] * 4
    rebuilt = json.loads(catalog_lines(root, "g")[-1])
    assert rebuilt == original  # every field of the final line came back from the trace
    assert entries[1] == original
    log = [json.loads(line) for line in (root / "g" / "catalog-repairs.jsonl").read_text().splitlines()]
    assert [r["action"] for r in log] == ["dropped", "rebuilt_from_trace"]
    assert log[0]["line"] == number and log[0]["text"] == lines[number - 1]  # the damaged text is kept
    assert log[1]["entry"] == {k: v for k, v in original.items() if k != "schema_version"}
    assert check_sessions(root) == []


def test_the_rebuilt_line_equals_the_written_one_for_every_status_and_actor(tmp_path: Path) -> None:
    """finished / abandoned / crashed, a model with a weights hash, a degraded battle, an
    omniscient peek and a codename: the trace's meta + sha256 give back every field."""
    root, ck = tmp_path / "s", tmp_path / "ck"
    registry = CheckpointRegistry(ck)
    registry.register("scripted", onnx_factory.save(onnx_factory.v5_model(), tmp_path / "m.onnx"), "v5")
    registry.register("broken", onnx_factory.save(onnx_factory.v5_nan(), tmp_path / "b.onnx"), "v5")
    store = SessionStore(root)
    run_series(root, "models", 2, p1_model="scripted", opponent="broken", codename="Falcon", checkpoints_dir=ck)
    finished = start_match(store, "llm", "llm", "baseline:random", seed=3, codename="Heron")
    finished.omniscient_view()
    while not finished.done:
        finished.submit(finished.legal_actions()[-1]["action_id"], "last action")
    finished.finish()
    start_match(store, "llm", "llm", "baseline:random", seed=4).abandon("stopped early")
    start_match(store, "llm", "llm", "baseline:random", seed=5).crash(RuntimeError("policy bug"))
    checked = 0
    for group in ("models", "llm"):
        for line in catalog_lines(root, group):
            entry = json.loads(line)
            if entry["status"] == "started":
                continue
            entry.pop("schema_version")
            assert store.rebuild_entry(group, entry["battle_id"]) == entry
            # the writer's bytes (they hash to the line's digests): decoded for the line's fields only, the same line
            assert store.rebuild_entry(group, entry["battle_id"], written=entry["files"]) == entry
            checked += 1
    statuses = {e["status"] for g in ("models", "llm") for e in store.read_catalog(g)}
    assert checked == 5 and statuses == {"finished", "abandoned", "crashed"}
    assert any(e["weights_hashes"] for e in store.read_catalog("models"))
    assert any(e["degraded"] for e in store.read_catalog("models"))
    assert store.read_catalog("llm")[0]["omniscient_peeks"] == 1


# --------------------------------------------------------------------------- fields named precisely
def _set(key: str, value: Any) -> Callable[[dict], None]:
    return lambda e: e.__setitem__(key, value)


def _drop(key: str) -> Callable[[dict], None]:
    return lambda e: e.pop(key)


CATALOG_DAMAGE = [
    ("index as text", _set("index", "1"), "index", "must be an integer"),
    ("missing seed", _drop("seed"), "seed", "is missing"),
    ("unknown status", _set("status", "done"), "status", "not one of started, finished, abandoned, crashed"),
    ("status as a number", _set("status", 3), "status", "not one of"),
    ("winner as text", _set("winner", "2"), "winner", "must be one of 0, 1, 2 for a finished battle"),
    ("finished without winner", _set("winner", None), "winner", "for a finished battle"),
    ("decisions as a boolean", _set("decisions", True), "decisions", "got true (a boolean)"),
    ("negative turns", _set("turns", -1), "turns", "must be an integer >= 0"),
    ("degraded as text", _set("degraded", "no"), "degraded", "must be true or false"),
    ("one deck id", _set("deck_ids", ["d-0123456789abcdef"]), "deck_ids", "must list 2 deck ids"),
    ("files missing a file", lambda e: e["files"].pop("turns.jsonl"), "files.turns.jsonl", "is missing"),
    ("files not a digest", lambda e: e["files"].__setitem__("meta.jsonl", "abc"), "files.meta.jsonl",
     "sha256 hex digest"),
    ("files null on a final line", _set("files", None), "files", "must be an object"),
    ("compact_sha256 not a digest", _set("compact_sha256", "ABC"), "compact_sha256", "sha256 hex digest"),
    ("compact_sha256 null", _set("compact_sha256", None), "compact_sha256", "sha256 hex digest"),
    ("bad battle id", _set("battle_id", "../../etc"), "battle_id", "a battle id like"),
    ("schema_version missing", _drop("schema_version"), "schema_version", "is missing"),
    ("schema_version as text", _set("schema_version", "1"), "schema_version", "must be an integer"),
]


@pytest.mark.parametrize("label,damage,field,words", CATALOG_DAMAGE, ids=[c[0] for c in CATALOG_DAMAGE])
def test_a_malformed_catalog_line_names_its_field(tmp_path: Path, label: str, damage: Callable, field: str,
                                                  words: str) -> None:
    root = tmp_path / "s"
    series(root, n=2)
    lines = catalog_lines(root, "g")
    number = final_line_number(lines, 1)
    entry = json.loads(lines[number - 1])
    damage(entry)
    lines[number - 1] = json.dumps(entry)
    write_lines(root, "g", lines)
    store = SessionStore(root)
    error = expect_error("corrupt_record", store.read_catalog, "g")
    assert error.details == {"path": str(root / "g" / "catalog.jsonl"), "line": number, "field": field}
    assert f"line {number}: field {field!r}" in str(error) and words in str(error)
    assert "check_sessions" in str(error)  # says what to do
    # the resume repairs it from the intact trace and plays nothing again
    result = series(root, n=2)
    assert (result["ran"], result["repaired"]) == (0, 1)
    assert [e["status"] for e in store.read_catalog("g")] == ["finished", "finished"]


@pytest.mark.parametrize("shape", ["[1, 2]", "\"text\"", "null", "42"])
def test_a_catalog_line_that_is_not_an_object_is_named(tmp_path: Path, shape: str) -> None:
    root = tmp_path / "s"
    series(root, n=2)
    lines = catalog_lines(root, "g")
    lines.insert(1, shape)
    write_lines(root, "g", lines)
    error = expect_error("corrupt_record", SessionStore(root).read_catalog, "g")
    assert error.details["line"] == 2 and error.details["field"] is None and "not a JSON object" in str(error)


def test_a_line_of_another_schema_version_is_refused_and_never_dropped(tmp_path: Path) -> None:
    root = tmp_path / "s"
    series(root, n=2)
    lines = catalog_lines(root, "g")
    number = final_line_number(lines, 0)
    entry = json.loads(lines[number - 1])
    lines[number - 1] = json.dumps({**entry, "schema_version": 2})
    write_lines(root, "g", lines)
    before = (root / "g" / "catalog.jsonl").read_bytes()
    error = expect_error("unsupported_schema", SessionStore(root).read_catalog, "g")
    assert f"line {number}" in str(error) and "schema_version 2" in str(error)
    error = expect_error("corrupt_record", series, root, n=2)  # not provably safe: stops with the reason
    assert "schema_version this ExtraRLHF does not read" in str(error) and "nothing was played" in str(error)
    assert (root / "g" / "catalog.jsonl").read_bytes() == before
    problems = check_sessions(root, repair=True)
    assert [(p["code"], p["repairable"], p["repaired"]) for p in problems] == [
        ("unsupported_schema", False, False), ("uncatalogued_trace", False, False)]
    assert (root / "g" / "catalog.jsonl").read_bytes() == before


MANIFEST_DAMAGE = [
    ("missing seeds", _drop("seeds"), "seeds", "is missing"),
    ("configuration not an object", _set("configuration", []), "configuration", "must be an object"),
    ("opponent spec a number", lambda m: m["configuration"]["opponent"].__setitem__("spec", 5),
     "configuration.opponent.spec", "must be text"),
    ("unknown actor type", lambda m: m["configuration"].__setitem__("p1_actor_type", "robot"),
     "configuration.p1_actor_type", "not one of human, llm, rl"),
    ("seed mode unknown", lambda m: m["seeds"].__setitem__("mode", "random"), "seeds.mode", "not one of"),
    ("n_battles as text", lambda m: m["seeds"].__setitem__("n_battles", "4"), "seeds.n_battles",
     "must be an integer >= 1"),
    ("created_at missing", _drop("created_at"), "created_at", "is missing"),
]


@pytest.mark.parametrize("label,damage,field,words", MANIFEST_DAMAGE, ids=[c[0] for c in MANIFEST_DAMAGE])
def test_a_malformed_manifest_names_its_field_and_stops_every_writer(tmp_path: Path, label: str, damage: Callable,
                                                                     field: str, words: str) -> None:
    root = tmp_path / "s"
    series(root, n=2)
    path = root / "g" / "manifest.json"
    manifest = json.loads(path.read_text())
    damage(manifest)
    path.write_text(json.dumps(manifest))
    error = expect_error("corrupt_record", SessionStore(root).read_manifest, "g")
    assert error.details == {"path": str(path), "line": None, "field": field}
    assert f"field {field!r}" in str(error) and words in str(error) and "restore it" in str(error)
    catalog = (root / "g" / "catalog.jsonl").read_bytes()
    expect_error("corrupt_record", series, root, n=3)
    assert (root / "g" / "catalog.jsonl").read_bytes() == catalog  # nothing was played
    [item] = check_sessions(root, repair=True)
    assert (item["code"], item["field"], item["repairable"], item["repaired"]) == ("corrupt_record", field, False,
                                                                                  False)


def test_a_manifest_that_is_not_json_is_named(tmp_path: Path) -> None:
    root = tmp_path / "s"
    series(root, n=1)
    (root / "g" / "manifest.json").write_text("{\"schema_version\": 1, ")
    error = expect_error("corrupt_record", SessionStore(root).read_manifest, "g")
    assert error.details["field"] is None and "not valid JSON" in str(error) and "manifest.json" in str(error)


SUMMARY_DAMAGE = [
    ("missing by_status", _drop("by_status"), "by_status", "is missing"),
    ("battles as text", _set("battles", "4"), "battles", "must be an integer"),
    ("a status count missing", lambda s: s["by_status"].pop("unfinished"), "by_status.unfinished", "is missing"),
    ("readiness flag as text", lambda s: s["readiness"].__setitem__("v5_policy_training_ready", "yes"),
     "readiness.v5_policy_training_ready", "must be true or false"),
    ("results missing", _drop("results"), "results", "is missing"),
]


@pytest.mark.parametrize("label,damage,field,words", SUMMARY_DAMAGE, ids=[c[0] for c in SUMMARY_DAMAGE])
def test_a_malformed_summary_names_its_field_and_is_recomputed_by_a_repair(tmp_path: Path, label: str,
                                                                            damage: Callable, field: str,
                                                                            words: str) -> None:
    root = tmp_path / "s"
    series(root, n=2)
    path = root / "g" / "summary.json"
    summary = json.loads(path.read_text())
    damage(summary)
    path.write_text(json.dumps(summary))
    store = SessionStore(root)
    error = expect_error("corrupt_record", store.read_summary, "g")
    assert error.details == {"path": str(path), "line": None, "field": field}
    assert words in str(error) and "recomputed" in str(error)
    [item] = check_sessions(root)
    assert (item["code"], item["field"], item["repairable"], item["repaired"]) == ("corrupt_record", field, True,
                                                                                  False)
    [item] = check_sessions(root, repair=True)
    assert item["repaired"] is True
    assert store.read_summary("g")["by_status"]["finished"] == 2
    assert check_sessions(root) == []


# --------------------------------------------------------------------------- torn tails and damaged traces
def test_a_torn_last_line_is_skipped_by_readers_and_repaired_from_the_trace_by_a_resume(tmp_path: Path) -> None:
    root = tmp_path / "s"
    series(root)
    lines = catalog_lines(root, "g")
    last = json.loads(lines[-1])
    assert last["status"] == "finished"
    lines[-1] = lines[-1][: len(lines[-1]) // 2]  # a writer killed mid-append: no newline at the end
    write_lines(root, "g", lines, newline_at_end=False)
    store = SessionStore(root)
    statuses = {e["battle_id"]: e["status"] for e in store.read_catalog("g")}  # an append in progress looks so
    assert statuses[last["battle_id"]] == "unfinished"
    problems = check_sessions(root)
    assert [(p["code"], p["line"], p["repairable"]) for p in problems] == [
        ("corrupt_record", len(lines), True), ("uncatalogued_trace", None, True)]
    assert "ends in the middle of this line" in problems[0]["message"]
    before = trace_state(root, "g", last["battle_id"])
    result = series(root)
    assert (result["ran"], result["repaired"]) == (0, 1)
    assert trace_state(root, "g", last["battle_id"]) == before
    assert store.read_catalog("g")[last["index"]] == last


def test_a_damaged_trace_without_its_final_line_stops_the_resume_with_the_reason(tmp_path: Path) -> None:
    root = tmp_path / "s"
    series(root)
    store = SessionStore(root)
    battle_id = store.read_catalog("g")[2]["battle_id"]
    lines = catalog_lines(root, "g")
    number = final_line_number(lines, 2)
    lines[number - 1] = "{garbage"
    write_lines(root, "g", lines)
    battle = root / "g" / "battles" / battle_id
    actions = write_trace(battle, "actions.jsonl", read_trace(battle, "actions.jsonl")[:-200])  # damaged too
    catalog, trace = (root / "g" / "catalog.jsonl").read_bytes(), actions.read_bytes()
    error = expect_error("corrupt_record", series, root)
    message = str(error)
    assert "not provably safe" in message and battle_id in message and "actions.jsonl" in message
    assert "nothing was overwritten" in message and "delete that folder" in message
    assert (root / "g" / "catalog.jsonl").read_bytes() == catalog and actions.read_bytes() == trace
    problems = check_sessions(root, repair=True)
    assert {p["code"] for p in problems} == {"corrupt_record"}
    assert all(not p["repairable"] and not p["repaired"] for p in problems)
    assert any(p["path"] == str(actions) for p in problems)
    assert (root / "g" / "catalog.jsonl").read_bytes() == catalog
    # deleting the damaged folder is the documented way out: the battle is then played again
    shutil.rmtree(root / "g" / "battles" / battle_id)
    result = series(root)
    assert (result["ran"], result["repaired"], result["dropped_lines"]) == (1, 0, 1)
    assert [e["status"] for e in store.read_catalog("g")] == ["finished"] * 4


def test_check_sessions_reports_modified_and_missing_traces_and_never_repairs_them(tmp_path: Path) -> None:
    root = tmp_path / "s"
    series(root, n=3)
    store = SessionStore(root)
    entries = store.read_catalog("g")
    battle = root / "g" / "battles" / entries[0]["battle_id"]
    turns = write_trace(battle, "turns.jsonl", read_trace(battle, "turns.jsonl").replace(b'"turn":1', b'"turn":9', 1))
    missing = root / "g" / "battles" / entries[2]["battle_id"]
    missing.rename(tmp_path / "elsewhere")
    problems = check_sessions(root, repair=True)
    assert [(p["code"], p["path"], p["repairable"], p["repaired"]) for p in problems] == [
        ("integrity_error", str(turns), False, False), ("integrity_error", str(missing), False, False)]
    assert "does not match the sha256" in problems[0]["message"] and "is missing" in problems[1]["message"]
    assert check_sessions(root, hashes=False)[0]["path"] == str(missing)  # without hashes only the folder


def test_check_sessions_reports_each_group_and_the_codename_index(tmp_path: Path) -> None:
    root = tmp_path / "s"
    for group in ("a", "b", "c"):
        series(root, group, n=1)
    (root / "b" / "summary.json").write_text("[]")
    (root / "agents_index.json").write_text("{not json")
    problems = check_sessions(root)
    assert [(p["group"], p["code"]) for p in problems] == [(None, "corrupt_index"), ("b", "corrupt_record")]
    assert check_sessions(tmp_path / "absent") == []


def test_check_sessions_repair_runs_on_every_repairable_group(tmp_path: Path) -> None:
    root = tmp_path / "s"
    series(root, "one", n=3)
    series(root, "two", n=3)
    for group in ("one", "two"):
        lines = catalog_lines(root, group)
        number = final_line_number(lines, 1)
        lines[number - 1] = lines[number - 1].replace('"finished"', '"finishd"')
        write_lines(root, group, lines)
    problems = check_sessions(root, repair=True)
    assert len(problems) == 4 and all(p["repairable"] and p["repaired"] for p in problems)
    assert {p["field"] for p in problems if p["code"] == "corrupt_record"} == {"status"}
    assert check_sessions(root) == []
    for group in ("one", "two"):
        summary = json.loads((root / group / "summary.json").read_text())
        assert summary["by_status"]["finished"] == 3


def test_a_trace_folder_is_never_overwritten(tmp_path: Path) -> None:
    root = tmp_path / "s"
    series(root, n=1)
    store = SessionStore(root)
    battle_id = store.read_catalog("g")[0]["battle_id"]
    before = trace_state(root, "g", battle_id)
    error = expect_error("integrity_error", store.write_battle, "g", battle_id,
                         {name: b"{}\n" for name in TRACE_FILES})
    assert "written once" in str(error)
    assert trace_state(root, "g", battle_id) == before
    assert [p.name for p in (root / "g" / "battles").iterdir()] == [battle_id]  # no temp folder left


def test_an_interactive_group_is_repaired_before_a_new_battle_and_indexes_are_never_reused(tmp_path: Path) -> None:
    root = tmp_path / "s"
    store = SessionStore(root)
    first = start_match(store, "play", "llm", "baseline:random", seed=1)
    first.abandon("done")
    second = start_match(store, "play", "llm", "baseline:random", seed=2)
    second.abandon("done")
    lines = catalog_lines(root, "play")
    # damage battle 1's final line and remove every line of battle 0 (only its folder is left)
    number = final_line_number(lines, 1)
    kept = [line for i, line in enumerate(lines, 1) if json.loads(line)["index"] != 0 or i == number]
    kept[kept.index(lines[number - 1])] = '{"schema_version": 1, "battle_id": 17}'
    write_lines(root, "play", kept)
    expect_error("corrupt_record", store.read_catalog, "play")
    third = start_match(store, "play", "llm", "baseline:random", seed=3)
    assert third.index == 2  # above battle 0's folder although the catalog had lost it
    entries = store.read_catalog("play")
    assert [(e["index"], e["status"]) for e in entries] == [(0, "abandoned"), (1, "abandoned"), (2, "unfinished")]
    third.abandon("done")
    assert check_sessions(root) == []


def test_check_sessions_problem_shape(tmp_path: Path) -> None:
    root = tmp_path / "s"
    series(root, n=1)
    (root / "g" / "catalog.jsonl").write_bytes(b"\xff\xfe\n" + (root / "g" / "catalog.jsonl").read_bytes())
    [first, *_] = check_sessions(root)
    assert set(first) == {"group", "path", "line", "field", "code", "message", "repairable", "repaired"}
    assert (first["group"], first["line"], first["code"]) == ("g", 1, "corrupt_record")
    assert isinstance(first["message"], str) and first["message"].startswith(str(root / "g" / "catalog.jsonl"))
    digest = hashlib.sha256((root / "g" / "catalog.jsonl").read_bytes()).hexdigest()
    check_sessions(root)  # read-only: twice the same, nothing written
    assert hashlib.sha256((root / "g" / "catalog.jsonl").read_bytes()).hexdigest() == digest


def test_check_sessions_finds_a_valid_line_that_disagrees_with_its_trace(tmp_path: Path) -> None:
    root = tmp_path / "s"
    series(root, n=2)
    lines = catalog_lines(root, "g")
    number = final_line_number(lines, 1)
    entry = json.loads(lines[number - 1])
    entry["decisions"] += 1  # still a well-formed line: only its trace can tell
    lines[number - 1] = json.dumps(entry)
    write_lines(root, "g", lines)
    [item] = check_sessions(root, repair=True)
    assert (item["code"], item["line"], item["field"], item["repairable"]) == ("integrity_error", number,
                                                                               "decisions", False)
    assert f"is {entry['decisions']}" in item["message"] and f"says {entry['decisions'] - 1}" in item["message"]
    assert check_sessions(root, hashes=False) == []  # only the trace check reads the traces


def test_check_sessions_lists_final_lines_in_the_order_their_battles_first_appear(tmp_path: Path) -> None:
    """The check reads the catalog twice (it holds no entry): the problems of final lines still
    come in the order the battles first appear, not the order of their final lines."""
    root = tmp_path / "s"
    series(root, n=3)
    lines = catalog_lines(root, "g")
    started = [line for line in lines if json.loads(line)["status"] == "started"]
    final = [line for line in lines if json.loads(line)["status"] != "started"]
    final.sort(key=lambda line: -json.loads(line)["index"])
    started.sort(key=lambda line: json.loads(line)["index"])
    write_lines(root, "g", started + final)  # battle 0 starts first and ends last
    ids = [json.loads(line)["battle_id"] for line in started]
    for battle_id in (ids[0], ids[2]):
        (root / "g" / "battles" / battle_id).rename(tmp_path / battle_id)
    for hashes in (True, False):
        problems = check_sessions(root, hashes=hashes)
        assert [p["path"] for p in problems] == [str(root / "g" / "battles" / ids[0]),
                                                 str(root / "g" / "battles" / ids[2])]


def test_line_fields_are_those_of_a_whole_parse_or_none_for_what_a_whole_parse_must_judge(tmp_path: Path) -> None:
    from extrarlhf.runtime import records
    from extrarlhf.runtime.trace import V5_SCHEMA_VERSION as V5

    root = tmp_path / "s"
    run_series(root, "g", 2, **SPECS)
    battle = next((root / "g" / "battles").iterdir())
    for name, fields in (("actions.jsonl", ("battle_id", "decision_index", "state_hash_after")),
                         ("turns.jsonl", ("battle_id", "state_end_hash"))):
        data = read_trace(battle, name)
        whole = [json.loads(line) for line in data.splitlines()]
        assert records.line_fields(name, data, V5) == [{"schema_version": V5, **{f: r.get(f) for f in fields}}
                                                       for r in whole]
    for bad in (b'{"schema_version":1}\n{"schema_version":1', b'{"schema_version":2}', b'{"schema_version":true}',
                b'[1]', b'{"schema_version":1.0}', b'{"schema_version":1,"x":NaN}'):
        assert records.line_fields("actions.jsonl", bad, V5) is None, bad


def test_check_reads_only_the_lines_fields_of_the_writers_bytes_and_parses_changed_ones_whole(
        tmp_path: Path, monkeypatch) -> None:
    """``check`` at a million battles: an intact trace's actions and turns are decoded for the
    fields its catalog line needs only; a trace whose bytes are not the writer's is parsed
    whole, and reported as before (a number orjson refuses, behind a digest that no longer matches)."""
    root = tmp_path / "s"
    run_series(root, "g", 3, **SPECS)
    store = SessionStore(root)
    parsed: list[str] = []
    whole = SessionStore._trace_records

    def counted(self: SessionStore, path: Path, data: bytes) -> list[dict[str, Any]]:
        parsed.append(Path(path).name.removesuffix(".zst"))
        return whole(self, path, data)

    monkeypatch.setattr(SessionStore, "_trace_records", counted)
    assert check_sessions(root, hashes=True, workers=1) == []
    assert parsed == ["meta.jsonl"] * 3
    entry = store.read_catalog("g")[1]
    battle = root / "g" / "battles" / entry["battle_id"]
    lines = read_trace(battle, "actions.jsonl").splitlines(keepends=True)
    write_trace(battle, "actions.jsonl", b"".join([lines[0].replace(b'"decision_index":0', b'"decision_index":1e400')]
                                                  + lines[1:]))
    parsed.clear()
    problems = check_sessions(root, hashes=True, workers=1)
    assert "actions.jsonl" in parsed
    assert [(p["code"], entry["battle_id"] in p["message"], "does not match the sha256" in p["message"])
            for p in problems] == [("integrity_error", True, True)]
