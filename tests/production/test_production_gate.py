"""The production gate (DESIGN 10.1): off by default, names what is missing or invalid (never a
value), and a closed gate opens no connection -- checked with a real listening socket."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from extrarlhf.production import gate
from extrarlhf.production.export import export_production_v5_dataset
from extrarlhf.production.gate import ProductionDisabled, gate_status, open_gate
from extrarlhf.production.status import production_status
from extrarlhf.production.timestamp import export_timestamp_dataset

ROOT = Path(__file__).resolve().parents[2]
SALT = "a-very-secret-salt-value-Xq7Vd2kw9PzL0bMf4RtY8nJc6HsA1eGuT5oW"
GOOD = {gate.ENABLE_VAR: "1", gate.DSN_VAR: "postgresql://reader:hunter2-pw@db.internal:5432/prod",
        gate.SALT_VAR: SALT, gate.KEY_ID_VAR: "rc-2026-11"}
SECRETS = ("hunter2-pw", SALT, "postgresql://reader")


def _without(*names: str) -> dict[str, str]:
    return {k: v for k, v in GOOD.items() if k not in names}


def test_open_gate_grants_access_and_hides_secrets_in_its_repr():
    access = open_gate(GOOD)
    assert access.key_id == "rc-2026-11" and access.salt == SALT.encode()
    assert access.connect_kwargs == {"dsn": GOOD[gate.DSN_VAR]}
    assert (access.statement_timeout_ms, access.lock_timeout_ms) == (300_000, 10_000)  # the defaults
    for text in (repr(access), str(access)):
        assert all(s not in text for s in SECRETS)


@pytest.mark.parametrize("env, names", [
    ({}, list(gate.VARIABLES)),
    (_without(gate.ENABLE_VAR), [gate.ENABLE_VAR]),
    ({**GOOD, gate.ENABLE_VAR: "true"}, [gate.ENABLE_VAR]),
    (_without(gate.DSN_VAR), [gate.DSN_VAR]),
    ({**GOOD, gate.DSN_VAR: "mysql-ish nonsense"}, [gate.DSN_VAR]),
    ({**GOOD, gate.SALT_VAR: "short-salt-31-bytes-long-000000"}, [gate.SALT_VAR]),
    (_without(gate.KEY_ID_VAR), [gate.KEY_ID_VAR]),
    ({**GOOD, gate.KEY_ID_VAR: SALT}, [gate.KEY_ID_VAR]),
    ({**GOOD, gate.STATEMENT_TIMEOUT_VAR: "0"}, [gate.STATEMENT_TIMEOUT_VAR]),
    ({**GOOD, gate.LOCK_TIMEOUT_VAR: "10s"}, [gate.LOCK_TIMEOUT_VAR]),
    ({**GOOD, gate.LOCK_TIMEOUT_VAR: "99999999999"}, [gate.LOCK_TIMEOUT_VAR]),
])
def test_a_closed_gate_names_each_problem_and_never_a_value(env, names):
    with pytest.raises(ProductionDisabled) as info:
        open_gate(env)
    err = info.value
    assert err.code == "production_disabled"
    assert sorted(err.problems) == sorted(names)
    for name in names:
        assert name in str(err)
    for value in env.values():
        if value and value not in ("1",) and len(value) > 3:
            assert value not in str(err)


def test_a_salt_of_exactly_32_bytes_is_accepted_and_31_is_not():
    salt = "q7Vd2kXw9PzL0bMf4RtY8nJc6HsA1eGu"
    assert open_gate({**GOOD, gate.SALT_VAR: salt}).salt == salt.encode()
    with pytest.raises(ProductionDisabled, match="shorter than 32 bytes"):
        open_gate({**GOOD, gate.SALT_VAR: salt[:31]})


@pytest.mark.parametrize("salt, why", [
    (" " * 32, "fewer than 8 distinct byte values"), (" \t" * 16, "fewer than 8 distinct byte values"),
    ("x" * 64, "fewer than 8 distinct byte values"), ("ab" * 40, "fewer than 8 distinct byte values"),
    ("abcdefgh" * 4, "bits of entropy, fewer than 128"), ("0123456789abcde" * 3, "repeats a block of itself"),
    ("0123456789abcdef" * 2, "repeats a block of itself"),
    # issue 49: what a person types when asked for a random secret
    ("abcdefghijklmnopqrstuvwxyz012345", "runs through an alphabet in order"),
    ("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", "runs through an alphabet in order"),
    ("zyxwvutsrqponmlkjihgfedcba9876543210", "runs through an alphabet in order"),
    ("correct horse battery staple and more words", "reads as words (a passphrase)"),
    ("correct-horse-battery-staple-gets-long", "reads as words (a passphrase)"),
    ("cGFzc3dvcmRwYXNzd29yZHBhc3N3b3JkcGFzc3dvcmRwYXNzd29yZA==", "repeats parts of itself"),  # base64 of a phrase
    ("my secret phrase, my secret phrase, my secret phrase!", "repeats parts of itself")])
def test_a_salt_without_entropy_is_refused_without_showing_it(salt, why):
    with pytest.raises(ProductionDisabled) as info:
        open_gate({**GOOD, gate.SALT_VAR: salt, gate.KEY_ID_VAR: "rc-1"})
    assert sorted(info.value.problems) == [gate.SALT_VAR]
    assert why in str(info.value) and "token_urlsafe" in str(info.value)
    assert "no check can prove a salt random" in str(info.value)
    assert salt.strip() not in str(info.value) or not salt.strip()


def test_every_random_hex_or_urlsafe_salt_passes():
    import secrets

    for _ in range(2000):  # a 16-distinct-values rule refused about 23% of token_hex(32) salts
        for salt in (secrets.token_hex(32), secrets.token_urlsafe(32)):
            assert open_gate({**GOOD, gate.SALT_VAR: salt}).salt == salt.encode()


@pytest.mark.parametrize("value", ["1 ", " 1", "1\n", "\u00a01", "01", "１", "true"])
def test_the_enable_flag_must_be_exactly_1(value):
    with pytest.raises(ProductionDisabled) as info:
        open_gate({**GOOD, gate.ENABLE_VAR: value})
    assert sorted(info.value.problems) == [gate.ENABLE_VAR]
    assert f"{gate.ENABLE_VAR}: is set but not to exactly 1" in str(info.value)
    assert gate_status({**GOOD, gate.ENABLE_VAR: value})["open"] is False


@pytest.mark.parametrize("dsn, key_id, why", [
    (GOOD[gate.DSN_VAR], "rc-" + SALT, "contains RETURNCLOCK_DATASET_SALT"),
    (GOOD[gate.DSN_VAR], "RC-" + SALT.upper(), "contains RETURNCLOCK_DATASET_SALT"),
    (GOOD[gate.DSN_VAR], "hunter2-pw", "contains the password or user name of RLHF_PRODUCTION_DSN"),
    (GOOD[gate.DSN_VAR], "rc-reader-1", "contains the password or user name of RLHF_PRODUCTION_DSN"),
    ("postgresql://db.internal/prod?user=svc&password=pa55word-x", "key.pa55word-x",
     "contains the password or user name"),
    ("host=db.internal dbname=prod user=svc password='s3cr3t-pw'", "rc-s3cr3t-pw", "contains the password"),
    ("host=db.internal dbname=prod user=qz password=zz9-secret", "qz", "contains the password or user name"),
    (GOOD[gate.DSN_VAR], "k" * 65, "must be 1-64 characters"),
    (GOOD[gate.DSN_VAR], "rc:2026", "must be 1-64 characters"),
    (GOOD[gate.DSN_VAR], "rc 2026", "must be 1-64 characters"),
    (GOOD[gate.DSN_VAR], "rc-\u00e9t\u00e9", "must be 1-64 characters"),
])
def test_a_key_id_that_could_hold_a_secret_is_refused_and_never_echoed(dsn, key_id, why):
    with pytest.raises(ProductionDisabled) as info:
        open_gate({**GOOD, gate.DSN_VAR: dsn, gate.KEY_ID_VAR: key_id})
    assert sorted(info.value.problems) == [gate.KEY_ID_VAR] and why in info.value.problems[gate.KEY_ID_VAR]
    for value in (key_id, SALT, "hunter2-pw", "pa55word-x", "s3cr3t-pw", "zz9-secret"):
        assert value not in str(info.value)
    assert open_gate({**GOOD, gate.DSN_VAR: dsn, gate.KEY_ID_VAR: "rc-2026.11_b"}).key_id == "rc-2026.11_b"


def test_a_libpq_key_value_dsn_becomes_connect_arguments():
    dsn = "host=/run/pg port = 5433  dbname='prod db' user=reader password='it\\'s a \\\\secret' sslmode=require"
    access = open_gate({**GOOD, gate.DSN_VAR: dsn})
    assert access.connect_kwargs == {"host": "/run/pg", "port": 5433, "database": "prod db", "user": "reader",
                                     "password": "it's a \\secret", "ssl": "require"}
    assert "secret" not in repr(access)


@pytest.mark.parametrize("dsn, why", [
    ("host=db options='-c search_path=x'", "libpq keyword(s) this reader does not support (options)"),
    ("host=db hunter2secret=x", "(unknown ones)"),
    ("host=db password='never closed", "a quoted value is never closed"),
    ("host=db =x", "starts no keyword"),
    ("host=db port=54x", "port that is not a number"),
    ("host=db sslmode=sometimes", "sslmode that is not one of"),
])
def test_a_libpq_dsn_the_reader_cannot_use_is_refused_at_the_gate(dsn, why):
    with pytest.raises(ProductionDisabled) as info:
        open_gate({**GOOD, gate.DSN_VAR: dsn})
    assert sorted(info.value.problems) == [gate.DSN_VAR] and why in str(info.value)
    assert "hunter2secret" not in str(info.value) and "never closed'" not in str(info.value)


def test_status_reports_names_only():
    status = production_status(_without(gate.SALT_VAR))
    assert status["open"] is False and status["missing"] == [gate.SALT_VAR]
    assert status["variables"][gate.DSN_VAR] == {"set": True, "valid": True, "problem": None}
    assert status["variables"][gate.LOCK_TIMEOUT_VAR] == {"set": False, "valid": True, "problem": None, "ms": 10_000}
    assert production_status({**GOOD, gate.LOCK_TIMEOUT_VAR: "2500"})["variables"][gate.LOCK_TIMEOUT_VAR]["ms"] == 2500
    text = repr(status)
    assert all(s not in text for s in SECRETS)
    assert gate_status(GOOD)["open"] is True


class _Listener:
    """A real TCP listener that counts the connections it receives."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.sock.close()


@pytest.fixture
def listener():
    lst = _Listener()
    yield lst
    lst.close()


def test_a_closed_gate_opens_no_connection(listener, tmp_path):
    dsn = f"postgresql://reader:pw-secret-1@127.0.0.1:{listener.port}/prod"
    env = {gate.DSN_VAR: dsn, gate.SALT_VAR: SALT, gate.KEY_ID_VAR: "rc-1"}  # RLHF_ENABLE_... missing
    with pytest.raises(ProductionDisabled) as info:
        export_production_v5_dataset("2026-01-02T00:00:00Z", name="prod", datasets_dir=tmp_path, environ=env)
    assert gate.ENABLE_VAR in str(info.value) and dsn not in str(info.value)
    with pytest.raises(ProductionDisabled):
        export_timestamp_dataset("prod", "ts", datasets_dir=tmp_path, environ=env)
    assert listener.connections == 0
    assert not any(tmp_path.iterdir())  # nothing written either
    # the same socket does see a connection when the gate is open (the test could fail)
    with pytest.raises(Exception) as opened:
        export_production_v5_dataset("2026-01-02T00:00:00Z", name="prod", datasets_dir=tmp_path,
                                     environ={**env, gate.ENABLE_VAR: "1"})
    assert getattr(opened.value, "code", None) == "production_unavailable"
    assert "pw-secret-1" not in str(opened.value) and dsn not in str(opened.value)
    assert listener.connections >= 1


def test_the_cli_refuses_with_the_gate_closed_and_prints_no_value(listener, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in gate.VARIABLES}
    env[gate.DSN_VAR] = f"postgresql://reader:pw-secret-2@127.0.0.1:{listener.port}/prod"
    env[gate.SALT_VAR] = "too-short"
    proc = subprocess.run([sys.executable, "-m", "extrarlhf", "production", "export-v5", "--end-at",
                           "2026-01-02T00:00:00Z", "--name", "prod", "--datasets-dir", str(tmp_path)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error [production_disabled]")
    for name in (gate.ENABLE_VAR, gate.SALT_VAR, gate.KEY_ID_VAR):
        assert name in proc.stderr
    assert "pw-secret-2" not in proc.stdout + proc.stderr and "too-short" not in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert listener.connections == 0
    status = subprocess.run([sys.executable, "-m", "extrarlhf", "production", "status", "--json"], cwd=ROOT,
                            env=env, capture_output=True, text=True, timeout=60)
    assert status.returncode == 0 and '"open": false' in status.stdout
    assert "pw-secret-2" not in status.stdout and "too-short" not in status.stdout
