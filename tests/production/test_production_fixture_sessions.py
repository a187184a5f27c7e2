"""The fixture backend's player sessions and return treatments (DESIGN 10 "ReturnClock export",
10.1 "Fixture backend"), against a real PostgreSQL: every edge case the ReturnClock export must
handle is present and counted right, the rows are sane, determinism whatever the worker count,
a sessions-only fixture, and the battles of a seed unchanged by sessions."""

from __future__ import annotations

import json
import statistics
from collections import Counter, defaultdict
from datetime import datetime, timedelta
from itertools import pairwise
from typing import Any

import pytest

from extrarlhf.core.errors import InvalidArgument
from extrarlhf.production.fixture import (
    CHUNK_PLAYERS,
    PLACEMENTS,
    TREATMENT_STATUSES,
    TREATMENTS,
    build_fixture,
)

from .test_production_fixture import PLAYER_ID, cli_env, dump, fetch, run_cli

LATE = timedelta(days=3)
# 40 players (more than the 16 forced edge-case roles), about 6 sessions each, 20 battles.
PARAMS = {"battles": 20, "players": 40, "days": 5, "seed": 21, "sessions_per_player": 6}


class World:
    """The session and treatment rows of one fixture database, grouped per player."""

    def __init__(self, dsn: str, summary: dict[str, Any]) -> None:
        self.dsn, self.summary = dsn, summary
        self.sessions = fetch(dsn, "SELECT * FROM player_sessions ORDER BY session_id")
        self.treatments = fetch(dsn, "SELECT * FROM return_treatments ORDER BY assignment_id")
        self.by_player: dict[str, list] = defaultdict(list)
        for row in self.sessions:
            self.by_player[row["player_id"]].append(row)
        for rows in self.by_player.values():
            rows.sort(key=lambda r: (r["started_at"], r["session_id"]))


@pytest.fixture(scope="module")
def world(pg_server) -> World:
    dsn = pg_server.create_database("fixture_sessions")
    return World(dsn, build_fixture(dsn, workers=1, **PARAMS))


def _transitions(world: World) -> Counter[str]:
    """overlapping / same_instant_next counted from the rows: each session against the previous one."""
    out: Counter[str] = Counter()
    for rows in world.by_player.values():
        for prev, row in pairwise(rows):
            assert prev["ended_at"] is not None, "only a player's last session may be open"
            out["overlapping"] += row["started_at"] < prev["ended_at"]
            out["same_instant_next"] += row["started_at"] == prev["ended_at"]
    return out


def _placement(world: World, treatment) -> str:
    """Where the assignment falls relative to the session that prompted it (named in its id)."""
    session_id = "s-" + treatment["assignment_id"][2:]
    rows = world.by_player[treatment["player_id"]]
    index = next(k for k, r in enumerate(rows) if r["session_id"] == session_id)
    ended, at = rows[index]["ended_at"], treatment["assigned_at"]
    next_start = rows[index + 1]["started_at"] if index + 1 < len(rows) else None
    if at < ended:
        return "before_end"
    if at == ended:
        return "at_end"
    if next_start is None:
        return "after_last"
    if at < next_start:
        return "between"
    return "at_next_start" if at == next_start else "after_next_start"


# ------------------------------------------------------------------------------ edge cases and counts

def test_every_session_edge_case_is_present_and_counted(world) -> None:
    counts = world.summary["counts"]["sessions"]
    assert counts["total"] == len(world.sessions) and 0.7 * 240 <= len(world.sessions) <= 1.3 * 240
    opened = [r for r in world.sessions if r["ended_at"] is None]
    assert counts["open"] == len(opened) >= 1
    for row in opened:  # still open: the player's last session
        assert world.by_player[row["player_id"]][-1]["session_id"] == row["session_id"]
    transitions = _transitions(world)
    assert counts["overlapping"] == transitions["overlapping"] >= 1
    assert counts["same_instant_next"] == transitions["same_instant_next"] >= 1
    ones = [p for p, rows in world.by_player.items() if len(rows) == 1]
    assert counts["one_session_players"] == len(ones) >= 1
    late = [r for r in world.sessions if r["ended_at"] is not None and r["ingested_at"] >= r["ended_at"] + LATE]
    assert counts["late"] == len(late) >= 1
    assert set(world.by_player) == set(world.summary["player_ids"])  # every player has sessions


def test_every_treatment_edge_case_is_present_and_counted(world) -> None:
    counts = world.summary["counts"]["treatments"]
    assert counts["total"] == len(world.treatments) >= 16
    statuses = Counter(t["status"] for t in world.treatments)
    assert counts["by_status"] == {s: statuses[s] for s in TREATMENT_STATUSES}
    assert all(statuses[s] >= 1 for s in TREATMENT_STATUSES)
    placements = Counter(_placement(world, t) for t in world.treatments)
    assert counts["by_placement"] == {p: placements[p] for p in PLACEMENTS}
    assert all(placements[p] >= 1 for p in PLACEMENTS), placements
    late = [t for t in world.treatments if t["ingested_at"] >= t["status_updated_at"] + LATE]
    assert counts["late"] == len(late) >= 1
    treated = {t["player_id"] for t in world.treatments}
    assert 0 < len(treated) < len(world.by_player)  # some players are nudged, not all


# ------------------------------------------------------------------------------ sanity

def test_sessions_are_well_formed(world) -> None:
    start = datetime.fromisoformat(world.summary["window"]["start_at"])
    end = datetime.fromisoformat(world.summary["window"]["end_at"])
    for row in world.sessions:
        assert PLAYER_ID.fullmatch(row["player_id"])
        assert start <= row["started_at"] < end
        if row["ended_at"] is None:
            assert row["started_at"] < row["ingested_at"] < row["started_at"] + timedelta(minutes=1)
            continue
        assert row["started_at"] < row["ended_at"] < end
        delay = row["ingested_at"] - row["ended_at"]
        assert timedelta(0) < delay < timedelta(minutes=1) or delay >= LATE
    gaps = [(b["started_at"] - a["ended_at"]).total_seconds() for rows in world.by_player.values()
            for a, b in pairwise(rows) if b["started_at"] > a["ended_at"]]
    lengths = [(r["ended_at"] - r["started_at"]).total_seconds() for r in world.sessions if r["ended_at"]]
    assert 3600 <= statistics.median(gaps) <= 2 * 86_400 and max(gaps) >= 86_400  # hours to days
    assert 5 * 60 <= statistics.median(lengths) <= 60 * 60


def test_treatments_reference_players_and_have_valid_statuses(world) -> None:
    players = set(world.summary["player_ids"])
    session_ids = {r["session_id"] for r in world.sessions}
    for t in world.treatments:
        assert t["player_id"] in players and t["player_id"] in world.by_player
        assert "s-" + t["assignment_id"][2:] in session_ids
        assert t["status"] in TREATMENT_STATUSES and t["treatment"] in TREATMENTS
        if t["status"] == "assigned":
            assert t["status_updated_at"] == t["assigned_at"]
        else:
            assert t["status_updated_at"] > t["assigned_at"]
        assert t["ingested_at"] > t["status_updated_at"]
    orphans = fetch(world.dsn, "SELECT count(*) FROM return_treatments t WHERE NOT EXISTS "
                               "(SELECT 1 FROM player_sessions s WHERE s.player_id = t.player_id)")
    assert orphans[0][0] == 0


# ------------------------------------------------------------------------------ determinism, battles, CLI

def test_rows_do_not_depend_on_the_worker_count(pg_server) -> None:
    # more players than one chunk, so the order of chunks across workers matters; no battles
    params = {"battles": 0, "players": CHUNK_PLAYERS + 500, "days": 7, "seed": 5, "sessions_per_player": 2}
    one = pg_server.create_database("fixture_sessions_workers_1")
    two = pg_server.create_database("fixture_sessions_workers_2")
    summary = build_fixture(one, workers=1, **params)
    assert summary == build_fixture(two, workers=2, **params)
    assert summary["counts"]["battles"] == 0 and summary["counts"]["sessions"]["total"] >= 2 * CHUNK_PLAYERS
    dumped = dump(one)
    assert dumped["battles"] == b"" and dumped["player_sessions"].count(b"\n") == summary["counts"]["sessions"]["total"]
    assert dumped == dump(two)


def test_sessions_leave_the_battles_of_a_seed_unchanged(pg_server, world) -> None:
    without = pg_server.create_database("fixture_sessions_none")
    params = {k: v for k, v in PARAMS.items() if k != "sessions_per_player"}
    summary = build_fixture(without, workers=2, **params)
    mine = dump(world.dsn)
    theirs = dump(without)
    assert (theirs["battles"], theirs["battle_actions"]) == (mine["battles"], mine["battle_actions"])
    assert theirs["player_sessions"] == theirs["return_treatments"] == b""
    assert summary["counts"]["sessions"] == {"total": 0, "open": 0, "overlapping": 0, "same_instant_next": 0,
                                             "one_session_players": 0, "late": 0}
    assert summary["counts"]["treatments"]["total"] == 0
    for key in ("battles", "actions", "kinds", "unfinished", "late", "late_actions", "broken"):
        assert summary["counts"][key] == world.summary["counts"][key]


def test_argument_checks(pg_server) -> None:
    dsn = pg_server.create_database("fixture_sessions_args")
    with pytest.raises(InvalidArgument, match="battles must be"):
        build_fixture(dsn, battles=0, players=4, days=1, seed=1)  # no sessions: battles are the fixture
    with pytest.raises(InvalidArgument, match="battles must be"):
        build_fixture(dsn, battles=3, players=4, days=1, seed=1, sessions_per_player=2)  # too few for the defects
    with pytest.raises(InvalidArgument, match="sessions_per_player must be"):
        build_fixture(dsn, battles=10, players=4, days=1, seed=1, sessions_per_player=-1)
    one = build_fixture(dsn, battles=0, players=4, days=1, seed=1, sessions_per_player=1, workers=1)
    assert one["counts"]["sessions"]["one_session_players"] == 4 == one["counts"]["sessions"]["total"]


def test_cli_sessions_only_prints_no_raw_ids(pg_server) -> None:
    dsn = pg_server.create_database("fixture_sessions_cli")
    done = run_cli(cli_env(FIXTURE_TEST_DSN=dsn), "--dsn-env", "FIXTURE_TEST_DSN", "--battles", "0", "--players",
                   "30", "--days", "2", "--seed", "9", "--sessions-per-player", "4", "--workers", "1", "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["params"]["sessions_per_player"] == 4 and summary["counts"]["battles"] == 0
    assert summary["counts"]["sessions"]["total"] == fetch(dsn, "SELECT count(*) FROM player_sessions")[0][0] > 0
    assert "30/30 players" in done.stderr
    readable = run_cli(cli_env(FIXTURE_TEST_DSN=dsn), "--dsn-env", "FIXTURE_TEST_DSN", "--battles", "0",
                       "--players", "30", "--days", "2", "--seed", "9", "--sessions-per-player", "4", "--reset")
    assert readable.returncode == 0, readable.stderr
    assert "sessions " in readable.stdout and "treatments " in readable.stdout
    ids = {r[0] for r in fetch(dsn, "SELECT player_id FROM player_sessions")}
    for out in (done, readable):
        assert not any(i in out.stdout + out.stderr for i in ids) and dsn not in out.stdout + out.stderr
