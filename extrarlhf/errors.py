"""Errors of the core library. Each carries a stable ``code`` the facades pass on
(MCP ``error.code``, CLI exit messages) and a message that says what to do."""

from __future__ import annotations


class RLHFError(ValueError):
    """Base of every business error; ``code`` is stable and machine-readable."""

    code = "error"

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
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
