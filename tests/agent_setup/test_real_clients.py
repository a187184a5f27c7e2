"""The real clients from npm (``make tools`` puts them in ``.tools/``: ``@anthropic-ai/claude-code``,
``@openai/codex``, ``opencode-ai``) read what ``skills install`` wrote: ``claude mcp list``
health-checks the server (``✔ Connected`` after ``--trust``, ``Pending approval`` before),
``codex mcp list`` shows it enabled (after ``--trust``; before, Codex ignores the project's
config), ``opencode mcp list`` connects, and OpenCode sees one copy of each skill when the
claude and opencode targets share a project. No model API is used by these commands.

Each client runs with HOME (and the XDG dirs) in a temp folder, never the real ~/.claude.json
or ~/.codex, in its own process group, killed after, with a timeout. Skipped when the clients
are not installed (no npm or no registry: ``make tools`` said so in one line), except under
CI (``CI`` set), where the registry is reachable and a missing client is a failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from extrarlhf.agent_setup.install import install_targets
from tests.skills.skilldocs import REPO, SKILLS

BIN = REPO / ".tools" / "node_modules" / ".bin"
CLIENT_BINS = {name: BIN / name for name in ("claude", "codex", "opencode")}
SKILL_NAMES = sorted(p.parent.name for p in SKILLS.glob("*/SKILL.md"))
TIMEOUT_S = 90
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

_missing = [str(path) for path in CLIENT_BINS.values() if not path.exists()]
if _missing and os.environ.get("CI"):
    raise RuntimeError(f"CI is set but the real MCP clients are not installed ({', '.join(_missing)}): `make tools` "
                       f"could not install them from npm")
pytestmark = pytest.mark.skipif(bool(_missing), reason=f"real MCP clients not installed ({', '.join(_missing)}): run "
                                                        f"`make tools` (needs npm and the npm registry)")


@pytest.fixture
def home(tmp_path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    return home


def _env(home: Path) -> dict[str, str]:
    """A client's whole environment: a scratch HOME, no inherited credentials or config dirs."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "TERM": "dumb", "NO_COLOR": "1",
            "XDG_CONFIG_HOME": str(home / ".config"), "XDG_DATA_HOME": str(home / ".local" / "share"),
            "XDG_CACHE_HOME": str(home / ".cache"), "XDG_STATE_HOME": str(home / ".local" / "state"),
            "MCP_TIMEOUT": "60000",  # Claude Code's server start-up timeout (ms; 30,000 by default): a loaded machine
            "DISABLE_AUTOUPDATER": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1"}


def run(*commands: list[str], cwd: Path, home: Path) -> list[tuple[str, str]]:
    """Run the commands side by side, each in its own process group with a timeout; every group
    is killed after, so no server a client started outlives the test. Returns each command's
    (stdout, stderr) without ANSI colours."""
    procs = [subprocess.Popen(command, cwd=cwd, env=_env(home), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, start_new_session=True) for command in commands]
    results = []
    try:
        for command, proc in zip(commands, procs):
            try:
                out, err = proc.communicate(timeout=TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                out, err = proc.communicate()
                pytest.fail(f"{' '.join(command)} did not finish within {TIMEOUT_S} s:\n{out}\n{err}")
            assert proc.returncode == 0, f"{' '.join(command)} exited {proc.returncode}:\n{out}\n{err}"
            results.append((ANSI.sub("", out), ANSI.sub("", err)))
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return results


def install(home: Path, project: Path, *targets: str, trust: bool = False) -> list[dict[str, Any]]:
    """``skills install`` (its command line is tested in test_install_trust.py), into ``home``."""
    return install_targets(list(targets), project=project, home=home, trust=trust)


def _line(out: str, start: str) -> str:
    lines = [line.strip() for line in out.splitlines() if line.strip().startswith(start)]
    assert len(lines) == 1, f"expected one line starting {start!r} in:\n{out}"
    return lines[0]


def test_claude_code_connects_after_trust_and_opencode_shares_its_skills(tmp_path, home):
    project = tmp_path / "project"
    project.mkdir()
    install(home, project, "claude", "opencode")
    claude = [str(CLIENT_BINS["claude"]), "mcp", "list"]
    before = _line(run(claude, cwd=project, home=home)[0][0], "extra-rlhf:")
    assert before.endswith("- ⏸ Pending approval (run `claude` to approve)"), before

    reports = install(home, project, "claude", "opencode", trust=True)
    assert [s["path"] for s in reports[0]["settings"]][-1] == str(home / ".claude.json")  # not a git work tree
    opencode = str(CLIENT_BINS["opencode"])
    (claude_out, _), (listed, _) = run(claude, [opencode, "mcp", "list", "--pure"], cwd=project, home=home)
    after = _line(claude_out, "extra-rlhf:")
    assert after.endswith("- ✔ Connected"), after
    assert after.startswith(f"extra-rlhf: {REPO / '.venv' / 'bin' / 'python'} -m mcp_server")
    assert _line(listed, "●") == "●  ✓ extra-rlhf connected", listed

    [(skills_out, logs)] = run([opencode, "debug", "skill", "--pure", "--print-logs"], cwd=project, home=home)
    skills = {s["name"]: s["location"] for s in json.loads(skills_out)}
    assert {n: skills.get(n) for n in SKILL_NAMES} == {n: str(project / ".claude" / "skills" / n / "SKILL.md")
                                                       for n in SKILL_NAMES}
    assert "duplicate skill name" not in logs and not (project / ".agents").exists()


def test_claude_code_in_a_git_work_tree_needs_no_home_setting(tmp_path, home):
    project = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(project)], check=True, timeout=30)
    [report] = install(home, project, "claude", trust=True)
    assert report["skipped"][0]["what"] == str(home / ".claude.json")
    assert not (home / ".claude.json").exists()
    after = _line(run([str(CLIENT_BINS["claude"]), "mcp", "list"], cwd=project, home=home)[0][0], "extra-rlhf:")
    assert after.endswith("- ✔ Connected"), after


def test_codex_lists_the_server_enabled_after_trust(tmp_path, home):
    project = tmp_path / "project"
    project.mkdir()
    install(home, project, "codex")
    codex = [str(CLIENT_BINS["codex"]), "mcp", "list"]
    assert "No MCP servers configured yet" in run(codex, cwd=project, home=home)[0][0]  # untrusted: config ignored

    install(home, project, "codex", trust=True)
    out = run(codex, cwd=project, home=home)[0][0]
    header = _line(out, "Name")
    assert header.split() == ["Name", "Command", "Args", "Env", "Cwd", "Status", "Auth"], header
    row = _line(out, "extra-rlhf")
    assert row.split()[:2] == ["extra-rlhf", str(REPO / ".venv" / "bin" / "python")]
    assert row.split()[-3:-1] == [str(REPO), "enabled"], row
    assert "PYTHONPATH=*****" in row  # Codex masks env values
