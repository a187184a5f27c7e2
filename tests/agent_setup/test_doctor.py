"""``python -m extrarlhf doctor``: a passing checkout, and failures each with a one-line fix and
a non-zero exit (a missing config, a broken interpreter, a server that does not start, a dir
that cannot be written, a half-open production gate whose values never show)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from extrarlhf.agent_setup import install_skills, run_doctor
from tests.skills.skilldocs import REPO

IMPORTS = ("numpy", "onnxruntime", "asyncpg", "pyarrow", "dagster", "mcp")


def doctor(*args: str, home: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "HOME": str(home)} if home else dict(os.environ)
    return subprocess.run([sys.executable, "-m", "extrarlhf", "doctor", *args], capture_output=True, text=True,
                          cwd=REPO, env=env, timeout=180)


def fails_with_fixes(out: str) -> list[str]:
    """The FAIL lines; each must be followed by its one-line fix."""
    lines = out.splitlines()
    failed = [i for i, line in enumerate(lines) if line.strip().startswith("FAIL")]
    for i in failed:
        assert lines[i + 1].strip().startswith("fix: "), f"no fix after {lines[i]!r}"
        assert lines[i + 1].strip() != "fix:", "an empty fix"
    return [lines[i].strip() for i in failed]


def test_the_pinned_checkout_passes():
    done = doctor()
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"OK    interpreter: {REPO / '.venv' / 'bin' / 'python'} (Python 3." in done.stdout
    for name in IMPORTS:
        assert f"OK    import {name}: " in done.stdout
    assert "OK    mcp server: tools/list answered" in done.stdout
    for name in ("sessions", "datasets", "checkpoints"):
        assert f"OK    {name} dir: {REPO / name}" in done.stdout
    assert "INFO  production gate: closed" in done.stdout and done.stdout.rstrip().endswith("all checks passed")
    assert fails_with_fixes(done.stdout) == []


def test_an_installed_config_passes_as_written(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    install_skills("codex", project=project, home=tmp_path / "home")
    report = run_doctor("codex", project=project, home=tmp_path / "home")
    assert report["ok"], report["checks"]
    statuses = {c["check"]: c["status"] for c in report["checks"]}
    assert statuses["mcp config"] == "ok" and statuses["mcp server"] == "ok"
    assert str(project / ".codex" / "config.toml") in report["source"]
    assert report["server"]["env_names"] == ["PYTHONPATH"]


def test_a_missing_config_fails_with_the_install_command(tmp_path):
    done = doctor("--target", "opencode", "--user", home=tmp_path)
    assert done.returncode == 1
    fails = fails_with_fixes(done.stdout)
    assert fails == [f"FAIL  mcp config: {tmp_path / '.config' / 'opencode' / 'opencode.json'} does not exist"]
    assert "fix: run `python -m extrarlhf skills install --target opencode --user`" in done.stdout


def _edit_claude_config(project: Path, **changes) -> None:
    path = project / ".mcp.json"
    doc = json.loads(path.read_text())
    doc["mcpServers"]["extra-rlhf"].update(changes)
    path.write_text(json.dumps(doc))


def test_a_missing_interpreter_fails(tmp_path):
    install_skills("claude", project=tmp_path, home=tmp_path / "h")
    _edit_claude_config(tmp_path, command=str(tmp_path / "gone" / "python"))
    done = doctor("--target", "claude", "--project", str(tmp_path))
    assert done.returncode == 1
    assert fails_with_fixes(done.stdout)[0] == \
        f"FAIL  interpreter: {tmp_path / 'gone' / 'python'} does not exist or is not executable"
    assert f"fix: run `make setup` in {REPO}" in done.stdout


def test_a_server_that_does_not_start_and_an_unwritable_dir_fail(tmp_path):
    install_skills("claude", project=tmp_path, home=tmp_path / "h")
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    _edit_claude_config(tmp_path, args=["-m", "no_such_server_module", "--sessions-dir", str(blocker / "sessions")])
    done = doctor("--target", "claude", "--project", str(tmp_path), "--timeout", "30")
    assert done.returncode == 1
    fails = fails_with_fixes(done.stdout)
    assert [f.split(":")[0] for f in fails] == ["FAIL  mcp server", "FAIL  sessions dir"]
    assert "No module named no_such_server_module" in fails[0]
    assert f"{blocker} is not a directory" in fails[1]
    for name in IMPORTS:  # the interpreter itself is fine
        assert f"OK    import {name}: " in done.stdout
    assert done.stdout.rstrip().endswith("2 check(s) failed")


def test_a_half_open_production_gate_fails_by_name_only(tmp_path):
    install_skills("claude", project=tmp_path, home=tmp_path / "h")
    secret = "postgresql://reader:Sup3rSecretPw@db.internal/prod"
    _edit_claude_config(tmp_path, env={"PYTHONPATH": str(REPO), "RLHF_ENABLE_PRODUCTION_DATASETS": "1",
                                       "RLHF_PRODUCTION_DSN": secret, "RETURNCLOCK_DATASET_SALT": "short-salt"})
    done = doctor("--target", "claude", "--project", str(tmp_path), "--json")
    assert done.returncode == 1
    report = json.loads(done.stdout)
    gate = next(c for c in report["checks"] if c["check"] == "production gate")
    assert gate["status"] == "fail" and "RETURNCLOCK_DATASET_SALT_KEY_ID" in gate["detail"]
    assert "RETURNCLOCK_DATASET_SALT " in gate["detail"] and gate["fix"]
    assert "Sup3rSecretPw" not in done.stdout and "short-salt" not in done.stdout
    assert "Sup3rSecretPw" not in done.stderr
    assert report["server"]["env_names"] == sorted(["PYTHONPATH", "RLHF_ENABLE_PRODUCTION_DATASETS",
                                                    "RLHF_PRODUCTION_DSN", "RETURNCLOCK_DATASET_SALT"])


@pytest.mark.parametrize("bad", ["{not json", "[]"])
def test_an_unreadable_config_fails_without_a_traceback(tmp_path, bad):
    (tmp_path / ".mcp.json").write_text(bad)
    done = doctor("--target", "claude", "--project", str(tmp_path))
    assert done.returncode == 1 and "Traceback" not in done.stdout + done.stderr
    assert fails_with_fixes(done.stdout)[0].startswith(f"FAIL  mcp config: {tmp_path / '.mcp.json'}")


def test_a_bad_timeout_is_refused():
    done = doctor("--timeout", "0")
    assert done.returncode == 2 and done.stderr.strip() == \
        "error [invalid_argument]: --timeout must be a positive number of seconds, got 0.0"
