"""The fixture backend (extrarlhf.production.fixture) and the throwaway server, against a real
PostgreSQL: schema, realistic rows that replay on the engine, every deliberate defect,
determinism whatever the worker count, refusals, and no server left behind."""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import subprocess
import sys
import textwrap
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import pytest

import engine
from extrarlhf.core.procs import pid_alive
from extrarlhf.production.fixture import DEFECTS, FixtureRefused, build_fixture
from extrarlhf.production.localdb import ThrowawayPostgres
from extrarlhf.production.schema import TABLE_COLUMNS

ROOT = Path(__file__).resolve().parents[2]
PLAYER_ID = re.compile(r"player-[0-9a-f]{12}")
LATE = timedelta(days=3)
KIND_PAIRS = {"human-human", "human-bot", "bot-human", "human-model", "model-model"}
PRIMARY_KEYS = {"battles": "battle_id", "battle_actions": "battle_id, seq", "player_sessions": "session_id",
                "return_treatments": "assignment_id"}


def fetch(dsn: str, sql: str, *args: Any) -> list[asyncpg.Record]:
    async def run() -> list[asyncpg.Record]:
        conn = await asyncpg.connect(dsn)
        try:
            return await conn.fetch(sql, *args)
        finally:
            await conn.close()
    return asyncio.run(run())


def dump(dsn: str) -> dict[str, bytes]:
    """Every table's rows in primary-key order, as COPY text."""
    async def run() -> dict[str, bytes]:
        conn = await asyncpg.connect(dsn)
        try:
            out = {}
            for table, key in PRIMARY_KEYS.items():
                buffer = io.BytesIO()
                await conn.copy_from_query(f"SELECT * FROM {table} ORDER BY {key}", output=buffer)
                out[table] = buffer.getvalue()
            return out
        finally:
            await conn.close()
    return asyncio.run(run())


def run_cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "extrarlhf.production.fixture", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FIXTURE_TEST_")}
    env.update(extra)
    return env


class Battle:
    """A battle row with its action rows (seq order)."""

    def __init__(self, row: asyncpg.Record, actions: list[asyncpg.Record]) -> None:
        self.row, self.actions = row, actions
        self.kinds = (row["p1_kind"], row["p2_kind"])

    def new_state(self) -> engine.State:
        row = self.row
        return engine.new_battle(row["seed"], json.loads(row["p1_deck"]), json.loads(row["p2_deck"]),
                                 row["starting_player"])

    def replay(self) -> engine.State:
        """Apply every recorded action, checking the recorded turn and player on the way."""
        state = self.new_state()
        for action in self.actions:
            assert (action["turn"], action["player"]) == (state.turn, state.to_move), (self.row["battle_id"], action)
            state.apply(action["action_id"])
        return state


@pytest.fixture(scope="module")
def battles(production_db) -> dict[str, Battle]:
    rows = fetch(production_db.dsn, "SELECT * FROM battles ORDER BY battle_id")
    actions: dict[str, list] = {}
    for action in fetch(production_db.dsn, "SELECT * FROM battle_actions ORDER BY battle_id, seq"):
        actions.setdefault(action["battle_id"], []).append(action)
    return {row["battle_id"]: Battle(row, actions.get(row["battle_id"], [])) for row in rows}


@pytest.fixture(scope="module")
def defects(production_db) -> dict[str, str]:
    return {b["battle_id"]: b["defect"] for b in production_db.summary["broken"]}


# ------------------------------------------------------------------------------ schema

def test_schema_matches_table_columns(production_db) -> None:
    rows = fetch(production_db.dsn, "SELECT table_name, column_name FROM information_schema.columns "
                                    "WHERE table_schema = 'public' ORDER BY table_name, ordinal_position")
    columns: dict[str, list[str]] = {}
    for row in rows:
        columns.setdefault(row["table_name"], []).append(row["column_name"])
    assert columns == {table: list(cols) for table, cols in TABLE_COLUMNS.items()}
    constraints = fetch(production_db.dsn,
                        "SELECT table_name, constraint_type FROM information_schema.table_constraints "
                        "WHERE table_schema = 'public' AND constraint_type IN ('PRIMARY KEY', 'FOREIGN KEY') "
                        "ORDER BY table_name, constraint_type")
    assert [tuple(r) for r in constraints] == [
        ("battle_actions", "FOREIGN KEY"), ("battle_actions", "PRIMARY KEY"), ("battles", "PRIMARY KEY"),
        ("player_sessions", "PRIMARY KEY"), ("return_treatments", "PRIMARY KEY")]


# ------------------------------------------------------------------------------ rows

def test_counts_match_the_summary(production_db, battles) -> None:
    counts = production_db.summary["counts"]
    assert counts["battles"] == len(battles) == 400
    assert counts["actions"] == sum(len(b.actions) for b in battles.values())
    assert counts["actions"] >= 50 * counts["battles"]
    kinds = Counter("-".join(b.kinds) for b in battles.values())
    assert kinds == counts["kinds"] and set(kinds) == KIND_PAIRS
    assert 0.5 <= kinds["human-human"] / len(battles) <= 0.7
    unfinished = [b for b in battles.values() if b.row["finished_at"] is None]
    assert len(unfinished) == counts["unfinished"] >= 1
    late = [b for b in battles.values() if b.row["finished_at"] and b.row["ingested_at"] >= b.row["finished_at"] + LATE]
    assert len(late) == counts["late"] >= 1
    late_actions = [b for b in battles.values() if b.row["finished_at"] and b not in late
                    and any(a["ingested_at"] >= b.row["finished_at"] + LATE for a in b.actions)]
    assert len(late_actions) == counts["late_actions"] >= 1
    assert counts["broken"] == len(production_db.summary["broken"])
    assert fetch(production_db.dsn, "SELECT count(*) FROM player_sessions")[0][0] == 0


def test_enough_human_battles_and_decks_for_standard_training(battles, defects) -> None:
    usable = [b for b in battles.values() if b.kinds == ("human", "human") and b.row["finished_at"] is not None
              and b.row["battle_id"] not in defects]
    assert len(usable) >= 200
    assert len({deck for b in usable for deck in (b.row["p1_deck_id"], b.row["p2_deck_id"])}) >= 20
    assert len({deck for b in battles.values() for deck in (b.row["p1_deck_id"], b.row["p2_deck_id"])}) >= 40


def test_players_decks_and_kinds(production_db, battles) -> None:
    ids = set(production_db.summary["player_ids"])
    assert len(ids) == production_db.summary["params"]["players"] == 60
    seen = set()
    for b in battles.values():
        for seat, kind in zip(("p1", "p2"), b.kinds, strict=True):
            player = b.row[f"{seat}_player_id"]
            assert kind in ("human", "bot", "model")
            assert (player is None) == (kind != "human")
            if player is not None:
                assert PLAYER_ID.fullmatch(player) and player in ids
                seen.add(player)
            deck = json.loads(b.row[f"{seat}_deck"])
            assert engine.validate_deck(deck) and engine.deck_id(deck) == b.row[f"{seat}_deck_id"]
        if b.kinds == ("human", "human"):
            assert b.row["p1_player_id"] != b.row["p2_player_id"]
        assert b.row["starting_player"] in (1, 2)
    assert len(seen) >= 40  # most players play


def test_times_and_actions_are_well_formed(production_db, battles) -> None:
    window = production_db.summary["window"]
    start_at, end_at = (datetime.fromisoformat(window[k]) for k in ("start_at", "end_at"))
    for b in battles.values():
        row, actions = b.row, b.actions
        assert [a["seq"] for a in actions] == list(range(len(actions))) and actions
        assert row["started_at"] >= start_at
        times = [a["acted_at"] for a in actions]
        assert times == sorted(times) and times[0] > row["started_at"]
        for a in actions:
            human = b.kinds[a["player"] - 1] == "human"
            assert (a["decision_ms"] is not None) == human
            assert not human or 150 <= a["decision_ms"] <= 120_000
            assert 0 <= a["action_id"] < engine.ACTION_SPACE_SIZE
            assert a["ingested_at"] > a["acted_at"]
        if row["finished_at"] is None:
            assert (row["winner"], row["turns"], row["duration_seconds"]) == (None, None, None)
            continue
        assert start_at <= row["finished_at"] < end_at and row["finished_at"] > times[-1]
        assert row["duration_seconds"] == pytest.approx((row["finished_at"] - row["started_at"]).total_seconds())
        assert row["finished_at"] < row["ingested_at"]
        delay = row["ingested_at"] - row["finished_at"]
        assert delay < timedelta(minutes=1) or delay >= LATE


def test_recorded_battles_replay_to_their_record(battles, defects) -> None:
    for battle_id, b in battles.items():
        if battle_id in defects:
            continue
        assert b.row["ruleset"] == engine.RULESET
        state = b.replay()
        if b.row["finished_at"] is None:
            assert not state.is_terminal  # only a prefix was recorded
        else:
            assert state.is_terminal and (state.winner, state.turn) == (b.row["winner"], b.row["turns"]), battle_id


def test_every_defect_is_present_and_really_broken(production_db, battles, defects) -> None:
    assert set(defects.values()) == set(DEFECTS)
    for battle_id, defect in defects.items():
        b = battles[battle_id]
        assert b.row["finished_at"] is not None and b.row["ingested_at"] < b.row["finished_at"] + LATE
        if defect == "illegal_action":
            state = b.new_state()
            for a in b.actions:
                if a["action_id"] not in state.legal_actions():
                    with pytest.raises(engine.IllegalActionError):
                        state.apply(a["action_id"])
                    break
                state.apply(a["action_id"])
            else:
                pytest.fail(f"{battle_id}: every recorded action is legal")
            continue
        state = b.replay()
        if defect == "missing_actions":
            assert not state.is_terminal
            continue
        assert state.is_terminal
        if defect == "winner_mismatch":
            assert state.winner != b.row["winner"] and state.turn == b.row["turns"]
        elif defect == "turns_mismatch":
            assert abs(state.turn - b.row["turns"]) == 1 and state.winner == b.row["winner"]
        else:
            assert defect == "unknown_ruleset" and b.row["ruleset"] not in ("", engine.RULESET)
            assert (state.winner, state.turn) == (b.row["winner"], b.row["turns"])


# ------------------------------------------------------------------------------ determinism, refusals

def test_rows_do_not_depend_on_the_worker_count(pg_server) -> None:
    params = {"battles": 450, "players": 30, "days": 2, "seed": 11}  # 3 chunks: the order across workers matters
    one = pg_server.create_database("fixture_workers_1")
    two = pg_server.create_database("fixture_workers_2")
    assert build_fixture(one, workers=1, **params) == build_fixture(two, workers=2, **params)
    dumped = dump(one)
    assert dumped["battles"].count(b"\n") == 450 and dumped["battle_actions"]
    assert dumped == dump(two)


def test_refuses_to_overwrite_rows_without_reset(pg_server) -> None:
    dsn = pg_server.create_database("fixture_refusal")
    params = {"battles": 12, "players": 4, "days": 1, "seed": 3}
    first = build_fixture(dsn, workers=1, **params)
    before = dump(dsn)
    with pytest.raises(FixtureRefused, match="already hold rows.*--reset"):
        build_fixture(dsn, workers=1, **params)
    env = cli_env(FIXTURE_TEST_DSN=dsn)
    done = run_cli(env, "--dsn-env", "FIXTURE_TEST_DSN", "--battles", "12", "--players", "4", "--days", "1",
                   "--seed", "3", "--workers", "1")
    assert done.returncode == 2 and "--reset" in done.stderr and "Traceback" not in done.stderr
    assert dsn not in done.stdout + done.stderr and str(pg_server.root) not in done.stdout + done.stderr
    assert dump(dsn) == before
    assert build_fixture(dsn, workers=1, reset=True, **params) == first
    assert dump(dsn) == before


def test_cli_refuses_an_unset_variable(pg_server) -> None:
    done = run_cli(cli_env(), "--dsn-env", "FIXTURE_TEST_UNSET", "--battles", "10", "--players", "4", "--days", "1",
                   "--seed", "1")
    assert done.returncode == 2 and done.stdout == ""
    assert "FIXTURE_TEST_UNSET is not set" in done.stderr and "Traceback" not in done.stderr


def test_cli_connection_failure_names_the_variable_not_the_dsn(tmp_path) -> None:
    secret = "s3cret-Passw0rd"
    dsn = f"postgresql://fixture_user:{secret}@/nowhere_db?host={tmp_path}&port=5999"
    done = run_cli(cli_env(FIXTURE_TEST_DSN=dsn), "--dsn-env", "FIXTURE_TEST_DSN", "--battles", "10", "--players", "4",
                   "--days", "1", "--seed", "1")
    assert done.returncode == 2, done.stderr
    assert re.fullmatch(r"error \[connection_failed\]: could not connect to the database named by "
                        r"\$FIXTURE_TEST_DSN \(\w+\)\n", done.stderr), done.stderr
    for leak in (secret, "fixture_user", "nowhere_db", str(tmp_path)):
        assert leak not in done.stdout + done.stderr


def test_cli_builds_and_prints_no_raw_ids(pg_server) -> None:
    dsn = pg_server.create_database("fixture_cli")
    done = run_cli(cli_env(FIXTURE_TEST_DSN=dsn), "--dsn-env", "FIXTURE_TEST_DSN", "--battles", "40", "--players",
                   "6", "--days", "1", "--seed", "5", "--workers", "2", "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["counts"]["battles"] == 40 and summary["player_ids"] == 6
    assert "fixture [" in done.stderr and "40/40 battles" in done.stderr
    ids = {r[0] for r in fetch(dsn, "SELECT p1_player_id FROM battles UNION SELECT p2_player_id FROM battles") if r[0]}
    assert ids and not any(i in done.stdout + done.stderr for i in ids)
    assert dsn not in done.stdout + done.stderr
    readable = run_cli(cli_env(FIXTURE_TEST_DSN=dsn), "--dsn-env", "FIXTURE_TEST_DSN", "--battles", "40",
                       "--players", "6", "--days", "1", "--seed", "5", "--workers", "1", "--reset")
    assert readable.returncode == 0 and "battles 40" in readable.stdout and "window [" in readable.stdout
    assert not any(i in readable.stdout + readable.stderr for i in ids)


# ------------------------------------------------------------------------------ the throwaway server

def _postmaster_status(pg: ThrowawayPostgres, data_dir: Path) -> int:
    command = [str(pg.bin_dir / "pg_ctl"), "status", "-D", str(data_dir)]
    if os.geteuid() == 0:
        command = ["runuser", "-u", "postgres", "--", *command]
    return subprocess.run(command, capture_output=True, cwd="/", check=False).returncode


def test_throwaway_server_stops_on_exit() -> None:
    pg = ThrowawayPostgres()
    with pg:
        pid, root, data_dir = pg.pid, pg.root, pg.data_dir
        assert pid_alive(pid) and _postmaster_status(pg, data_dir) == 0
        assert pg.psql("postgres", "SELECT 1").strip() == "1"
    assert not pid_alive(pid) and not root.exists()
    assert _postmaster_status(pg, data_dir) != 0


def test_throwaway_server_stops_at_interpreter_exit() -> None:
    script = textwrap.dedent("""
        import json
        from extrarlhf.production.localdb import ThrowawayPostgres
        pg = ThrowawayPostgres()
        pg.start()  # never stopped by the script: atexit must do it
        print(json.dumps({"pid": pg.pid, "root": str(pg.root)}))
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    started = json.loads(done.stdout)
    assert not pid_alive(started["pid"]) and not Path(started["root"]).exists()
