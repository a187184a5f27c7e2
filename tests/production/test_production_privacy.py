"""The production plane end to end through its real facades -- the MCP server over stdio and the
CLI -- against the fixture database, then every byte written scanned for secrets: the DSN,
the salt and every raw player and battle id of the database never appear in any file (Parquet
decoded too), manifest, stdout, stderr or tool result. A SIGKILL mid-export leaves no half
dataset."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import asyncpg
import pyarrow.parquet as pq
import pytest
from mcp import Client, StdioServerParameters

from extrarlhf.datasets import validate_dataset
from extrarlhf.production import gate

from ..mcp_helpers import REPO, Checked

SALT = "privacy-salt-do-not-leak-Xq7Vd2kw9PzL0bMf4RtY8nJc6HsA1eGuT5oW"


@pytest.fixture
def anyio_backend():
    return "asyncio"


def _env(dsn: str | None, **extra: str) -> dict[str, str]:
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/"), "PYTHONPATH": str(REPO)}
    if dsn is not None:
        env.update({gate.ENABLE_VAR: "1", gate.DSN_VAR: dsn, gate.SALT_VAR: SALT, gate.KEY_ID_VAR: "rc-privacy"})
    env.update(extra)
    return env


def _server(tmp: Path, env: dict[str, str], errlog: Path) -> StdioServerParameters:
    """The real server over stdio, its stderr kept in a file so that it can be scanned."""
    command = " ".join(shlex.quote(a) for a in (sys.executable, "-m", "mcp_server", "--sessions-dir",
                                                 str(tmp / "sessions"), "--datasets-dir", str(tmp / "datasets")))
    return StdioServerParameters(command="/bin/sh", args=["-c", f"exec {command} 2>>{shlex.quote(str(errlog))}"],
                                 env=env, cwd=str(REPO))


async def _raw_ids(dsn: str) -> list[str]:
    conn = await asyncpg.connect(dsn)
    try:
        battles = [r[0] for r in await conn.fetch("SELECT battle_id FROM battles")]
        players = [r[0] for r in await conn.fetch("SELECT p1_player_id FROM battles WHERE p1_player_id IS NOT NULL "
                                                  "UNION SELECT p2_player_id FROM battles WHERE p2_player_id IS NOT NULL")]
    finally:
        await conn.close()
    return battles + players


def _texts(root: Path) -> dict[str, bytes]:
    """Every file under root as bytes, plus every Parquet file decoded (compressed pages hide text)."""
    out = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        out[str(path)] = path.read_bytes()
        if path.suffix == ".parquet":  # ids can only hide in text columns (numbers are no ids)
            table = pq.read_table(path)
            text = [name for name, typ in zip(table.column_names, table.schema.types) if "string" in str(typ)]
            out[f"{path} (decoded)"] = repr(table.select(text).to_pylist()).encode()
    return out


def _assert_clean(blobs: dict[str, bytes], secrets: list[str]) -> None:
    pattern = re.compile(b"|".join(re.escape(s.encode()) for s in sorted(set(secrets), key=len, reverse=True)))
    for where, blob in blobs.items():
        found = pattern.search(blob)
        assert found is None, f"{found.group()[:12]!r}... found in {where}"


@pytest.mark.anyio
async def test_every_byte_written_by_mcp_and_cli_exports_is_free_of_secrets(production_db, tmp_path):
    dsn, end = production_db.dsn, production_db.summary["window"]["end_at"]
    errlog = tmp_path / "server-stderr.log"
    results: list[str] = []
    progress: list[float] = []

    async def on_progress(done, total, message):
        progress.append(done)

    async with Client(_server(tmp_path, _env(dsn), errlog)) as client:
        c = Checked(client)
        status = await c.ok("production_status")
        assert status["open"] is True and status["variables"][gate.DSN_VAR]["set"] is True
        exported = await c.ok("export_production_v5_dataset", {"end_at": end, "name": "prod"},
                              progress_callback=on_progress)
        assert exported["published"] and exported["complete"] and progress
        ts = await c.ok("export_timestamp_dataset", {"source": "prod", "name": "prod-ts"})
        assert ts["row_counts"]["inputs"] > 0
        capped = await c.ok("export_production_v5_dataset", {"end_at": end, "name": "capped", "max_rows": 100})
        assert capped["published"] is False and capped["stop_reason"] == "row_ceiling"
        refused = await c.err("export_production_v5_dataset", {"end_at": end, "name": "x", "dsn": dsn},
                              code="forbidden_argument")
        salted = await c.err("export_production_v5_dataset", {"end_at": end, "name": "x", "salt": SALT},
                             code="forbidden_argument")
        naive = await c.err("export_production_v5_dataset", {"end_at": end[:19], "name": "x"}, code="invalid_argument")
        results += [json.dumps(x) for x in (status, exported, ts, capped, refused, salted, naive)]
        results.append(json.dumps(await c.ok("inspect_dataset", {"dataset": "prod"})))

    cli = subprocess.run([sys.executable, "-m", "extrarlhf", "production", "export-v5", "--end-at", end, "--name",
                          "prod-cli", "--datasets-dir", str(tmp_path / "datasets")], cwd=REPO, env=_env(dsn),
                         capture_output=True, timeout=600)
    assert cli.returncode == 0, cli.stderr.decode()
    assert b"prod-cli/v1" in cli.stdout and b"pseudonymized" in cli.stdout
    assert validate_dataset("prod-cli", datasets_dir=tmp_path / "datasets")["valid"]

    secrets = [dsn, SALT, *await _raw_ids(dsn)]
    blobs = _texts(tmp_path / "datasets")
    blobs.update({"server stderr": errlog.read_bytes(), "cli stdout": cli.stdout, "cli stderr": cli.stderr,
                  "mcp results": "\n".join(results).encode()})
    assert len(blobs) > 20
    with pytest.raises(AssertionError):  # the scan does see a secret where there is one
        _assert_clean({"probe": b"x" + secrets[-1].encode()}, secrets)
    _assert_clean(blobs, secrets)


@pytest.mark.anyio
@pytest.mark.parametrize("variant", ["unset", "near-misses"])
async def test_a_server_without_the_gate_refuses_every_export(variant, tmp_path, production_db):
    """Missing variables, or set ones that only look right: a flag of "1 " and a key id holding
    the salt (it would be written into manifests and results)."""
    errlog = tmp_path / "stderr.log"
    if variant == "unset":
        env = _env(None, **{gate.DSN_VAR: production_db.dsn, gate.SALT_VAR: "tiny-salt-xyz"})
        refused, secrets = [gate.ENABLE_VAR, gate.SALT_VAR, gate.KEY_ID_VAR], ["tiny-salt-xyz"]
    else:
        env = _env(production_db.dsn, **{gate.ENABLE_VAR: "1 ", gate.KEY_ID_VAR: f"rc-{SALT}"})
        refused, secrets = [gate.ENABLE_VAR, gate.KEY_ID_VAR], [SALT]
    async with Client(_server(tmp_path, env, errlog)) as client:
        c = Checked(client)
        status = await c.ok("production_status")
        assert status["open"] is False
        assert status["invalid"] == ([gate.SALT_VAR] if variant == "unset" else [gate.ENABLE_VAR, gate.KEY_ID_VAR])
        for tool, args in (("export_production_v5_dataset", {"end_at": "2026-01-02T00:00:00Z", "name": "p"}),
                           ("export_returnclock_dataset", {"end_at": "2026-01-02T00:00:00Z", "name": "r"}),
                           ("export_timestamp_dataset", {"source": "p", "name": "t"})):
            error = await c.err(tool, args, code="production_disabled")
            assert all(name in error["message"] for name in refused), error["message"]
            assert production_db.dsn not in error["message"]
            assert not any(secret in error["message"] for secret in secrets)
    assert not (tmp_path / "datasets").exists() or not any((tmp_path / "datasets").iterdir())


def test_a_sigkill_mid_export_leaves_no_half_dataset(production_db, tmp_path):
    datasets = tmp_path / "datasets"
    end = production_db.summary["window"]["end_at"]
    command = [sys.executable, "-m", "extrarlhf", "production", "export-v5", "--end-at", end, "--name", "prod",
               "--datasets-dir", str(datasets), "--workers", "2"]
    proc = subprocess.Popen(command, cwd=REPO, env=_env(production_db.dsn), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 120
    try:
        while not any(p.name.startswith(".tmp-") for p in (datasets / "prod").glob("*")):
            assert proc.poll() is None and time.monotonic() < deadline, "the export ended before it could be killed"
            time.sleep(0.02)
        time.sleep(0.3)
        os.killpg(proc.pid, signal.SIGKILL)  # the export and its worker processes
    finally:
        proc.wait(timeout=30)
    assert not [p for p in (datasets / "prod").iterdir() if p.name.startswith("v")]
    again = subprocess.run(command, cwd=REPO, env=_env(production_db.dsn), capture_output=True, timeout=600)
    assert again.returncode == 0, again.stderr.decode()
    assert sorted(p.name for p in (datasets / "prod").iterdir()
                  if not p.name.startswith((".publish", ".card-sizes"))) == ["README.md", "v1"]
    assert validate_dataset("prod", datasets_dir=datasets)["valid"]


def test_fixture_cli_reads_the_dsn_from_the_environment_only(pg_server, tmp_path):
    dsn = pg_server.create_database("privacy_cli_fixture")
    env = _env(None, FIXTURE_DSN=dsn)
    proc = subprocess.run([sys.executable, "-m", "extrarlhf.production.fixture", "--dsn-env", "FIXTURE_DSN",
                           "--battles", "12", "--players", "6", "--days", "1", "--seed", "3", "--workers", "1"],
                          cwd=REPO, env=env, capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()
    assert dsn.encode() not in proc.stdout + proc.stderr
    ids = asyncio.run(_raw_ids(dsn))
    assert len(ids) > 12
    assert not any(i.encode() in proc.stdout for i in ids if i.startswith("player-"))
