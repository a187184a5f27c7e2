"""The settings ``skills install --trust`` writes so that a client uses the project's server
without a person at the prompt (checked with Claude Code 2.1.197 and Codex 0.171.0 from npm).

- Claude Code shows a project (``.mcp.json``) server as ``Pending approval`` until it is
  enabled: ``enabledMcpjsonServers`` in the project's ``.claude/settings.local.json`` (a
  documented setting, in the file Claude Code itself moves that list to). Claude Code reads
  that file for this only in a trusted folder, or in a git work tree where the file is not
  tracked (it ignores it otherwise); outside such a work tree the folder is also marked
  trusted: ``projects["<dir>"].hasTrustDialogAccepted`` in ``~/.claude.json``, the one key
  the "trust this folder" dialog writes, keyed by the git root or the folder itself.
- Codex ignores a project's ``.codex/config.toml`` until ``~/.codex/config.toml`` has
  ``[projects."<dir>"] trust_level = "trusted"``.
- OpenCode has no trust step; a generic client is the user's to configure. A user-level
  install needs no trust: user configs are read everywhere.

Each setting is one :class:`Setting`: the file, how to set it in a parsed document, and
what the printout calls it; install.py plans and writes them with the MCP config.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .clients import SERVER_NAME, SetupError

CLAUDE_LOCAL_SETTINGS = Path(".claude") / "settings.local.json"
GIT_TIMEOUT_S = 10


@dataclass(frozen=True)
class Setting:
    path: Path
    fmt: str                                   # "json" or "toml"
    describe: str                              # the setting as printed, e.g. projects["/p"].hasTrustDialogAccepted = true
    apply: Callable[[Any, str], list[str]]     # sets it in the parsed document; returns the key path
    user_level: bool                           # a file in the home folder (created private, 0600)


@dataclass(frozen=True)
class Skipped:
    what: str
    why: str


def _git(project: Path, *args: str) -> subprocess.CompletedProcess[str] | None:
    git = shutil.which("git")
    if git is None:
        return None
    try:
        return subprocess.run([git, "-c", "core.hooksPath=/dev/null", "-C", str(project), *args], capture_output=True,
                              text=True, check=False, timeout=GIT_TIMEOUT_S, env={**os.environ, "GIT_LITERAL_PATHSPECS": "1"})
    except (OSError, subprocess.TimeoutExpired):
        return None


def claude_reads_local_settings(project: Path) -> bool:
    """Whether Claude Code reads ``.claude/settings.local.json`` of an untrusted folder: only in a
    git work tree where the file is untracked and neither it nor ``.claude`` is a symlink."""
    if any(p.is_symlink() for p in (project / ".claude", project / CLAUDE_LOCAL_SETTINGS)):
        return False
    if (project / ".claude" / ".git").exists():
        return False
    done = _git(project, "ls-files", "--error-unmatch", "--", CLAUDE_LOCAL_SETTINGS.as_posix())
    return done is not None and done.returncode == 1  # 1: in a work tree, not tracked; 128: no work tree


def claude_project_key(project: Path) -> str:
    """The key Claude Code files a folder under in ``~/.claude.json``: its git root, else itself."""
    done = _git(project, "rev-parse", "--show-toplevel")
    if done is not None and done.returncode == 0 and done.stdout.strip():
        return os.path.realpath(done.stdout.strip())
    return os.path.realpath(project)


def _json_object(doc: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = doc.setdefault(key, {})
    if not isinstance(value, dict):
        raise SetupError(f"{where}: {key!r} is a {type(value).__name__}, not an object; fix the file (or move it "
                         f"aside) and run again - nothing was written", "invalid_config")
    return value


def _enable_in_claude_settings(doc: Any, where: str) -> list[str]:
    enabled = doc.setdefault("enabledMcpjsonServers", [])
    if not isinstance(enabled, list):
        raise SetupError(f"{where}: 'enabledMcpjsonServers' is a {type(enabled).__name__}, not a list; fix the file "
                         f"(or move it aside) and run again - nothing was written", "invalid_config")
    if SERVER_NAME not in enabled:
        enabled.append(SERVER_NAME)
    disabled = doc.get("disabledMcpjsonServers")
    if isinstance(disabled, list) and SERVER_NAME in disabled:  # Claude Code checks the disabled list first
        disabled.remove(SERVER_NAME)
    return ["enabledMcpjsonServers"]


def _claude_trust(key: str) -> Callable[[Any, str], list[str]]:
    def apply(doc: Any, where: str) -> list[str]:
        _json_object(_json_object(doc, "projects", where), key, f"{where}: projects")["hasTrustDialogAccepted"] = True
        return ["projects", key, "hasTrustDialogAccepted"]
    return apply


def _codex_trust(key: str) -> Callable[[Any, str], list[str]]:
    def apply(doc: Any, where: str) -> list[str]:
        import tomlkit

        projects = doc.get("projects")
        if projects is None:
            projects = doc["projects"] = tomlkit.table(is_super_table=True)
        elif not isinstance(projects, dict):
            raise SetupError(f"{where}: 'projects' is not a table; fix the file (or move it aside) and run again - "
                             f"nothing was written", "invalid_config")
        entry = projects.get(key)
        if entry is None:
            entry = tomlkit.table()
            projects[key] = entry
        elif not isinstance(entry, dict):
            raise SetupError(f"{where}: projects.{key!r} is not a table; fix the file (or move it aside) and run "
                             f"again - nothing was written", "invalid_config")
        entry["trust_level"] = "trusted"
        return ["projects", key, "trust_level"]
    return apply


def trust_plan(target: str, project: Path, home: Path, user: bool, trust: bool) -> tuple[list[Setting], list[Skipped]]:
    """The settings ``--trust`` writes for ``target`` (none without it), and what is skipped and why."""
    if user:
        return [], [Skipped("trust settings", "a user-level config is read in every folder: nothing to trust")]
    if target == "opencode":
        return [], [Skipped("trust settings", "OpenCode uses a project's opencode.json without a trust step")]
    if target == "agents":
        return [], [Skipped("trust settings", "a generic client: approve the server as its own documentation says")]
    if target == "claude":
        local = project / CLAUDE_LOCAL_SETTINGS
        key = claude_project_key(project)
        claude_json = home / ".claude.json"
        if not trust:
            return [], [Skipped("trust settings", f"not asked (--trust writes enabledMcpjsonServers in {local}, and "
                                f"hasTrustDialogAccepted for {key} in {claude_json} when needed); until then "
                                f"`claude mcp list` shows the server as Pending approval")]
        settings = [Setting(local, "json", f'enabledMcpjsonServers includes "{SERVER_NAME}"',
                            _enable_in_claude_settings, False)]
        if claude_reads_local_settings(project):
            return settings, [Skipped(f"{claude_json}", f"not touched: {project} is in a git work tree where "
                                      f"{CLAUDE_LOCAL_SETTINGS} is untracked, which Claude Code reads untrusted")]
        settings.append(Setting(claude_json, "json", f'projects["{key}"].hasTrustDialogAccepted = true',
                                _claude_trust(key), True))
        return settings, []
    key = os.path.realpath(project)
    codex_toml = home / ".codex" / "config.toml"
    if not trust:
        return [], [Skipped("trust settings", f'not asked (--trust writes [projects."{key}"] trust_level = "trusted" '
                            f"in {codex_toml}); until then Codex ignores {project / '.codex' / 'config.toml'}")]
    return [Setting(codex_toml, "toml", f'[projects."{key}"] trust_level = "trusted"', _codex_trust(key), True)], []
