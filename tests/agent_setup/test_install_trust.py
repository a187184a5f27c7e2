"""``skills install --trust`` and several targets in one project (issue 27): the trust settings
are written only when asked, merged into the user's files without losing a key, atomically
(all or nothing with the rest of the install); targets that read the same skill folder share
one copy; the printout names every file, setting and skip. The real clients reading these
files are in test_real_clients.py."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from extrarlhf.agent_setup.clients import SetupError
from extrarlhf.agent_setup.install import MARKER, install_skills, install_targets
from tests.skills.skilldocs import REPO, SKILLS

SKILL_NAMES = sorted(p.parent.name for p in SKILLS.glob("*/SKILL.md"))


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def dirs(tmp_path):
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    return project, home


def _git_init(path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    subprocess.run(["git", "init", "-q", str(path)], check=True, timeout=30)


# ------------------------------------------------------------------------------ --trust
def test_without_trust_nothing_is_written_into_home_and_the_report_says_what_was_left(dirs):
    project, home = dirs
    claude, codex = install_targets(["claude", "codex"], project=project, home=home)
    assert not home.exists()
    assert claude["settings"] == [] and codex["settings"] == []
    assert "not asked (--trust writes enabledMcpjsonServers" in claude["skipped"][0]["why"]
    assert "Pending approval" in claude["skipped"][0]["why"]
    assert 'trust_level = "trusted"' in codex["skipped"][0]["why"]
    assert not (project / ".claude" / "settings.local.json").exists()


def test_claude_trust_outside_git_merges_both_files_and_keeps_every_key(dirs):
    project, home = dirs
    home.mkdir()
    key = os.path.realpath(project)
    claude_json = home / ".claude.json"
    claude_json.write_text(json.dumps({"numStartups": 7, "oauthAccount": {"emailAddress": "a@b.c"},
                                       "projects": {"/elsewhere": {"hasTrustDialogAccepted": False},
                                                    key: {"allowedTools": ["Bash"], "hasTrustDialogAccepted": False}}}))
    os.chmod(claude_json, 0o640)
    local = project / ".claude" / "settings.local.json"
    local.parent.mkdir()
    local.write_text(json.dumps({"permissions": {"allow": ["Read"]}, "enabledMcpjsonServers": ["other"],
                                 "disabledMcpjsonServers": ["extra-rlhf", "third"]}))
    report = install_skills("claude", project=project, home=home, trust=True)
    assert [(s["path"], s["action"]) for s in report["settings"]] == [(str(local), "updated"),
                                                                     (str(claude_json), "updated")]
    assert report["settings"][1]["setting"] == f'projects["{key}"].hasTrustDialogAccepted = true'
    assert json.loads(local.read_text()) == {"permissions": {"allow": ["Read"]},
                                             "enabledMcpjsonServers": ["other", "extra-rlhf"],
                                             "disabledMcpjsonServers": ["third"]}
    assert json.loads(claude_json.read_text()) == {
        "numStartups": 7, "oauthAccount": {"emailAddress": "a@b.c"},
        "projects": {"/elsewhere": {"hasTrustDialogAccepted": False},
                     key: {"allowedTools": ["Bash"], "hasTrustDialogAccepted": True}}}
    assert claude_json.stat().st_mode & 0o777 == 0o640, "an existing file keeps its permissions"
    again = install_skills("claude", project=project, home=home, trust=True)
    assert [s["action"] for s in again["settings"]] == ["unchanged", "unchanged"]


def test_a_new_claude_json_is_private(dirs):
    project, home = dirs
    install_skills("claude", project=project, home=home, trust=True)
    assert (home / ".claude.json").stat().st_mode & 0o777 == 0o600
    assert json.loads((home / ".claude.json").read_text()) == {
        "projects": {os.path.realpath(project): {"hasTrustDialogAccepted": True}}}


def test_claude_trust_in_a_git_work_tree_writes_only_the_project_file(dirs):
    project, home = dirs
    _git_init(project)
    report = install_skills("claude", project=project, home=home, trust=True)
    assert [s["path"] for s in report["settings"]] == [str(project / ".claude" / "settings.local.json")]
    assert not home.exists()
    assert "untracked, which Claude Code reads untrusted" in report["skipped"][0]["why"]


def test_codex_trust_merges_into_the_users_config_toml(dirs):
    project, home = dirs
    (home / ".codex").mkdir(parents=True)
    config = home / ".codex" / "config.toml"
    config.write_text('# my settings\nmodel = "o4"\n\n[projects."/elsewhere"]\ntrust_level = "untrusted"\n\n'
                      '[mcp_servers.other]\ncommand = "x"\n')
    report = install_skills("codex", project=project, home=home, trust=True)
    key = os.path.realpath(project)
    assert report["settings"] == [{"path": str(config), "setting": f'[projects."{key}"] trust_level = "trusted"',
                                   "keys": ["projects", key, "trust_level"], "action": "updated",
                                   "written_to": str(config)}]
    text = config.read_text()
    assert text.startswith('# my settings\nmodel = "o4"\n')
    assert tomllib.loads(text) == {"model": "o4", "mcp_servers": {"other": {"command": "x"}},
                                   "projects": {"/elsewhere": {"trust_level": "untrusted"},
                                                key: {"trust_level": "trusted"}}}
    assert "extra-rlhf" in tomllib.loads((project / ".codex" / "config.toml").read_text())["mcp_servers"]
    assert install_skills("codex", project=project, home=home, trust=True)["settings"][0]["action"] == "unchanged"


@pytest.mark.parametrize("target,user", [("opencode", False), ("agents", False), ("claude", True), ("codex", True)])
def test_trust_is_skipped_with_a_reason_where_there_is_nothing_to_trust(dirs, target, user):
    project, home = dirs
    report = install_skills(target, project=project, home=home, user=user, trust=True)
    assert report["settings"] == [] and report["skipped"][-1]["what"] == "trust settings"
    assert ("without a trust step" if target == "opencode" else "generic client" if target == "agents"
            else "nothing to trust") in report["skipped"][-1]["why"]
    assert not (project / ".claude" / "settings.local.json").exists()


def test_a_claude_json_that_does_not_parse_is_refused_and_nothing_is_written(dirs):
    project, home = dirs
    home.mkdir()
    (home / ".claude.json").write_text('{"projects": ')
    with pytest.raises(SetupError) as info:
        install_skills("claude", project=project, home=home, trust=True)
    assert info.value.code == "invalid_config" and "is not valid JSON" in str(info.value)
    assert "nothing was written" in str(info.value)
    assert (home / ".claude.json").read_text() == '{"projects": ' and list(project.iterdir()) == []


def test_a_failing_trust_write_puts_back_the_skills_and_the_configs_already_written(dirs, monkeypatch):
    from extrarlhf.agent_setup import install as install_module

    project, home = dirs
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"other": {"command": "x"}}}))
    before = _snapshot(project)
    real_write = install_module.atomic_write_bytes

    def full_on_claude_json(path, data):
        if Path(path).name == ".claude.json":
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        real_write(path, data)

    monkeypatch.setattr(install_module, "atomic_write_bytes", full_on_claude_json)
    with pytest.raises(Exception) as info:
        install_skills("claude", project=project, home=home, trust=True)
    assert getattr(info.value, "code", None) == "disk_full"
    assert _snapshot(project) == before, ".mcp.json restored, settings.local.json and the skills removed"
    assert not (home / ".claude.json").exists()


# ------------------------------------------------------------------------------ several targets, one copy
def test_claude_and_opencode_share_one_copy_in_claude_skills(dirs):
    project, home = dirs
    claude, opencode = install_targets(["claude", "opencode"], project=project, home=home)
    assert claude["skills_dir"] == opencode["skills_dir"] == str(project / ".claude" / "skills")
    assert not (project / ".agents").exists()
    assert opencode["skipped"][0]["what"] == f"the OpenCode copy in {project / '.agents' / 'skills'}"
    assert "no duplicate skill names" in opencode["skipped"][0]["why"]
    assert claude["warnings"] == [] and opencode["warnings"] == []


def test_opencode_after_claude_uses_the_claude_copy(dirs):
    project, home = dirs
    install_skills("claude", project=project, home=home)
    report = install_skills("opencode", project=project, home=home)
    assert report["skills_dir"] == str(project / ".claude" / "skills")
    assert all(s["action"] == "unchanged" for s in report["skills"]) and not (project / ".agents").exists()
    assert "already holds these skills" in report["skipped"][0]["why"]


def test_two_copies_opencode_reads_are_warned_about(dirs):
    project, home = dirs
    reports = install_targets(["claude", "codex", "opencode"], project=project, home=home)
    assert all((project / d / "skills" / n / MARKER).is_file() for d in (".claude", ".agents") for n in SKILL_NAMES)
    warning = reports[0]["warnings"][0]
    assert "OpenCode reads both" in warning and "OPENCODE_DISABLE_CLAUDE_CODE_SKILLS=1" in warning
    # a claude install into a project whose OpenCode already has the .agents copy warns too
    other = project / "other"
    other.mkdir()
    install_skills("opencode", project=other, home=home)
    assert "OpenCode reads both" in install_skills("claude", project=other, home=home)["warnings"][0]


def test_two_targets_writing_the_same_config_are_refused(dirs):
    project, home = dirs
    with pytest.raises(SetupError) as info:
        install_targets(["claude", "agents"], project=project, home=home)
    assert info.value.code == "invalid_argument" and ".mcp.json" in str(info.value)
    assert list(project.iterdir()) == []


# ------------------------------------------------------------------------------ the printout
def test_the_printout_names_every_file_setting_and_skip_and_the_cwd_it_writes(dirs):
    project, home = dirs
    run = [sys.executable, "-m", "extrarlhf", "skills", "install", "--target", "claude", "opencode", "--trust",
           "--project", str(project)]
    done = subprocess.run(run, capture_output=True, text=True, check=False, env={**os.environ, "HOME": str(home)}, cwd=REPO,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for name in SKILL_NAMES:
        assert f"{project / '.claude' / 'skills' / name}\n        files: " in out
    assert "files: INSTALL.md, SKILL.md, mcp/extra-rlhf.mcp.json, references/" in out
    assert out.count(".extra-rlhf-install.json") == len(SKILL_NAMES)
    assert (f'setting {project / ".claude" / "settings.local.json"}: enabledMcpjsonServers includes "extra-rlhf" '
            f"created") in out
    assert f"setting {home / '.claude.json'}: projects[\"{os.path.realpath(project)}\"]" in out
    assert f"skipped the OpenCode copy in {project / '.agents' / 'skills'}" in out
    assert "skipped trust settings: OpenCode uses a project's opencode.json without a trust step" in out
    assert f"skills in {project / '.claude' / 'skills'}: as listed above" in out
    written = json.loads((project / "opencode.json").read_text())["mcp"]["extra-rlhf"]
    opencode_part = out[out.index("OpenCode (project scope)"):]
    assert f"    cwd     {written['cwd']}\n" in opencode_part and written["cwd"] == str(REPO)


def test_a_tracked_local_settings_file_gets_the_trust_key_of_the_git_root(tmp_path):
    """Claude Code ignores a git-tracked .claude/settings.local.json in an untrusted folder, and
    files folders of a work tree under its root (checked with the real client: Connected)."""
    repo = tmp_path / "repo"
    _git_init(repo)
    project = repo / "sub"
    (project / ".claude").mkdir(parents=True)
    (project / ".claude" / "settings.local.json").write_text("{}")
    subprocess.run(["git", "-C", str(repo), "add", "sub/.claude/settings.local.json"], check=True, timeout=30)
    report = install_skills("claude", project=project, home=tmp_path / "home", trust=True)
    root = os.path.realpath(repo)
    assert report["settings"][1]["setting"] == f'projects["{root}"].hasTrustDialogAccepted = true'
    assert json.loads((tmp_path / "home" / ".claude.json").read_text()) == {
        "projects": {root: {"hasTrustDialogAccepted": True}}}
