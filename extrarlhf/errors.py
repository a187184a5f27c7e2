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
