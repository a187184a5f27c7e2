"""The fixture backend (DESIGN section 10.1): a game backend's production database, really played.

``python -m extrarlhf.production.fixture --dsn-env VAR --battles N --players M --days D --seed S``
creates the production schema (schema.py) in the database whose DSN is in the environment
variable ``VAR`` and fills it with battles the engine actually played: humans play a mix of
the greedy baseline and random legal moves with sampled think times, bots and models
greedy/random variants; decks come from a seeded pool, each player favouring a few. Like a
real backend it has unfinished battles, late-ingested battles and actions, and a few
deliberately broken battles (each :data:`DEFECTS` kind at least once) that an export must
catch and exclude.

The rows depend only on (seed, battles, players, days, start): every battle draws from its
own generator ``numpy.random.default_rng([seed, index])`` and the shared pools from
``engine.derive_seed`` streams -- no wall clock, no global random state -- so the number of
worker processes changes nothing. Rows are written with COPY, in one transaction: a failed
build leaves the database as it was.

The DSN is never a command-line value and never printed: a connection failure names only
the variable and the exception class.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import hashlib
import json
import math
import os
import sys
from collections import Counter, deque
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import closing
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from itertools import islice
from multiprocessing import get_context
from typing import Any, NamedTuple

import asyncpg
import numpy as np

import engine
from adapters.baselines import GreedyPolicy
from extrarlhf.errors import InvalidArgument, RLHFError
from extrarlhf.progress import ProgressLine

from .schema import DDL, TABLE_COLUMNS

DEFAULT_START = datetime(2026, 1, 1, tzinfo=timezone.utc)
BROKEN_RULESET = "arena-0"
DEFECTS = ("winner_mismatch", "turns_mismatch", "illegal_action", "unknown_ruleset", "missing_actions")
# (p1 kind, p2 kind, share of battles)
KIND_PAIRS = (("human", "human", 0.60), ("human", "bot", 0.12), ("bot", "human", 0.12),
              ("human", "model", 0.08), ("model", "model", 0.08))
UNFINISHED_SHARE, LATE_SHARE, LATE_ACTIONS_SHARE = 0.03, 0.02, 0.01
BATTLES_PER_EXTRA_DEFECT = 2500  # each defect once, plus once more per this many battles
DECK_POOL_SIZE = 48
LATE_US = 3 * 86_400 * 1_000_000  # how late a late row is ingested after the battle finished
BOT_GREEDY_SHARE = {"bot": 0.85, "model": 0.97}  # humans draw theirs per battle
BOT_MS = {"bot": (200, 900), "model": (80, 400)}  # time a bot / model takes per action
CHUNK_BATTLES = 200  # battles per worker task and per COPY batch

_GREEDY = GreedyPolicy()  # stateless


class FixtureRefused(RLHFError):
    """The database already holds production rows and no reset was asked for."""

    code = "fixture_refused"


class FixtureConnectError(RLHFError):
    """The database could not be reached; carries only the exception class, never the DSN."""

    code = "connection_failed"

    def __init__(self, exception_class: str) -> None:
        super().__init__(f"could not connect to the database ({exception_class})")
        self.exception_class = exception_class


class Deck(NamedTuple):
    cards: tuple[int, ...]
    deck_id: str
    json: str  # the jsonb column's text


@dataclass(frozen=True)
class Plan:
    """Everything a worker needs to play any battle of the fixture (shared, read-only)."""

    seed: int
    battles: int
    days: int
    start: datetime
    decks: tuple[Deck, ...]
    player_ids: tuple[str, ...]
    player_cdf: tuple[float, ...]  # cumulative pick weights: a few players play much more
    player_decks: tuple[tuple[int, ...], ...]  # indexes into ``decks`` each player plays
    defects: dict[int, str]  # battle index -> defect


class Played(NamedTuple):
    """One battle's rows (in TABLE_COLUMNS order) and what the summary counts about it."""

    battle: tuple
    actions: list[tuple]
    status: str  # normal | unfinished | late | late_actions
    defect: str | None


class Move(NamedTuple):
    turn: int
    player: int
    action_id: int
    decision_ms: int | None
    elapsed_ms: int  # since the battle started, after this action


# ---------------------------------------------------------------------------- the plan

def player_id(seed: int, index: int) -> str:
    """A raw backend user id: distinctive, so tests can scan exported bytes for it."""
    return "player-" + hashlib.sha256(f"fixture:{seed}:player:{index}".encode()).hexdigest()[:12]


def make_plan(seed: int, battles: int, players: int, days: int, start: datetime) -> Plan:
    decks = tuple(_deck(engine.random_deck(engine.SplitMix64(engine.derive_seed(seed, f"fixture:deck:{k}"))))
                  for k in range(DECK_POOL_SIZE))
    rng = np.random.default_rng(engine.derive_seed(seed, "fixture:players"))
    weights = 1.0 / np.arange(1, players + 1) ** 0.7
    player_decks = tuple(_favourite_decks(rng) for _ in range(players))
    return Plan(seed=seed, battles=battles, days=days, start=start, decks=decks,
                player_ids=tuple(player_id(seed, i) for i in range(players)),
                player_cdf=tuple(np.cumsum(weights / weights.sum()).tolist()),
                player_decks=player_decks, defects=_pick_defects(seed, battles))


def _favourite_decks(rng: np.random.Generator) -> tuple[int, ...]:
    """One to three decks of the pool that a player plays."""
    return tuple(sorted(rng.choice(DECK_POOL_SIZE, size=1 + int(rng.integers(3)), replace=False).tolist()))


def _deck(cards: tuple[int, ...]) -> Deck:
    return Deck(cards, engine.deck_id(cards), json.dumps(list(cards)))


def _pick_defects(seed: int, battles: int) -> dict[int, str]:
    per_defect = 1 + battles // BATTLES_PER_EXTRA_DEFECT
    rng = np.random.default_rng(engine.derive_seed(seed, f"fixture:defects:{battles}"))
    chosen = rng.choice(battles, size=min(battles, per_defect * len(DEFECTS)), replace=False).tolist()
    return {index: DEFECTS[k % len(DEFECTS)] for k, index in enumerate(chosen)}


def battle_id(seed: int, index: int) -> str:
    return f"b-{seed}-{index:07d}"


# ---------------------------------------------------------------------------- one battle

def play_battle(plan: Plan, index: int) -> Played:
    """Draw, play and record battle ``index``; only ``default_rng([seed, index])`` is used."""
    rng = np.random.default_rng([plan.seed, index])
    kinds = _draw_kinds(rng)
    players = _draw_players(plan, rng, kinds)
    decks = [_draw_deck(plan, rng, player) for player in players]
    seed, starting_player = int(rng.integers(0, 2**63 - 1)), 1 + int(rng.integers(2))
    started_us = int(rng.integers(0, plan.days * 86_400 * 1_000_000))
    defect = plan.defects.get(index)
    status = _draw_status(rng) if defect is None else "normal"  # broken battles are finished and on time
    state = engine.new_battle(seed, decks[0].cards, decks[1].cards, starting_player)
    moves = _play(state, rng, kinds)
    record: dict[str, Any] = {
        "battle_id": battle_id(plan.seed, index), "ruleset": engine.RULESET, "seed": seed,
        "p1_player_id": None if players[0] is None else plan.player_ids[players[0]],
        "p2_player_id": None if players[1] is None else plan.player_ids[players[1]],
        "p1_kind": kinds[0], "p2_kind": kinds[1], "p1_deck": decks[0].json, "p2_deck": decks[1].json,
        "p1_deck_id": decks[0].deck_id, "p2_deck_id": decks[1].deck_id, "starting_player": starting_player,
        "started_at": _at(plan, started_us),
    }
    finished_us = started_us + moves[-1].elapsed_ms * 1000 + int(rng.integers(100_000, 2_000_000))
    if status == "unfinished":
        moves = moves[:int(rng.integers(1, len(moves)))]
        finished_us = None
    acted_us = [started_us + m.elapsed_ms * 1000 for m in moves]
    ingested_us = _ingestion_times(rng, status, acted_us, finished_us)
    record.update(_result_columns(plan, state, started_us, finished_us), ingested_at=_at(plan, ingested_us[0]))
    if defect is not None:
        moves = _break(rng, defect, record, state, moves)
    actions = [(record["battle_id"], seq, m.turn, m.player, m.action_id, m.decision_ms,
                _at(plan, acted_us[seq]), _at(plan, ingested_us[1 + seq]))
               for seq, m in enumerate(moves)]
    return Played(tuple(record[c] for c in TABLE_COLUMNS["battles"]), actions, status, defect)


def _draw_kinds(rng: np.random.Generator) -> tuple[str, str]:
    u = rng.random()
    for p1, p2, share in KIND_PAIRS:
        if u < share:
            return p1, p2
        u -= share
    return KIND_PAIRS[-1][0], KIND_PAIRS[-1][1]


def _draw_players(plan: Plan, rng: np.random.Generator, kinds: tuple[str, str]) -> list[int | None]:
    """Player indexes per seat (None for non-humans); two human seats are two different players."""
    players: list[int | None] = []
    for kind in kinds:
        chosen = None
        while kind == "human" and (chosen is None or chosen in players):
            chosen = min(bisect.bisect_right(plan.player_cdf, rng.random()), len(plan.player_ids) - 1)
        players.append(chosen)
    return players


def _draw_deck(plan: Plan, rng: np.random.Generator, player: int | None) -> Deck:
    """A human plays one of their favourite decks; bots and models any deck of the pool."""
    options = range(DECK_POOL_SIZE) if player is None else plan.player_decks[player]
    return plan.decks[options[int(rng.integers(len(options)))]]


def _draw_status(rng: np.random.Generator) -> str:
    u = rng.random()
    for status, share in (("unfinished", UNFINISHED_SHARE), ("late", LATE_SHARE), ("late_actions", LATE_ACTIONS_SHARE)):
        if u < share:
            return status
        u -= share
    return "normal"


def _play(state: engine.State, rng: np.random.Generator, kinds: tuple[str, str]) -> list[Move]:
    """Play to the end. Each seat plays greedy with its own probability, else a random legal action."""
    greedy_share = [rng.uniform(0.55, 0.95) if kind == "human" else BOT_GREEDY_SHARE[kind] for kind in kinds]
    moves: list[Move] = []
    elapsed_ms = 0
    while not state.is_terminal:
        seat = state.to_move - 1
        legal = state.legal_actions()
        if rng.random() < greedy_share[seat]:
            action = _GREEDY.act(state)
        else:
            action = legal[int(rng.integers(len(legal)))]
        if kinds[seat] == "human":
            decision_ms = _think_ms(rng, len(legal))
            elapsed_ms += decision_ms
        else:
            decision_ms = None
            elapsed_ms += int(rng.integers(*BOT_MS[kinds[seat]]))
        moves.append(Move(state.turn, seat + 1, action, decision_ms, elapsed_ms))
        state.apply(action)
    return moves


def _think_ms(rng: np.random.Generator, n_legal: int) -> int:
    """A human's think time: lognormal around a median (~1.5-4 s) that grows with the options."""
    median = 1500.0 * n_legal ** 0.4
    return int(min(max(round(rng.lognormal(math.log(median), 0.8)), 150), 120_000))


def _ingestion_times(rng: np.random.Generator, status: str, acted_us: list[int],
                     finished_us: int | None) -> list[int]:
    """[battle row, action 0, action 1, ...] ingestion times: seconds after the fact, or 3 days late."""
    n = len(acted_us)
    jitter = rng.integers(50_000, 2_000_000, size=n + 1).tolist()
    battle = (acted_us[-1] if finished_us is None else finished_us) + jitter[0] * 10
    if status == "late":
        return [finished_us + LATE_US + j for j in jitter]
    actions = [a + j for a, j in zip(acted_us, jitter[1:], strict=True)]
    if status == "late_actions":
        late = int(rng.integers(1, min(5, n) + 1))
        actions[n - late:] = [finished_us + LATE_US + j for j in jitter[n + 1 - late:]]
    return [battle, *actions]


def _at(plan: Plan, us: int) -> datetime:
    """The instant ``us`` microseconds after the fixture's start."""
    return plan.start + timedelta(microseconds=us)


def _result_columns(plan: Plan, final: engine.State, started_us: int, finished_us: int | None) -> dict[str, Any]:
    if finished_us is None:
        return {"finished_at": None, "winner": None, "turns": None, "duration_seconds": None}
    return {"finished_at": _at(plan, finished_us), "winner": final.winner, "turns": final.turn,
            "duration_seconds": (finished_us - started_us) / 1e6}


def _break(rng: np.random.Generator, defect: str, record: dict[str, Any], final: engine.State,
           moves: list[Move]) -> list[Move]:
    """Apply ``defect`` to a finished battle's record; returns the moves to store."""
    if defect == "winner_mismatch":
        record["winner"] = (final.winner + 1 + int(rng.integers(2))) % 3
    elif defect == "turns_mismatch":
        record["turns"] = final.turn + 1
    elif defect == "unknown_ruleset":
        record["ruleset"] = BROKEN_RULESET
    elif defect == "missing_actions":
        return moves[:len(moves) - int(rng.integers(1, min(3, len(moves) - 1) + 1))]
    elif defect == "illegal_action":
        return _with_illegal_action(rng, final, moves)
    return moves


def _with_illegal_action(rng: np.random.Generator, final: engine.State, moves: list[Move]) -> list[Move]:
    """Replace one action by an id that is illegal where it was played; the rows after it stay."""
    seq = int(rng.integers(len(moves)))
    state = engine.new_battle(final.seed, final.decks[0], final.decks[1], final.starting_player)
    for move in moves[:seq]:
        state.apply(move.action_id)
    legal = set(state.legal_actions())
    illegal = [a for a in range(engine.ACTION_SPACE_SIZE) if a not in legal]
    moves = list(moves)
    moves[seq] = moves[seq]._replace(action_id=illegal[int(rng.integers(len(illegal)))])
    return moves


# ---------------------------------------------------------------------------- many battles

def play_range(plan: Plan, lo: int, hi: int) -> list[Played]:
    return [play_battle(plan, index) for index in range(lo, hi)]


_WORKER_PLAN: Plan | None = None  # set once per worker process by _init_worker


def _init_worker(plan: Plan) -> None:
    global _WORKER_PLAN
    _WORKER_PLAN = plan


def _worker_play_range(lo: int, hi: int) -> list[Played]:
    assert _WORKER_PLAN is not None, "the worker was started without _init_worker"
    return play_range(_WORKER_PLAN, lo, hi)


def played_chunks(plan: Plan, workers: int) -> Iterator[list[Played]]:
    """Chunks of played battles in battle-index order, played on ``workers`` processes.

    At most ``2 * workers`` chunks are in flight, so memory does not grow with the fixture.
    """
    ranges = ((lo, min(lo + CHUNK_BATTLES, plan.battles)) for lo in range(0, plan.battles, CHUNK_BATTLES))
    if workers == 1:
        yield from (play_range(plan, lo, hi) for lo, hi in ranges)
        return
    pool = ProcessPoolExecutor(workers, mp_context=get_context("spawn"), initializer=_init_worker, initargs=(plan,))
    try:
        pending = deque(pool.submit(_worker_play_range, lo, hi) for lo, hi in islice(ranges, 2 * workers))
        while pending:
            chunk = pending.popleft().result()
            pending.extend(pool.submit(_worker_play_range, lo, hi) for lo, hi in islice(ranges, 1))
            yield chunk
    finally:
        pool.shutdown(cancel_futures=True)


# ---------------------------------------------------------------------------- the database

class _Tally:
    """What the summary reports, counted from the rows as they are written."""

    def __init__(self) -> None:
        self.battles = self.actions = 0
        self.kinds: Counter[str] = Counter()
        self.statuses: Counter[str] = Counter()
        self.broken: list[dict[str, str]] = []
        self.last_finished: datetime | None = None

    def add(self, played: Played) -> None:
        row = dict(zip(TABLE_COLUMNS["battles"], played.battle, strict=True))
        self.battles += 1
        self.actions += len(played.actions)
        self.kinds[f"{row['p1_kind']}-{row['p2_kind']}"] += 1
        self.statuses[played.status] += 1
        if played.defect is not None:
            self.broken.append({"battle_id": row["battle_id"], "defect": played.defect})
        if row["finished_at"] is not None and (self.last_finished is None or row["finished_at"] > self.last_finished):
            self.last_finished = row["finished_at"]


async def _connect(dsn: str) -> asyncpg.Connection:
    try:
        return await asyncpg.connect(dsn)
    except Exception as exc:  # whatever the cause, its text may quote the DSN: keep only the class
        raise FixtureConnectError(type(exc).__name__) from None


async def _create_schema(conn: asyncpg.Connection, reset: bool) -> None:
    """Create the four tables. Existing ones are dropped when empty or when ``reset`` is asked."""
    existing = [t for t in TABLE_COLUMNS if await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", t)]
    if not reset:
        filled = [t for t in existing if await conn.fetchval(f"SELECT EXISTS (SELECT 1 FROM {t})")]
        if filled:
            raise FixtureRefused(f"the production table(s) {', '.join(filled)} already hold rows; "
                                 "pass --reset (reset=True) to drop and rebuild them")
    if existing:
        await conn.execute("DROP TABLE " + ", ".join(existing))
    await conn.execute(DDL)


async def _fill(conn: asyncpg.Connection, plan: Plan, workers: int,
                progress: Callable[[int, int], None] | None) -> _Tally:
    tally = _Tally()
    with closing(played_chunks(plan, workers)) as chunks:  # a failed COPY cancels the queued chunks
        for chunk in chunks:
            await conn.copy_records_to_table("battles", records=[p.battle for p in chunk],
                                             columns=TABLE_COLUMNS["battles"])
            await conn.copy_records_to_table("battle_actions", records=[a for p in chunk for a in p.actions],
                                             columns=TABLE_COLUMNS["battle_actions"])
            for played in chunk:
                tally.add(played)
            if progress is not None:
                progress(tally.battles, plan.battles)
    return tally


async def _build(dsn: str, plan: Plan, workers: int, reset: bool,
                 progress: Callable[[int, int], None] | None) -> _Tally:
    conn = await _connect(dsn)
    try:
        async with conn.transaction():
            await _create_schema(conn, reset)
            return await _fill(conn, plan, workers, progress)
    finally:
        await conn.close()


def _summary(plan: Plan, players: int, tally: _Tally) -> dict[str, Any]:
    # The window ends at the first whole hour after the last finished battle.
    end = (tally.last_finished or plan.start).replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    return {
        "params": {"seed": plan.seed, "battles": plan.battles, "players": players, "days": plan.days,
                   "start": plan.start.isoformat()},
        "counts": {"battles": tally.battles, "actions": tally.actions, "kinds": dict(sorted(tally.kinds.items())),
                   "unfinished": tally.statuses["unfinished"], "late": tally.statuses["late"],
                   "late_actions": tally.statuses["late_actions"], "broken": len(tally.broken)},
        "broken": tally.broken,
        "window": {"start_at": plan.start.isoformat(), "end_at": end.isoformat()},
        "player_ids": list(plan.player_ids),
    }


def _check_args(battles: int, players: int, days: int, seed: int, start: datetime, workers: int) -> None:
    for name, value, low in (("battles", battles, len(DEFECTS)), ("players", players, 2), ("days", days, 1),
                             ("seed", seed, 0), ("workers", workers, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise InvalidArgument(f"{name} must be an integer >= {low}, got {value!r}")
    if seed >= 2**63:
        raise InvalidArgument(f"seed must be below 2**63, got {seed}")
    if start.tzinfo is None:
        raise InvalidArgument("start must be timezone-aware (e.g. 2026-01-01T00:00:00+00:00)")


def build_fixture(dsn: str, *, battles: int, players: int, days: int, seed: int,
                  start: datetime = DEFAULT_START, workers: int | None = None, reset: bool = False,
                  progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Create the production schema in ``dsn`` and fill it; returns the summary.

    Raises :class:`FixtureRefused` when the tables already hold rows and ``reset`` is false,
    :class:`FixtureConnectError` (exception class only) when the database cannot be reached.
    ``progress(done, total)`` is called with battles written.
    """
    workers = min(2, os.cpu_count() or 1) if workers is None else workers
    _check_args(battles, players, days, seed, start, workers)
    plan = make_plan(seed, battles, players, days, start.astimezone(timezone.utc))
    tally = asyncio.run(_build(dsn, plan, workers, reset, progress))
    return _summary(plan, players, tally)


# ---------------------------------------------------------------------------- CLI

def _parse_start(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO date or datetime: {text!r}") from None
    return value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m extrarlhf.production.fixture",
                                     description="Create the production schema in a database and fill it "
                                                 "with engine-played battles (a test backend).")
    parser.add_argument("--dsn-env", required=True, metavar="VAR",
                        help="name of the environment variable that holds the database DSN")
    parser.add_argument("--battles", type=int, required=True)
    parser.add_argument("--players", type=int, required=True)
    parser.add_argument("--days", type=int, required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--start", type=_parse_start, default=DEFAULT_START,
                        help="first possible battle start, ISO (default 2026-01-01, UTC when no offset)")
    parser.add_argument("--workers", type=int, default=None, help="processes playing battles (default min(2, cpus))")
    parser.add_argument("--reset", action="store_true", help="drop the four production tables first")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    return parser


def _public_summary(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary without the raw player ids (only their count)."""
    public = {k: v for k, v in summary.items() if k != "player_ids"}
    public["player_ids"] = len(summary["player_ids"])
    return public


def _readable(summary: dict[str, Any]) -> str:
    counts = summary["counts"]
    kinds = ", ".join(f"{pair} {n}" for pair, n in counts["kinds"].items())
    broken = ", ".join(f"{b['defect']} {b['battle_id']}" for b in summary["broken"])
    return "\n".join([
        f"battles {counts['battles']:,}  actions {counts['actions']:,}  players {len(summary['player_ids'])}",
        f"kinds: {kinds}",
        f"unfinished {counts['unfinished']}  late {counts['late']}  late_actions {counts['late_actions']}",
        f"broken {counts['broken']}: {broken}",
        f"window [{summary['window']['start_at']}, {summary['window']['end_at']})",
    ])


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    dsn = os.environ.get(args.dsn_env)
    if not dsn:
        print(f"error [invalid_argument]: the environment variable {args.dsn_env} is not set "
              "(it must hold the DSN of the database to fill)", file=sys.stderr)
        return 2
    try:
        summary = build_fixture(dsn, battles=args.battles, players=args.players, days=args.days, seed=args.seed,
                                start=args.start, workers=args.workers, reset=args.reset,
                                progress=ProgressLine("fixture"))
    except FixtureConnectError as exc:
        print(f"error [{exc.code}]: could not connect to the database named by ${args.dsn_env} "
              f"({exc.exception_class})", file=sys.stderr)
        return 2
    except RLHFError as exc:
        print(f"error [{exc.code}]: {exc}", file=sys.stderr)
        return 2
    except asyncpg.PostgresError as exc:  # server messages carry no DSN
        print(f"error [database_error]: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(_public_summary(summary), indent=2) if args.json else _readable(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
