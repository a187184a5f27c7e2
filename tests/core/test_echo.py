"""What an error may repeat (extrarlhf/core/echo.py, issue 24): the one secret detector, redaction
of every echo (never partly) and the caps on echoed values, in the core and on the CLI."""

from __future__ import annotations

import subprocess
import sys

import pytest

from extrarlhf.core.echo import ECHO_LIMIT, MESSAGE_LIMIT, REDACTED, looks_like_secret, safe_text
from extrarlhf.core.errors import NotFound, UnknownSpec
from extrarlhf.runtime.codenames import CodenameError, check_codename
from tests.mcp_helpers import REPO

# (secret, the part that must never appear again, not even partly)
SECRETS = [
    ("sk-live-4eC39HqLyjWDarjtT1zdp7dc", "4eC39HqLyjWDarjtT1zdp7dc"),
    ("sk_live_51HxQ2eKd8Zq7wPzR", "51HxQ2eKd8Zq7wPzR"),
    ("Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJl", "eyJzdWIiOiIxMjM0In0"),
    ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJl", "eyJzdWIiOiIxMjM0In0"),
    ("Bearer 0a1b2c3d4e5f6a7b8c9d", "0a1b2c3d4e5f6a7b8c9d"),
    ("api_key=abcd1234efgh5678", "abcd1234efgh5678"),
    ("X-Api-Key: zq81mmWQ02lkA9", "zq81mmWQ02lkA9"),
    ("AKIAIOSFODNN7EXAMPLE", "IOSFODNN7EXAMPLE"),
    ("ghp_0123456789abcdefghijABCDEFGHIJ012345", "0123456789abcdefghij"),
    ("postgresql://admin:S3cr3tPw@db.example/prod", "S3cr3tPw@db.example"),
    ("postgresql\uff1a//admin:S3cr3tPw@db.example/prod", "S3cr3tPw@db.example"),   # fullwidth colon
    ("\uff50\uff4f\uff53\uff54\uff47\uff52\uff45\uff53://u@db.example/prod", "u@db.example"),  # fullwidth letters
    ("postgres\u200b://u@db.example/prod", "u@db.example"),                          # a zero-width space
    ("postgresql:// admin:S3cr3tPw@db.example/prod", "S3cr3tPw@db.example"),  # a space after // (issue 49)
    ("admin:S3cr3tPw@db.example", "S3cr3tPw@db.example"),                      # user:password@host alone
    ("host=db.example dbname=prod user=admin", "db.example"),
    ("password = hunter2hunter2", "hunter2hunter2"),
    ("RLHF_PRODUCTION_DSN=anything-here", "anything-here"),
    ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA"),
    ("-----BEGIN RSA PRIVATE KEY-----", "BEGIN RSA PRIVATE KEY"),
]
ORDINARY = [
    "alice", "alice-l2", "AKIA", "AKIAIOSFODNN7EXAMPL", "null", "{}", "baseline:greedy", "exit-r06",
    "search:baseline:greedy?sims=32&play=exit-r01", "search:tiny?sims=4096", "b000001-0123456789", "m_0123abcd_" + "0" * 24,
    "3f" * 32, "gg/v1", "@promoted", "tokens", "the bearer of this card attacks first", "password",
    "is not a PostgreSQL connection string (postgresql://... or libpq key=value pairs)",
    "eyJ0b29sIjoibGlzdF9zZXNzaW9ucyIsImFmdGVyIjpbImciXX0",  # a paging cursor (base64url JSON, no dot)
    "sk-learn-baseline", "the server's log (stderr) and the tool's inputSchema",
]


def _windows(text: str, size: int = 6) -> set[str]:
    return {text[i:i + size] for i in range(max(1, len(text) - size + 1))}


@pytest.mark.parametrize("secret, material", SECRETS, ids=[s[:24] for s, _ in SECRETS])
def test_every_secret_form_is_detected_and_never_repeated_even_partly(secret, material):
    assert looks_like_secret(secret)
    for message in (f"unknown model {secret!r}; known: baseline:random",
                    f"group {secret} does not exist",
                    f"invalid codename {secret!r}: it must start with a letter",
                    f'a repr with a quote "it\'s {secret}" and after',
                    f"unknown model {('x' * 300 + ', ' + secret)!r}"):  # in a long value
        for shown in (safe_text(message), str(NotFound(message)), str(UnknownSpec(message))):
            assert REDACTED in shown, shown
            leaked = [w for w in _windows(material) if w in shown]
            assert not leaked, (shown, leaked)
            assert safe_text(shown) == shown  # idempotent: the facades apply it again


@pytest.mark.parametrize("value", ORDINARY)
def test_ordinary_values_are_not_taken_for_secrets(value):
    assert not looks_like_secret(value), value
    message = f"unknown model {value!r}; known: baseline:random, baseline:greedy (see the server's log)"
    assert safe_text(message) == message


def test_a_huge_value_is_shown_by_its_ends_and_its_length():
    big = "a" * 199_990 + "0123456789"
    once = str(NotFound(f"unknown model {big!r}; known: baseline:random"))
    assert once.startswith("unknown model 'aaaa") and once.endswith("' (200,000 chars); known: baseline:random")
    assert "0123456789'" in once and len(once) < ECHO_LIMIT + 100
    thrice = safe_text(f"checkpoint {big!r} is not {big!r}; register {big!r} first")
    assert thrice.count("(200,000 chars)") == 3 and len(thrice) < 4 * ECHO_LIMIT
    bare = safe_text(f"group {big} does not exist")
    assert "(200,000 chars) does not exist" in bare and len(bare) < ECHO_LIMIT + 100
    spaced = safe_text("words: " + "ab " * 100_000)  # no single long value: the message itself is cut
    assert len(spaced) <= MESSAGE_LIMIT and spaced.endswith("…(message cut: 300,007 chars)")
    for text in (once, thrice, bare, spaced):
        assert safe_text(text) == text
    path = "/tmp/pytest-of-root/pytest-1/test_a_long_test_name0/datasets/name/v1/manifest.json"
    assert safe_text(f"{path!r} is damaged; move {path} aside") == f"{path!r} is damaged; move {path} aside"


def test_a_credential_is_refused_as_a_codename_without_being_repeated():
    for secret in ("AKIAIOSFODNN7EXAMPLE", "sk-live-4eC39HqLyjWDarjtT1zdp7dc", "ghp_0123456789abcdefghijABCDEFGHIJ012345"):
        with pytest.raises(CodenameError) as info:
            check_codename(secret)
        assert info.value.code == "invalid_argument" and "looks like a credential" in str(info.value)
        assert not [w for w in _windows(secret[4:]) if w in str(info.value)]
    assert check_codename("alice-l2") == "alice-l2" and check_codename("AKIA") == "AKIA"


def test_the_cli_prints_bounded_and_redacted_errors(tmp_path):
    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "extrarlhf", *argv, "--sessions-dir", str(tmp_path)], cwd=REPO,
                              capture_output=True, text=True, timeout=60)

    big = run("sessions", "show", "g" * 100_000)  # one argv string may hold at most 128 KiB
    assert big.returncode == 2 and "(100,000 chars)" in big.stderr and len(big.stderr) < 1000, big.stderr[:300]
    secret = run("sessions", "show", "AKIAIOSFODNN7EXAMPLE")
    assert secret.returncode == 2 and "error [not_found]" in secret.stderr and REDACTED in secret.stderr
    assert "IOSFODNN7" not in secret.stderr
