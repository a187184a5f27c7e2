"""Errors of the core library. Each carries a stable ``code`` the facades pass on
(MCP ``error.code``, CLI exit messages) and a message that says what to do. A message never
repeats a secret nor a huge value it quotes: every message goes through
:func:`extrarlhf.core.echo.safe_text` when the error is made."""

from __future__ import annotations

import errno as _errno
import os

from .echo import safe_text


class RLHFError(ValueError):
    """Base of every business error; ``code`` is stable and machine-readable; the message is
    bounded and redacted (module docstring)."""

    code = "error"

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(safe_text(message))
        if code is not None:
            self.code = code


class InvalidArgument(RLHFError):
    code = "invalid_argument"


class NotFound(RLHFError):
    code = "not_found"


class UnknownSpec(RLHFError):
    code = "unknown_spec"


class UnsupportedSchema(RLHFError):
    """A file carries a schema_version this code does not know."""

    code = "unsupported_schema"


class GroupConflict(RLHFError):
    """A group exists with another configuration than the one asked for."""

    code = "group_conflict"


class MatchError(RLHFError):
    """A move that the match cannot take (illegal, out of turn, finished)."""

    code = "match_error"


class PathOutsideDatasetsDir(RLHFError):
    """A dataset path that is absolute, uses ``..`` or resolves (through a symlink) outside
    the datasets dir."""

    code = "path_outside_datasets_dir"


class DatasetExists(RLHFError):
    """The versioned target of a publication exists and ``overwrite`` was not asked for."""

    code = "dataset_exists"


class IntegrityError(RLHFError):
    """Source data does not match its recorded hashes or invariants (a trace that does not
    match its catalog line, an illegal recorded action, ...)."""

    code = "integrity_error"


class NotReady(RLHFError):
    """A training contour is not ready; ``blockers`` says why (one reason per entry)."""

    code = "not_ready"

    def __init__(self, message: str, blockers: list[str] | None = None, code: str | None = None) -> None:
        super().__init__(message, code)
        self.blockers = list(blockers or [])


class ValidationFailed(RLHFError):
    """A dataset failed validation; ``failures`` lists each failed check."""

    code = "validation_failed"

    def __init__(self, message: str, failures: list[dict] | None = None, code: str | None = None) -> None:
        super().__init__(message, code)
        self.failures = list(failures or [])


class ResourceError(RLHFError):
    """The filesystem refused a write (full, read-only, not permitted). ``directory`` names
    where; ``details`` carries it (and the errno name) for the facades."""

    code = "resource_error"

    def __init__(self, message: str, directory: str, errno_name: str | None = None, code: str | None = None) -> None:
        super().__init__(message, code)
        self.directory = directory
        self.details = {"directory": directory, "errno": errno_name}


class DiskFull(ResourceError):
    """No space (or quota) left on the filesystem being written."""

    code = "disk_full"


class ReadOnlyFilesystem(ResourceError):
    """The directory being written is on a read-only filesystem."""

    code = "read_only"


class PermissionDenied(ResourceError):
    """This user may not write (create, rename, remove) in the directory."""

    code = "permission_denied"


_RESOURCE_ERRORS: dict[int, tuple[type[ResourceError], str]] = {
    _errno.ENOSPC: (DiskFull, "no space left on the filesystem of {dir} while {what}; free space there (or use a "
                              "directory on a larger filesystem) and retry"),
    _errno.EDQUOT: (DiskFull, "the disk quota is exhausted on the filesystem of {dir} while {what}; free space "
                              "there (or use another directory) and retry"),
    _errno.EROFS: (ReadOnlyFilesystem, "{dir} is on a read-only filesystem (while {what}); remount it read-write "
                                       "or use a writable directory, then retry"),
    _errno.EACCES: (PermissionDenied, "permission denied in {dir} (while {what}); give this user write access to "
                                      "it or use another directory, then retry"),
    _errno.EPERM: (PermissionDenied, "operation not permitted in {dir} (while {what}); give this user write "
                                     "access to it or use another directory, then retry"),
}


def resource_error(exc: BaseException, directory: str | os.PathLike[str] | None, what: str = "writing") \
        -> ResourceError | None:
    """The :class:`ResourceError` an ``OSError`` stands for (ENOSPC/EDQUOT -> ``disk_full``,
    EROFS -> ``read_only``, EACCES/EPERM -> ``permission_denied``), naming ``directory``, or
    None for any other error. When the OSError names a file outside ``directory`` (e.g. a
    source file that could not be read), or no directory is given, that file's directory is
    named instead."""
    if not isinstance(exc, OSError) or exc.errno not in _RESOURCE_ERRORS:
        return None
    where = None if directory is None else os.path.abspath(os.fspath(directory))
    filename = exc.filename if isinstance(exc.filename, str) else None
    if filename:
        path = os.path.abspath(filename)
        if where is None or os.path.commonpath([path, where]) != where:
            where = os.path.dirname(path)
    cls, template = _RESOURCE_ERRORS[exc.errno]
    message = template.format(dir=where or "a directory being written", what=what)
    return cls(message, where or "", _errno.errorcode.get(exc.errno))


class Cancelled(RLHFError):
    """Long work stopped because its caller cancelled it (an MCP request, a ``cancel`` callable);
    whatever it was building was not published."""

    code = "cancelled"


class WorkCapExceeded(RLHFError):
    """A call asked for more work than one call may (search sims x battles, training cost);
    the message names the cap, its value and how to split the work. ``details``: cap, limit, asked."""

    code = "work_cap_exceeded"

    def __init__(self, message: str, details: dict) -> None:
        super().__init__(message)
        self.details = details


class StaleCard(RLHFError):
    """A model card that describes other weights than the checkpoint registered under its name
    now (the card's ``weights_hash`` is not the registry's): e.g. an overwriting
    ``train_policy`` killed between registration and the card write."""

    code = "stale_card"


class CorruptRecord(RLHFError):
    """A damaged session record (a catalog line, a group manifest, ``summary.json``, a group
    lease): not valid JSON, not an object, a missing key, a wrong type or an unknown value.
    ``path``, ``line`` (1-based, None for a whole file) and ``field`` (dotted, None when the
    record as a whole is unreadable) say where; ``details`` carries them for the facades.
    Nothing acts on a damaged record: readers stop, writers repair only what is provably safe."""

    code = "corrupt_record"

    def __init__(self, message: str, path: str | os.PathLike[str], line: int | None = None,
                 field: str | None = None, code: str | None = None) -> None:
        super().__init__(message, code)
        self.path = os.fspath(path)
        self.line = line
        self.field = field
        self.details = {"path": self.path, "line": line, "field": field}


class ManifestMismatch(CorruptRecord):
    """A group's manifest disagrees with the actors its traces record (a spec, a weights hash,
    the battle tag): it was edited after they were played. Nothing adds battles to the group
    while it does, or the group would hold battles of two configurations under one."""

    code = "manifest_mismatch"


class GroupBusy(RLHFError):
    """A session group is owned by another running series (its lease is live); ``owner``
    names that owner (pid, host, codename, since, last heartbeat)."""

    code = "group_busy"

    def __init__(self, message: str, owner: dict | None = None, code: str | None = None) -> None:
        super().__init__(message, code)
        self.owner = dict(owner) if owner else None
        self.details = {"owner": self.owner}


class PathOutsideSessionsDir(RLHFError):
    """A session group (or a file or folder in it) resolves, through a symlink, outside the
    sessions dir."""

    code = "path_outside_sessions_dir"


class GroupMissing(NotFound):
    """A session group's folder (or the sessions dir itself) vanished while something was
    about to write into it; nothing was written."""

    code = "group_missing"


def corrupt_record(why: str, *, path: str | os.PathLike[str], line: int | None = None, field: str | None = None,
                   hint: str | None = None) -> "CorruptRecord":
    """A :class:`CorruptRecord` whose message starts with where the record is
    (``<path> line N, field 'f': why; hint``); ``why`` is kept as ``error.why``."""
    where = os.fspath(path) + (f" line {line}" if line is not None else "") + \
        (f", field {field!r}" if field is not None else "")
    error = CorruptRecord(f"{where}: {why}" + (f"; {hint}" if hint else ""), path, line, field)
    error.why = why  # type: ignore[attr-defined]
    return error


def record_problem(error: "CorruptRecord") -> dict:
    """A damaged record as a JSON-ready problem: ``code``, ``path``, ``line``, ``field``,
    ``problem`` (what is wrong) and ``message`` (where, what, what to do)."""
    return {"code": error.code, "path": error.path, "line": error.line, "field": error.field,
            "problem": getattr(error, "why", str(error)), "message": str(error)}
