"""The MCP server entry every client gets, and where each client looks for skills and config.

Where clients look (STACK.md "Agent skills"): Claude Code reads ``.claude/skills/`` and
``.mcp.json`` (user level ``~/.claude/skills/`` and ``~/.claude.json``); Codex reads
``.agents/skills/`` and ``[mcp_servers.NAME]`` in ``.codex/config.toml`` (user level
``~/.agents/skills/``, ``~/.codex/config.toml``); OpenCode reads ``.agents/skills/`` (and
``.claude/skills/``: see :attr:`Client.reads`) and the ``"mcp"`` object of ``opencode.json``
(user level ``~/.config/opencode/opencode.json``). The
generic target ``agents`` uses ``.agents/skills/`` and the widespread ``mcpServers`` JSON of
``.mcp.json``; at user level its config is the filled-in snippet inside the installed skill.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..core.errors import RLHFError

SERVER_NAME = "extra-rlhf"
REPO = Path(__file__).resolve().parents[2]
SNIPPET = Path("extra-rlhf") / "mcp" / "extra-rlhf.mcp.json"
CODEX_STARTUP_TIMEOUT_S = 30  # the first start imports onnxruntime and pyarrow: more than Codex's default 10 s


class SetupError(RLHFError):
    """A refused install or doctor input: ``code`` says which (invalid_config, skill_conflict, ...)."""


@dataclass(frozen=True)
class ServerEntry:
    """How a client starts the server: exactly these command, args, cwd and env."""

    command: str
    args: list[str]
    cwd: str | None
    env: dict[str, str] = field(default_factory=dict)

    def dirs(self) -> dict[str, Path]:
        """The sessions/datasets/checkpoints dirs the server will use (its defaults when not passed)."""
        base = Path(self.cwd) if self.cwd else Path.cwd()
        found = {"sessions": "sessions", "datasets": "datasets", "checkpoints": "checkpoints"}
        for flag in found:
            option = f"--{flag}-dir"
            if option in self.args[:-1]:
                found[flag] = self.args[self.args.index(option) + 1]
        return {name: base / value for name, value in found.items()}


def pinned_entry(repo: Path = REPO) -> ServerEntry:
    """This checkout's server: its ``.venv`` interpreter, absolute dirs, cwd and PYTHONPATH."""
    python = repo / ".venv" / "bin" / "python"
    if not python.exists():
        raise SetupError(f"{python} does not exist: run `make setup` in {repo} first (it creates the .venv the "
                         f"client configs pin)", "not_found")
    args = ["-m", "mcp_server", "--sessions-dir", str(repo / "sessions"), "--datasets-dir", str(repo / "datasets"),
            "--checkpoints-dir", str(repo / "checkpoints")]
    return ServerEntry(str(python), args, str(repo), {"PYTHONPATH": str(repo)})


# --------------------------------------------------------------------------- config documents
def json_server(entry: ServerEntry) -> dict[str, Any]:
    """The ``mcpServers`` form (Claude Code, the generic snippet)."""
    return {"type": "stdio", "command": entry.command, "args": list(entry.args), "cwd": entry.cwd,
            "env": dict(entry.env)}


def codex_server(entry: ServerEntry) -> dict[str, Any]:
    return {"command": entry.command, "args": list(entry.args), "cwd": entry.cwd, "env": dict(entry.env),
            "startup_timeout_sec": CODEX_STARTUP_TIMEOUT_S}


def opencode_server(entry: ServerEntry, nested: bool) -> dict[str, Any]:
    """OpenCode's local entry (``cwd`` is read by OpenCode 1.18; the paths are absolute anyway)."""
    doc = {"type": "local", "command": [entry.command, *entry.args], "cwd": entry.cwd, "environment": dict(entry.env)}
    return {**doc, "disabled": False} if nested else {**doc, "enabled": True}


def _kept_env(previous: Any, key: str, ours: dict[str, Any]) -> dict[str, Any]:
    """The env of our entry as written again: the variables a user added to it (``previous``
    entry's ``key`` object) kept, ours (``PYTHONPATH``) set to this checkout's."""
    env = previous.get(key) if isinstance(previous, dict) else None
    env = env.unwrap() if hasattr(env, "unwrap") else env
    return {**(env if isinstance(env, dict) else {}), **ours}


def added_env(previous: Any, key: str, ours: dict[str, Any]) -> list[str]:
    """Names (never values) of the variables of ``previous``'s env that are not ours."""
    return sorted(set(_kept_env(previous, key, ours)) - set(ours))


def _object(doc: Any, key: str, where: str) -> dict[str, Any]:
    value = doc.setdefault(key, {})
    if not isinstance(value, dict):
        raise SetupError(f"{where}: {key!r} is a {type(value).__name__}, not an object; fix the file (or move it "
                         f"aside) and run again - nothing was written", "invalid_config")
    return value


def set_mcp_servers(doc: dict[str, Any], entry: ServerEntry, where: str) -> tuple[list[str], Any]:
    servers = _object(doc, "mcpServers", where)
    previous = servers.get(SERVER_NAME)
    servers[SERVER_NAME] = {**json_server(entry), "env": _kept_env(previous, "env", entry.env)}
    return ["mcpServers", SERVER_NAME], previous


def set_opencode(doc: dict[str, Any], entry: ServerEntry, where: str) -> tuple[list[str], Any]:
    mcp = _object(doc, "mcp", where)
    nested = isinstance(mcp.get("servers"), dict)  # the newer layout: "mcp": {"servers": {...}}
    servers = mcp["servers"] if nested else mcp
    previous = servers.get(SERVER_NAME)
    servers[SERVER_NAME] = {**opencode_server(entry, nested=nested),
                            "environment": _kept_env(previous, "environment", entry.env)}
    return ["mcp", "servers", SERVER_NAME] if nested else ["mcp", SERVER_NAME], previous


def set_codex(doc: Any, entry: ServerEntry, where: str) -> tuple[list[str], Any]:
    import tomlkit
    from tomlkit.items import InlineTable

    servers = doc.get("mcp_servers")
    if servers is None:
        servers = doc["mcp_servers"] = tomlkit.table(is_super_table=True)
    elif not isinstance(servers, dict):
        raise SetupError(f"{where}: 'mcp_servers' is not a table; fix the file (or move it aside) and run again - "
                         f"nothing was written", "invalid_config")
    previous = servers.get(SERVER_NAME)
    previous = previous.unwrap() if hasattr(previous, "unwrap") else previous
    ours = {**codex_server(entry), "env": _kept_env(previous, "env", entry.env)}
    if isinstance(servers, InlineTable):  # `mcp_servers = { other = {...} }`: ours goes inline beside the others
        table: Any = tomlkit.inline_table()
        table.update(ours)
    else:
        table = tomlkit.table()
        for key, value in ours.items():
            table[key] = value
        table.add(tomlkit.nl())  # a blank line before whatever table follows
    servers[SERVER_NAME] = table
    return ["mcp_servers", SERVER_NAME], previous


def entry_from_config(target: str, doc: Any) -> ServerEntry | None:
    """The server entry a client would start from its parsed config (None when there is none)."""
    if target == "codex":
        raw = (doc.get("mcp_servers") or {}).get(SERVER_NAME)
        raw = raw.unwrap() if hasattr(raw, "unwrap") else raw
        return None if raw is None else ServerEntry(raw["command"], list(raw.get("args", [])), raw.get("cwd"),
                                                    dict(raw.get("env") or {}))
    if target == "opencode":
        mcp = doc.get("mcp") or {}
        raw = (mcp.get("servers") or {}).get(SERVER_NAME) if isinstance(mcp.get("servers"), dict) \
            else mcp.get(SERVER_NAME)
        return None if raw is None else ServerEntry(raw["command"][0], list(raw["command"][1:]), raw.get("cwd"),
                                                    dict(raw.get("environment") or {}))
    raw = (doc.get("mcpServers") or {}).get(SERVER_NAME)
    return None if raw is None else ServerEntry(raw["command"], list(raw.get("args", [])), raw.get("cwd"),
                                                dict(raw.get("env") or {}))


# --------------------------------------------------------------------------- clients
@dataclass(frozen=True)
class Client:
    name: str
    label: str
    skills: tuple[str, str]      # project-relative, home-relative skill folders
    config: tuple[str, str | None]  # project-relative, home-relative config file (None: the snippet)
    fmt: str                     # "json" or "toml"
    setter: Callable[[Any, ServerEntry, str], tuple[list[str], Any]]
    verify: str                  # how to see it from inside the client
    reads: tuple[str, ...] = ()  # the other skill folders it reads (same relative path in a project and in home)

    def skills_dir(self, project: Path, home: Path, user: bool) -> Path:
        return home / self.skills[1] if user else project / self.skills[0]

    def config_path(self, project: Path, home: Path, user: bool) -> Path:
        if not user:
            return project / self.config[0]
        if self.config[1] is None:
            return self.skills_dir(project, home, user) / SNIPPET
        return home / self.config[1]


CLIENTS: dict[str, Client] = {c.name: c for c in (
    Client("claude", "Claude Code", (".claude/skills", ".claude/skills"), (".mcp.json", ".claude.json"), "json",
           set_mcp_servers, "run `claude mcp list` (a project server shows `Pending approval` until trusted: "
           "--trust, or approve it in `/mcp`)"),
    Client("codex", "Codex", (".agents/skills", ".agents/skills"), (".codex/config.toml", ".codex/config.toml"),
           "toml", set_codex, "run `codex mcp list` (a project .codex/config.toml is read in trusted projects)"),
    Client("opencode", "OpenCode", (".agents/skills", ".agents/skills"),
           ("opencode.json", ".config/opencode/opencode.json"), "json", set_opencode,
           "run `opencode mcp list`", reads=(".claude/skills",)),
    Client("agents", "a generic MCP client", (".agents/skills", ".agents/skills"), (".mcp.json", None), "json",
           set_mcp_servers, "point your client's MCP settings at the config file above"),
)}


def client(target: str) -> Client:
    if target not in CLIENTS:
        raise SetupError(f"unknown target {target!r}; choose one of {', '.join(CLIENTS)}", "invalid_argument")
    return CLIENTS[target]


def parse_config(path: Path, fmt: str) -> Any:
    """The config document at ``path`` ({} when missing); a file that does not parse is refused."""
    if not path.exists():
        return {}
    if path.is_dir():
        raise SetupError(f"{path} is a directory, not a config file; move it aside and run again - nothing was "
                         f"written", "invalid_config")
    text = read_config_text(path)
    if fmt == "toml":
        import tomlkit
        from tomlkit.exceptions import ParseError

        try:
            return tomlkit.parse(text)
        except ParseError as exc:
            raise SetupError(f"{path} is not valid TOML ({exc}); fix it or move it aside and run again - it was "
                             f"left unchanged and nothing was written", "invalid_config") from None
    if not text.strip():
        return {}
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SetupError(f"{path} is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); fix it or "
                         f"move it aside and run again - it was left unchanged and nothing was written",
                         "invalid_config") from None
    if not isinstance(doc, dict):
        raise SetupError(f"{path}: the top level is a {type(doc).__name__}, not an object; fix it or move it aside "
                         f"and run again - nothing was written", "invalid_config")
    return doc


def read_config_text(path: Path) -> str:
    """The text of a config file with its line endings as ``\n`` (see :func:`newline_of`); a file
    that is not UTF-8 is refused."""
    try:
        return path.read_bytes().decode("utf-8").replace("\r\n", "\n")
    except UnicodeDecodeError as exc:
        raise SetupError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start}); fix it or move it aside and "
                         f"run again - it was left unchanged and nothing was written", "invalid_config") from None


def newline_of(path: Path) -> str:
    """The line ending a config file uses (``\r\n`` when most of its lines end so, else
    ``\n``), so that a rewrite keeps it."""
    try:
        data = path.read_bytes()
    except OSError:
        return "\n"
    return "\r\n" if 2 * data.count(b"\r\n") > data.count(b"\n") else "\n"


def dump_config(doc: Any, fmt: str, newline: str = "\n") -> str:
    if fmt == "toml":
        import tomlkit

        text = tomlkit.dumps(doc)
    else:
        text = json.dumps(doc, indent=2, ensure_ascii=False) + "\n"  # newlines inside strings are escaped
    return text.replace("\n", newline) if newline != "\n" else text
