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
SALT = "a-very-secret-salt-value-0123456789abcdef"
GOOD = {gate.ENABLE_VAR: "1", gate.DSN_VAR: "postgresql://reader:hunter2-pw@db.internal:5432/prod",
        gate.SALT_VAR: SALT, gate.KEY_ID_VAR: "rc-2026-11"}
SECRETS = ("hunter2-pw", SALT, "postgresql://reader")


def _without(*names: str) -> dict[str, str]:
    return {k: v for k, v in GOOD.items() if k not in names}


def test_open_gate_grants_access_and_hides_secrets_in_its_repr():
    access = open_gate(GOOD)
    assert access.key_id == "rc-2026-11" and access.salt == SALT.encode()
    for text in (repr(access), str(access)):
        assert all(s not in text for s in SECRETS)
    assert access.scrub(f"failed for {GOOD[gate.DSN_VAR]} with password hunter2-pw") == \
        "failed for <redacted> with password <redacted>"


@pytest.mark.parametrize("env, names", [
    ({}, list(gate.VARIABLES)),
    (_without(gate.ENABLE_VAR), [gate.ENABLE_VAR]),
    ({**GOOD, gate.ENABLE_VAR: "true"}, [gate.ENABLE_VAR]),
    (_without(gate.DSN_VAR), [gate.DSN_VAR]),
    ({**GOOD, gate.DSN_VAR: "mysql-ish nonsense"}, [gate.DSN_VAR]),
    ({**GOOD, gate.SALT_VAR: "short-salt-31-bytes-long-000000"}, [gate.SALT_VAR]),
    (_without(gate.KEY_ID_VAR), [gate.KEY_ID_VAR]),
    ({**GOOD, gate.KEY_ID_VAR: SALT}, [gate.KEY_ID_VAR]),
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
    assert open_gate({**GOOD, gate.SALT_VAR: "x" * 32}).salt == b"x" * 32
    with pytest.raises(ProductionDisabled, match="shorter than 32 bytes"):
        open_gate({**GOOD, gate.SALT_VAR: "x" * 31})


def test_status_reports_names_only():
    status = production_status(_without(gate.SALT_VAR))
    assert status["open"] is False and status["missing"] == [gate.SALT_VAR]
    assert status["variables"][gate.DSN_VAR] == {"set": True, "valid": True, "problem": None}
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
