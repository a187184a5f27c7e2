"""Argument guards applied to every ``tools/call`` before a tool runs (DESIGN section 8).

* Secrets never travel as tool arguments: an argument *named* like a salt, a DSN, a
  password, a secret or token, a raw user/player id, or ``include_players`` (or named like a
  connection string) -- or a nested key or value that *looks like* a secret (a DSN, a
  credential assignment, an API key, a bearer token: :func:`extrarlhf.core.echo.looks_like_secret`,
  the one detector, which also keeps secrets out of every error message) -- is refused as
  ``forbidden_argument`` whatever the tool. Names and values are NFKC-normalized first, so
  fullwidth or other compatibility forms of them are caught too.
* Unknown arguments are refused as ``invalid_argument`` listing the accepted ones (the SDK
  would silently drop them).
* Type errors found by the SDK's argument validation are reported field by field.
* No error repeats what the tool does not accept: a refusal says how many arguments were
  refused and why, and locates them by position -- ``<argument 3>`` for a name the tool does
  not accept, ``policy.<key 2>`` for a key its input schema does not declare -- never by
  the name, key or value sent.
* Arguments reach the tool exactly as sent: :func:`take_arguments_as_sent` turns off the
  SDK's re-parsing of string arguments as JSON (it made a rationale ``"null"`` None, a group
  ``"null"`` the default group and refused a rationale ``"{}"``); a value of the wrong JSON
  type (a string for an object, an array or a number) is refused by argument validation.
* :func:`confine_path` keeps file arguments inside the directories the server was given.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata

from extrarlhf.core.echo import looks_like_secret
from extrarlhf.core.errors import RLHFError

# Argument names are normalized (NFKC, lowercase, letters and digits only) before matching, so
# "db_password", "pgDsn", "User-Id" and "includePlayers" are all caught.
_FORBIDDEN_NAME_PARTS = ("salt", "dsn", "password", "passwd", "passphrase", "secret", "token", "apikey",
                         "credential", "privatekey", "userid", "playerid", "rawuser", "includeplayers",
                         "connectionstring", "connstr", "databaseurl")
_MAX_SCAN_DEPTH = 16

FORBIDDEN_HELP = ("tool arguments never carry salts, DSNs, passwords, secrets or tokens, raw user or player ids, "
                  "or include_players; those live only in the trusted process environment (production plane, "
                  "DESIGN section 10). The value was not used.")


class GuardError(RLHFError):
    """An argument refused before the tool ran; ``details`` goes into ``error.details``."""

    def __init__(self, message: str, code: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message, code)
        self.details = details


def _normalized(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", unicodedata.normalize("NFKC", name).lower())


def forbidden_name(name: str) -> bool:
    norm = _normalized(name)
    return any(part in norm for part in _FORBIDDEN_NAME_PARTS)


def _key_label(key: str, position: int, declared: frozenset[str]) -> str:
    """A nested key as errors show it: its name when the tool's input schema declares it (and it
    is harmless), else its 1-based position in its object."""
    if key in declared and not forbidden_name(key) and not looks_like_secret(key):
        return key
    return f"<key {position}>"


def argument_label(name: str, position: int, accepted: Iterable[str]) -> str:
    """A top-level argument as errors show it: its name when the tool accepts it, else its
    1-based position in the call's arguments object (the name is never repeated)."""
    return name if name in accepted and not forbidden_name(name) else f"<argument {position}>"


def _scan(value: Any, where: str, declared: frozenset[str], depth: int = 0) -> str | None:
    """The redacted path of the first secret-looking key or value inside ``value``, or None."""
    if depth > _MAX_SCAN_DEPTH:
        return None
    if isinstance(value, str):
        return where if looks_like_secret(value) else None
    if isinstance(value, Mapping):
        for position, (key, item) in enumerate(value.items(), 1):
            key = str(key)
            here = f"{where}.{_key_label(key, position, declared)}"
            if forbidden_name(key) or looks_like_secret(key):
                return here
            found = _scan(item, here, declared, depth + 1)
            if found:
                return found
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            found = _scan(item, f"{where}[{i}]", declared, depth + 1)
            if found:
                return found
    return None


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def check_arguments(tool: str, arguments: Mapping[str, Any], accepted: Iterable[str],
                    declared: Iterable[str] = ()) -> None:
    """Refuse secret-carrying, then unknown arguments (raises :class:`GuardError`).

    Errors never repeat an argument name the tool does not accept, nor any nested key the
    tool's input schema does not declare, nor any refused value: they say how many
    arguments were refused and why, locate them by position (``<argument 3>``,
    ``policy.<key 2>``) and list the accepted names.
    """
    accepted = list(accepted)
    declared = frozenset(declared)
    accepted_text = ", ".join(accepted) or "(none)"
    refused: list[str] = []
    reasons: set[str] = set()
    for position, (name, value) in enumerate(arguments.items(), 1):
        name = str(name)
        label = argument_label(name, position, accepted)
        if forbidden_name(name) or looks_like_secret(name):
            refused.append(label)
            reasons.add("named like a secret, a connection string or a user id")
            continue
        found = _scan(value, label, declared)
        if found:
            refused.append(found)
            reasons.add("a key or value looks like a connection string or a credential")
    if refused:
        raise GuardError(f"{tool}: {_plural(len(refused), 'argument')} refused (names and values not repeated): "
                         f"{'; '.join(sorted(reasons))} - at {', '.join(refused)}. {FORBIDDEN_HELP} "
                         f"Accepted arguments: {accepted_text}.", "forbidden_argument",
                         {"refused": len(refused), "arguments": refused, "accepted": accepted})
    unknown = [argument_label(str(name), position, accepted)
               for position, name in enumerate(arguments, 1) if name not in accepted]
    if unknown:
        raise GuardError(f"{tool}: {_plural(len(unknown), 'unknown argument')} (names not repeated; at "
                         f"{', '.join(unknown)} of the call); accepted: {accepted_text}", "invalid_argument",
                         {"unknown_count": len(unknown), "unknown": unknown, "accepted": accepted})


def _strings(value: Any, depth: int = 0) -> set[str]:
    """Every string (keys included) inside ``value``."""
    if depth > _MAX_SCAN_DEPTH:
        return set()
    if isinstance(value, str):
        return {value}
    out: set[str] = set()
    if isinstance(value, Mapping):
        for key, item in value.items():
            out.add(str(key))
            out |= _strings(item, depth + 1)
    elif isinstance(value, (list, tuple)):
        for item in value:
            out |= _strings(item, depth + 1)
    return out


def redact_loc(loc: Iterable[Any], arguments: Mapping[str, Any], accepted: Iterable[str],
               declared: Iterable[str] = ()) -> str:
    """A pydantic error location as errors show it: the accepted top-level name, then integer
    indexes as ``[i]``, keys of the caller's objects by position (``<key 2>``) unless the
    input schema declares them, and other parts (union member tags, declared field names)
    only when they are not text the caller sent."""
    accepted = list(accepted)
    declared = frozenset(declared)
    parts = list(loc)
    if not parts:
        return "(arguments)"
    head = str(parts[0])
    names = list(arguments)
    if head in accepted:
        out = head
    else:
        out = argument_label(head, names.index(head) + 1, accepted) if head in names else "<argument>"
    current: Any = arguments.get(head)
    sent = _strings(arguments)
    for part in parts[1:]:
        if isinstance(part, int) and not isinstance(part, bool):
            out += f"[{part}]"
            current = current[part] if isinstance(current, (list, tuple)) and -len(current) <= part < len(current) \
                else None
            continue
        part = str(part)
        if isinstance(current, Mapping) and part in current:
            out += "." + _key_label(part, list(current).index(part) + 1, declared)
            current = current[part]
        elif part in declared or (part not in sent and not looks_like_secret(part)):
            out += "." + part  # from the schema: a declared field or a union member tag
            current = None
        else:
            out += ".<redacted>"
            current = None
    return out


def _safe_msg(err: Mapping[str, Any]) -> str:
    """pydantic's message, unless it repeats any text of the rejected input or looks like a secret."""
    msg = str(err.get("msg") or "invalid value")
    expected = (err.get("ctx") or {}).get("expected")
    if err.get("type") == "literal_error" and isinstance(expected, str):
        return f"must be {expected}"  # the choices come from the schema, never from the input
    if looks_like_secret(msg) or any(len(s) >= 3 and s in msg for s in _strings(err.get("input"))):
        return f"invalid value ({err.get('type', 'value_error')})"
    return msg


def describe_validation_errors(tool: str, errors: list[dict[str, Any]], accepted: Iterable[str],
                               arguments: Mapping[str, Any] | None = None,
                               declared: Iterable[str] = ()) -> GuardError:
    """A readable ``invalid_argument`` from pydantic errors: where (redacted, see
    :func:`redact_loc`) and what is wrong, never the value."""
    accepted = list(accepted)
    arguments = arguments or {}
    problems = []
    fields = []
    for err in errors:
        loc = redact_loc(err.get("loc", ()), arguments, accepted, declared)
        fields.append(loc)
        problems.append(f"{loc}: {_safe_msg(err)}")
    return GuardError(f"{tool}: invalid arguments - {'; '.join(problems)}. Accepted arguments: "
                      f"{', '.join(accepted) or '(none)'}; see the tool's inputSchema.", "invalid_argument",
                      {"fields": sorted(set(fields))})


def confine_path(value: Any, roots: Iterable[str | os.PathLike[str]], what: str = "path") -> Path:
    """Resolve ``value`` (relative to the working directory) and require it inside one of ``roots``.

    ``..`` components are refused outright; the real path (symlinks resolved) must lie
    inside the real path of a root, checked on a path-separator boundary.
    """
    roots = [Path(os.path.realpath(r)) for r in roots]
    allowed = ", ".join(str(r) for r in roots)
    if not isinstance(value, str) or not value or "\x00" in value:
        raise GuardError(f"{what} must be a non-empty path string", "invalid_argument")
    if ".." in Path(value).parts:
        raise GuardError(f"{what} may not contain '..'; give a path inside: {allowed}", "path_not_allowed")
    real = Path(os.path.realpath(os.path.abspath(value)))
    for root in roots:
        if real == root or str(real).startswith(str(root) + os.sep):
            return real
    raise GuardError(f"{what} {value!r} is outside the directories this server may read; put the file inside one "
                     f"of: {allowed}", "path_not_allowed", {"allowed_roots": [str(r) for r in roots]})


class _ArgumentsAsSent(FuncMetadata):
    """The SDK's argument metadata without its JSON pre-parsing of string values.

    ``FuncMetadata.pre_parse_json`` decodes any string sent for a parameter not annotated
    exactly ``str`` (so ``str | None`` too) when it decodes to an object, an array, a boolean
    or null -- meant for clients that send objects as JSON text, it silently changes text
    that merely looks like JSON. Here every argument is validated as the JSON value it was.
    """

    def pre_parse_json(self, data: dict[str, Any]) -> dict[str, Any]:
        return dict(data)


def take_arguments_as_sent(tool: Any) -> None:
    """Make a registered SDK ``Tool`` validate its arguments without re-parsing strings."""
    meta = tool.fn_metadata
    tool.fn_metadata = _ArgumentsAsSent(arg_model=meta.arg_model, output_schema=meta.output_schema,
                                        output_model=meta.output_model, wrap_output=meta.wrap_output)
