"""The production gate (DESIGN section 10.1): off unless the trusted process's environment opts in.

Four variables open it, read afresh on every call (never cached, never taken from arguments):

- ``RLHF_ENABLE_PRODUCTION_DATASETS`` must be exactly ``1`` (no spaces, no newline);
- ``RLHF_PRODUCTION_DSN`` the read-only connection string of the production database: a
  ``postgresql://`` URI or libpq ``key=value`` pairs (parsed here into asyncpg's keyword
  arguments, since asyncpg reads URIs only);
- ``RETURNCLOCK_DATASET_SALT`` the pseudonym key: at least 32 bytes with real entropy
  (:func:`salt_entropy_problem`: a salt of 32 spaces, or one block repeated, is 32 bytes but
  no secret; a random hex string passes);
- ``RETURNCLOCK_DATASET_SALT_KEY_ID`` a public name for that key (recorded in manifests and
  results): 1-64 of ``A-Z a-z 0-9 . _ -``, and it may not contain the salt, nor the DSN's
  password or user name (it is written where they must never be).

Two optional variables bound every statement of a production read (the server enforces
them; defaults below): ``RLHF_PRODUCTION_STATEMENT_TIMEOUT_MS`` and
``RLHF_PRODUCTION_LOCK_TIMEOUT_MS``, whole milliseconds.

:func:`open_gate` returns a :class:`ProductionAccess` or raises :class:`ProductionDisabled`
naming every missing or invalid variable, never a value; it opens no connection, so a closed
gate never reaches the database. :func:`gate_status` reports the same by name only.
"""

from __future__ import annotations

import math
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Mapping
from urllib.parse import parse_qs, unquote, urlsplit

from ..core.errors import RLHFError

ENABLE_VAR = "RLHF_ENABLE_PRODUCTION_DATASETS"
DSN_VAR = "RLHF_PRODUCTION_DSN"
SALT_VAR = "RETURNCLOCK_DATASET_SALT"
KEY_ID_VAR = "RETURNCLOCK_DATASET_SALT_KEY_ID"
VARIABLES = (ENABLE_VAR, DSN_VAR, SALT_VAR, KEY_ID_VAR)
STATEMENT_TIMEOUT_VAR = "RLHF_PRODUCTION_STATEMENT_TIMEOUT_MS"
LOCK_TIMEOUT_VAR = "RLHF_PRODUCTION_LOCK_TIMEOUT_MS"
# the largest statement, the ReturnClock COPY of 1,000,000 sessions, takes about 11 s (docs/production.md)
TIMEOUT_DEFAULTS_MS = {STATEMENT_TIMEOUT_VAR: 300_000, LOCK_TIMEOUT_VAR: 10_000}
MAX_TIMEOUT_MS = 86_400_000
MIN_SALT_BYTES = 32
MIN_SALT_DISTINCT_BYTES = 8
MIN_SALT_ENTROPY_BITS = 128  # length x the Shannon entropy of its byte histogram
MAX_KEY_ID_CHARS = 64
REDACTED = "<redacted>"

_KEY_ID = re.compile(r"[A-Za-z0-9._-]{1,%d}" % MAX_KEY_ID_CHARS)
_MS = re.compile(r"[0-9]{1,9}")
# libpq keywords (conninfo) and the asyncpg keyword argument each one becomes
_LIBPQ_KEYWORDS = {"host": "host", "port": "port", "dbname": "database", "user": "user", "password": "password",
                   "passfile": "passfile", "sslmode": "ssl", "target_session_attrs": "target_session_attrs",
                   "application_name": None}  # the reader names itself (reader.APPLICATION_NAME)
# the other keywords of libpq's conninfo: named in a refusal (any other name might be a typo'd secret)
_OTHER_LIBPQ_KEYWORDS = frozenset((
    "hostaddr", "connect_timeout", "client_encoding", "options", "fallback_application_name", "keepalives",
    "keepalives_idle", "keepalives_interval", "keepalives_count", "tcp_user_timeout", "replication", "gssencmode",
    "sslcompression", "sslcert", "sslkey", "sslpassword", "sslcertmode", "sslrootcert", "sslcrl", "sslcrldir",
    "sslsni", "requirepeer", "ssl_min_protocol_version", "ssl_max_protocol_version", "krbsrvname", "gsslib",
    "gssdelegation", "service", "load_balance_hosts", "require_auth", "channel_binding", "sslnegotiation"))
_SSLMODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")
_LIBPQ_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

__all__ = ["VARIABLES", "ENABLE_VAR", "DSN_VAR", "SALT_VAR", "KEY_ID_VAR", "STATEMENT_TIMEOUT_VAR",
           "LOCK_TIMEOUT_VAR", "TIMEOUT_DEFAULTS_MS", "MIN_SALT_BYTES", "MIN_SALT_DISTINCT_BYTES",
           "MIN_SALT_ENTROPY_BITS",
           "ProductionDisabled", "ProductionAccess", "open_gate", "gate_status"]


class ProductionDisabled(RLHFError):
    """The gate is closed; ``problems`` maps each missing or invalid variable to what is wrong."""

    code = "production_disabled"

    def __init__(self, problems: dict[str, str]) -> None:
        self.problems = dict(problems)
        listed = "; ".join(f"{name}: {why}" for name, why in problems.items())
        super().__init__(f"production datasets are disabled ({listed}). The production plane is opt-in: set "
                         f"{', '.join(VARIABLES)} in the environment of the trusted process (never as arguments); "
                         f"no connection was opened")


class _BadDsn(Exception):
    """Why a DSN cannot be used (a sentence that never quotes the DSN)."""



def salt_entropy_problem(salt: bytes) -> str | None:
    """Why ``salt`` is no random secret, or None. It needs at least
    :data:`MIN_SALT_DISTINCT_BYTES` distinct byte values, an estimated
    :data:`MIN_SALT_ENTROPY_BITS` bits (its length times the Shannon entropy of its byte
    histogram) and no repeating block. A random hex string of 64 characters (16 possible
    values, ~250 bits) passes; 32 spaces, tabs and spaces, or a 16-byte block written twice do not."""
    counts = Counter(salt)
    if len(counts) < MIN_SALT_DISTINCT_BYTES:
        return f"has fewer than {MIN_SALT_DISTINCT_BYTES} distinct byte values"
    bits = -sum(n * math.log2(n / len(salt)) for n in counts.values())
    if bits < MIN_SALT_ENTROPY_BITS:
        return f"has about {bits:.0f} bits of entropy, fewer than {MIN_SALT_ENTROPY_BITS}"
    if any(salt[period:] == salt[:-period] for period in range(1, len(salt) // 2 + 1)):
        return "repeats a block of itself"
    grams = [salt[i:i + _GRAM] for i in range(len(salt) - _GRAM + 1)]
    if grams and len(set(grams)) < 0.9 * len(grams):
        return "repeats parts of itself (a phrase written again and again, or its base64)"
    steps = [b - a for a, b in zip(salt, salt[1:])]
    if max(steps.count(1), steps.count(-1)) >= len(steps) // 4:
        return "runs through an alphabet in order (abc..., 012..., the base64 alphabet)"
    if _WORDS.fullmatch(salt) or _LOWER_WORDS.fullmatch(salt):
        return "reads as words (a passphrase)"
    return None


# What salt_entropy_problem recognizes beyond counting (issue 49). No rule can prove randomness:
# a known hash of a dictionary word (sha256("password") as hex) looks random and passes; say so.
_GRAM = 6  # a random 64-character hex salt repeats no 6 characters (16**6 values); a phrase does
_WORDS = re.compile(rb"[A-Za-z]+(?: +[A-Za-z0-9]+)+[ .!?]*")  # words separated by spaces
_LOWER_WORDS = re.compile(rb"[a-z]{2,}(?:[-_.,][a-z]{2,}){2,}[0-9]*")  # correct-horse-battery-staple

def _libpq_pairs(text: str) -> dict[str, str]:
    """libpq ``key = value`` pairs (values bare or single-quoted, backslash escapes ``\\'`` and
    ``\\\\``); the last of a repeated keyword wins, as in libpq."""
    pairs: dict[str, str] = {}
    i, n = 0, len(text)
    while True:
        while i < n and text[i].isspace():
            i += 1
        if i == n:
            return pairs
        key = _LIBPQ_KEY.match(text, i)
        if key is None:
            raise _BadDsn(f"is not a PostgreSQL connection string: character {i + 1} starts no keyword "
                          f"(use postgresql://... or libpq key=value pairs)")
        i = key.end()
        while i < n and text[i].isspace():
            i += 1
        if i == n or text[i] != "=":
            raise _BadDsn("is not a PostgreSQL connection string: a keyword has no '=' (use postgresql://... or "
                          "libpq key=value pairs)")
        i += 1
        while i < n and text[i].isspace():
            i += 1
        value, quoted = [], i < n and text[i] == "'"
        i += quoted
        while i < n and (text[i] != "'" if quoted else not text[i].isspace()):
            if text[i] == "\\" and i + 1 < n:
                i += 1
            value.append(text[i])
            i += 1
        if quoted:
            if i == n:
                raise _BadDsn("is not a PostgreSQL connection string: a quoted value is never closed")
            i += 1
        pairs[key.group().lower()] = "".join(value)


def _connect_kwargs(dsn: str) -> dict[str, Any]:
    """asyncpg's ``connect`` keyword arguments for ``dsn`` (see the module docstring)."""
    if dsn.startswith(("postgresql://", "postgres://")):
        return {"dsn": dsn}
    if "=" not in dsn:
        raise _BadDsn("is not a PostgreSQL connection string (postgresql://... or libpq key=value pairs)")
    pairs = _libpq_pairs(dsn)
    unsupported = sorted(k for k in pairs if k not in _LIBPQ_KEYWORDS)
    if unsupported:  # keyword names are no secrets, but a name that is no keyword may be one
        named = [k for k in unsupported if k in _OTHER_LIBPQ_KEYWORDS]
        raise _BadDsn(f"uses libpq keyword(s) this reader does not support ({', '.join(named) or 'unknown ones'}); "
                      f"supported: {', '.join(sorted(_LIBPQ_KEYWORDS))}. Use the postgresql:// URI form for the rest")
    kwargs = {_LIBPQ_KEYWORDS[k]: v for k, v in pairs.items() if _LIBPQ_KEYWORDS[k] is not None}
    if "port" in kwargs:
        if not re.fullmatch(r"[0-9]{1,5}", kwargs["port"]):
            raise _BadDsn("has a port that is not a number")
        kwargs["port"] = int(kwargs["port"])
    if "ssl" in kwargs and kwargs["ssl"] not in _SSLMODES:
        raise _BadDsn(f"has an sslmode that is not one of {', '.join(_SSLMODES)}")
    return kwargs


def _dsn_identity(dsn: str) -> list[str]:
    """The DSN's password and user name (both forms), which a key id must not contain."""
    try:
        kwargs = _connect_kwargs(dsn)
    except _BadDsn:
        return []
    if "dsn" not in kwargs:
        return [v for v in (kwargs.get("password"), kwargs.get("user")) if v]
    try:
        url = urlsplit(dsn)
        query = parse_qs(url.query)
    except ValueError:
        return []
    found = [unquote(v) for v in (url.password, url.username) if v]
    return found + [v for k in ("password", "user") for v in query.get(k, []) if v]


def _timeout_ms(env: Mapping[str, str], name: str) -> int | None:
    value = env.get(name)
    if value is None or value == "":
        return TIMEOUT_DEFAULTS_MS[name]
    if not _MS.fullmatch(value) or not 1 <= int(value) <= MAX_TIMEOUT_MS:
        return None
    return int(value)


def _key_id_problem(key_id: str, salt: str | None, dsn: str | None) -> str | None:
    if not _KEY_ID.fullmatch(key_id):
        return (f"must be 1-{MAX_KEY_ID_CHARS} characters from A-Z, a-z, 0-9, '.', '_' and '-' (it is a public "
                f"name written into manifests, e.g. rc-2026-11)")
    lowered = key_id.lower()
    if salt and salt.lower() in lowered:
        return f"contains {SALT_VAR}; it must name the salt, never hold it"
    for part in _dsn_identity(dsn or ""):
        if part.lower() in lowered if len(part) >= 4 else part.lower() == lowered:
            return f"contains the password or user name of {DSN_VAR}; choose a public name that holds neither"
    return None


def _problems(env: Mapping[str, str]) -> dict[str, str]:
    problems: dict[str, str] = {}
    enable = env.get(ENABLE_VAR)
    if enable is None or enable == "":
        problems[ENABLE_VAR] = "is not set (set it to 1 to opt in)"
    elif enable != "1":
        problems[ENABLE_VAR] = "is set but not to exactly 1 (only the single character 1 opts in: no spaces, no newline)"
    dsn = env.get(DSN_VAR)
    if not dsn:
        problems[DSN_VAR] = "is not set"
    else:
        try:
            _connect_kwargs(dsn.strip())
        except _BadDsn as why:
            problems[DSN_VAR] = str(why)
    salt = env.get(SALT_VAR)
    if not salt:
        problems[SALT_VAR] = "is not set"
    elif len(salt.encode("utf-8")) < MIN_SALT_BYTES:
        problems[SALT_VAR] = (f"is shorter than {MIN_SALT_BYTES} bytes (use a random secret of at least "
                              f"{MIN_SALT_BYTES} bytes, e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))')")
    elif (weak := salt_entropy_problem(salt.encode("utf-8"))) is not None:
        problems[SALT_VAR] = (f"{weak}: it is no random secret (use at least {MIN_SALT_BYTES} random bytes, e.g. "
                              f"python -c 'import secrets; print(secrets.token_urlsafe(32))'; no check can prove a "
                              f"salt random: a hash of a word passes these, so make it with secrets)")
    key_id = env.get(KEY_ID_VAR)
    if not key_id:
        problems[KEY_ID_VAR] = "is not set (a public name for the salt, e.g. rc-2026-11)"
    elif (why := _key_id_problem(key_id, salt, dsn.strip() if dsn else None)) is not None:
        problems[KEY_ID_VAR] = why
    for name, default in TIMEOUT_DEFAULTS_MS.items():
        if _timeout_ms(env, name) is None:
            problems[name] = (f"must be a whole number of milliseconds from 1 to {MAX_TIMEOUT_MS} (unset: "
                              f"{default})")
    return problems


@dataclass(frozen=True, repr=False)
class ProductionAccess:
    """What an open gate grants. Its repr and str never show the DSN or the salt."""

    connect_kwargs: dict[str, Any] = field(compare=False)
    salt: bytes
    key_id: str
    statement_timeout_ms: int = TIMEOUT_DEFAULTS_MS[STATEMENT_TIMEOUT_VAR]
    lock_timeout_ms: int = TIMEOUT_DEFAULTS_MS[LOCK_TIMEOUT_VAR]

    def __repr__(self) -> str:
        return (f"ProductionAccess(key_id={self.key_id!r}, dsn={REDACTED}, salt={REDACTED}, "
                f"statement_timeout_ms={self.statement_timeout_ms}, lock_timeout_ms={self.lock_timeout_ms})")

    __str__ = __repr__


def open_gate(environ: Mapping[str, str] | None = None) -> ProductionAccess:
    """The production access granted by the environment, or :class:`ProductionDisabled`."""
    env = os.environ if environ is None else environ
    problems = _problems(env)
    if problems:
        raise ProductionDisabled(problems)
    return ProductionAccess(connect_kwargs=_connect_kwargs(env[DSN_VAR].strip()),
                            salt=env[SALT_VAR].encode("utf-8"), key_id=env[KEY_ID_VAR],
                            statement_timeout_ms=_timeout_ms(env, STATEMENT_TIMEOUT_VAR),
                            lock_timeout_ms=_timeout_ms(env, LOCK_TIMEOUT_VAR))


def gate_status(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Whether the gate is open and, per variable, whether it is set and valid (names only; the
    optional timeouts also with the milliseconds in effect: they are no secrets)."""
    env = os.environ if environ is None else environ
    problems = _problems(env)
    variables = {name: {"set": bool(env.get(name)), "valid": name not in problems, "problem": problems.get(name)}
                 for name in (*VARIABLES, *TIMEOUT_DEFAULTS_MS)}
    for name in TIMEOUT_DEFAULTS_MS:
        variables[name]["ms"] = _timeout_ms(env, name)
    return {"open": not problems, "variables": variables,
            "missing": [n for n in VARIABLES if not env.get(n)],
            "invalid": [n for n in (*VARIABLES, *TIMEOUT_DEFAULTS_MS) if env.get(n) and n in problems],
            "message": ("production datasets are enabled (values not shown)" if not problems else
                        "production datasets are disabled: " + "; ".join(f"{k} {v}" for k, v in problems.items()))}
