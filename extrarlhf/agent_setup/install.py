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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.fileio import atomic_write_bytes, writing
from .clients import (
    CLIENTS,
    REPO,
    SERVER_NAME,
    SNIPPET,
    Client,
    ServerEntry,
    SetupError,
    added_env,
    client,
    dump_config,
    entry_from_config,
    json_server,
    newline_of,
    parse_config,
    pinned_entry,
)
from .trust import Setting, Skipped, trust_plan

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
    private: bool = False  # a new file is made 0600 (a settings file in the home folder)
    before: bytes | None = None  # the file's bytes before (None: it did not exist), put back on a failure


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


def _edit(path: Path, fmt: str, edit: Callable[[Any], tuple[list[str], bool]], private: bool = False) -> _ConfigStep:
    """Plan one merged config file: ``edit`` changes the parsed document and returns the keys it
    set and whether they are new (``added`` rather than ``updated``)."""
    target = write_target(path)
    _check_writable(target.parent)
    existed = target.exists()
    doc = parse_config(target, fmt)
    newline = newline_of(target)
    before = dump_config(doc, fmt, newline) if existed else None
    keys, new_key = edit(doc)
    text = dump_config(doc, fmt, newline)
    action = "created" if not existed else "unchanged" if text == before else "added" if new_key else "updated"
    return _ConfigStep(path, keys, text, action, target, [], private, target.read_bytes() if existed else None)


def _plan_config(c: Client, path: Path, entry: ServerEntry) -> _ConfigStep:
    kept: list[str] = []

    def edit(doc: Any) -> tuple[list[str], bool]:
        keys, previous = c.setter(doc, entry, str(path))
        kept.extend(added_env(previous, "environment" if c.name == "opencode" else "env", entry.env))
        return keys, previous is None

    step = _edit(path, c.fmt, edit)
    step.kept_env = kept
    return step


def _plan_setting(setting: Setting) -> _ConfigStep:
    return _edit(setting.path, setting.fmt, lambda doc: (setting.apply(doc, str(setting.path)), False),
                 private=setting.user_level)


def _all_ours(folder: Path, names: list[str]) -> bool:
    """Every skill of ``names`` is in ``folder`` with the marker of a previous install."""
    return all((folder / name / MARKER).is_file() for name in names)


def _skills_dir_for(c: Client, targets: list[str], base: Path, names: list[str]) -> tuple[Path, list[Skipped]]:
    """Where ``c``'s skills go: its own folder, or, for a client that also reads another
    target's folder (OpenCode reads ``.claude/skills``), that folder: one copy, so the client
    sees no duplicate skill names. ``base`` is the project or the home folder (the skill
    folders have the same relative path in both)."""
    own = base / c.skills[0]
    others = [CLIENTS[t] for t in targets if t != c.name]
    if not c.reads or any(o.skills[0] == c.skills[0] for o in others):
        return own, []
    for o in others:
        if o.skills[0] in c.reads:
            return base / o.skills[0], [Skipped(f"the {c.label} copy in {own}", f"{c.label} reads {base / o.skills[0]} "
                                                f"too, where the {o.name} target puts them: one copy, no duplicate "
                                                f"skill names")]
    if not others and not _all_ours(own, names):
        for rel in c.reads:
            if _all_ours(base / rel, names):
                return base / rel, [Skipped(f"the {c.label} copy in {own}", f"{c.label} reads {base / rel} too, "
                                            f"which already holds these skills (an earlier install): one copy, no "
                                            f"duplicate skill names")]
    return own, []


def _duplicates(base: Path, configs: dict[str, Path], targets: list[str], dests: set[Path],
                names: list[str]) -> list[str]:
    """Warnings for a client (installed now, or configured before) that will see the skills in
    two of the folders it reads; ``configs`` is each client's config file in this scope."""
    warnings = []
    for c in CLIENTS.values():
        if not c.reads:
            continue
        config = configs[c.name]
        try:
            configured = c.name in targets or entry_from_config(c.name, parse_config(config, c.fmt)) is not None
        except (SetupError, KeyError, TypeError, AttributeError, IndexError):
            configured = False
        holding = [base / rel for rel in (c.skills[0], *c.reads)
                   if any(base / rel / n in dests for n in names) or _all_ours(base / rel, names)]
        if configured and len(holding) > 1:
            warnings.append(f"{c.label} reads both {holding[0]} and {holding[1]} and will warn 'duplicate skill name' "
                            f"for each skill: remove the copy no other client of this project uses"
                            + (", or run OpenCode with OPENCODE_DISABLE_CLAUDE_CODE_SKILLS=1 (it then skips "
                               ".claude/skills)" if c.name == "opencode" else ""))
    return warnings


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
                   home: str | os.PathLike[str] | None = None, dry_run: bool = False, force: bool = False,
                   trust: bool = False) -> dict[str, Any]:
    """Install every skill of ``skills/`` and the MCP server config for ``target``: the report
    of :func:`install_targets` for that one target."""
    return install_targets([target], user=user, project=project, home=home, dry_run=dry_run, force=force,
                           trust=trust)[0]


def install_targets(targets: list[str], *, user: bool = False, project: str | os.PathLike[str] = ".",
                    home: str | os.PathLike[str] | None = None, dry_run: bool = False, force: bool = False,
                    trust: bool = False) -> list[dict[str, Any]]:
    """Install the skills and the MCP server config for each of ``targets`` in one project (or,
    with ``user``, the home folder), all or nothing; with ``trust``, also the settings that let
    each client use the project's server unattended (trust.py). Targets that read the same
    skill folder share one copy.

    Returns per target what was (or, with ``dry_run``, would be) written: per skill its
    destination, action and files; the config file, the keys set and its action; each trust
    setting; the server entry; and what was skipped and why.
    """
    targets = list(dict.fromkeys(targets))
    if not targets:
        raise SetupError("no target given; choose one or more of " + ", ".join(CLIENTS), "invalid_argument")
    chosen = [client(t) for t in targets]
    project_dir = Path(project).absolute()
    if not user and not project_dir.is_dir():
        raise SetupError(f"the project folder {project_dir} does not exist; pass --project with the folder your "
                         f"client runs in - nothing was written", "not_found")
    home_dir = Path(home if home is not None else Path.home()).absolute()
    base = home_dir if user else project_dir
    entry = pinned_entry()
    sources = source_skills()
    names = list(sources)
    skills: dict[Path, _SkillStep] = {}
    configs: dict[Path, _ConfigStep] = {}
    plans = []
    for c in chosen:
        skills_dir, skipped = _skills_dir_for(c, targets, base, names)
        _check_writable(skills_dir)
        for name, src in sources.items():
            if skills_dir / name not in skills:
                skills[skills_dir / name] = _plan_skill(name, src, skills_dir / name, entry, force)
        config_path = c.config_path(project_dir, home_dir, user)
        config = None
        if config_path != skills_dir / SNIPPET:
            if config_path in configs:
                raise SetupError(f"{', '.join(targets)}: two of these targets write the server into {config_path}; "
                                 f"install one of them - nothing was written", "invalid_argument")
            config = configs[config_path] = _plan_config(c, config_path, entry)
        settings, not_trusted = trust_plan(c.name, project_dir, home_dir, user, trust)
        steps = []
        for setting in settings:
            if setting.path in configs:
                raise SetupError(f"{setting.path} is both an MCP config and a trust setting here; install these "
                                 f"targets one at a time - nothing was written", "invalid_argument")
            steps.append((setting, configs.setdefault(setting.path, _plan_setting(setting))))
        plans.append((c, skills_dir, config_path, config, steps, skipped + not_trusted))
    warnings = _duplicates(base, {t: c.config_path(project_dir, home_dir, user) for t, c in CLIENTS.items()},
                           targets, set(skills), names)
    if not dry_run:
        _apply(list(skills.values()), list(configs.values()))
    return [_report(c, user, dry_run, skills_dir, [skills[skills_dir / n] for n in names], config_path, config, steps,
                    skipped, warnings, entry)
            for c, skills_dir, config_path, config, steps, skipped in plans]


def _report(c: Client, user: bool, dry_run: bool, skills_dir: Path, skills: list[_SkillStep], config_path: Path,
            config: _ConfigStep | None, steps: list[tuple[Setting, _ConfigStep]], skipped: list[Skipped],
            warnings: list[str], entry: ServerEntry) -> dict[str, Any]:
    return {"target": c.name, "client": c.label, "scope": "user" if user else "project", "dry_run": dry_run,
            "skills_dir": str(skills_dir),
            "skills": [{"name": s.name, "path": str(s.dest), "action": s.action,
                        "files": [] if s.action == "unchanged" else [*s.files, MARKER]} for s in skills],
            "config": {"path": str(config_path), "keys": config.keys if config else ["mcpServers", SERVER_NAME],
                       "action": config.action if config else "written with the skill extra-rlhf", "format": c.fmt,
                       "written_to": str(config.target if config else config_path),
                       "kept_env": config.kept_env if config else []},
            "settings": [{"path": str(step.path), "setting": setting.describe, "keys": step.keys,
                          "action": step.action, "written_to": str(step.target)} for setting, step in steps],
            "skipped": [{"what": s.what, "why": s.why} for s in skipped],
            "warnings": warnings,
            "server": {"command": entry.command, "args": entry.args, "cwd": entry.cwd, "env": entry.env},
            "verify": c.verify}


def _apply(skills: list[_SkillStep], configs: list[_ConfigStep]) -> None:
    moved: list[tuple[_SkillStep, Path | None]] = []
    written: list[_ConfigStep] = []
    try:
        for step in skills:
            if step.action != "unchanged":
                moved.append((step, _write_skill(step, str(REPO))))
        for config in configs:
            if config.action == "unchanged":
                continue
            with writing(config.target.parent, f"writing {config.target.name}"):
                config.target.parent.mkdir(parents=True, exist_ok=True)
                written.append(config)
                atomic_write_bytes(config.target, config.text.encode("utf-8"))
                if config.private and config.before is None:
                    os.chmod(config.target, 0o600)  # a new file in the home folder: the user's only
    except BaseException:
        for config in reversed(written):  # put back what was there
            with contextlib.suppress(OSError):
                if config.before is None:
                    config.target.unlink(missing_ok=True)
                else:
                    atomic_write_bytes(config.target, config.before)
        for step, old in reversed(moved):
            with contextlib.suppress(OSError):
                shutil.rmtree(step.dest)
                if old is not None:
                    os.rename(old, step.dest)
        raise
    for _, old in moved:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
