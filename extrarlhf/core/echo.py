"""What a message may repeat of what it was given: the one secret detector and the echo caps.

Errors say what was wrong, and often quote the value they refused (``unknown model 'x'``).
Two things must never come back that way (issue 24):

* **a secret** -- a DSN or a database URL, a ``KEY=value`` credential, an API key
  (``sk-live-...``, ``AKIA...``, ``ghp_...``), a bearer token or a JWT, a private key.
  :func:`looks_like_secret` is the one detector: the MCP argument guards refuse what it
  flags, the codename check refuses it, and :func:`safe_text` replaces every span of a
  message it flags by ``<redacted>`` -- the whole quoted value or word, never a part of it.
  Text is NFKC-normalized (with invisible format characters dropped) before matching, so a
  fullwidth ``postgresql：//`` or full-width letters are caught like the ASCII forms;
* **a huge value** -- a 200,000-character name quoted three times made a 600 KB reply.
  :func:`safe_text` shows a quoted value or a word longer than :data:`ECHO_LIMIT` characters
  as its first and last characters and its length (``'aaaa…aaaa' (200,000 chars)``), and
  cuts a message longer than :data:`MESSAGE_LIMIT` at a word boundary, saying so.

:func:`safe_text` is applied where messages are made: every :class:`~extrarlhf.core.errors.RLHFError`
(so the CLI, MCP and Dagster all show the same bounded text), and again by the facades for the
errors of ``engine`` and ``adapters``, which cannot import the core. It is idempotent.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

ECHO_LIMIT = 200  # characters of one quoted value or one word a message shows
MESSAGE_LIMIT = 4000  # characters of a whole message
REDACTED = "<redacted>"
_HEAD, _TAIL = 149, 50  # what a capped value shows of itself: ECHO_LIMIT characters with the "…"

_SECRET = re.compile(
    r"(?:\b(?:postgres(?:ql)?|mysql|mariadb|mongodb(?:\+srv)?|rediss?|amqps?|mssql|sqlserver|oracle|cockroachdb"
    r"|clickhouse|snowflake)(?:\+[a-z0-9]+)?://(?![.\s<)]|$))"  # a database URL ("postgresql://..." in prose is not)
    r"|(?:\bjdbc:[a-z0-9]+:)"                                  # a JDBC URL
    r"|(?:\b[a-z][a-z0-9+.-]*://[^/\s:@]+:[^/\s@]+@)"          # any URL carrying user:password@
    r"|(?:(?<![^\s'\"(\[<])[^\s/:@'\"]+:[^\s/@'\"]+@[^\s'\"]+)"  # user:password@host on its own (a URL split at a space)
    r"|(?:\bpassword\s*=\s*\S)"                                # libpq keyword DSN with a password
    r"|(?:(?:dsn|salt|password|passwd|secret|token|credential)[a-z0-9_]*\s*=\s*\S)"  # KEY=value (any prefix)
    r"|(?:(?:api[_-]?key|access[_-]?key|secret[_-]?key|private[_-]?key|client[_-]?secret"
    r"|auth[_-]?token|access[_-]?token|refresh[_-]?token|session[_-]?token)[a-z0-9_.-]*\s*[:=]\s*\S)"  # api_key: x
    r"|(?:\bauthorization\s*:\s*(?:[a-z]+\s+)?\S)"             # an HTTP Authorization header (scheme, credential)
    r"|(?:\b(?:bearer|basic|token)\s+(?=[a-z0-9._~+/=-]*[0-9])[a-z0-9._~+/=-]{16,})"  # a bearer/basic credential
    r"|(?:\beyj[a-z0-9_-]{8,}\.[a-z0-9_-]{8,})"                # a JWT (base64url of '{"', a dot, a payload)
    r"|(?:\b[sr]k[-_](?:live|test|proj|ant|svcacct)[-_][a-z0-9_-]{8,})"  # Stripe / OpenAI / Anthropic keys
    r"|(?:-----begin [a-z ]*private key-----)",                # a PEM private key
    re.IGNORECASE)
_CASED_SECRET = re.compile(  # forms defined by their case: an uppercase AWS key id is not any word
    r"(?<![A-Za-z0-9])(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[0-9A-Z]{16}(?![A-Za-z0-9])"  # AWS access key ids
    r"|\bsk-[A-Za-z0-9]{32,}"                                  # an OpenAI key
    r"|\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})"  # GitHub tokens
    r"|\bxox[abprs]-[A-Za-z0-9-]{10,}"                         # Slack tokens
    r"|\bAIza[0-9A-Za-z_-]{35}")                               # a Google API key
# Every form above holds one of these (a cheap first look: a long plain name is cleared at once).
_TRIGGER = re.compile(r"[=:._\-\s]|A(?:KIA|SIA|GPA|IDA|ROA|NPA|Iza)")
_LIBPQ_KEY = re.compile(r"\b(?:host|hostaddr|port|dbname|user|sslmode)\s*=\s*\S", re.IGNORECASE)
# Zero-width, bidirectional and other invisible format characters, and control characters:
# they split no real word, so they are dropped before matching.
_INVISIBLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f"
                        "\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000e0000-\U000e007f]")

# A quoted value as repr() writes it (not an apostrophe inside a word), or one word.
_PIECE = re.compile(r"""(?<![\w'"])'(?:[^'\\]++|\\.)*+'(?!\w)|(?<![\w'"])"(?:[^"\\]++|\\.)*+"(?!\w)"""
                    r"""|[^\s'"]++|['"]""", re.DOTALL)


# repr() writes an invisible character as an escape (``'\\u200b'``): read back before matching.
_ESCAPE = re.compile(r"\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8})")
_ESCAPE_OR_CHAR = re.compile(_ESCAPE.pattern + "|.", re.DOTALL)


def _unescaped(match: re.Match[str]) -> str:
    code = int(match.group()[2:], 16)
    return chr(code) if code <= 0x10FFFF else match.group()


def _normalized(text: str) -> str:
    if "\\" in text:
        text = _ESCAPE.sub(_unescaped, text)
    return _INVISIBLE.sub("", unicodedata.normalize("NFKC", text))


def _normalized_with_origin(text: str) -> tuple[str, list[int]]:
    """:func:`_normalized` piece by piece (a character or an escape), with for each normalized
    character the index in ``text`` of the piece it came from."""
    if text.isascii() and "\\" not in text and not _INVISIBLE.search(text):
        return text, list(range(len(text)))
    out: list[str] = []
    origin: list[int] = []
    for piece in _ESCAPE_OR_CHAR.finditer(text):
        norm = _normalized(piece.group())
        out.append(norm)
        origin.extend([piece.start()] * len(norm))
    return "".join(out), origin


def looks_like_secret(value: str) -> bool:
    """True when ``value`` carries anything credential-like (module docstring)."""
    norm = _normalized(value)
    if not _TRIGGER.search(norm):
        return False
    return bool(_SECRET.search(norm) or _CASED_SECRET.search(norm)) or len(_LIBPQ_KEY.findall(norm)) >= 2


def _secret_spans(text: str) -> list[tuple[int, int]]:
    norm, origin = _normalized_with_origin(text)
    matches = [*_SECRET.finditer(norm), *_CASED_SECRET.finditer(norm)]
    pairs = list(_LIBPQ_KEY.finditer(norm))
    if len(pairs) >= 2:
        matches += pairs
    return [(origin[m.start()], origin[m.end() - 1] + 1) for m in matches if m.end() > m.start()]


def _cap(inner: str, quote: str = "") -> str:
    return f"{quote}{inner[:_HEAD]}…{inner[-_TAIL:]}{quote} ({len(inner):,} chars)"


def _piece(match: re.Match[str]) -> str:
    piece = match.group()
    quote = piece[0] if len(piece) >= 2 and piece[0] in "'\"" and piece[-1] == piece[0] else ""
    inner = piece[1:-1] if quote else piece
    if len(inner) <= ECHO_LIMIT:
        return piece
    return REDACTED if looks_like_secret(inner) else _cap(inner, quote)


def _word_bounds(text: str, start: int, end: int) -> tuple[int, int]:
    """``[start, end)`` widened to whole words (runs without whitespace or quotes)."""
    while start > 0 and not (text[start - 1].isspace() or text[start - 1] in "'\""):
        start -= 1
    while end < len(text) and not (text[end].isspace() or text[end] in "'\""):
        end += 1
    return start, end


def _redact_secrets(text: str) -> str:
    spans = _secret_spans(text)
    if not spans:
        return text
    quoted = [(m.start(), m.end()) for m in _PIECE.finditer(text) if m.group()[:1] in "'\"" and len(m.group()) > 1]
    widened = []
    for start, end in spans:
        enclosing = next(((s, e) for s, e in quoted if s <= start and end <= e), None)
        widened.append(enclosing or _word_bounds(text, start, end))
    out, last = [], 0
    for start, end in sorted(widened):
        if end <= last:
            continue
        out.append(text[last:max(start, last)])
        out.append(REDACTED)
        last = end
    out.append(text[last:])
    return "".join(out)


def safe_text(text: str) -> str:
    """``text`` as a message may show it: secrets redacted, long values capped (module docstring)."""
    if not isinstance(text, str):
        text = str(text)
    if len(text) > ECHO_LIMIT:
        text = _PIECE.sub(_piece, text)
    if len(text) > MESSAGE_LIMIT:
        note = f" …(message cut: {len(text):,} chars)"
        room = MESSAGE_LIMIT - len(note)
        cut = text.rfind(" ", 0, room)
        text = text[:cut if cut > room // 2 else room] + note
    return _redact_secrets(text)


def safe_data(value: Any, depth: int = 0) -> Any:
    """Every string inside a JSON-like ``value`` (error details) through :func:`safe_text`."""
    if isinstance(value, str):
        return safe_text(value)
    if depth > 16:
        return value
    if isinstance(value, dict):
        return {safe_text(str(k)): safe_data(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [safe_data(v, depth + 1) for v in value]
    return value
