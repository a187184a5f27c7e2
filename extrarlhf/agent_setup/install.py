"""``install_skills``: copy the skills where a client looks and merge its MCP config, all or nothing.

Everything is checked before anything is written: the target (known), each existing config
(parses, has the expected shape), each destination folder (creatable and writable), and each
skill folder already there (ours and unmodified, else refused unless ``force``). Then the
skills are built in temp folders beside their destination and renamed into place, and the
configs are replaced atomically; an error on the way puts back what was there.

A config is merged, never rewritten from scratch: every other key and server stays, the
variables a user added to our entry's env stay, its line endings (CRLF) stay, and a config
that is a symlink is written through the link (its target is replaced atomically, the link
stays; see :func:`write_target`).

A folder is "ours" when it holds the marker :data:`MARKER` written by a previous install and
its files still have the hashes the marker records: such a folder is updated freely, so
installing again after ``git pull`` needs no ``--force``, while a user's own skill of the same
name, or our copy edited by hand, is never overwritten silently.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.fileio import atomic_write_bytes, writing
from .clients import (
    REPO,
    SERVER_NAME,
    SNIPPET,
    Client,
    ServerEntry,
    SetupError,
    added_env,
    client,
    dump_config,
    json_server,
    newline_of,
    parse_config,
    pinned_entry,
)

MARKER = ".extra-rlhf-install.json"
PLACEHOLDER = "<REPO_ROOT>"


@dataclass
class _SkillStep:
    name: str
    dest: Path
    files: dict[str, bytes]  # relative path -> content
    action: str  # installed, updated, unchanged, replaced (--force)


@dataclass
class _ConfigStep:
    path: Path
    keys: list[str]
    text: str
    action: str  # created, added, updated, unchanged
    target: Path  # where it is written: ``path``, or the file a symlink at ``path`` resolves to
    kept_env: list[str]  # names of the variables of the user's own kept in our entry


def source_skills(root: Path = REPO / "skills") -> dict[str, Path]:
    return {p.parent.name: p.parent for p in sorted(root.glob("*/SKILL.md"))}


def _digest(files: dict[str, bytes]) -> dict[str, str]:
    return {rel: hashlib.sha256(data).hexdigest() for rel, data in sorted(files.items())}


def _skill_files(src: Path, entry: ServerEntry) -> dict[str, bytes]:
    """The files of one skill as installed: the MCP snippet gets this checkout's paths."""
    files = {}
    for path in sorted(src.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            files[path.relative_to(src).as_posix()] = path.read_bytes()
    snippet = SNIPPET.relative_to(src.name).as_posix() if SNIPPET.parts[0] == src.name else None
    if snippet in files:
        doc = json.loads(files[snippet])
        doc["_comment"] = "ExtraRLHF MCP server (stdio), filled in by `python -m extrarlhf skills install` for " \
                          f"the checkout {REPO}."
        doc["mcpServers"] = {name: json_server(entry) for name in doc["mcpServers"]}
        files[snippet] = (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode()
    return files


def _installed_files(dest: Path) -> dict[str, bytes]:
    return {p.relative_to(dest).as_posix(): p.read_bytes() for p in sorted(dest.rglob("*"))
            if p.is_file() and p.name != MARKER}


def _ours_and_intact(dest: Path) -> bool:
    try:
        marker = json.loads((dest / MARKER).read_text(encoding="utf-8"))
        return marker.get("files") == _digest(_installed_files(dest))
    except (OSError, ValueError, AttributeError):
        return False


def _check_writable(directory: Path) -> None:
    """``directory`` exists and is writable, or can be created: else a clear error, before any write."""
    probe = directory
    while not probe.exists():
        if probe.is_symlink():  # a dangling link cannot be created through
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        raise SetupError(f"cannot create {directory}: {probe} is a file, not a directory; move it aside or choose "
                         f"another --project - nothing was written", "not_a_directory")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise SetupError(f"cannot write into {probe} (needed for {directory}); fix its permissions or choose "
                         f"another --project - nothing was written", "permission_denied")


def _plan_skill(name: str, src: Path, dest: Path, entry: ServerEntry, force: bool) -> _SkillStep:
    files = _skill_files(src, entry)
    if dest.is_symlink() or (dest.exists() and not dest.is_dir()):
        raise SetupError(f"{dest} exists and is not a skill folder; move it aside and run again - nothing was "
                         f"written", "skill_conflict")
    if not dest.exists():
        return _SkillStep(name, dest, files, "installed")
    if _installed_files(dest) == files:
        return _SkillStep(name, dest, files, "unchanged")
    if _ours_and_intact(dest):
        return _SkillStep(name, dest, files, "updated")
    if not force:
        raise SetupError(f"{dest} already holds a different skill named {name!r} (not installed by `skills install`, "
                         f"or edited since); move it aside or pass --force to replace it - nothing was written",
                         "skill_conflict")
    return _SkillStep(name, dest, files, "replaced")


def write_target(path: Path) -> Path:
    """Where the config at ``path`` is written: ``path`` itself, or, when it is a symlink (a
    dotfile manager's ``~/.claude.json`` -> ``dotfiles/claude.json``), the file it resolves to,
    replaced atomically there, so the link stays a link and its target gets the entry. A link
    that loops, leads to something other than a regular file, or dangles into a folder that
    does not exist is refused (``config_symlink``)."""
    if not path.is_symlink():
        return path
    target = Path(os.path.realpath(path))
    fix = "point the link at a regular file (or replace it by one) and run again - nothing was written"
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if target.parent.is_dir():
            return target  # a dangling link into an existing folder: the file is created there
        raise SetupError(f"{path} is a symlink to {target}, whose folder does not exist; {fix}",
                         "config_symlink") from None
    except OSError as exc:  # ELOOP: the link leads back to itself
        raise SetupError(f"{path} is a symlink that cannot be followed ({os.strerror(exc.errno or 0)}); {fix}",
                         "config_symlink") from None
    if not stat.S_ISREG(st.st_mode):
        raise SetupError(f"{path} is a symlink to {target}, which is not a regular file; {fix}", "config_symlink")
    return target


def _plan_config(c: Client, path: Path, entry: ServerEntry) -> _ConfigStep:
    target = write_target(path)
    _check_writable(target.parent)
    existed = target.exists()
    doc = parse_config(target, c.fmt)
    newline = newline_of(target)
    before = dump_config(doc, c.fmt, newline) if existed else None
    keys, previous = c.setter(doc, entry, str(path))
    text = dump_config(doc, c.fmt, newline)
    if not existed:
        action = "created"
    elif text == before:
        action = "unchanged"
    else:
        action = "added" if previous is None else "updated"
    return _ConfigStep(path, keys, text, action, target,
                       added_env(previous, "environment" if c.name == "opencode" else "env", entry.env))


def _write_skill(step: _SkillStep, source: str) -> Path | None:
    """Build the skill in a temp folder beside ``dest`` and rename it in; returns the old folder set aside."""
    parent = step.dest.parent
    with writing(parent, f"installing the skill {step.name}"):
        parent.mkdir(parents=True, exist_ok=True)
        tmp = parent / f".{step.name}.{os.getpid()}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            for rel, data in step.files.items():
                (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
                (tmp / rel).write_bytes(data)
            marker = {"skill": step.name, "source": source, "files": _digest(step.files)}
            (tmp / MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
            old = None
            if step.dest.exists():
                old = parent / f".{step.name}.{os.getpid()}.old"
                shutil.rmtree(old, ignore_errors=True)
                os.rename(step.dest, old)
            os.rename(tmp, step.dest)
            return old
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise


def install_skills(target: str, *, user: bool = False, project: str | os.PathLike[str] = ".",
                   home: str | os.PathLike[str] | None = None, dry_run: bool = False,
                   force: bool = False) -> dict[str, Any]:
    """Install every skill of ``skills/`` and the MCP server config for ``target``.

    Returns what was (or, with ``dry_run``, would be) written: per skill its destination and
    action, the config file, the keys set and its action, and the server entry.
    """
    c = client(target)
    project_dir = Path(project).absolute()
    if not user and not project_dir.is_dir():
        raise SetupError(f"the project folder {project_dir} does not exist; pass --project with the folder your "
                         f"client runs in - nothing was written", "not_found")
    home_dir = Path(home if home is not None else Path.home()).absolute()
    entry = pinned_entry()
    skills_dir = c.skills_dir(project_dir, home_dir, user)
    config_path = c.config_path(project_dir, home_dir, user)
    _check_writable(skills_dir)
    skills = [_plan_skill(name, src, skills_dir / name, entry, force) for name, src in source_skills().items()]
    snippet_is_config = config_path == skills_dir / SNIPPET
    config = None
    if not snippet_is_config:
        config = _plan_config(c, config_path, entry)
    if not dry_run:
        _apply(skills, config)
    report_config = {"path": str(config_path), "keys": config.keys if config else ["mcpServers", SERVER_NAME],
                     "action": config.action if config else "written with the skill extra-rlhf",
                     "format": c.fmt, "written_to": str(config.target if config else config_path),
                     "kept_env": config.kept_env if config else []}
    return {"target": target, "client": c.label, "scope": "user" if user else "project",
            "dry_run": dry_run, "skills_dir": str(skills_dir),
            "skills": [{"name": s.name, "path": str(s.dest), "action": s.action} for s in skills],
            "config": report_config,
            "server": {"command": entry.command, "args": entry.args, "cwd": entry.cwd, "env": entry.env},
            "verify": c.verify}


def _apply(skills: list[_SkillStep], config: _ConfigStep | None) -> None:
    moved: list[tuple[_SkillStep, Path | None]] = []
    try:
        for step in skills:
            if step.action != "unchanged":
                moved.append((step, _write_skill(step, str(REPO))))
        if config is not None and config.action != "unchanged":
            with writing(config.target.parent, f"writing {config.target.name}"):
                config.target.parent.mkdir(parents=True, exist_ok=True)
                atomic_write_bytes(config.target, config.text.encode("utf-8"))
    except BaseException:
        for step, old in reversed(moved):  # put back what was there
            with contextlib.suppress(OSError):
                shutil.rmtree(step.dest)
                if old is not None:
                    os.rename(old, step.dest)
        raise
    for _, old in moved:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
