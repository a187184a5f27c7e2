"""``python -m extrarlhf skills install``: the skills land where each client looks, the MCP
config it writes parses and, started exactly as written, serves tools/list to the official SDK
client; unrelated config entries survive; a second run changes nothing; bad input is refused
with nothing written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from extrarlhf.agent_setup import install_skills
from extrarlhf.agent_setup.clients import CLIENTS, SetupError, entry_from_config, parse_config
from extrarlhf.agent_setup.install import MARKER, _digest, _installed_files
from tests.skills.skilldocs import REPO, SKILLS

SKILL_NAMES = sorted(p.parent.name for p in SKILLS.glob("*/SKILL.md"))
VENV_PYTHON = str(REPO / ".venv" / "bin" / "python")


def _config(path: Path) -> dict[str, Any]:
    text = path.read_text(encoding="utf-8")
    return tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


async def _tools_as_written(command: str, args: list[str], cwd: str | None, env: dict[str, str],
                            run_in: Path) -> set[str]:
    params = StdioServerParameters(command=command, args=args, cwd=cwd or str(run_in), env=env)
    async with Client(params) as client:
        pong = await client.call_tool("ping", {})
        assert pong.structured_content["ok"]
        return {t.name for t in (await client.list_tools()).tools}


def _written_entry(target: str, doc: dict[str, Any]) -> tuple[str, list[str], str | None, dict[str, str]]:
    """The server entry exactly as each client's config spells it."""
    if target == "codex":
        raw = doc["mcp_servers"]["extra-rlhf"]
        assert raw["startup_timeout_sec"] >= 30
        return raw["command"], raw["args"], raw["cwd"], raw["env"]
    if target == "opencode":
        raw = doc["mcp"]["extra-rlhf"]
        assert raw["type"] == "local" and raw["enabled"] is True
        return raw["command"][0], raw["command"][1:], raw["cwd"], raw["environment"]
    raw = doc["mcpServers"]["extra-rlhf"]
    assert raw["type"] == "stdio"
    return raw["command"], raw["args"], raw["cwd"], raw["env"]


@pytest.mark.parametrize("target,user", [(t, u) for t in CLIENTS for u in (False, True)])
def test_install_writes_skills_and_a_config_that_serves_tools(tmp_path, target, user):
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    report = install_skills(target, user=user, project=project, home=home)
    client = CLIENTS[target]
    skills_dir = client.skills_dir(project, home, user)
    config_path = client.config_path(project, home, user)
    assert report["skills_dir"] == str(skills_dir) and report["config"]["path"] == str(config_path)
    assert [s["name"] for s in report["skills"]] == SKILL_NAMES
    assert all(s["action"] == "installed" for s in report["skills"])
    for name in SKILL_NAMES:  # every file of the skill, byte for byte (the snippet filled in)
        installed = _installed_files(skills_dir / name)
        source = {str(p.relative_to(SKILLS / name)): p.read_bytes() for p in (SKILLS / name).rglob("*") if p.is_file()}
        assert set(installed) == set(source)
        for rel, data in source.items():
            if rel != "mcp/extra-rlhf.mcp.json":
                assert installed[rel] == data, f"{name}/{rel}"
        assert json.loads((skills_dir / name / MARKER).read_text())["files"] == _digest(installed)
    snippet = json.loads((skills_dir / "extra-rlhf" / "mcp" / "extra-rlhf.mcp.json").read_text())
    assert "<REPO_ROOT>" not in json.dumps(snippet)
    assert snippet["mcpServers"]["extra-rlhf"]["command"] == VENV_PYTHON

    command, args, cwd, env = _written_entry(target, _config(config_path))
    assert command == VENV_PYTHON and env == {"PYTHONPATH": str(REPO)}
    assert args[:2] == ["-m", "mcp_server"] and str(REPO / "sessions") in args
    assert cwd in (str(REPO), None)
    tools = anyio.run(_tools_as_written, command, args, cwd, env, project)
    assert {"start_battle", "submit_action", "run_series", "run_pipeline"} <= tools


def test_the_cli_prints_what_it_wrote_and_a_second_run_changes_nothing(tmp_path):
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    env = {**os.environ, "HOME": str(home)}
    run = [sys.executable, "-m", "extrarlhf", "skills", "install", "--target", "codex", "--project", str(project)]
    first = subprocess.run(run, capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    assert first.returncode == 0, first.stderr
    config = project / ".codex" / "config.toml"
    assert f"mcp config {config}: mcp_servers.extra-rlhf created" in first.stdout
    for name in SKILL_NAMES:
        assert f"skill {name}" in first.stdout and str(project / ".agents" / "skills" / name) in first.stdout
    assert f"command {VENV_PYTHON}" in first.stdout and f"cwd     {REPO}" in first.stdout
    before = _snapshot(project)
    mtimes = {p: p.stat().st_mtime_ns for p in project.rglob("*")}
    second = subprocess.run(run, capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    assert second.returncode == 0, second.stderr
    assert second.stdout.count(" unchanged ") == len(SKILL_NAMES) and "extra-rlhf unchanged" in second.stdout
    assert _snapshot(project) == before and {p: p.stat().st_mtime_ns for p in project.rglob("*")} == mtimes
    touched = {p.name for p in home.iterdir()} if home.exists() else set()
    assert touched & {".claude", ".claude.json", ".agents", ".codex", ".config"} == set(), \
        "a project install writes nothing into the home folder"


def test_dry_run_writes_nothing(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    report = install_skills("claude", project=project, home=tmp_path / "home", dry_run=True)
    assert report["dry_run"] and report["config"]["action"] == "created"
    assert all(s["action"] == "installed" for s in report["skills"])
    assert list(project.iterdir()) == [] and not (tmp_path / "home").exists()


# ------------------------------------------------------------------------------ merging
def test_claude_merge_keeps_every_unrelated_entry(tmp_path):
    project = tmp_path / "p"
    project.mkdir()
    existing = {"mcpServers": {"filesystem": {"command": "npx", "args": ["-y", "server-filesystem", "/tmp"]},
                               "extra-rlhf": {"command": "/old/python", "args": []}},
                "otherSetting": {"keep": [1, 2, 3]}}
    (project / ".mcp.json").write_text(json.dumps(existing))
    report = install_skills("claude", project=project, home=tmp_path / "h")
    assert report["config"]["action"] == "updated"
    doc = json.loads((project / ".mcp.json").read_text())
    assert doc["mcpServers"]["filesystem"] == existing["mcpServers"]["filesystem"]
    assert doc["otherSetting"] == existing["otherSetting"]
    assert doc["mcpServers"]["extra-rlhf"]["command"] == VENV_PYTHON
    assert list(doc) == ["mcpServers", "otherSetting"], "key order kept"


def test_claude_user_config_keeps_the_rest_of_claude_json(tmp_path):
    home = tmp_path / "h"
    home.mkdir()
    existing = {"numStartups": 12, "projects": {"/x": {"allowedTools": ["Bash"]}}, "theme": "dark"}
    (home / ".claude.json").write_text(json.dumps(existing, indent=2))
    report = install_skills("claude", user=True, project=tmp_path, home=home)
    assert report["config"]["action"] == "added"
    doc = json.loads((home / ".claude.json").read_text())
    assert {k: doc[k] for k in existing} == existing and set(doc["mcpServers"]) == {"extra-rlhf"}
    assert (home / ".claude" / "skills" / "extra-rlhf" / "SKILL.md").is_file()


def test_codex_merge_keeps_comments_tables_and_other_servers(tmp_path):
    project = tmp_path / "p"
    (project / ".codex").mkdir(parents=True)
    original = ('# my Codex settings\nmodel = "o4"  # the model\n\n[mcp_servers.docs]\ncommand = "docs-server"\n'
                'args = ["--port", "1"]\n\n[profiles.fast]\nmodel = "mini"\n')
    (project / ".codex" / "config.toml").write_text(original)
    report = install_skills("codex", project=project, home=tmp_path / "h")
    assert report["config"]["action"] == "added"
    text = (project / ".codex" / "config.toml").read_text()
    lines = iter(text.splitlines())
    assert all(line in lines for line in original.splitlines()), "every line kept, in order, comments included"
    doc = tomllib.loads(text)
    assert doc["model"] == "o4" and doc["profiles"] == {"fast": {"model": "mini"}}
    assert doc["mcp_servers"]["docs"] == {"command": "docs-server", "args": ["--port", "1"]}
    assert doc["mcp_servers"]["extra-rlhf"]["command"] == VENV_PYTHON
    assert install_skills("codex", project=project, home=tmp_path / "h")["config"]["action"] == "unchanged"
    assert (project / ".codex" / "config.toml").read_text() == text


def test_opencode_merge_keeps_other_entries_and_the_nested_layout(tmp_path):
    project = tmp_path / "p"
    project.mkdir()
    existing = {"$schema": "https://opencode.ai/config.json", "theme": "system",
                "mcp": {"servers": {"other": {"type": "remote", "url": "https://example.invalid/mcp"}}}}
    (project / "opencode.json").write_text(json.dumps(existing))
    install_skills("opencode", project=project, home=tmp_path / "h")
    doc = json.loads((project / "opencode.json").read_text())
    assert doc["$schema"] == existing["$schema"] and doc["theme"] == "system"
    assert doc["mcp"]["servers"]["other"] == existing["mcp"]["servers"]["other"]
    entry = doc["mcp"]["servers"]["extra-rlhf"]
    assert entry["disabled"] is False and entry["command"][0] == VENV_PYTHON
    parsed = entry_from_config("opencode", parse_config(project / "opencode.json", "json"))
    assert parsed.command == VENV_PYTHON and parsed.env == {"PYTHONPATH": str(REPO)}


def test_an_older_install_of_ours_is_updated_without_force(tmp_path):
    project = tmp_path / "p"
    project.mkdir()
    install_skills("agents", project=project, home=tmp_path / "h")
    skill = project / ".agents" / "skills" / "extra-rlhf-l2-battle"
    (skill / "SKILL.md").write_text("---\nname: extra-rlhf-l2-battle\ndescription: an older version\n---\nold\n")
    marker = json.loads((skill / MARKER).read_text())
    marker["files"] = _digest(_installed_files(skill))  # as an older install would have recorded it
    (skill / MARKER).write_text(json.dumps(marker))
    report = install_skills("agents", project=project, home=tmp_path / "h")
    actions = {s["name"]: s["action"] for s in report["skills"]}
    assert actions["extra-rlhf-l2-battle"] == "updated" and actions["extra-rlhf"] == "unchanged"
    assert (skill / "SKILL.md").read_bytes() == (SKILLS / "extra-rlhf-l2-battle" / "SKILL.md").read_bytes()
    assert sorted(p.name for p in skill.parent.iterdir()) == SKILL_NAMES, "no temp or old folder left behind"


# ------------------------------------------------------------------------------ bad input
def _refused(code: str, fn: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(SetupError) as info:
        fn(*args, **kwargs)
    assert info.value.code == code, str(info.value)
    return str(info.value)


def test_unknown_target_is_refused(tmp_path):
    message = _refused("invalid_argument", install_skills, "vim", project=tmp_path, home=tmp_path / "h")
    assert "unknown target 'vim'" in message and "claude, codex, opencode, agents" in message
    done = subprocess.run([sys.executable, "-m", "extrarlhf", "skills", "install", "--target", "vim"],
                          capture_output=True, text=True, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 2 and "invalid choice: 'vim'" in done.stderr and "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("target,name,content", [
    ("claude", ".mcp.json", '{"mcpServers": {"a": 1},'),
    ("opencode", "opencode.json", "[1, 2]"),
    ("claude", ".mcp.json", '{"mcpServers": ["not", "an", "object"]}'),
    ("codex", ".codex/config.toml", '[mcp_servers\ncommand = "x"\n'),
    ("codex", ".codex/config.toml", 'mcp_servers = "not a table"\n'),
])
def test_a_config_that_does_not_parse_is_refused_and_left_alone(tmp_path, target, name, content):
    project = tmp_path / "p"
    (project / name).parent.mkdir(parents=True, exist_ok=True)
    (project / name).write_text(content)
    before = _snapshot(project)
    message = _refused("invalid_config", install_skills, target, project=project, home=tmp_path / "h")
    assert str(project / name) in message and "nothing was written" in message
    assert _snapshot(project) == before, "no skill copied, the config untouched"
    done = subprocess.run([sys.executable, "-m", "extrarlhf", "skills", "install", "--target", target,
                           "--project", str(project)], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "HOME": str(tmp_path / "h")})
    assert done.returncode == 2 and done.stderr.startswith("error [invalid_config]: ")
    assert "Traceback" not in done.stderr and _snapshot(project) == before


def test_a_missing_project_folder_is_refused(tmp_path):
    message = _refused("not_found", install_skills, "claude", project=tmp_path / "typo", home=tmp_path / "h")
    assert str(tmp_path / "typo") in message and list(tmp_path.iterdir()) == []


def test_an_unwritable_target_directory_is_refused_before_anything_is_written(tmp_path):
    project = tmp_path / "p"
    project.mkdir()
    (project / ".claude").write_text("a file where the skills folder should go")
    message = _refused("not_a_directory", install_skills, "claude", project=project, home=tmp_path / "h")
    assert ".claude is a file" in message
    assert sorted(p.name for p in project.iterdir()) == [".claude"], "no .mcp.json written either"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through any permission bits")
def test_a_read_only_project_is_refused(tmp_path):
    project = tmp_path / "p"
    project.mkdir()
    project.chmod(0o555)
    try:
        message = _refused("permission_denied", install_skills, "codex", project=project, home=tmp_path / "h")
        assert str(project) in message and list(project.iterdir()) == []
    finally:
        project.chmod(0o755)


def test_a_different_skill_of_the_same_name_is_refused_unless_forced(tmp_path):
    project = tmp_path / "p"
    theirs = project / ".claude" / "skills" / "extra-rlhf-l2-battle"
    theirs.mkdir(parents=True)
    (theirs / "SKILL.md").write_text("---\nname: extra-rlhf-l2-battle\ndescription: someone else's skill\n---\n")
    before = _snapshot(project)
    message = _refused("skill_conflict", install_skills, "claude", project=project, home=tmp_path / "h")
    assert str(theirs) in message and "--force" in message
    assert _snapshot(project) == before, "no other skill installed, no config written, theirs untouched"

    report = install_skills("claude", project=project, home=tmp_path / "h", force=True)
    assert {s["name"]: s["action"] for s in report["skills"]}["extra-rlhf-l2-battle"] == "replaced"
    assert (theirs / "SKILL.md").read_bytes() == (SKILLS / "extra-rlhf-l2-battle" / "SKILL.md").read_bytes()


def test_our_copy_edited_by_hand_counts_as_a_different_skill(tmp_path):
    project = tmp_path / "p"
    project.mkdir()
    install_skills("opencode", project=project, home=tmp_path / "h")
    edited = project / ".agents" / "skills" / "extra-rlhf" / "SKILL.md"
    edited.write_text(edited.read_text() + "\nmy own notes\n")
    _refused("skill_conflict", install_skills, "opencode", project=project, home=tmp_path / "h")
    assert edited.read_text().endswith("my own notes\n")


def test_a_write_failing_midway_puts_everything_back(tmp_path, monkeypatch):
    """A full disk while the config is written (after the skills were renamed into place):
    the error names the directory and the skills folder is back as it was."""
    import errno

    from extrarlhf.agent_setup import install as install_module

    project = tmp_path / "p"
    project.mkdir()
    install_skills("claude", project=project, home=tmp_path / "h")
    skill = project / ".claude" / "skills" / "extra-rlhf-l1-campaigns"
    (skill / "SKILL.md").write_text("older")
    marker = json.loads((skill / MARKER).read_text())
    marker["files"] = _digest(_installed_files(skill))  # an unedited older install: it will be updated
    (skill / MARKER).write_text(json.dumps(marker))
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"other": {"command": "x"}}}))
    before = _snapshot(project)

    def full_disk(path, data):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(install_module, "atomic_write_bytes", full_disk)
    with pytest.raises(Exception) as info:
        install_skills("claude", project=project, home=tmp_path / "h")
    assert getattr(info.value, "code", None) == "disk_full" and str(project) in str(info.value)
    assert _snapshot(project) == before, "the updated skill is rolled back, nothing else changed"
    assert sorted(p.name for p in skill.parent.iterdir()) == SKILL_NAMES, "no temp or old folder left"


# --------------------------------------------------------------------------- issue 24: links, inline tables, env, CRLF
def test_a_symlinked_config_is_written_through_the_link(tmp_path):
    """Issue 24: a dotfile manager's links. Before, the link was replaced by a plain file and the
    dotfile never got the entry."""
    home, project, dotfiles = tmp_path / "h", tmp_path / "p", tmp_path / "dotfiles"
    for folder in (home, project, dotfiles):
        folder.mkdir()
    (dotfiles / "claude.json").write_text(json.dumps({"theme": "dark", "numStartups": 3}))
    (dotfiles / "claude.json").chmod(0o600)
    (home / ".claude.json").symlink_to(dotfiles / "claude.json")
    (dotfiles / "mcp.json").write_text(json.dumps({"mcpServers": {"other": {"command": "x"}}}))
    (project / ".mcp.json").symlink_to("../dotfiles/mcp.json")  # a relative link
    for user, link, target in ((True, home / ".claude.json", dotfiles / "claude.json"),
                               (False, project / ".mcp.json", dotfiles / "mcp.json")):
        pointed = os.readlink(link)
        report = install_skills("claude", user=user, project=project, home=home)
        assert report["config"]["path"] == str(link) and report["config"]["written_to"] == str(target)
        assert link.is_symlink() and os.readlink(link) == pointed, "the link itself is left as it was"
        doc = json.loads(target.read_text())
        assert doc["mcpServers"]["extra-rlhf"]["command"] == VENV_PYTHON
        assert sorted(p.name for p in dotfiles.iterdir()) == ["claude.json", "mcp.json"], "no temp file left"
        assert install_skills("claude", user=user, project=project, home=home)["config"]["action"] == "unchanged"
    assert json.loads((dotfiles / "claude.json").read_text())["theme"] == "dark"
    assert json.loads((dotfiles / "mcp.json").read_text())["mcpServers"]["other"] == {"command": "x"}
    assert (dotfiles / "claude.json").stat().st_mode & 0o777 == 0o600, "its permissions kept"


@pytest.mark.parametrize("case", ["loop", "device", "no folder"])
def test_a_config_symlink_that_cannot_be_written_through_is_refused(tmp_path, case):
    project = tmp_path / "p"
    project.mkdir()
    link = project / ".mcp.json"
    if case == "loop":
        link.symlink_to(".mcp.json")
    elif case == "device":
        link.symlink_to("/dev/null")
    else:
        link.symlink_to(tmp_path / "missing" / "mcp.json")
    before = (os.readlink(link), _snapshot(project))
    message = _refused("config_symlink", install_skills, "claude", project=project, home=tmp_path / "h")
    assert str(link) in message and "nothing was written" in message
    assert (os.readlink(link), _snapshot(project)) == before and not (project / ".claude").exists()


def test_a_codex_inline_mcp_servers_table_is_merged(tmp_path):
    """Issue 24: `mcp_servers = { other = {...} }` (an inline table) exited with a traceback."""
    project = tmp_path / "p"
    (project / ".codex").mkdir(parents=True)
    config = project / ".codex" / "config.toml"
    config.write_text('model = "o4"\nmcp_servers = { other = { command = "x" } }\n')
    report = install_skills("codex", project=project, home=tmp_path / "h")
    assert report["config"]["action"] == "added"
    doc = tomllib.loads(config.read_text())
    assert doc["model"] == "o4" and doc["mcp_servers"]["other"] == {"command": "x"}
    command, args, cwd, env = _written_entry("codex", doc)
    assert (command, cwd, env) == (VENV_PYTHON, str(REPO), {"PYTHONPATH": str(REPO)}) and "mcp_server" in args
    assert install_skills("codex", project=project, home=tmp_path / "h")["config"]["action"] == "unchanged"


@pytest.mark.parametrize("target,name", [("codex", ".codex/config.toml"), ("claude", ".mcp.json"),
                                         ("opencode", "opencode.json")])
def test_the_users_own_env_variables_of_our_entry_are_kept(tmp_path, target, name, capsys):
    """Issue 24: variables added under `[mcp_servers.extra-rlhf.env]` were dropped on reinstall."""
    project = tmp_path / "p"
    project.mkdir()
    install_skills(target, project=project, home=tmp_path / "h")
    config = project / name
    if target == "codex":
        text = config.read_text().replace("[mcp_servers.extra-rlhf.env]\n",
                                          '[mcp_servers.extra-rlhf.env]\nMY_TOKEN = "s3cr3t-value"\n')
        assert "MY_TOKEN" in text
        config.write_text(text)
    else:
        doc = json.loads(config.read_text())
        server = doc["mcp"]["extra-rlhf"] if target == "opencode" else doc["mcpServers"]["extra-rlhf"]
        server["environment" if target == "opencode" else "env"].update(MY_TOKEN="s3cr3t-value", PYTHONPATH="/old")
        config.write_text(json.dumps(doc))
    report = install_skills(target, project=project, home=tmp_path / "h")
    assert report["config"]["kept_env"] == ["MY_TOKEN"] and "s3cr3t-value" not in json.dumps(report)
    doc = _config(config)
    env = doc["mcp"]["extra-rlhf"]["environment"] if target == "opencode" else _written_entry(target, doc)[3]
    assert env == {"PYTHONPATH": str(REPO), "MY_TOKEN": "s3cr3t-value"}, "theirs kept, ours pinned"


@pytest.mark.parametrize("target,name,content", [
    ("codex", ".codex/config.toml", b'# mine\r\nmodel = "o4"\r\n\r\n[mcp_servers.docs]\r\ncommand = "d"\r\n'),
    ("claude", ".mcp.json", b'{\r\n  "theme": "dark"\r\n}\r\n'),
])
def test_crlf_line_endings_are_kept(tmp_path, target, name, content):
    project = tmp_path / "p"
    (project / name).parent.mkdir(parents=True, exist_ok=True)
    (project / name).write_bytes(content)
    install_skills(target, project=project, home=tmp_path / "h")
    data = (project / name).read_bytes()
    assert data.count(b"\n") > content.count(b"\n") and data.count(b"\n") == data.count(b"\r\n")
    assert b"extra-rlhf" in data and _config(project / name)
    if target == "codex":
        assert data.startswith(content), "the user's lines are kept as they were"
    assert install_skills(target, project=project, home=tmp_path / "h")["config"]["action"] == "unchanged"


def test_a_config_that_is_not_utf8_is_refused_and_left_alone(tmp_path):
    project = tmp_path / "p"
    project.mkdir()
    (project / ".mcp.json").write_bytes(b'{"theme": "\xff\xfe"}\n')
    before = _snapshot(project)
    message = _refused("invalid_config", install_skills, "claude", project=project, home=tmp_path / "h")
    assert "is not UTF-8 text" in message and "nothing was written" in message
    assert _snapshot(project) == before
