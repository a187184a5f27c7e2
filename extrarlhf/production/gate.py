"""The production gate (DESIGN section 10.1): off unless the trusted process's environment opts in.

Four variables open it, read afresh on every call (never cached, never taken from arguments):

- ``RLHF_ENABLE_PRODUCTION_DATASETS`` must be ``1``;
- ``RLHF_PRODUCTION_DSN`` the read-only connection string of the production database;
- ``RETURNCLOCK_DATASET_SALT`` the pseudonym key, at least 32 bytes;
- ``RETURNCLOCK_DATASET_SALT_KEY_ID`` a public name for that key (recorded in manifests).

:func:`open_gate` returns a :class:`ProductionAccess` or raises :class:`ProductionDisabled`
naming every missing or invalid variable, never a value; it opens no connection, so a closed
gate never reaches the database. :func:`gate_status` reports the same by name only.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, Mapping
from urllib.parse import unquote, urlsplit

from ..errors import RLHFError

ENABLE_VAR = "RLHF_ENABLE_PRODUCTION_DATASETS"
DSN_VAR = "RLHF_PRODUCTION_DSN"
SALT_VAR = "RETURNCLOCK_DATASET_SALT"
KEY_ID_VAR = "RETURNCLOCK_DATASET_SALT_KEY_ID"
VARIABLES = (ENABLE_VAR, DSN_VAR, SALT_VAR, KEY_ID_VAR)
MIN_SALT_BYTES = 32
REDACTED = "<redacted>"

_KEY_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,63}")
_LIBPQ_PAIR = re.compile(r"\b(\w+)\s*=\s*('(?:[^'\\]|\\.)*'|\S+)")

__all__ = ["VARIABLES", "ENABLE_VAR", "DSN_VAR", "SALT_VAR", "KEY_ID_VAR", "MIN_SALT_BYTES", "ProductionDisabled",
           "ProductionAccess", "open_gate", "gate_status"]


class ProductionDisabled(RLHFError):
    """The gate is closed; ``problems`` maps each missing or invalid variable to what is wrong."""

    code = "production_disabled"

    def __init__(self, problems: dict[str, str]) -> None:
        self.problems = dict(problems)
        listed = "; ".join(f"{name}: {why}" for name, why in problems.items())
        super().__init__(f"production datasets are disabled ({listed}). The production plane is opt-in: set "
                         f"{', '.join(VARIABLES)} in the environment of the trusted process (never as arguments); "
                         f"no connection was opened")


def _dsn_problem(dsn: str) -> str | None:
    if dsn.startswith(("postgresql://", "postgres://")):
        return None
    if "=" in dsn:  # libpq keyword/value form: host=... dbname=...
        return None
    return "is not a PostgreSQL connection string (postgresql://... or libpq key=value pairs)"


def _problems(env: Mapping[str, str]) -> dict[str, str]:
    problems: dict[str, str] = {}
    enable = env.get(ENABLE_VAR)
    if enable is None or enable == "":
        problems[ENABLE_VAR] = "is not set (set it to 1 to opt in)"
    elif enable.strip() != "1":
        problems[ENABLE_VAR] = "is set but not to 1 (only 1 opts in)"
    dsn = env.get(DSN_VAR)
    if not dsn:
        problems[DSN_VAR] = "is not set"
    elif (why := _dsn_problem(dsn.strip())) is not None:
        problems[DSN_VAR] = why
    salt = env.get(SALT_VAR)
    if not salt:
        problems[SALT_VAR] = "is not set"
    elif len(salt.encode("utf-8")) < MIN_SALT_BYTES:
        problems[SALT_VAR] = f"is shorter than {MIN_SALT_BYTES} bytes (use a random secret of at least {MIN_SALT_BYTES} bytes)"
    key_id = env.get(KEY_ID_VAR)
    if not key_id:
        problems[KEY_ID_VAR] = "is not set (a public name for the salt, e.g. rc-2026-11)"
    elif salt and key_id == salt:
        problems[KEY_ID_VAR] = f"equals {SALT_VAR}; it must name the salt, not be it"
    elif not _KEY_ID.fullmatch(key_id):
        problems[KEY_ID_VAR] = "must be 1-64 letters, digits, '.', '_', ':' or '-' (it is written into manifests)"
    return problems


def _dsn_secrets(dsn: str) -> list[str]:
    """Parts of a DSN that must never be shown: the whole string, its password and user."""
    parts = [dsn]
    if "://" in dsn:
        try:
            url = urlsplit(dsn)
        except ValueError:
            return parts
        for value in (url.password, url.username):
            if value:
                parts += [value, unquote(value)]
    else:
        for key, value in _LIBPQ_PAIR.findall(dsn):
            if key.lower() in ("password", "user"):
                parts.append(value.strip("'"))
    return [p for p in parts if len(p) >= 4]


@dataclass(frozen=True, repr=False)
class ProductionAccess:
    """What an open gate grants. Its repr and str never show the DSN or the salt."""

    dsn: str
    salt: bytes
    key_id: str
    _secrets: tuple[str, ...] = field(default=(), compare=False)

    def __repr__(self) -> str:
        return f"ProductionAccess(key_id={self.key_id!r}, dsn={REDACTED}, salt={REDACTED})"

    __str__ = __repr__

    def scrub(self, text: str) -> str:
        """``text`` with every secret this access holds replaced (defence in depth for messages
        that quote a database error)."""
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
        return text


def open_gate(environ: Mapping[str, str] | None = None) -> ProductionAccess:
    """The production access granted by the environment, or :class:`ProductionDisabled`."""
    env = os.environ if environ is None else environ
    problems = _problems(env)
    if problems:
        raise ProductionDisabled(problems)
    dsn, salt = env[DSN_VAR].strip(), env[SALT_VAR]
    secrets = sorted({*_dsn_secrets(dsn), salt}, key=len, reverse=True)
    return ProductionAccess(dsn=dsn, salt=salt.encode("utf-8"), key_id=env[KEY_ID_VAR], _secrets=tuple(secrets))


def gate_status(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Whether the gate is open and, per variable, whether it is set and valid (names only)."""
    env = os.environ if environ is None else environ
    problems = _problems(env)
    variables = {name: {"set": bool(env.get(name)), "valid": name not in problems, "problem": problems.get(name)}
                 for name in VARIABLES}
    return {"open": not problems, "variables": variables,
            "missing": [n for n in VARIABLES if not env.get(n)],
            "invalid": [n for n in VARIABLES if env.get(n) and n in problems],
            "message": ("production datasets are enabled (values not shown)" if not problems else
                        "production datasets are disabled: " + "; ".join(f"{k} {v}" for k, v in problems.items()))}
