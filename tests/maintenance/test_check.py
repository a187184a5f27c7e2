"""``extrarlhf check`` / ``check_all`` (issue 14, "What to build"): a walk of the sessions,
datasets and checkpoints dirs that lists every problem with where it is, writes nothing unless
asked, and with ``--repair`` fixes only what is provably safe (crash leftovers of promotions
and publications, stale model cards set aside) while every damaged record stays as it is.

Real trees throughout: sessions played by the runtime, datasets materialized from them,
checkpoints trained, benchmarked and promoted."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from extrarlhf.checkpoints.registry import CheckpointRegistry
from extrarlhf.datasets import promote_dataset
from extrarlhf.maintenance.check import add_parser, check_all
from extrarlhf.policies.promotion import HISTORY, promote_checkpoint
from extrarlhf.training.card import card_path
from tests.policies.test_promotion import _pass_vs_random
from tests.maintenance.test_gc import dead_pid
from tests.training_helpers import shared_data, train_small

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """sessions/ (gg, mixed), datasets/ (gg/v1, mixed/v1, pointer cur -> gg/v1), checkpoints/
    (bc1 promoted, then bc2; spare never promoted; each with its model card)."""
    root = tmp_path_factory.mktemp("check")
    shutil.copytree(shared_data() / "sessions", root / "sessions")
    shutil.copytree(shared_data() / "datasets", root / "datasets")
    promote_dataset("gg/v1", "cur", datasets_dir=root / "datasets")
    ck = root / "checkpoints"
    for name, seed in (("bc1", 0), ("bc2", 1)):
        train_small(ck, name, seed=seed)
        _pass_vs_random(ck, name)
        promote_checkpoint(name, checkpoints_dir=ck, require_current_incumbent=False)
    train_small(ck, "spare", seed=3)
    return root


@pytest.fixture
def tree(template: Path, tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    shutil.copytree(template, root, symlinks=True)
    return root


def _dirs(root: Path) -> tuple[Path, Path, Path]:
    return root / "sessions", root / "datasets", root / "checkpoints"


def _snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under root (lock files and folders included) with its bytes (None: a folder)."""
    out: dict[str, bytes | None] = {}
    for path in sorted(root.rglob("*")):
        out[str(path.relative_to(root))] = None if path.is_dir() else path.read_bytes()
    return out


def _codes(report: dict) -> list[str]:
    return sorted(p["code"] for p in report["problems"])


def _sessions_checked(report: dict) -> bool:
    return not any(s["area"] == "sessions" for s in report["skipped"])


def test_a_sound_tree_has_no_problem_and_the_check_writes_nothing(tree: Path) -> None:
    before = _snapshot(tree)
    report = check_all(*_dirs(tree))
    assert _snapshot(tree) == before  # not even a lock file
    assert report["ok"] and report["problems"] == [] and report["repaired"] == [], report["problems"]
    assert report["checked"]["datasets"] == {"datasets": 2, "versions": 2, "pointers": 1}
    assert report["checked"]["checkpoints"]["checkpoints"] == 3 and report["checked"]["checkpoints"]["cards"] == 3
    assert report["roots"] == {k: str(p.absolute()) for k, p in zip(("sessions", "datasets", "checkpoints"),
                                                                     _dirs(tree))}
    if not _sessions_checked(report):  # said, never silently passed over
        assert "check_sessions" in report["skipped"][0]["reason"]


def test_what_a_crash_left_is_listed_read_only_and_repaired_on_request(tree: Path) -> None:
    sessions, datasets, ck = _dirs(tree)
    # a stale card: "spare" registered again with other weights (as a killed overwriting train_policy leaves it)
    registry = CheckpointRegistry(ck)
    registry.register("spare", registry.get("bc1").path, "v5", overwrite=True)
    # the promotion history one line behind its pointer (a crash between the two writes)
    lines = (ck / HISTORY).read_text().splitlines()
    (ck / HISTORY).write_text(lines[0] + "\n")
    # a publication whose process died
    leftover = datasets / "gg" / f".tmp-v9-{dead_pid()}-0a1b2c3d"
    leftover.mkdir()
    (leftover / "decisions.parquet").write_bytes(b"half")

    before = _snapshot(tree)
    report = check_all(sessions, datasets, ck)
    assert _snapshot(tree) == before
    assert not report["ok"] and report["repaired"] == []
    assert _codes(report) == ["promotion_torn", "stale_card", "unfinished_publication"]
    assert all(p["repairable"] for p in report["problems"])
    by_code = {p["code"]: p for p in report["problems"]}
    assert by_code["stale_card"]["path"] == str(card_path(ck, "spare").absolute())
    assert by_code["unfinished_publication"]["path"] == str(leftover) and \
        by_code["unfinished_publication"]["severity"] == "warning"
    assert "does not record that promote" in by_code["promotion_torn"]["message"]

    repaired = check_all(sessions, datasets, ck, repair=True)
    assert repaired["ok"] and repaired["problems"] == [], repaired["problems"]
    assert sorted(r["area"] for r in repaired["repaired"]) == ["checkpoints", "checkpoints", "datasets"]
    assert not leftover.exists() and not card_path(ck, "spare").exists()
    assert len((ck / HISTORY).read_text().splitlines()) == 2
    again = check_all(sessions, datasets, ck, repair=True)
    assert again["ok"] and again["repaired"] == [] and again["problems"] == []


def test_damaged_records_are_each_named_and_never_repaired(tree: Path) -> None:
    sessions, datasets, ck = _dirs(tree)
    history = (ck / HISTORY).read_text().splitlines()
    (ck / HISTORY).write_text("{garbage\n" + history[1] + "\n")  # line 1 damaged
    pointer = json.loads((datasets / "pointers" / "cur.json").read_text())
    del pointer["dataset_id"]
    (datasets / "pointers" / "cur.json").write_text(json.dumps(pointer))
    (datasets / "pointers" / "old.json").write_text(json.dumps({
        "schema_version": 1, "pointer": "old", "dataset_id": "mixed/v1", "name": "mixed", "version": 1,
        "manifest_sha256": "0" * 64, "promoted_at": "2024-01-01T00:00:00.000Z", "previous": None}))
    battles = datasets / "gg" / "v1" / "battles.parquet"
    data = bytearray(battles.read_bytes())
    data[len(data) // 2] ^= 0xFF
    battles.write_bytes(bytes(data))
    (datasets / "gg" / "v7").mkdir()
    (datasets / "gg" / "v7" / "decisions.parquet").write_bytes(b"orphan")
    spare = CheckpointRegistry(ck).get("spare").path
    with open(spare, "ab") as fh:
        fh.write(b"\0")
    shutil.copy(CheckpointRegistry(ck).get("bc1").path, ck / "ghost.0123456789ab.onnx")
    report_file = sorted((ck / "benchmarks").glob("*.json"))[0]
    report_file.write_text("{not json")
    (ck / "ladder.json").write_text('{"kind": "policy_ladder", "schema_version": 1, "measurements": [1]}')

    before = _snapshot(tree)
    for repair in (False, True):
        report = check_all(sessions, datasets, ck, repair=repair)
        assert _snapshot(tree) == before, repair  # nothing here is provably safe to repair
        assert not report["ok"] and report["repaired"] == []
        problems = {(p["code"], Path(p["path"]).name if p["path"] else None): p for p in report["problems"]}
        history_problem = problems[("corrupt_record", HISTORY)]
        assert history_problem["line"] == 1 and history_problem["field"] is None
        pointer_problem = problems[("corrupt_record", "cur.json")]
        assert pointer_problem["field"] == "dataset_id" and pointer_problem["area"] == "datasets"
        assert ("stale_pointer", "old.json") in problems
        assert any(code == "file_hash_mismatch" or "hash" in code for code, name in problems
                   if name == "battles.parquet"), sorted(problems)
        assert ("version_without_manifest", "v7") in problems
        assert ("model_file_changed", spare.name) in problems
        assert problems[("unreferenced_model_file", "ghost.0123456789ab.onnx")]["severity"] == "warning"
        assert ("benchmark_report_unreadable", "benchmarks") in problems
        ladder = problems[("corrupt_record", "ladder.json")]  # a cache: a warning that says how to rebuild it
        assert ladder["severity"] == "warning" and ladder["field"] == "measurements"
        assert "move ladder.json aside" in ladder["message"]
        assert not any(p["repairable"] for p in report["problems"])


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    parser = argparse.ArgumentParser(prog="extrarlhf")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    code = args.func(args)
    return code, capsys.readouterr().out


def test_the_command_prints_each_problem_and_exits_1_until_the_tree_is_sound(tree: Path,
                                                                            capsys: pytest.CaptureFixture[str]) -> None:
    sessions, datasets, ck = _dirs(tree)
    where = ["--sessions-dir", str(sessions), "--datasets-dir", str(datasets), "--checkpoints-dir", str(ck)]
    code, out = _cli(["check", *where], capsys)
    assert code == 0 and "0 error(s), 0 warning(s), 0 repaired" in out
    lines = (ck / HISTORY).read_text().splitlines()
    (ck / HISTORY).write_text(lines[0] + "\n")
    code, out = _cli(["fsck", *where], capsys)
    assert code == 1 and "error [promotion_torn] (checkpoints)" in out and "(--repair fixes it)" in out
    assert "1 repairable with --repair" in out
    code, out = _cli(["check", *where, "--json"], capsys)
    assert code == 1 and json.loads(out)["counts"]["repairable"] == 1
    code, out = _cli(["check", *where, "--repair"], capsys)
    assert code == 0 and out.startswith("repaired (checkpoints): completed") and "0 error(s)" in out


def test_the_installed_cli_runs_check(tree: Path) -> None:
    """Through ``python -m extrarlhf`` once cli.py wires ``extrarlhf.maintenance.check.add_parser``."""
    from extrarlhf.cli import build_parser

    try:
        build_parser().parse_args(["check", "--json"])
    except SystemExit:
        pytest.skip("extrarlhf/cli.py does not register the check command yet")
    sessions, datasets, ck = _dirs(tree)
    done = subprocess.run([sys.executable, "-m", "extrarlhf", "check", "--sessions-dir", str(sessions),
                           "--datasets-dir", str(datasets), "--checkpoints-dir", str(ck), "--json"],
                          cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["ok"]


def test_missing_dirs_are_skipped_and_bad_arguments_refused(tmp_path: Path) -> None:
    report = check_all(tmp_path / "no-sessions", None, tmp_path / "no-checkpoints")
    assert report["ok"] and report["roots"] == {"sessions": None, "datasets": None, "checkpoints": None}
    assert sorted(s["area"] for s in report["skipped"]) == ["checkpoints", "sessions"]
    with pytest.raises(Exception) as info:
        check_all(None, None, None, repair="yes")
    assert getattr(info.value, "code", None) == "invalid_argument"


def test_a_damaged_session_record_is_listed_when_sessions_can_be_checked(tree: Path) -> None:
    sessions, datasets, ck = _dirs(tree)
    catalog = sessions / "gg" / "catalog.jsonl"
    lines = catalog.read_text().splitlines()
    lines[1] = lines[1][: len(lines[1]) // 2]
    catalog.write_text("\n".join(lines) + "\n")
    before = _snapshot(tree)
    report = check_all(sessions, datasets, ck)
    assert _snapshot(tree) == before
    if not _sessions_checked(report):
        skipped = [s for s in report["skipped"] if s["area"] == "sessions"]
        assert len(skipped) == 1 and "were not checked" in skipped[0]["reason"]
        pytest.skip("extrarlhf.runtime.sessions.check_sessions does not exist yet")
    found = [p for p in report["problems"] if p["area"] == "sessions"]
    assert found and not report["ok"]
    assert any(p["path"] and p["path"].endswith("catalog.jsonl") and p["line"] == 2 for p in found), found


# ---------------------------------------------------------------------------- issue 24: the last fsck gaps
def _edit_json(path: Path, change) -> None:
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


def _listed_groups(tree: Path) -> dict[str, dict]:
    """list_sessions through the MCP server (in process), by group."""
    import anyio
    from mcp import Client

    from mcp_server import build_server
    from tests.mcp_helpers import Checked

    async def listing() -> dict:
        async with Client(build_server(*_dirs(tree))) as client:
            return await Checked(client).ok("list_sessions", {})

    return {row["group"]: row for row in anyio.run(listing)["groups"]}


def test_a_summary_count_edited_alone_is_refused_by_list_sessions_and_check(tree: Path) -> None:
    """Issue 24: summary.json edited from 40 to 47 finished battles. Before, list_sessions showed 47
    and check found nothing."""
    sessions, datasets, ck = _dirs(tree)
    summary = sessions / "gg" / "summary.json"
    _edit_json(summary, lambda d: d["by_status"].update(finished=47))
    listed = _listed_groups(tree)
    assert listed["mixed"]["battles"] == 24 and "error" not in listed["mixed"]
    error = listed["gg"]["error"]
    assert error["code"] == "corrupt_record" and error["details"]["field"] == "by_status.finished"
    assert "is 47, but results (p1_wins + draws + p2_wins) add up to 40" in error["message"]
    before = _snapshot(tree)
    report = check_all(sessions, datasets, ck)
    assert _snapshot(tree) == before
    [problem] = report["problems"]
    assert (problem["code"], problem["path"], problem["field"], problem["repairable"]) == (
        "corrupt_record", str(summary), "by_status.finished", True)
    assert check_all(sessions, datasets, ck, repair=True)["repaired"]
    assert json.loads(summary.read_text())["by_status"]["finished"] == 40 and check_all(*_dirs(tree))["ok"]


def test_a_summary_edited_consistently_disagrees_with_its_catalog_and_is_recomputed(tree: Path) -> None:
    sessions, datasets, ck = _dirs(tree)
    summary = sessions / "gg" / "summary.json"

    def inflate(doc: dict) -> None:
        doc["battles"] += 7
        doc["by_status"]["finished"] += 7
        doc["results"]["p1_wins"] += 7
        doc["battle_tags"]["rl-vs-bot"] += 7

    _edit_json(summary, inflate)
    before = _snapshot(tree)
    report = check_all(sessions, datasets, ck)
    assert _snapshot(tree) == before and not report["ok"]
    [problem] = report["problems"]
    assert (problem["code"], problem["path"], problem["field"], problem["severity"], problem["repairable"]) == (
        "summary_mismatch", str(summary), "battles", "error", True)
    assert "by_status.finished is 47 there but 40 from the catalog" in problem["message"]
    assert "extrarlhf check --repair` recomputes it" in problem["message"]
    repaired = check_all(sessions, datasets, ck, repair=True)
    assert [r["path"] for r in repaired["repaired"]] == [str(summary)]
    assert json.loads(summary.read_text())["by_status"]["finished"] == 40 and check_all(*_dirs(tree))["ok"]


def test_a_manifest_whose_opponent_was_edited_is_reported_and_never_repaired(tree: Path) -> None:
    """Issue 24: the group "mixed" was played against random; its manifest now says greedy."""
    sessions, datasets, ck = _dirs(tree)
    manifest = sessions / "mixed" / "manifest.json"
    _edit_json(manifest, lambda d: d["configuration"]["opponent"].update(spec="baseline:greedy"))
    before = _snapshot(tree)
    for repair in (False, True):
        report = check_all(sessions, datasets, ck, repair=repair)
        assert _snapshot(tree) == before and report["repaired"] == []
        [problem] = report["problems"]
        assert (problem["code"], problem["path"], problem["field"], problem["repairable"]) == (
            "manifest_mismatch", str(manifest), "configuration.opponent.spec", False)
        assert "disagrees with what 24 of its battles record" in problem["message"]
        assert "records actors.p2.spec 'baseline:random', the manifest has 'baseline:greedy'" in problem["message"]
        assert "Restore manifest.json from a backup" in problem["message"]


def test_an_unregistered_model_file_is_reported(tree: Path) -> None:
    sessions, datasets, ck = _dirs(tree)
    stray = ck / "mine.onnx"
    shutil.copy(CheckpointRegistry(ck).get("bc1").path, stray)
    [problem] = check_all(sessions, datasets, ck)["problems"]
    assert (problem["code"], problem["path"], problem["severity"]) == (
        "unreferenced_model_file", str(stray.absolute()), "warning")
    assert "copied here by hand" in problem["message"] and "register_checkpoint" in problem["message"]


def test_a_dataset_manifest_with_null_tables_is_a_clear_error_everywhere(tree: Path) -> None:
    """Issue 24: ``"tables": null`` crashed validate_dataset, train_policy and check (AttributeError)."""
    from extrarlhf.core.errors import RLHFError
    from extrarlhf.datasets import validate_dataset
    from extrarlhf.training import train_policy

    sessions, datasets, ck = _dirs(tree)
    manifest = datasets / "gg" / "v1" / "manifest.json"
    _edit_json(manifest, lambda d: d.update(tables=None))
    before = _snapshot(tree)
    expected = f"{manifest}, field 'tables': must be an object, got null; the manifest was edited or damaged"
    result = validate_dataset("gg/v1", datasets_dir=datasets)
    assert not result["valid"] and [f["code"] for f in result["failures"]] == ["manifest_unreadable"]
    assert result["failures"][0]["message"].startswith(expected)
    with pytest.raises(RLHFError) as info:
        train_policy("gg/v1", "nope", datasets_dir=datasets, checkpoints_dir=ck, epochs=1)
    assert info.value.code == "validation_failed" and expected in str(info.value)
    problems = check_all(sessions, datasets, ck)["problems"]
    # (the pointer "cur" was promoted for the manifest as it was: it is stale now)
    assert [(p["code"], Path(p["path"]).name) for p in problems] == [("manifest_unreadable", "manifest.json"),
                                                                       ("stale_pointer", "cur.json")]
    assert problems[0]["path"] == str(manifest)
    assert expected in problems[0]["message"] and "restore it from a backup" in problems[0]["message"]
    assert _snapshot(tree) == before  # nothing trained, registered or written


# ---------------------------------------------------------------------------- issue 50: check on worker processes
def test_check_on_worker_processes_reports_what_one_process_does_in_the_same_order(tmp_path: Path) -> None:
    """The trace hashes of a group can be spread over processes (``--workers``): the same
    problems in the same order, whoever checked which chunk; a bad count is refused first."""
    from extrarlhf.runtime import diagnosis
    from extrarlhf.runtime.series import run_series
    from extrarlhf.runtime.sessions import check_sessions
    from tests.trace_helpers import read_trace, write_trace

    sessions = tmp_path / "sessions"
    run_series(sessions, "many", 14, p1_model="baseline:random", opponent="baseline:random", seed=3)
    battles = sorted((sessions / "many" / "battles").iterdir())
    write_trace(battles[2], "actions.jsonl", read_trace(battles[2], "actions.jsonl") + b"\n")  # another sha256
    write_trace(battles[9], "turns.jsonl", b"")
    shutil.rmtree(battles[12])  # a final line without its folder
    before = _snapshot(tmp_path)
    chunk = diagnosis.TRACES_PER_TASK
    diagnosis.TRACES_PER_TASK = 2  # several chunks for each process
    try:
        alone = check_sessions(sessions, workers=1)
        spread = [check_sessions(sessions, workers=n) for n in (2, 3)]
    finally:
        diagnosis.TRACES_PER_TASK = chunk
    assert _snapshot(tmp_path) == before
    assert [p["path"] for p in alone] == [str(battles[2] / "v5" / "actions.jsonl.zst"),
                                          str(battles[9] / "v5" / "turns.jsonl.zst"), str(battles[12])]
    assert all(found == alone for found in spread)
    report = check_all(sessions, None, None, workers=2)
    assert [p["path"] for p in report["problems"]] == [p["path"] for p in alone]
    with pytest.raises(Exception) as info:
        check_all(sessions, None, None, workers=0)
    assert getattr(info.value, "code", None) == "invalid_argument" and "workers must be an integer in 1..64" in str(
        info.value)
