"""Production reads are bounded, cancellable and fail cleanly (issue 24, items 1 and 2) -- against a
real throwaway PostgreSQL, a second session holding ``LOCK TABLE ... IN ACCESS EXCLUSIVE MODE``:

- the server-enforced ``lock_timeout`` ends a blocked export with one ``production_read_failed``
  error naming the timeout and the SQLSTATE; ``statement_timeout`` likewise;
- a cancelled export ends within a second and leaves no query of ours in ``pg_stat_activity``
  (the core's ``cancel`` callable, and an MCP ``notifications/cancelled`` over stdio);
- a server error whose text quotes a stored value is reported by stream, SQLSTATE and class,
  never with that text; the CLI prints one error line (no traceback), MCP answers the code;
- a libpq ``key=value`` DSN is read (and the session carries the timeouts).
"""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import anyio
import asyncpg
import pytest
from mcp import Client, StdioServerParameters

from extrarlhf.core.errors import Cancelled, RLHFError
from extrarlhf.production import gate
from extrarlhf.production.export import export_production_v5_dataset
from extrarlhf.production.fixture import build_fixture
from extrarlhf.production.reader import APPLICATION_NAME, close_connections, connect_production
from extrarlhf.production.returnclock import export_returnclock_dataset
from extrarlhf.production.schema import DDL

from ..mcp_helpers import REPO, Checked

SALT = "timeouts-salt-Xq7Vd2kw9PzL0bMf4RtY8nJc6HsA1eGuT5oW"
LEAKED_VALUE = "b-5-0000101-secret-row-value"


@pytest.fixture
def anyio_backend():
    return "asyncio"


def env_for(dsn: str, **extra: str) -> dict[str, str]:
    return {gate.ENABLE_VAR: "1", gate.DSN_VAR: dsn, gate.SALT_VAR: SALT, gate.KEY_ID_VAR: "rc-timeouts", **extra}


@pytest.fixture(scope="module")
def world(pg_server) -> tuple[str, str]:
    """A small production database (battles, actions, sessions, treatments): (dsn, end_at)."""
    dsn = pg_server.create_database("timeouts_world")
    summary = build_fixture(dsn, battles=12, players=6, days=1, seed=5, workers=1, sessions_per_player=3)
    return dsn, summary["window"]["end_at"]


def _export_v5(end: str, root: Path, env: dict[str, str], cancel: Callable[[], bool] | None = None) -> dict:
    return export_production_v5_dataset(end, name="v5", datasets_dir=root, environ=env, workers=1, cancel=cancel)


def _export_rc(end: str, root: Path, env: dict[str, str], cancel: Callable[[], bool] | None = None) -> dict:
    return export_returnclock_dataset(None, end, name="rc", datasets_dir=root, environ=env, cancel=cancel)


EXPORTS = {"v5": (_export_v5, "battles"), "returnclock": (_export_rc, "player_sessions")}


def _ours(pg_server, dbname: str, waiting: bool = False) -> int:
    """How many backends of the production reader are connected to ``dbname`` (waiting on a lock)."""
    sql = (f"SELECT count(*) FROM pg_stat_activity WHERE application_name = '{APPLICATION_NAME}' "
           f"AND datname = '{dbname}'" + (" AND wait_event_type = 'Lock'" if waiting else ""))
    return int(pg_server.psql("postgres", sql).strip())


class _Lock:
    """A second session holding ``LOCK TABLE <table> IN ACCESS EXCLUSIVE MODE`` until closed."""

    def __init__(self, dsn: str, table: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.conn = self.loop.run_until_complete(asyncpg.connect(dsn))
        self.loop.run_until_complete(self.conn.execute(f"BEGIN; LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE"))

    def close(self) -> None:
        self.loop.run_until_complete(self.conn.close())
        self.loop.close()


def _published(root: Path) -> list[str]:
    """Dataset versions (``<name>/v<N>``) and leftovers of a publication under ``root`` (the
    pointers folder holds ``<name>.complete`` pointers, not versions)."""
    found = [p for p in (*root.glob("*/v[0-9]*"), *root.glob("*/.tmp-*")) if p.parent.name != "pointers"] \
        if root.exists() else []
    return sorted(str(p.relative_to(root)) for p in found)


def _wait_until(predicate: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.parametrize("kind", sorted(EXPORTS))
def test_a_locked_table_ends_the_export_at_lock_timeout(kind, world, pg_server, tmp_path):
    dsn, end = world
    export, table = EXPORTS[kind]
    lock = _Lock(dsn, table)
    try:
        started = time.monotonic()
        with pytest.raises(RLHFError) as info:
            export(end, tmp_path, env_for(dsn, **{gate.LOCK_TIMEOUT_VAR: "400"}))
        elapsed = time.monotonic() - started
    finally:
        lock.close()
    message = str(info.value)
    assert info.value.code == "production_read_failed" and info.value.sqlstate == "55P03"
    assert "lock_timeout of 400 ms reached" in message and "SQLSTATE 55P03" in message
    assert gate.LOCK_TIMEOUT_VAR in message and "nothing was published" in message
    assert dsn not in message and SALT not in message
    assert elapsed < 0.4 + 3.0, f"the export took {elapsed:.2f} s under a 0.4 s lock_timeout"
    assert _published(tmp_path) == []
    assert _ours(pg_server, "timeouts_world") == 0


@pytest.mark.parametrize("kind", sorted(EXPORTS))
def test_a_cancelled_export_ends_within_a_second_and_leaves_no_query(kind, world, pg_server, tmp_path):
    dsn, end = world
    export, table = EXPORTS[kind]
    lock = _Lock(dsn, table)
    stop = threading.Event()
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            export(end, tmp_path, env_for(dsn), cancel=stop.is_set)  # the default lock_timeout: 10 s
        except BaseException as exc:  # noqa: BLE001 - checked below
            outcome["error"] = exc
        outcome["ended"] = time.monotonic()

    thread = threading.Thread(target=run, daemon=True)
    try:
        thread.start()
        assert _wait_until(lambda: _ours(pg_server, "timeouts_world", waiting=True) >= 1, 20), "never blocked"
        cancelled = time.monotonic()
        stop.set()
        thread.join(10)
        assert not thread.is_alive(), "the cancelled export is still running"
        took = outcome["ended"] - cancelled
        left = _ours(pg_server, "timeouts_world")
    finally:
        lock.close()
    assert isinstance(outcome.get("error"), Cancelled), outcome
    assert "cancelled on the server" in str(outcome["error"]) and "nothing was published" in str(outcome["error"])
    assert took < 1.0, f"cancel -> end took {took:.2f} s"
    assert left == 0, "a query of the cancelled export is still on the server"
    assert _published(tmp_path) == []


@pytest.mark.parametrize("kind", sorted(EXPORTS))
def test_statement_timeout_is_one_clean_error(kind, world, tmp_path):
    dsn, end = world
    export, _ = EXPORTS[kind]
    with pytest.raises(RLHFError) as info:
        export(end, tmp_path, env_for(dsn, **{gate.STATEMENT_TIMEOUT_VAR: "1"}))
    assert info.value.code == "production_read_failed" and info.value.sqlstate == "57014"
    assert "statement_timeout of 1 ms reached" in str(info.value) and gate.STATEMENT_TIMEOUT_VAR in str(info.value)
    assert "QueryCanceledError" in str(info.value) and "canceling statement" not in str(info.value)
    assert _published(tmp_path) == []


@pytest.fixture(scope="module")
def value_error_db(pg_server) -> str:
    """A backend whose ``battles`` and ``player_sessions`` are views over text columns: reading them
    makes the server fail with a message that quotes a stored value (22P02)."""
    dsn = pg_server.create_database("value_error_world")

    async def build() -> None:
        conn = await asyncpg.connect(dsn)
        try:
            await conn.execute(DDL)
            await conn.execute(f"""
                ALTER TABLE battle_actions DROP CONSTRAINT battle_actions_battle_id_fkey;
                ALTER TABLE battles RENAME TO battles_raw;
                ALTER TABLE battles_raw ALTER COLUMN seed TYPE text;
                CREATE VIEW battles AS SELECT battle_id, ruleset, seed::bigint AS seed, p1_player_id, p2_player_id,
                  p1_kind, p2_kind, p1_deck, p2_deck, p1_deck_id, p2_deck_id, starting_player, started_at,
                  finished_at, winner, turns, duration_seconds, ingested_at FROM battles_raw;
                INSERT INTO battles_raw VALUES ('battle-1', 'arena-1', '{LEAKED_VALUE}', NULL, NULL, 'bot', 'bot',
                  '[]', '[]', 'd1', 'd2', 1, '2026-01-01T00:00:00Z', '2026-01-01T00:10:00Z', 1, 3, 600,
                  '2026-01-01T00:11:00Z');
                ALTER TABLE player_sessions RENAME TO sessions_raw;
                ALTER TABLE sessions_raw ALTER COLUMN ended_at TYPE text;
                CREATE VIEW player_sessions AS SELECT session_id, player_id, started_at,
                  ended_at::timestamptz AS ended_at, ingested_at FROM sessions_raw;
                INSERT INTO sessions_raw VALUES ('session-1', 'player-1', '2026-01-01T00:00:00Z', '{LEAKED_VALUE}',
                  '2026-01-01T00:11:00Z');""")
        finally:
            await conn.close()

    asyncio.run(build())
    return dsn


@pytest.mark.parametrize("kind, stream, sqlstate, cls", [
    ("v5", "stream battles, page 1", "22P02", "InvalidTextRepresentationError"),
    ("returnclock", "stream player_sessions", "22007", "InvalidDatetimeFormatError")])
def test_a_server_error_quoting_a_value_never_passes_through(kind, stream, sqlstate, cls, value_error_db, tmp_path):
    export, _ = EXPORTS[kind]
    with pytest.raises(RLHFError) as info:
        export("2026-01-02T00:00:00Z", tmp_path, env_for(value_error_db))
    message = str(info.value)
    assert info.value.code == "production_read_failed" and info.value.sqlstate == sqlstate
    assert stream in message and f"SQLSTATE {sqlstate}" in message and cls in message
    assert "a data exception" in message  # what the class means, from the SQLSTATE
    assert LEAKED_VALUE not in message and "invalid input syntax" not in message
    assert _published(tmp_path) == []


def test_a_libpq_key_value_dsn_is_read_with_the_timeouts(world, pg_server, tmp_path):
    dsn, end = world
    libpq = f"host={pg_server.root} port={pg_server.port} dbname='timeouts_world' user=postgres"
    env = env_for(libpq, **{gate.STATEMENT_TIMEOUT_VAR: "45000", gate.LOCK_TIMEOUT_VAR: "1500"})

    async def settings() -> list:
        conn = await connect_production(gate.open_gate(env))
        try:
            return list(await conn.fetchrow("SELECT current_database(), current_setting('statement_timeout'), "
                                            "current_setting('lock_timeout'), current_setting('application_name')"))
        finally:
            await close_connections(conn)

    assert asyncio.run(settings()) == ["timeouts_world", "45s", "1500ms", APPLICATION_NAME]
    result = _export_rc(end, tmp_path, env)
    assert result["published"] and result["row_counts"]["returnclock"] > 0


def _cli_env(dsn: str, **extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k not in gate.VARIABLES}
    return {**base, "PYTHONPATH": str(REPO), **env_for(dsn, **extra)}


@pytest.mark.parametrize("command", ["export-v5", "export-returnclock"])
def test_the_cli_prints_one_error_line_for_a_statement_timeout(command, world, tmp_path):
    dsn, end = world
    proc = subprocess.run([sys.executable, "-m", "extrarlhf", "production", command, "--end-at", end, "--name", "x",
                           "--datasets-dir", str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env=_cli_env(dsn, **{gate.STATEMENT_TIMEOUT_VAR: "1"}))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error [production_read_failed]") and "SQLSTATE 57014" in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert dsn not in proc.stdout + proc.stderr and SALT not in proc.stdout + proc.stderr


@pytest.mark.parametrize("command, table", [("export-v5", "battles"), ("export-returnclock", "player_sessions")])
def test_ctrl_c_on_a_blocked_cli_export_cancels_its_statement(command, table, world, pg_server, tmp_path):
    dsn, end = world
    lock = _Lock(dsn, table)
    try:
        # SIGINT as a terminal delivers it: a child inherits an ignored SIGINT (the CLI then ran into the lock
        # timeout in the whole suite on a clean clone, though it passes alone), so the child gets the default
        proc = subprocess.Popen([sys.executable, "-m", "extrarlhf", "production", command, "--end-at", end, "--name",
                                 "x", "--datasets-dir", str(tmp_path)], cwd=REPO, env=_cli_env(dsn),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        try:
            assert _wait_until(lambda: _ours(pg_server, "timeouts_world", waiting=True) >= 1, 60), "never blocked"
            proc.send_signal(signal.SIGINT)
            _, stderr = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
        left = _ours(pg_server, "timeouts_world")
    finally:
        lock.close()
    assert proc.returncode == 130 and stderr == "interrupted; run the same command again to resume\n", stderr
    assert left == 0
    assert _published(tmp_path) == []


def test_the_cli_never_prints_a_value_quoted_by_the_server(value_error_db, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "extrarlhf", "production", "export-v5", "--end-at",
                           "2026-01-02T00:00:00Z", "--name", "x", "--datasets-dir", str(tmp_path)], cwd=REPO,
                          capture_output=True, text=True, timeout=120, env=_cli_env(value_error_db))
    assert proc.returncode == 2 and proc.stderr.startswith("error [production_read_failed]"), proc.stderr
    assert "SQLSTATE 22P02" in proc.stderr and LEAKED_VALUE not in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr


def _server(tmp: Path, env: dict[str, str]) -> StdioServerParameters:
    base = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/"), "PYTHONPATH": str(REPO)}
    tmp.mkdir(parents=True, exist_ok=True)
    command = " ".join(shlex.quote(a) for a in (sys.executable, "-m", "mcp_server", "--sessions-dir",
                                                 str(tmp / "sessions"), "--datasets-dir", str(tmp / "datasets")))
    return StdioServerParameters(command="/bin/sh", args=["-c", f"exec {command} 2>>{shlex.quote(str(tmp / 'err'))}"],
                                 env={**base, **env}, cwd=str(REPO))


@pytest.mark.anyio
async def test_mcp_maps_timeouts_and_value_errors_and_a_cancel_leaves_no_query(world, value_error_db, pg_server,
                                                                               tmp_path):
    dsn, end = world
    async with Client(_server(tmp_path / "a", env_for(dsn, **{gate.STATEMENT_TIMEOUT_VAR: "1"}))) as client:
        c = Checked(client)
        for tool, args in (("export_returnclock_dataset", {"end_at": end, "name": "rc"}),
                           ("export_production_v5_dataset", {"end_at": end, "name": "v5"})):
            error = await c.err(tool, args, code="production_read_failed")
            assert "SQLSTATE 57014" in error["message"] and dsn not in error["message"]

    lock = await asyncpg.connect(value_error_db)  # the second session, on the test's own loop here
    await lock.execute("BEGIN; LOCK TABLE battles IN ACCESS EXCLUSIVE MODE")
    try:
        async with Client(_server(tmp_path / "b", env_for(value_error_db))) as client:
            c = Checked(client)
            error = await c.err("export_returnclock_dataset", {"end_at": "2026-01-02T00:00:00Z", "name": "rc"},
                                code="production_read_failed")
            assert "SQLSTATE 22007" in error["message"] and LEAKED_VALUE not in error["message"]
            async with anyio.create_task_group() as group:
                async def call() -> None:
                    await client.call_tool("export_production_v5_dataset", {"end_at": "2026-01-02T00:00:00Z",
                                                                            "name": "blocked"})
                    raise AssertionError("the export ended although it was blocked and cancelled")

                group.start_soon(call)
                with anyio.fail_after(30):
                    while _ours(pg_server, "value_error_world", waiting=True) < 1:
                        await anyio.sleep(0.05)
                cancelled = time.monotonic()
                group.cancel_scope.cancel()  # the client sends notifications/cancelled
            with anyio.fail_after(10):
                while _ours(pg_server, "value_error_world") > 0:
                    await anyio.sleep(0.05)
            took = time.monotonic() - cancelled
            assert took < 1.5, f"cancel -> no query of ours left took {took:.2f} s"
            assert (await c.ok("production_status"))["open"] is True  # the server still answers
    finally:
        await lock.close()
    assert _published(tmp_path / "b" / "datasets") == []


def test_the_local_steps_after_an_export_stop_when_cancelled(world, tmp_path):
    """The TimeStamp export and the ReturnClock split run as cancellable long work over MCP:
    a true ``cancel()`` stops them before anything is published."""
    from extrarlhf.production.returnclock import split_returnclock_training_dataset
    from extrarlhf.production.timestamp import export_timestamp_dataset

    dsn, end = world
    env = env_for(dsn)
    assert _export_rc(end, tmp_path, env)["published"] and _export_v5(end, tmp_path, env)["published"]
    policy = {"min_returnclock_rows": 1, "min_returnclock_events": 1}
    with pytest.raises(Cancelled, match="nothing was published"):
        split_returnclock_training_dataset("rc", name="rc-split", datasets_dir=tmp_path, policy=policy,
                                           cancel=lambda: True)
    with pytest.raises(Cancelled, match="nothing was published"):
        export_timestamp_dataset("v5", "ts", datasets_dir=tmp_path, environ=env, cancel=lambda: True)
    assert _published(tmp_path) == ["rc/v1", "v5/v1"]
    assert split_returnclock_training_dataset("rc", name="rc-split", datasets_dir=tmp_path, policy=policy,
                                              cancel=lambda: False)["row_counts"]["train"] > 0
