"""ReturnClock export and split (DESIGN 10, issue 15) against a real PostgreSQL: tiny worlds
inserted directly, compared row by row with a brute-force oracle in plain Python."""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import asyncpg
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extrarlhf.core.errors import RLHFError
from extrarlhf.datasets import validate_dataset
from extrarlhf.production import gate
from extrarlhf.production.pseudonyms import player_pseudonym, session_key
from extrarlhf.production.returnclock import (
    export_returnclock_dataset,
    load_returnclock_training,
    split_returnclock_training_dataset,
)
from extrarlhf.production.schema import DDL

SALT = "returnclock-test-salt-Xq7Vd2kw9PzL0bMf4RtY8nJc6HsA1eGuT5oW"
KEY_ID = "rc-test-2"
T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)
INF = datetime.max.replace(tzinfo=timezone.utc)


def env_for(dsn: str) -> dict[str, str]:
    return {gate.ENABLE_VAR: "1", gate.DSN_VAR: dsn, gate.SALT_VAR: SALT, gate.KEY_ID_VAR: KEY_ID}


def m(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


@dataclass(frozen=True)
class S:
    id: str
    player: str
    started: datetime
    ended: datetime | None
    ingested: datetime


@dataclass(frozen=True)
class A:
    id: str
    player: str
    assigned: datetime
    status: str
    ingested: datetime
    treatment: str = "push"


# --------------------------------------------------------------------------- the oracle
def oracle(sessions: list[S], treatments: list[A], start: datetime | None, end: datetime,
           cut: datetime | None) -> tuple[dict, dict]:
    """Plain Python over every row, straight from the definition (module docstring)."""
    cut = cut or INF
    start = start or datetime.min.replace(tzinfo=timezone.utc)
    salt = SALT.encode()
    vis = [s for s in sessions if s.ingested < cut and s.started < end]
    eff = {s.id: (s.ended if s.ended is not None and s.ended < end else INF) for s in vis}
    rows, excluded = {}, {}
    for s in vis:
        if s.ended is None or not (start <= s.ended < end):
            continue
        others = [t for t in vis if t.player == s.player and t.id != s.id]
        covered = any(t.started <= s.ended and (eff[t.id] > s.ended or (eff[t.id] == s.ended and
                                                                          (t.started, t.id) > (s.started, s.id)))
                      for t in others)
        key = session_key(salt, s.id)
        if s.ended < s.started:
            excluded[key] = "ended_before_start"
            continue
        if covered:
            excluded[key] = "overlapped"
            continue
        nexts = [t.started for t in others if t.started > s.ended]
        nxt = min(nexts) if nexts else None
        stop = nxt or end
        matched = sorted((a for a in treatments if a.ingested < cut and a.player == s.player
                          and s.ended <= a.assigned < stop and a.assigned >= start and a.assigned < end),
                         key=lambda a: (a.assigned, a.id))
        rows[key] = {"player": player_pseudonym(salt, s.player), "ended_at": s.ended, "next_start": nxt,
                     "duration_seconds": (stop - s.ended).total_seconds(), "event": int(nxt is not None),
                     "treated": bool(matched), "treatments": len(matched),
                     "treatment_status": matched[0].status if matched else None,
                     "exposed": any(a.status in ("sent", "delivered") for a in matched)}
    return rows, excluded


# --------------------------------------------------------------------------- worlds
async def _fill(dsn: str, sessions: list[S], treatments: list[A], fresh: bool) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        if fresh:
            await conn.execute(DDL)
        else:
            await conn.execute("TRUNCATE player_sessions, return_treatments")
        await conn.copy_records_to_table("player_sessions", records=[
            (s.id, s.player, s.started, s.ended, s.ingested) for s in sessions])
        await conn.copy_records_to_table("return_treatments", records=[
            (a.id, a.player, a.treatment, a.assigned, a.status, a.ingested, a.ingested) for a in treatments])
    finally:
        await conn.close()


@pytest.fixture(scope="module")
def world_db(pg_server):
    dsn = pg_server.create_database("returnclock_world")
    asyncio.run(_fill(dsn, [], [], fresh=True))
    return dsn


def fill(dsn: str, sessions: list[S], treatments: list[A]) -> None:
    asyncio.run(_fill(dsn, sessions, treatments, fresh=False))


def exported_rows(result: dict) -> tuple[dict, dict]:
    folder = Path(result["path"])
    rows = {r["session_key"]: r for r in pq.read_table(folder / "returnclock.parquet").to_pylist()}
    excluded = {r["session_key"]: r["reason"] for r in pq.read_table(folder / "excluded.parquet").to_pylist()}
    return rows, excluded


def assert_matches_oracle(result: dict, sessions, treatments, start, end, cut) -> tuple[dict, dict]:
    want_rows, want_excluded = oracle(sessions, treatments, start, end, cut)
    rows, excluded = exported_rows(result)
    assert excluded == want_excluded
    assert set(rows) == set(want_rows)
    for key, want in want_rows.items():
        got = rows[key]
        for column, value in want.items():
            assert got[column] == value, (key, column, got, want)
    return rows, excluded


# --------------------------------------------------------------------------- edge cases
END = m(600)
EDGE_SESSIONS = [
    S("solo-1", "solo", m(10), m(20), m(21)),                    # one session only -> censored at end_at
    S("ret-1", "ret", m(10), m(20), m(21)),                      # returns after 30 minutes
    S("ret-2", "ret", m(50), m(60), m(61)),                      # last session -> censored
    S("ovl-1", "ovl", m(10), m(40), m(41)),                      # overlapped by ovl-2: no row
    S("ovl-2", "ovl", m(30), m(50), m(51)),                      # ends the activity island
    S("ovl-3", "ovl", m(35), m(45), m(46)),                      # nested in ovl-2: no row
    S("ovl-4", "ovl", m(80), m(90), m(91)),
    S("cont-1", "cont", m(10), m(20), m(21)),                    # next starts at the same instant: continuation
    S("cont-2", "cont", m(20), m(30), m(31)),
    S("cont-3", "cont", m(100), None, m(101)),                   # still open: no row, but a return for cont-2
    S("late-1", "late", m(10), m(20), m(21)),
    S("late-2", "late", m(30), m(40), m(700)),                   # ingested after the cut: invisible
    S("after-1", "after", m(10), m(20), m(21)),
    S("after-2", "after", m(590), m(650), m(591)),               # ends after end_at: open at end_at, still a return
    S("after-3", "after", m(700), m(710), m(711)),               # starts after end_at: never seen
    S("early-1", "early", m(0), m(4), m(5)),                     # ended before start_at: no row, no effect
    S("early-2", "early", m(6), m(8), m(9)),
    S("tie-1", "tie", m(10), m(30), m(31)),                      # same end as tie-2: the later one carries
    S("tie-2", "tie", m(15), m(30), m(31)),
    S("rev-1", "rev", m(10), m(20), m(21)),
    S("rev-2", "rev", m(100), m(40), m(101)),                    # ended before it started: no row, a return
]
EDGE_TREATMENTS = [
    A("t1", "ret", m(25), "cancelled", m(26)),                   # in [20, 50): treated, whatever its status
    A("t2", "ret", m(55), "delivered", m(56)),                   # during ret-2: nothing
    A("t3", "ret", m(65), "delivered", m(66)),                   # after ret-2: treated and exposed
    A("t4", "solo", m(700), "sent", m(701)),                     # after end_at: nothing
    A("t5", "solo", m(1), "sent", m(2)),                         # before start_at: nothing
    A("t6", "late", m(22), "sent", m(800)),                      # ingested after the cut: nothing
    A("t7", "after", m(21), "failed", m(22)),                    # treated, not exposed
]
START, CUT = m(5), m(600)


@pytest.fixture(scope="module")
def edge_export(world_db, tmp_path_factory):
    fill(world_db, EDGE_SESSIONS, EDGE_TREATMENTS)
    root = tmp_path_factory.mktemp("rc-edge")
    result = export_returnclock_dataset(START, END, name="rc", ingested_before=CUT, datasets_dir=root,
                                        environ=env_for(world_db), policy={"min_returnclock_rows": 1,
                                                                           "min_returnclock_events": 1})
    return root, result


def test_edge_cases_have_their_documented_outcomes(edge_export):
    root, result = edge_export
    assert result["published"] and result["complete"]
    rows, excluded = assert_matches_oracle(result, EDGE_SESSIONS, EDGE_TREATMENTS, START, END, CUT)
    salt = SALT.encode()
    k = lambda sid: session_key(salt, sid)  # noqa: E731
    assert rows[k("solo-1")]["event"] == 0 and rows[k("solo-1")]["duration_seconds"] == 580 * 60
    assert rows[k("ret-1")]["event"] == 1 and rows[k("ret-1")]["duration_seconds"] == 30 * 60
    assert rows[k("ret-1")]["treated"] and rows[k("ret-1")]["treatment_status"] == "cancelled"
    assert not rows[k("ret-1")]["exposed"]
    assert rows[k("ret-2")]["treated"] and rows[k("ret-2")]["exposed"] and rows[k("ret-2")]["treatments"] == 1
    assert excluded[k("ovl-1")] == excluded[k("ovl-3")] == "overlapped"
    assert rows[k("ovl-2")]["next_start"] == m(80) and rows[k("ovl-2")]["duration_seconds"] == 30 * 60
    assert excluded[k("cont-1")] == "overlapped"                       # no duration-0 row
    assert rows[k("cont-2")]["next_start"] == m(100)                   # the open session is a return
    assert k("cont-3") not in rows and k("cont-3") not in excluded
    assert rows[k("late-1")]["event"] == 0 and not rows[k("late-1")]["treated"]
    assert rows[k("after-1")]["next_start"] == m(590) and rows[k("after-1")]["treated"]
    assert not rows[k("after-1")]["exposed"]
    assert k("after-2") not in rows and k("after-2") not in excluded
    assert not rows[k("solo-1")]["treated"]
    assert k("early-1") not in rows and k("early-1") not in excluded and k("early-2") in rows
    assert excluded[k("tie-1")] == "overlapped" and k("tie-2") in rows
    assert excluded[k("rev-2")] == "ended_before_start" and rows[k("rev-1")]["next_start"] == m(100)
    assert all(r["duration_seconds"] > 0 and r["session_seconds"] >= 0 for r in rows.values())
    assert result["excluded_by_reason"] == {"ended_before_start": 1, "overlapped": 4}
    assert json.loads((Path(result["path"]) / "manifest.json").read_text())["returnclock"]["excluded_by_reason"] \
        == result["excluded_by_reason"]


def test_the_manifest_and_files_carry_no_raw_id(edge_export, world_db):
    root, result = edge_export
    assert validate_dataset("rc", datasets_dir=root)["valid"]
    m_ = json.loads((Path(result["path"]) / "manifest.json").read_text())
    assert m_["kind"] == "returnclock_export" and m_["pseudonymized"] is True and m_["anonymous"] is False
    assert m_["pseudonym_key_id"] == KEY_ID and m_["complete"] is True
    assert set(m_["production"]["streams"]) == {"player_sessions", "return_treatments"}
    assert m_["production"]["streams"]["return_treatments"]["rows"] == 4  # t4, t5, t6: outside the window or the cut
    assert m_["readiness"]["contours"]["returnclock"]["ready"] is True
    blob = b"".join(p.read_bytes() for p in Path(result["path"]).iterdir())
    for raw in {s.id for s in EDGE_SESSIONS} | {s.player for s in EDGE_SESSIONS}:
        assert f'"{raw}"'.encode() not in blob and raw.encode() + b"\x00" not in blob
    assert SALT.encode() not in blob and world_db.encode() not in blob


def test_organic_split_is_lifelines_ready_and_the_loader_refuses_the_raw_export(edge_export):
    root, result = edge_export
    policy = {"min_returnclock_rows": 1, "min_returnclock_events": 1}
    split = split_returnclock_training_dataset("rc", datasets_dir=root, policy=policy,
                                               fractions=(0.5, 0.25, 0.25))
    assert validate_dataset(split["dataset_id"], datasets_dir=root)["valid"]
    rows, _ = exported_rows(result)
    organic = {k for k, r in rows.items() if not r["treated"]}
    got = set()
    players: dict[str, str] = {}
    for name in ("train", "val", "test"):
        table = load_returnclock_training("rc-split", name, datasets_dir=root)
        for r in table.to_pylist():
            got.add(r["session_key"])
            assert players.setdefault(r["player"], name) == name  # a player never straddles splits
            assert r["duration_seconds"] > 0 and r["event"] in (0, 1)
    assert got == organic and split["split"]["treated_rows_dropped"] == len(rows) - len(organic)
    with pytest.raises(RLHFError, match="never the raw export"):
        load_returnclock_training("rc", "train", datasets_dir=root)
    with pytest.raises(RLHFError) as info:
        split_returnclock_training_dataset("rc", name="rc-split2", datasets_dir=root)  # default policy: too few
    assert info.value.code == "not_ready"


# --------------------------------------------------------------------------- generated worlds
@st.composite
def worlds(draw):
    # ids COPY must quote (comma, quote, newline), an empty one and a non-ASCII one
    players = draw(st.lists(st.sampled_from(["a", 'b"q', "c,d", "e\nf", "", "é"]), min_size=1, max_size=4,
                            unique=True))
    sessions, treatments = [], []
    for i in range(draw(st.integers(1, 14))):
        start = draw(st.integers(0, 60))
        length = draw(st.one_of(st.none(), st.integers(-5, 15)))  # < 0: ended before it started
        sessions.append(S(f"s{i}", draw(st.sampled_from(players)), m(start),
                          None if length is None else m(start + length), m(draw(st.integers(0, 80)))))
    statuses = ("assigned", "sent", "delivered", "cancelled", "failed")
    for i in range(draw(st.integers(0, 8))):
        treatments.append(A(f"a{i}", draw(st.sampled_from(players)), m(draw(st.integers(0, 70))),
                            draw(st.sampled_from(statuses)), m(draw(st.integers(0, 80)))))
    start = draw(st.one_of(st.none(), st.integers(0, 30)))
    end = draw(st.integers((start or 0) + 1, 70))
    cut = draw(st.one_of(st.none(), st.integers(end, 80)))
    return sessions, treatments, None if start is None else m(start), m(end), None if cut is None else m(cut)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(world=worlds(), batch_bytes=st.sampled_from([1, 64, 1 << 20]))
def test_generated_worlds_match_the_oracle(world, batch_bytes, world_db, tmp_path_factory):
    """Also cut the COPY stream into batches of every size: a record split across chunks,
    or a quoted newline near a cut, must not move a field."""
    sessions, treatments, start, end, cut = world
    fill(world_db, sessions, treatments)
    root = tmp_path_factory.mktemp("rc-gen")
    result = export_returnclock_dataset(start, end, name="gen", ingested_before=cut, datasets_dir=root,
                                        environ=env_for(world_db), batch_bytes=batch_bytes)
    assert result["published"] and result["complete"]
    assert_matches_oracle(result, sessions, treatments, start, end, cut)


# --------------------------------------------------------------------------- ceiling, failures, gate
def _bulk(n_players: int, per_player: int) -> list[S]:
    out = []
    for p in range(n_players):
        for j in range(per_player):
            out.append(S(f"b{p}-{j}", f"player{p:04d}", m(j * 30), m(j * 30 + 10), m(j * 30 + 11)))
    return out


def test_the_row_ceiling_stops_the_export(world_db, tmp_path):
    fill(world_db, _bulk(10, 10), [])
    env = env_for(world_db)
    stopped = export_returnclock_dataset(None, m(1000), name="cap", max_rows=50, datasets_dir=tmp_path, environ=env)
    assert stopped["published"] is False and stopped["complete"] is False
    assert stopped["stop_reason"] == "row_ceiling" and stopped["stopped_stream"] == "player_sessions"
    assert not (tmp_path / "cap").exists() or not any(p.name.startswith("v") for p in (tmp_path / "cap").iterdir())
    kept = export_returnclock_dataset(None, m(1000), name="cap", max_rows=50, publish_incomplete=True,
                                      datasets_dir=tmp_path, environ=env,
                                      policy={"min_returnclock_rows": 1, "min_returnclock_events": 1})
    assert kept["published"] and kept["complete"] is False and kept["streams"]["player_sessions"]["rows"] == 50
    assert kept["readiness"]["returnclock_ready"] is False
    assert any("incomplete" in b for b in kept["readiness"]["returnclock_blockers"])
    with pytest.raises(RLHFError) as info:
        split_returnclock_training_dataset("cap", datasets_dir=tmp_path,
                                           policy={"min_returnclock_rows": 1, "min_returnclock_events": 1})
    assert info.value.code == "not_ready"
    full = export_returnclock_dataset(None, m(1000), name="full", datasets_dir=tmp_path, environ=env)
    assert full["complete"] and full["counts"]["rows"] == 100 and full["counts"]["events"] == 90


def test_the_treatments_ceiling_keeps_only_complete_rows(world_db, tmp_path):
    """More treatments than the ceiling: the export stops at the first row whose treatments
    could lie past the cut, and every row it keeps is exactly the oracle's row."""
    sessions = _bulk(10, 10)  # 100 rows: player p's row j is [30j, 30j + 10), next start 30(j + 1)
    treatments = [A(f"t{p}-{j}-{k}", f"player{p:04d}", m(j * 30 + at), "sent", m(j * 30 + at + 1))
                  for p in range(10) for j in range(10) for k, at in enumerate((12, 18))]  # 2 per row: 200
    fill(world_db, sessions, treatments)
    kept = export_returnclock_dataset(None, m(1000), name="tcap", max_rows=150, publish_incomplete=True,
                                      datasets_dir=tmp_path, environ=env_for(world_db))
    assert kept["complete"] is False and kept["stopped_stream"] == "return_treatments"
    assert kept["streams"]["return_treatments"] == {"rows": 150, "ceiling_hit": True, "max_rows": 150}
    want, _ = oracle(sessions, treatments, None, m(1000), None)
    rows, _ = exported_rows(kept)
    # the 150 treatments read: players 0-6 whole, player 7's rows 0-4; the first one not read is
    # player 7's at 162, inside row 5 ([160, 180)): rows 0-4 of player 7 are complete, row 5 is not
    assert len(rows) == 7 * 10 + 5
    for key, got in rows.items():
        assert {c: got[c] for c in want[key]} == want[key]
    assert all(r["treatments"] == 2 for r in rows.values())
    stopped = export_returnclock_dataset(None, m(1000), name="tcap2", max_rows=150, datasets_dir=tmp_path,
                                         environ=env_for(world_db))
    assert stopped["published"] is False and stopped["stopped_stream"] == "return_treatments"
    assert "return_treatments has more than 150 rows" in stopped["message"]


def test_validation_checks_every_row_against_the_definition(edge_export):
    """A writer bug (rows that break the definition, files re-hashed) is caught row by row."""
    import hashlib
    import shutil

    import pyarrow as pa

    root, result = edge_export
    broken = root / "rc-broken"
    shutil.copytree(result["path"], broken / "v1")
    folder = broken / "v1"
    table = pq.read_table(folder / "returnclock.parquet")
    event = table.column("event").to_pylist()
    event[0] = 1 - event[0]
    table = table.set_column(table.schema.get_field_index("event"), table.schema.field("event"),
                             pa.array(event, pa.int8()))
    pq.write_table(table, folder / "returnclock.parquet")
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["dataset_id"] = "rc-broken/v1"
    manifest["files"]["returnclock.parquet"] = hashlib.sha256((folder / "returnclock.parquet").read_bytes()).hexdigest()
    (folder / "manifest.json").write_text(json.dumps(manifest))
    report = validate_dataset("rc-broken/v1", datasets_dir=root)
    assert not report["valid"]
    messages = [f["message"] for f in report["failures"] if f["code"] == "returnclock_row_invalid"]
    assert any("event = 1 without a next_start" in msg for msg in messages)
    assert report["failure_codes"].get("returnclock_counts_mismatch") == 1
    assert validate_dataset("rc", datasets_dir=root)["valid"]


def test_a_dropped_connection_fails_cleanly_with_nothing_published(world_db, tmp_path):
    # far more than the socket buffers and the batches queued can hold: the server is still sending
    fill(world_db, _bulk(100, 500), [])
    killed = []

    def cancel() -> bool:
        if not killed:
            killed.append(True)  # callbacks run on the export's event loop: terminate from another thread
            worker = threading.Thread(target=asyncio.run, args=(_terminate(world_db),))
            worker.start()
            worker.join()
        return False

    with pytest.raises(RLHFError) as info:
        export_returnclock_dataset(None, m(10_000), name="dropped", datasets_dir=tmp_path, environ=env_for(world_db),
                                   batch_bytes=4096, cancel=cancel)
    assert killed
    assert info.value.code == "production_read_failed"
    assert "stream player_sessions" in str(info.value) and "nothing was published" in str(info.value)
    assert world_db not in str(info.value)
    folder = tmp_path / "dropped"
    assert not folder.exists() or not [p for p in folder.iterdir() if not p.name.startswith(".publish")]


async def _terminate(dsn: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
                           "AND datname = current_database() AND backend_type = 'client backend'")
    finally:
        await conn.close()


def test_a_closed_gate_refuses_before_anything(tmp_path):
    with pytest.raises(RLHFError) as info:
        export_returnclock_dataset(None, "2026-03-02T00:00:00Z", name="rc", datasets_dir=tmp_path, environ={})
    assert info.value.code == "production_disabled"
    with pytest.raises(RLHFError) as info:
        split_returnclock_training_dataset("rc", datasets_dir=tmp_path)
    assert info.value.code == "not_found"
    assert not any(tmp_path.iterdir())


def test_a_database_without_the_tables_is_named(pg_server, tmp_path):
    dsn = pg_server.create_database("rc_empty_backend")
    with pytest.raises(RLHFError) as info:
        export_returnclock_dataset(None, "2026-03-02T00:00:00Z", name="rc", datasets_dir=tmp_path,
                                   environ=env_for(dsn))
    assert info.value.code == "production_schema_mismatch" and "player_sessions" in str(info.value)
    assert not any(tmp_path.iterdir())


# --------------------------------------------------------------------------- lifelines
def test_lifelines_fits_the_train_file(world_db, tmp_path):
    lifelines = pytest.importorskip("lifelines")
    import random

    rng = random.Random(3)
    sessions = []
    for p in range(120):
        t = rng.uniform(0, 60)
        for j in range(rng.randint(1, 6)):
            length = rng.uniform(1, 40)
            sessions.append(S(f"l{p}-{j}", f"lp{p}", m(t), m(t + length), m(t + length + 1)))
            t += length + rng.expovariate(1 / 120)
    fill(world_db, sessions, [])
    env, policy = env_for(world_db), {"min_returnclock_rows": 50, "min_returnclock_events": 20}
    export_returnclock_dataset(None, m(1500), name="lf", datasets_dir=tmp_path, environ=env, policy=policy)
    split_returnclock_training_dataset("lf", datasets_dir=tmp_path, policy=policy)
    df = load_returnclock_training("lf-split", "train", datasets_dir=tmp_path).to_pandas()
    assert len(df) > 50
    kmf = lifelines.KaplanMeierFitter().fit(df["duration_seconds"], event_observed=df["event"])
    assert 0 < kmf.median_survival_time_ < float("inf")
    cph = lifelines.CoxPHFitter().fit(df[["duration_seconds", "event", "session_seconds", "end_hour_utc"]],
                                      duration_col="duration_seconds", event_col="event")
    assert set(cph.params_.index) == {"session_seconds", "end_hour_utc"}


async def _read_world(dsn: str) -> tuple[list[S], list[A]]:
    conn = await asyncpg.connect(dsn)
    try:
        sessions = [S(r[0], r[1], r[2], r[3], r[4]) for r in await conn.fetch(
            "SELECT session_id, player_id, started_at, ended_at, ingested_at FROM player_sessions")]
        treatments = [A(r[0], r[1], r[2], r[3], r[4], r[5]) for r in await conn.fetch(
            "SELECT assignment_id, player_id, assigned_at, status, ingested_at, treatment FROM return_treatments")]
    finally:
        await conn.close()
    return sessions, treatments


def test_the_fixture_backend_exports_exactly_what_the_oracle_says(pg_server, tmp_path):
    """The fixture's sessions and treatments (every edge case it guarantees, late rows, status
    updates) exported with a cut inside the window and compared row by row with the oracle."""
    from extrarlhf.production.fixture import build_fixture

    dsn = pg_server.create_database("returnclock_fixture")
    summary = build_fixture(dsn, battles=0, players=40, days=4, seed=5, sessions_per_player=6, workers=1)
    assert summary["counts"]["sessions"]["total"] > 200 and summary["counts"]["treatments"]["total"] > 10
    sessions, treatments = asyncio.run(_read_world(dsn))
    start = min(s.started for s in sessions) + timedelta(hours=12)
    end = max(s.started for s in sessions) - timedelta(hours=6)
    cut = end + timedelta(days=1)  # late rows (ingested days after) stay invisible
    result = export_returnclock_dataset(start, end, name="fixture", ingested_before=cut, datasets_dir=tmp_path,
                                        environ=env_for(dsn))
    assert result["published"] and result["complete"]
    rows, excluded = assert_matches_oracle(result, sessions, treatments, start, end, cut)
    assert rows and any(r["event"] == 0 for r in rows.values()) and any(r["treated"] for r in rows.values())


def test_a_sigkill_mid_export_leaves_no_half_dataset(pg_server, tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    from extrarlhf.production.fixture import build_fixture

    dsn = pg_server.create_database("returnclock_kill")
    build_fixture(dsn, battles=0, players=3000, days=20, seed=9, sessions_per_player=40, workers=1)
    root = Path(__file__).resolve().parents[2]
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/"), "PYTHONPATH": str(root),
           **env_for(dsn)}
    datasets = tmp_path / "datasets"
    command = [sys.executable, "-m", "extrarlhf", "production", "export-returnclock", "--end-at",
               "2026-02-01T00:00:00Z", "--name", "rc", "--datasets-dir", str(datasets)]
    proc = subprocess.Popen(command, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    try:
        while not any(p.name.startswith(".tmp-") for p in (datasets / "rc").glob("*")):
            assert proc.poll() is None and time.monotonic() < deadline, "the export ended before it could be killed"
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert not [p for p in (datasets / "rc").iterdir() if p.name.startswith("v")]
    again = subprocess.run(command, cwd=root, env=env, capture_output=True, timeout=600)
    assert again.returncode == 0, again.stderr.decode()
    assert sorted(p.name for p in (datasets / "rc").iterdir()
                  if not p.name.startswith((".publish", ".card-sizes"))) == ["README.md", "v1"]


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.anyio
async def test_the_mcp_tool_reports_progress_and_leaks_nothing(pg_server, tmp_path):
    """Over the real stdio server: progress notifications that count the window's session rows up
    to their total, the same rows as the oracle says, and no DSN, salt or raw id in the result, the
    files or the server's stderr."""
    import os
    import shlex
    import sys

    from mcp import Client, StdioServerParameters

    from ..mcp_helpers import REPO, Checked

    dsn = pg_server.create_database("returnclock_mcp")
    await asyncio.to_thread(asyncio.run, _fill(dsn, EDGE_SESSIONS, EDGE_TREATMENTS, fresh=True))
    errlog = tmp_path / "stderr.log"
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/"), "PYTHONPATH": str(REPO),
           **env_for(dsn)}
    command = " ".join(shlex.quote(a) for a in (sys.executable, "-m", "mcp_server", "--sessions-dir",
                                                 str(tmp_path / "sessions"), "--datasets-dir", str(tmp_path / "ds")))
    server = StdioServerParameters(command="/bin/sh", args=["-c", f"exec {command} 2>>{shlex.quote(str(errlog))}"],
                                   env=env, cwd=str(REPO))
    progress: list[tuple[float, float | None]] = []

    async def on_progress(done, total, message):
        progress.append((done, total))

    policy = {"min_returnclock_rows": 1, "min_returnclock_events": 1}  # the thresholds, overridden over MCP
    async with Client(server) as client:
        c = Checked(client)
        result = await c.ok("export_returnclock_dataset", {
            "start_at": START.isoformat(), "end_at": END.isoformat(), "ingested_before": CUT.isoformat(),
            "name": "rc", "policy": policy}, progress_callback=on_progress)
        refused = await c.err("split_returnclock_training_dataset", {"dataset": "rc"}, code="not_ready")
        split = await c.ok("split_returnclock_training_dataset", {"dataset": "rc", "policy": policy})
    assert result["published"] and result["complete"] and result["readiness"]["returnclock_ready"] is True
    assert "need 200" in refused["message"] and split["row_counts"]["train"] >= 1
    window_rows = result["counts"]["rows"] + result["counts"]["excluded"]
    assert progress and progress[-1] == (window_rows, window_rows)
    assert [d for d, _ in progress] == sorted(d for d, _ in progress)
    assert_matches_oracle(result, EDGE_SESSIONS, EDGE_TREATMENTS, START, END, CUT)
    raw = {s.id for s in EDGE_SESSIONS} | {s.player for s in EDGE_SESSIONS} | {a.id for a in EDGE_TREATMENTS}
    blobs = [json.dumps(result).encode(), errlog.read_bytes()]
    blobs += [p.read_bytes() for p in (tmp_path / "ds").rglob("*") if p.is_file()]
    blobs += [repr(pq.read_table(p).to_pylist()).encode() for p in (tmp_path / "ds").rglob("*.parquet")]
    for secret in [dsn, SALT, *(f'"{r}"' for r in raw), *(f"'{r}'" for r in raw)]:
        assert not any(secret.encode() in blob for blob in blobs), secret


def test_the_default_cut_off_is_recorded_and_a_re_export_with_it_reads_the_same_rows(pg_server, tmp_path):
    """Issue 49: a session ingested 48 ms before the snapshot was absent (its transaction committed
    after the snapshot), and a re-export with the manifest's cut-off (the snapshot time) then held it.
    Here a session is written by a transaction that starts before the export's snapshot and commits
    after it: the default cut-off (recorded: 60 s before the snapshot) leaves it out of both exports."""
    from extrarlhf.production.fixture import build_fixture

    dsn = pg_server.create_database("returnclock_cut")
    summary = build_fixture(dsn, battles=0, players=20, days=3, seed=9, sessions_per_player=4, workers=1)
    sessions, _ = asyncio.run(_read_world(dsn))
    start, end = min(s.started for s in sessions), max(s.started for s in sessions) + timedelta(hours=1)
    player = sessions[0].player
    loop = asyncio.new_event_loop()
    writer = loop.run_until_complete(asyncpg.connect(dsn))
    try:
        open_transaction = writer.transaction()
        loop.run_until_complete(open_transaction.start())
        loop.run_until_complete(writer.execute(
            "INSERT INTO player_sessions VALUES ('late-session', $1, $2, $3, now())", player,
            start + timedelta(hours=1), start + timedelta(hours=2)))
        first = export_returnclock_dataset(start, end, name="first", datasets_dir=tmp_path, environ=env_for(dsn))
        loop.run_until_complete(open_transaction.commit())
    finally:
        loop.run_until_complete(writer.close())
        loop.close()
    window = json.loads((Path(first["path"]) / "manifest.json").read_text())["production"]["window"]
    snapshot = datetime.fromisoformat(first["snapshot_at"].replace("Z", "+00:00"))
    cut = datetime.fromisoformat(window["ingested_before"].replace("Z", "+00:00"))
    assert window["ingested_before_is_default"] is True and window["settle_seconds"] == 60
    assert cut == snapshot - timedelta(seconds=60)
    again = export_returnclock_dataset(start, end, name="again", ingested_before=window["ingested_before"],
                                       datasets_dir=tmp_path, environ=env_for(dsn))
    assert again["streams"] == first["streams"] and again["row_counts"] == first["row_counts"]
    for name in ("returnclock", "excluded"):
        assert (Path(again["path"]) / f"{name}.parquet").read_bytes() == \
            (Path(first["path"]) / f"{name}.parquet").read_bytes(), name
    assert summary["counts"]["sessions"]["total"] == len(sessions)
