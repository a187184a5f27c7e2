"""Argument guards applied to every ``tools/call`` before a tool runs (DESIGN section 8).

* Secrets never travel as tool arguments: an argument *named* like a salt, a DSN, a
  password, a secret or token, a raw user/player id, or ``include_players`` -- or a value
  that *looks like* a DSN or a credential assignment -- is refused as ``forbidden_argument``
  whatever the tool. The refusal names the argument, never echoes its value.
* Unknown arguments are refused as ``invalid_argument``, naming them and listing the
  accepted ones (the SDK would silently drop them).
* Type errors found by the SDK's argument validation are reported field by field, without
  the rejected values.
* :func:`confine_path` keeps file arguments inside the directories the server was given.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from extrarlhf.errors import RLHFError

# Argument names are normalized (lowercase, letters and digits only) before matching, so
# "db_password", "pgDsn", "User-Id" and "includePlayers" are all caught.
_FORBIDDEN_NAME_PARTS = ("salt", "dsn", "password", "passwd", "passphrase", "secret", "token", "apikey",
                         "credential", "privatekey", "userid", "playerid", "rawuser", "includeplayers",
                         "connectionstring", "connstr", "databaseurl")
_DSN_VALUE = re.compile(
    r"(?:\b(?:postgres(?:ql)?|mysql|mariadb|mongodb(?:\+srv)?|rediss?|amqps?|mssql|sqlserver|oracle|cockroachdb"
    r"|clickhouse|snowflake)(?:\+[a-z0-9]+)?://)"        # a database URL
    r"|(?:\bjdbc:[a-z0-9]+:)"                            # a JDBC URL
    r"|(?:\b[a-z][a-z0-9+.-]*://[^/\s:@]+:[^/\s@]+@)"    # any URL carrying user:password@
    r"|(?:\bpassword\s*=\s*\S)"                          # libpq keyword DSN with a password
    r"|(?:\b[a-z0-9_]*(?:dsn|salt|password|secret)[a-z0-9_]*\s*=\s*\S)",  # KEY=value of a secret
    re.IGNORECASE)
_LIBPQ_KEY = re.compile(r"\b(?:host|hostaddr|port|dbname|user|sslmode)\s*=\s*\S", re.IGNORECASE)
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
    return re.sub(r"[^a-z0-9]", "", name.lower())


def forbidden_name(name: str) -> bool:
    norm = _normalized(name)
    return any(part in norm for part in _FORBIDDEN_NAME_PARTS)


def looks_like_secret(value: str) -> bool:
    return bool(_DSN_VALUE.search(value)) or len(_LIBPQ_KEY.findall(value)) >= 2


def _scan(value: Any, where: str, depth: int = 0) -> str | None:
    """The path of the first forbidden key or secret-looking value inside ``value``, or None."""
    if depth > _MAX_SCAN_DEPTH:
        return None
    if isinstance(value, str):
        return where if looks_like_secret(value) else None
    if isinstance(value, Mapping):
        for key, item in value.items():
            key = str(key)
            if forbidden_name(key):
                return f"{where}.{key}"
            found = _scan(item, f"{where}.{key}", depth + 1)
            if found:
                return found
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            found = _scan(item, f"{where}[{i}]", depth + 1)
            if found:
                return found
    return None


def check_arguments(tool: str, arguments: Mapping[str, Any], accepted: Iterable[str]) -> None:
    """Refuse forbidden, then unknown arguments (raises :class:`GuardError`)."""
    accepted = list(accepted)
    named = sorted(name for name in arguments if forbidden_name(str(name)))
    if named:
        raise GuardError(f"{tool}: argument{'s' if len(named) > 1 else ''} {', '.join(map(repr, named))} refused: "
                         f"{FORBIDDEN_HELP}", "forbidden_argument", {"arguments": named})
    for name, value in arguments.items():
        found = _scan(value, str(name))
        if found:
            raise GuardError(f"{tool}: the value of argument {found!r} looks like a database connection string or "
                             f"a credential, and is refused: {FORBIDDEN_HELP}", "forbidden_argument",
                             {"arguments": [found]})
    unknown = sorted(str(name) for name in arguments if name not in accepted)
    if unknown:
        raise GuardError(f"{tool}: unknown argument{'s' if len(unknown) > 1 else ''} "
                         f"{', '.join(map(repr, unknown))}; accepted: {', '.join(accepted) or '(none)'}",
                         "invalid_argument", {"unknown": unknown, "accepted": accepted})


def describe_validation_errors(tool: str, errors: list[dict[str, Any]], accepted: Iterable[str]) -> GuardError:
    """A readable ``invalid_argument`` from pydantic errors: field and problem, never the value."""
    problems = []
    fields = []
    for err in errors:
        loc = ".".join(str(part) for part in err.get("loc", ())) or "(arguments)"
        fields.append(loc)
        problems.append(f"{loc}: {err.get('msg', 'invalid value')}")
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
