"""The one result shape every tool returns, success or failure (DESIGN section 8).

Every ``tools/call`` result carries the envelope as JSON text in ``content[0]``, the same
object in ``structuredContent``, and ``isError``::

    success: {"ok": true,  "result": {...},  "error": null}
    failure: {"ok": false, "result": null,   "error": {"code": "...", "message": "...", "details": {...}|null}}

No tool declares an ``outputSchema`` (repeated on every tool it was half of ``tools/list``):
the server instructions and the skills describe this one shape. ``ENVELOPE_SCHEMA`` is that
shape as a JSON schema, written out by hand (no ``$ref``), for clients and tests that validate
results (the TypeScript SDK's Ajv, Python's jsonschema).
"""

from __future__ import annotations

import copy
import json
import logging
import os
from typing import Annotated, Any

import orjson
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, ConfigDict

from adapters import AdapterError
from engine import EngineError
from extrarlhf.core.echo import safe_data, safe_text
from extrarlhf.core.errors import RLHFError, resource_error

log = logging.getLogger("mcp_server")

# The stable error codes this server itself produces; the core adds its own (unknown_spec,
# group_conflict, codename_taken, kind_mismatch, ...), passed on unchanged.
SERVER_CODES = ("invalid_argument", "forbidden_argument", "unknown_tool", "path_not_allowed", "internal_error")

ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Why the call failed. `code` is stable and machine-readable; `message` says what to do.",
    "properties": {
        "code": {"type": "string", "description": "Stable error code, e.g. unknown_match, foreign_match, "
                                                  "match_finished, illegal_action, not_your_turn, invalid_argument, "
                                                  "forbidden_argument, not_found, unknown_spec, codename_taken; "
                                                  "disk_full, read_only, permission_denied (the filesystem "
                                                  "refused a write; details.directory names where)."},
        "message": {"type": "string", "description": "A readable explanation and what to do next."},
        "details": {"anyOf": [{"type": "object"}, {"type": "null"}],
                    "description": "Optional structured details (e.g. the accepted argument names)."},
    },
    "required": ["code", "message"],
}

ENVELOPE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "title": "ExtraRLHFResult",
    "description": "Every ExtraRLHF tool result: ok + result on success, ok=false + error on failure.",
    "properties": {
        "ok": {"type": "boolean", "description": "True when the call succeeded (then isError is false)."},
        "result": {"anyOf": [{"type": "object"}, {"type": "null"}],
                   "description": "The tool's result object (null on failure)."},
        "error": {"anyOf": [ERROR_SCHEMA, {"type": "null"}], "description": "Null on success."},
    },
    "required": ["ok", "result", "error"],
    "oneOf": [
        {"type": "object", "properties": {"ok": {"const": True}, "result": {"type": "object"},
                                          "error": {"type": "null"}}},
        {"type": "object", "properties": {"ok": {"const": False}, "result": {"type": "null"},
                                          "error": {"type": "object"}}},
    ],
}


class Envelope(BaseModel):
    """Pydantic mirror of :data:`ENVELOPE_SCHEMA` (the SDK validates successes against it)."""

    model_config = ConfigDict(extra="forbid")

    ok: bool
    result: dict[str, Any] | None
    error: dict[str, Any] | None

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: Any, handler: Any) -> dict[str, Any]:
        return copy.deepcopy(ENVELOPE_SCHEMA)


# The return annotation of every tool: a hand-built CallToolResult validated as an Envelope.
EnvelopeResult = Annotated[CallToolResult, Envelope]


def _dumps(envelope: dict[str, Any]) -> str:
    try:
        return orjson.dumps(envelope, default=str).decode()
    except TypeError:  # orjson stops at 64-bit integers; JSON (and the caller's own arguments) do not
        return json.dumps(envelope, default=str, ensure_ascii=False, separators=(",", ":"))


def _result(envelope: dict[str, Any], is_error: bool) -> CallToolResult:
    text = _dumps(envelope)
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=envelope,
                          is_error=is_error)


def success(result: dict[str, Any]) -> CallToolResult:
    return _result({"ok": True, "result": result, "error": None}, False)


def failure(code: str, message: str, details: dict[str, Any] | None = None) -> CallToolResult:
    """An error result; the message and every string of ``details`` are bounded and redacted
    (:mod:`extrarlhf.core.echo`): errors of ``engine`` and ``adapters`` are not made by the core."""
    return _result({"ok": False, "result": None, "error": {"code": code, "message": safe_text(message),
                                                           "details": safe_data(details)}}, True)


def from_exception(tool: str, exc: BaseException) -> CallToolResult:
    """Map an exception raised by the core into an error result.

    Business errors keep their stable ``code`` and message. A full, read-only or forbidden
    filesystem (``OSError`` ENOSPC/EDQUOT, EROFS, EACCES/EPERM) is ``disk_full``,
    ``read_only`` or ``permission_denied`` naming the directory -- the core raises these itself
    where it writes (fileio.writing); an OSError that escapes untranslated is mapped the same
    way here. Anything else is a bug: the traceback goes to stderr and the caller gets
    ``internal_error`` without internals.
    """
    if isinstance(exc, (RLHFError, AdapterError)):
        return failure(getattr(exc, "code", None) or "invalid_argument", str(exc), getattr(exc, "details", None))
    if isinstance(exc, EngineError):
        return failure("invalid_argument", str(exc))
    if isinstance(exc, OSError):  # a full/read-only/forbidden filesystem the core did not translate itself
        filename = exc.filename if isinstance(exc.filename, str) else None
        error = resource_error(exc, None, f"{tool} was accessing {os.path.basename(filename) if filename else 'it'}")
        if error is not None:
            log.warning("tool %s: untranslated %s (%s)", tool, type(exc).__name__, exc)
            return failure(error.code, str(error), error.details)
    log.error("tool %s failed unexpectedly", tool, exc_info=(type(exc), exc, exc.__traceback__))
    return failure("internal_error", f"{tool} failed with an internal error ({type(exc).__name__}); the details are "
                                     f"in the server's log (stderr). Retrying will not help unless the cause is "
                                     f"fixed.")
