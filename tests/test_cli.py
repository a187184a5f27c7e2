"""The command line (``python -m extrarlhf ...``) run as a real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from extrarlhf.runtime.sessions import SessionStore
from tests.trace_helpers import read_text, read_trace, write_trace

ROOT = Path(__file__).resolve().parents[1]


def cli(*args: str, cwd: Path = ROOT, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "extrarlhf", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


def assert_clean_error(proc: subprocess.CompletedProcess[str], code: str, *needles: str) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"error [{code}]: "), lines[0]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    sessions = tmp_path_factory.mktemp("cli") / "sessions"
    proc = cli("collect", "--group", "clig", "--battles", "4", "--seed", "3", "--opponent", "baseline:random",
               "--sessions-dir", str(sessions))
    return sessions, proc


def test_collect_prints_a_summary(collected) -> None:
    sessions, proc = collected
    assert proc.returncode == 0, proc.stderr
    assert "group clig: played 4, already done 0" in proc.stdout
    assert "battles 4 (finished 4)" in proc.stdout
    assert "p1 wins" in proc.stdout and "v5 policy training:" in proc.stdout
    assert "battles/s" in proc.stderr and "4/4 battles" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert [e["status"] for e in SessionStore(sessions).read_catalog("clig")] == ["finished"] * 4


def test_collect_again_resumes_and_json_parses(collected) -> None:
    sessions, _ = collected
    proc = cli("collect", "--group", "clig", "--battles", "4", "--seed", "3", "--opponent", "baseline:random",
               "--sessions-dir", str(sessions), "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["ran"] == 0 and result["skipped"] == 4 and result["group"] == "clig"
    assert result["summary"]["by_status"]["finished"] == 4


def test_sessions_list(collected) -> None:
    sessions, _ = collected
    proc = cli("sessions", "list", "--sessions-dir", str(sessions))
    assert proc.returncode == 0, proc.stderr
    row = next(line for line in proc.stdout.splitlines() if line.startswith("clig"))
    assert "rl (baseline:greedy) vs baseline:random" in row
    assert row.split()[1:3] == ["4", "4"]
    proc = cli("sessions", "list", "--sessions-dir", str(sessions), "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [r["group"] for r in rows] == ["clig"]
    assert rows[0]["battles"] == 4 and rows[0]["finished"] == 4


def test_sessions_list_empty(tmp_path: Path) -> None:
    proc = cli("sessions", "list", "--sessions-dir", str(tmp_path / "none"))
    assert proc.returncode == 0 and "no session groups" in proc.stdout
    proc = cli("sessions", "list", "--sessions-dir", str(tmp_path / "none"), "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout) == []


def test_sessions_show(collected) -> None:
    sessions, _ = collected
    store = SessionStore(sessions)
    ids = [e["battle_id"] for e in store.read_catalog("clig")]
    proc = cli("sessions", "show", "clig", "--battles", "--sessions-dir", str(sessions))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("group clig")
    assert "rl-vs-bot" in proc.stdout and "baseline:random" in proc.stdout
    for battle_id in ids:
        line = next(l for l in proc.stdout.splitlines() if battle_id in l)
        assert "finished" in line
    proc = cli("sessions", "show", "clig", "--battles", "--json", "--sessions-dir", str(sessions))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["manifest"]["group"] == "clig"
    assert doc["summary"]["by_status"]["finished"] == 4
    assert [e["battle_id"] for e in doc["catalog"]] == ids
    proc = cli("sessions", "show", "clig", "--json", "--sessions-dir", str(sessions))
    assert json.loads(proc.stdout)["catalog"] is None


def test_replay_group(collected) -> None:
    sessions, _ = collected
    proc = cli("replay", "--group", "clig", "--sessions-dir", str(sessions))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "4/4 battles reproduce"
    proc = cli("replay", "--group", "clig", "--sessions-dir", str(sessions), "--json")
    assert proc.returncode == 0
    reports = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(reports) == 4 and all(r["reproduces"] for r in reports)


def test_replay_reports_a_tampered_battle(tmp_path: Path) -> None:
    sessions = tmp_path / "s"
    assert cli("collect", "--group", "t", "--battles", "2", "--sessions-dir", str(sessions)).returncode == 0
    store = SessionStore(sessions)
    victim = store.read_catalog("t")[1]["battle_id"]
    battle = store.battle_dir("t", victim)
    lines = read_text(battle, "actions.jsonl").splitlines()
    record = json.loads(lines[3])
    record["state_hash_after"] = "f" * 64
    lines[3] = json.dumps(record)
    write_trace(battle, "actions.jsonl", ("\n".join(lines) + "\n").encode())
    proc = cli("replay", "--group", "t", "--sessions-dir", str(sessions))
    assert proc.returncode == 1, proc.stdout
    assert f"{victim}: DIVERGES at decision 3 (state_hash_after)" in proc.stdout
    assert proc.stdout.strip().splitlines()[-1] == "1/2 battles reproduce"
    single = cli("replay", "--group", "t", "--battle", victim, "--sessions-dir", str(sessions), "--json")
    assert single.returncode == 1
    assert json.loads(single.stdout)["first_divergence"]["decision_index"] == 3


def test_default_sessions_dir_is_relative_to_cwd(tmp_path: Path) -> None:
    proc = cli("collect", "--group", "here", "--battles", "1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "sessions" / "here" / "manifest.json").is_file()
    assert "here" in cli("sessions", "list", cwd=tmp_path).stdout


@pytest.mark.parametrize("args, code, needles", [
    (["collect", "--group", "a/b", "--battles", "1"], "invalid_argument", ["'a/b'"]),
    (["collect", "--group", "..", "--battles", "1"], "invalid_argument", ["group"]),
    (["collect", "--group", "g", "--battles", "1", "--opponent", "baseline:nope"], "unknown_spec",
     ["baseline:nope", "baseline:greedy", "baseline:random"]),
    (["collect", "--group", "g", "--battles", "0"], "invalid_argument", ["n_battles"]),
    (["collect", "--group", "g", "--battles", "1", "--workers", "0"], "invalid_argument", ["max_workers"]),
    (["collect", "--group", "g", "--battles", "1", "--seed", "-1"], "invalid_argument", ["seed"]),
    (["sessions", "show", "nosuch"], "not_found", ["nosuch"]),
    (["sessions", "show", "bad/name"], "invalid_argument", ["bad/name"]),
    (["replay", "--group", "nosuch"], "not_found", ["nosuch"]),
])
def test_bad_input_is_one_error_line_exit_2(tmp_path: Path, args: list[str], code: str, needles: list[str]) -> None:
    sessions = tmp_path / "sessions"
    proc = cli(*args, "--sessions-dir", str(sessions))
    assert_clean_error(proc, code, *needles)
    # nothing was created for a refused command
    assert not sessions.exists() or not any(p.is_file() for p in sessions.rglob("*"))


def test_group_conflict_and_unknown_battle_are_clean_errors(collected) -> None:
    sessions, _ = collected
    before = (sessions / "clig" / "catalog.jsonl").read_bytes()
    proc = cli("collect", "--group", "clig", "--battles", "4", "--seed", "4", "--opponent", "baseline:random",
               "--sessions-dir", str(sessions))
    assert_clean_error(proc, "group_conflict", "clig")
    assert (sessions / "clig" / "catalog.jsonl").read_bytes() == before
    proc = cli("replay", "--group", "clig", "--battle", "b999999-0000000000", "--sessions-dir", str(sessions))
    assert_clean_error(proc, "not_found", "b999999-0000000000")
    proc = cli("sessions", "show", "nosuch", "--sessions-dir", str(sessions))
    assert_clean_error(proc, "not_found", "nosuch", "clig")


def test_show_marks_unfinished_battles(tmp_path: Path) -> None:
    from extrarlhf.runtime.match import start_match

    sessions = tmp_path / "s"
    store = SessionStore(sessions)
    done = start_match(store, "mixed", "rl", opponent="baseline:greedy", p1_model="baseline:greedy", seed=1)
    done.run()
    done.finish()
    open_match = start_match(store, "mixed", "rl", opponent="baseline:greedy", p1_model="baseline:greedy", seed=2)
    proc = cli("sessions", "show", "mixed", "--battles", "--sessions-dir", str(sessions))
    assert proc.returncode == 0, proc.stderr
    assert "finished 1, unfinished 1" in proc.stdout
    line = next(l for l in proc.stdout.splitlines() if open_match.battle_id in l)
    assert "unfinished" in line and line.split()[2:5] == ["-", "-", "-"]
    proc = cli("replay", "--group", "mixed", "--sessions-dir", str(sessions))
    assert proc.returncode == 0 and proc.stdout.strip().splitlines()[-1] == "1/1 battles reproduce"


def test_unknown_schema_version_is_a_clean_error(tmp_path: Path) -> None:
    sessions = tmp_path / "s"
    assert cli("collect", "--group", "v", "--battles", "1", "--sessions-dir", str(sessions)).returncode == 0
    manifest = sessions / "v" / "manifest.json"
    doc = json.loads(manifest.read_text())
    doc["schema_version"] = 99
    manifest.write_text(json.dumps(doc))
    proc = cli("sessions", "show", "v", "--sessions-dir", str(sessions))
    assert_clean_error(proc, "unsupported_schema", "schema_version 99")


def test_replay_of_a_corrupt_trace_file_is_a_clean_error(tmp_path: Path) -> None:
    sessions = tmp_path / "s"
    assert cli("collect", "--group", "c", "--battles", "1", "--sessions-dir", str(sessions)).returncode == 0
    store = SessionStore(sessions)
    battle = store.battle_dir("c", store.read_catalog("c")[0]["battle_id"])
    write_trace(battle, "actions.jsonl", read_trace(battle, "actions.jsonl")[:500])  # cut inside the first record
    proc = cli("replay", "--group", "c", "--sessions-dir", str(sessions))
    assert "Traceback" not in proc.stderr
    assert proc.returncode in (1, 2)
    assert "actions.jsonl" in proc.stderr + proc.stdout
