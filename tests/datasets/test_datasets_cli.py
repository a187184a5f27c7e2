"""``python -m extrarlhf datasets ...`` run as real subprocesses: readable output, a progress
line, JSON output, exit codes and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.datasets_helpers import GREEDY, HUMAN, RANDOM, ROOT, rewrite_table, set_cell, shared_sessions


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "extrarlhf", "datasets", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


def one_line_error(proc: subprocess.CompletedProcess[str], code: str) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error")]
    assert len(lines) == 1 and lines[0].startswith(f"error [{code}]: "), proc.stderr
    return lines[0]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    datasets = tmp_path_factory.mktemp("cli") / "datasets"
    return {"sessions": str(shared_sessions()), "datasets": str(datasets)}


def test_materialize_then_list_inspect_validate(env) -> None:
    s, d = env["sessions"], env["datasets"]
    proc = cli("materialize", "--group", GREEDY, "--group", HUMAN, "--name", "cli", "--promote", "cur",
               "--sessions-dir", s, "--datasets-dir", d)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("cli/v1: decisions ")
    assert "excluded battles: 4" in proc.stdout and "pointer cur -> cli/v1" in proc.stdout
    assert "V5 policy: ready" in proc.stdout
    assert "materialize cli [" in proc.stderr and "battles/s" in proc.stderr and "/30 battles" in proc.stderr

    proc = cli("list", "--datasets-dir", d)
    assert proc.returncode == 0 and "cli  pointers: cur" in proc.stdout and "cli/v1" in proc.stdout
    assert "pointer cur -> cli/v1" in proc.stdout
    listed = json.loads(cli("list", "--datasets-dir", d, "--json").stdout)
    assert [x["name"] for x in listed["datasets"]] == ["cli"]

    proc = cli("inspect", "@cur", "--datasets-dir", d)
    assert proc.returncode == 0, proc.stderr
    for needle in ("cli/v1 (v5_decisions)", f"source group {GREEDY}: 24 battles", "decisions.parquet",
                   "pointer cur", "Metronome: NOT ready", "not production data"):
        assert needle in proc.stdout, needle
    manifest = json.loads(cli("inspect", "cli/v1", "--datasets-dir", d, "--json").stdout)["manifest"]
    assert manifest["dataset_id"] == "cli/v1"

    proc = cli("validate", "cli", "--datasets-dir", d)
    assert proc.returncode == 0 and proc.stdout.startswith("cli/v1: valid (")


def test_readiness(env) -> None:
    proc = cli("readiness", "--group", RANDOM, "--sessions-dir", env["sessions"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"group {RANDOM}: 8 eligible battles")
    assert "V5 policy (training_ready, scope v5_policy_only): NOT ready" in proc.stdout
    assert "- 8 eligible (finished, non-degraded) battles; need 20" in proc.stdout
    proc = cli("readiness", "--group", RANDOM, "--sessions-dir", env["sessions"], "--policy", "min_v5_battles=5",
               "--policy", "min_v5_decisions=10", "--json")
    result = json.loads(proc.stdout)
    assert result["v5_policy_training_ready"] is True and result["timestamp_ready"] is False
    one_line_error(cli("readiness", "--group", RANDOM, "--sessions-dir", env["sessions"], "--policy", "bogus=1"),
                   "invalid_argument")


def test_splits_and_promote(env) -> None:
    d = env["datasets"]
    cli("materialize", "--group", GREEDY, "--name", "sp", "--sessions-dir", env["sessions"], "--datasets-dir", d)
    proc = cli("split-v5", "sp", "--datasets-dir", d, "--fractions", "0.6,0.2,0.2")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("sp-v5split/v1: v5_policy split of sp/v1 by battle")
    assert "split-v5 [" in proc.stderr and "decisions/s" in proc.stderr
    proc = cli("split-nemesis", "sp", "--view", "lite", "--datasets-dir", d, "--json")
    assert json.loads(proc.stdout)["dataset_id"] == "sp-nemesis-lite/v1"
    line = one_line_error(cli("split-nemesis", "sp", "--view", "standard", "--datasets-dir", d), "not_ready")
    assert "human-vs-human production rows" in line
    proc = cli("promote", "sp-v5split", "train-v5", "--datasets-dir", d)
    assert proc.returncode == 0 and proc.stdout.strip() == "pointer train-v5 -> sp-v5split/v1"


def test_errors_are_one_line(env, tmp_path: Path) -> None:
    d = env["datasets"]
    line = one_line_error(cli("inspect", "../etc", "--datasets-dir", d), "path_outside_datasets_dir")
    assert "'..'" in line
    one_line_error(cli("validate", "/etc", "--datasets-dir", d), "path_outside_datasets_dir")
    one_line_error(cli("inspect", "nothing", "--datasets-dir", d), "not_found")
    one_line_error(cli("materialize", "--group", GREEDY, "--name", "cli", "--version", "1", "--sessions-dir",
                       env["sessions"], "--datasets-dir", d), "dataset_exists")
    one_line_error(cli("split-v5", "cli", "--fractions", "a,b", "--datasets-dir", d), "invalid_argument")


def test_validate_exits_1_and_lists_failures(env, tmp_path: Path) -> None:
    datasets = tmp_path / "datasets"
    assert cli("materialize", "--group", RANDOM, "--name", "bad", "--sessions-dir", env["sessions"],
               "--datasets-dir", str(datasets)).returncode == 0
    rewrite_table(datasets / "bad" / "v1", "battles", lambda t: set_cell(t, "degraded", 1, True))
    proc = cli("validate", "bad", "--datasets-dir", str(datasets))
    assert proc.returncode == 1
    assert "bad/v1: INVALID, 1 failure(s)" in proc.stdout
    assert "[degraded_battle_in_training_table] battle " in proc.stdout
    report = json.loads(cli("validate", "bad", "--datasets-dir", str(datasets), "--json").stdout)
    assert report["valid"] is False and report["failure_codes"] == {"degraded_battle_in_training_table": 1}
