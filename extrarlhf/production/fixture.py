"""The fixture backend (DESIGN section 10.1): a game backend's production database, really played.

``python -m extrarlhf.production.fixture --dsn-env VAR --battles N --players M --days D --seed S``
creates the production schema (schema.py) in the database whose DSN is in the environment
variable ``VAR`` and fills it with battles the engine actually played: humans play a mix of
the greedy baseline and random legal moves with sampled think times, bots and models
greedy/random variants; decks come from a seeded pool, each player favouring a few. Like a
real backend it has unfinished battles, late-ingested battles and actions, and a few
deliberately broken battles (each :data:`DEFECTS` kind at least once) that an export must
catch and exclude.

With ``--sessions-per-player K`` (``sessions_per_player=K``; 0 by default) it also fills
``player_sessions`` (about K sessions per player: lognormal lengths and gaps of hours to days,
players with one session only, last sessions still open, overlapping sessions, next sessions
starting at the very instant the previous ended, late-ingested sessions) and
``return_treatments`` (return nudges assigned after some session ends -- between the end and
the next start, at either boundary, after the next start, before the end, after the last
session -- whose status moved on after assignment, some rows ingested late). Each edge case is
forced on one player when there are enough players (SESSION_ROLES), so a tiny fixture has them
all. Player ``p``'s sessions and treatments draw only from ``default_rng([sessions seed, p])``;
with sessions, ``--battles 0`` is allowed.

``--seq-base B --seq-step K`` numbers each battle's actions B, B + K, ... (default 0, 1), as
backends that count from 1 or leave gaps do; only the ``seq`` column changes.

The rows depend only on (seed, battles, players, days, start, sessions_per_player, seq_base,
seq_step): every battle draws from its own generator ``numpy.random.default_rng([seed, index])`` (the battles
of a seed do not change with sessions_per_player) and the shared pools from
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
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from itertools import islice
from multiprocessing import get_context
from typing import Any, NamedTuple

import asyncpg
import numpy as np

import engine
from adapters.baselines import GreedyPolicy
from extrarlhf.core.errors import InvalidArgument, RLHFError
from extrarlhf.core.progress import ProgressLine

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

# Player sessions and return treatments (drawn only when sessions_per_player > 0).
SECOND_US, DAY_US = 1_000_000, 86_400 * 1_000_000
ONE_SESSION_SHARE = 0.05  # players who came once and never again
OPEN_SHARE = 0.03  # players whose last session is still open (ended_at NULL)
OVERLAP_SHARE = 0.01  # transitions where the next session starts before the previous ended
SAME_INSTANT_SHARE = 0.01  # transitions where the next session starts exactly at the previous ended_at
LATE_SESSION_SHARE = 0.02  # ended sessions ingested LATE_US after they ended
TREATED_PLAYER_SHARE = 0.5  # players in the return-nudge programme
TREAT_SESSION_SHARE = 0.3  # share of their ended sessions followed by a nudge
LATE_TREATMENT_SHARE = 0.05  # treatment rows ingested LATE_US after their last status update
TREATMENTS = ("push_reminder", "email_comeback", "daily_bonus")
TREATMENT_STATUSES = ("assigned", "sent", "delivered", "cancelled", "failed")
STATUS_SHARES = (0.08, 0.15, 0.55, 0.12, 0.10)
# Where assigned_at falls relative to the session whose end prompted the nudge (ended_at E, the
# player's next start N): before_end (< E), at_end (= E), between (E < t < N), at_next_start (= N),
# after_next_start (> N); after_last (> E, no next session). Drawn with these shares.
PLACEMENT_SHARES = (("between", 0.70), ("at_end", 0.06), ("at_next_start", 0.04), ("after_next_start", 0.12),
                    ("before_end", 0.08))
PLACEMENTS = ("before_end", "at_end", "between", "at_next_start", "after_next_start", "after_last")
# One player each (when players >= len(SESSION_ROLES) and sessions_per_player >= 2) is forced to
# show each edge case, so even a tiny fixture has every one of them.
SESSION_ROLES = ("one_session", "open", "overlap", "same_instant", "late_session",
                 *(f"treat_{p}" for p, _ in PLACEMENT_SHARES), "treat_late",
                 *(f"status_{s}" for s in TREATMENT_STATUSES))
CHUNK_PLAYERS = 2000  # players per worker task and per COPY batch

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
    sessions_per_player: int = 0  # mean sessions per player; 0: no sessions nor treatments
    session_roles: dict[int, str] = field(default_factory=dict)  # player index -> forced edge case
    seq_base: int = 0  # battle_actions.seq of a battle's first action
    seq_step: int = 1  # and the step between two actions (seq is an ordering key, not an index)


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


def make_plan(seed: int, battles: int, players: int, days: int, start: datetime,
              sessions_per_player: int = 0, seq_base: int = 0, seq_step: int = 1) -> Plan:
    decks = tuple(_deck(engine.random_deck(engine.SplitMix64(engine.derive_seed(seed, f"fixture:deck:{k}"))))
                  for k in range(DECK_POOL_SIZE))
    rng = np.random.default_rng(engine.derive_seed(seed, "fixture:players"))
    weights = 1.0 / np.arange(1, players + 1) ** 0.7
    player_decks = tuple(_favourite_decks(rng) for _ in range(players))
    return Plan(seed=seed, battles=battles, days=days, start=start, decks=decks,
                player_ids=tuple(player_id(seed, i) for i in range(players)),
                player_cdf=tuple(np.cumsum(weights / weights.sum()).tolist()),
                player_decks=player_decks, defects=_pick_defects(seed, battles),
                sessions_per_player=sessions_per_player,
                session_roles=_pick_session_roles(seed, players) if sessions_per_player else {},
                seq_base=seq_base, seq_step=seq_step)


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


def _pick_session_roles(seed: int, players: int) -> dict[int, str]:
    """Distinct players forced to show each edge case (as many roles as there are players)."""
    rng = np.random.default_rng(engine.derive_seed(seed, f"fixture:session-roles:{players}"))
    chosen = rng.permutation(players)[:len(SESSION_ROLES)].tolist()
    return {index: role for index, role in zip(chosen, SESSION_ROLES, strict=False)}


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
    actions = [(record["battle_id"], plan.seq_base + plan.seq_step * i, m.turn, m.player, m.action_id,
                m.decision_ms, _at(plan, acted_us[i]), _at(plan, ingested_us[1 + i]))
               for i, m in enumerate(moves)]
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


# ---------------------------------------------------------------------------- sessions and treatments

class SessionChunk(NamedTuple):
    """The session and treatment rows of a range of players and what the summary counts about them."""

    sessions: list[tuple]
    treatments: list[tuple]
    counts: Counter[str]
    last_us: int  # the latest session start or end, in microseconds after the start (-1: none)


def session_id(seed: int, player: int, index: int) -> str:
    return f"s-{seed}-{player:07d}-{index:05d}"


def assignment_id(seed: int, player: int, session_index: int) -> str:
    """At most one nudge per ended session: the id names the session that prompted it."""
    return f"t-{seed}-{player:07d}-{session_index:05d}"


def placement(assigned_us: int, ended_us: int, next_start_us: int | None) -> str:
    """Where an assignment falls relative to a session's end and the player's next start (PLACEMENTS)."""
    if assigned_us < ended_us:
        return "before_end"
    if assigned_us == ended_us:
        return "at_end"
    if next_start_us is None:
        return "after_last"
    if assigned_us < next_start_us:
        return "between"
    return "at_next_start" if assigned_us == next_start_us else "after_next_start"


def _session_seed(seed: int) -> int:
    return engine.derive_seed(seed, "fixture:sessions")


def player_session_rows(plan: Plan, player: int, counts: Counter[str]) -> tuple[list[tuple], list[tuple], int]:
    """Draw player ``player``'s sessions and treatments from ``default_rng([session seed, player])``.

    Returns (session rows, treatment rows, latest start/end in us) and adds to ``counts``.
    Sessions follow each other (lognormal lengths around 20 min, lognormal gaps scaled so the
    player's sessions fit in ``days``); a transition is an overlap (the next session starts
    inside the previous one and ends after it) or a same-instant restart now and then; the last
    session may be still open. Every later session starts after every earlier one ended, except
    for the overlap transitions.
    """
    rng = np.random.default_rng([_session_seed(plan.seed), player])
    role = plan.session_roles.get(player, "")
    spp, span = plan.sessions_per_player, plan.days * DAY_US
    u_one, u_open, u_programme, activity = rng.random(), rng.random(), rng.random(), rng.lognormal(0.0, 0.4)
    one = spp == 1 or role == "one_session" or (u_one < ONE_SESSION_SHARE and not role)
    n = 1 if one else max(2, 1 + int(rng.poisson(spp - 1)))
    lengths = np.clip(rng.lognormal(math.log(20 * 60), 0.8, size=n), 30, 6 * 3600) * SECOND_US
    gaps = rng.lognormal(math.log(0.4 * activity * span / spp), 1.0, size=n - 1)
    scale = min(1.0, 0.95 * span / (lengths.sum() + gaps.sum()))
    lengths_us = np.maximum((lengths * scale).astype(np.int64), SECOND_US).tolist()
    gaps_us = np.maximum((gaps * scale).astype(np.int64), SECOND_US).tolist()
    first = int(rng.integers(0, max(1, span - sum(lengths_us) - sum(gaps_us))))
    u_transition, fraction = rng.random(n - 1).tolist(), rng.uniform(0.2, 0.9, size=n - 1).tolist()
    u_late, jitter = rng.random(n).tolist(), rng.integers(500_000, 20 * SECOND_US, size=n).tolist()
    u_treat = rng.random(n).tolist()
    if n >= 2 and role:  # the first transition shows the role's edge case, or is a plain gap
        u_transition[0] = {"overlap": 0.0, "same_instant": OVERLAP_SHARE}.get(role, 1.0)
    starts, ends = [first], [first + lengths_us[0]]
    for i in range(1, n):
        prev_start, prev_end = starts[-1], ends[-1]
        if u_transition[i - 1] < OVERLAP_SHARE:
            start = min(prev_start + max(1, int((prev_end - prev_start) * fraction[i - 1])), prev_end - 1)
            end = max(start + lengths_us[i], prev_end + SECOND_US)
            counts["sessions_overlapping"] += 1
        else:
            same = u_transition[i - 1] < OVERLAP_SHARE + SAME_INSTANT_SHARE
            start = prev_end if same else prev_end + gaps_us[i - 1]
            end = start + lengths_us[i]
            counts["sessions_same_instant_next"] += same
        starts.append(start)
        ends.append(end)
    is_open = role == "open" or u_open < OPEN_SHARE
    ended: list[int | None] = list(ends)
    if is_open:
        ended[-1] = None
    sessions = []
    for i in range(n):
        if ended[i] is None:
            ingested = starts[i] + jitter[i]
        elif u_late[i] < LATE_SESSION_SHARE or (role == "late_session" and i == 0):
            ingested = ended[i] + LATE_US + jitter[i]
            counts["sessions_late"] += 1
        else:
            ingested = ended[i] + jitter[i]
        sessions.append((session_id(plan.seed, player, i), plan.player_ids[player], _at(plan, starts[i]),
                         None if ended[i] is None else _at(plan, ended[i]), _at(plan, ingested)))
    counts["sessions"] += n
    counts["sessions_open"] += is_open
    counts["one_session_players"] += n == 1
    forced = role.startswith(("treat_", "status_"))
    in_programme = forced or u_programme < TREATED_PLAYER_SHARE
    treatments = []
    for i in range(n):
        end = ended[i]
        if end is None or not in_programme or not (u_treat[i] < TREAT_SESSION_SHARE or (forced and i == 0)):
            continue
        forced_here = forced and i == 0
        next_start = starts[i + 1] if i + 1 < n else None
        kind = role[len("treat_"):] if forced_here and role.startswith("treat_") else None
        kind = kind if kind in dict(PLACEMENT_SHARES) else _draw(rng, PLACEMENT_SHARES)
        assigned = _assigned_at(rng, kind, starts[i], end, next_start)
        status = role[len("status_"):] if forced_here and role.startswith("status_") else \
            _draw(rng, tuple(zip(TREATMENT_STATUSES, STATUS_SHARES, strict=True)))
        updated = assigned if status == "assigned" else assigned + int(rng.lognormal(math.log(300 * SECOND_US), 1.0))
        if status == "delivered":
            updated += int(rng.lognormal(math.log(30 * SECOND_US), 1.0))
        ingested = updated + int(rng.integers(500_000, 20 * SECOND_US))
        if rng.random() < LATE_TREATMENT_SHARE or (forced_here and role == "treat_late"):
            ingested += LATE_US
            counts["treatments_late"] += 1
        treatments.append((assignment_id(plan.seed, player, i), plan.player_ids[player],
                           TREATMENTS[int(rng.integers(len(TREATMENTS)))], _at(plan, assigned), status,
                           _at(plan, updated), _at(plan, ingested)))
        counts["treatments"] += 1
        counts[f"status:{status}"] += 1
        counts[f"placement:{placement(assigned, end, next_start)}"] += 1
    return sessions, treatments, max(starts[-1], ends[-1] if not is_open else starts[-1])


def _draw(rng: np.random.Generator, shares: tuple[tuple[str, float], ...]) -> str:
    u = rng.random()
    for name, share in shares:
        if u < share:
            return name
        u -= share
    return shares[-1][0]


def _assigned_at(rng: np.random.Generator, kind: str, start: int, end: int, next_start: int | None) -> int:
    """An assignment time of the drawn ``kind`` (the time's actual placement is counted apart)."""
    v = rng.random()
    if kind == "before_end":
        return start + min(end - start - 1, max(0, int((end - start) * (0.1 + 0.8 * v))))
    if kind == "at_end":
        return end
    if next_start is None:  # after the player's last session: minutes to a day later
        return end + SECOND_US + int(v * DAY_US)
    if kind == "at_next_start":
        return next_start
    if kind == "after_next_start":
        return next_start + SECOND_US + int(v * 6 * 3600 * SECOND_US)
    if next_start <= end + 1:  # no room between (overlap or same instant): at the end
        return end
    return end + 1 + int(v * (min(next_start, end + 2 * DAY_US) - end - 1))


def session_range(plan: Plan, lo: int, hi: int) -> SessionChunk:
    sessions: list[tuple] = []
    treatments: list[tuple] = []
    counts: Counter[str] = Counter()
    last = -1
    for player in range(lo, hi):
        rows, nudges, player_last = player_session_rows(plan, player, counts)
        sessions.extend(rows)
        treatments.extend(nudges)
        last = max(last, player_last)
    return SessionChunk(sessions, treatments, counts, last)


# ---------------------------------------------------------------------------- many battles

def play_range(plan: Plan, lo: int, hi: int) -> list[Played]:
    return [play_battle(plan, index) for index in range(lo, hi)]


_WORKER_PLAN: Plan | None = None  # set once per worker process by _init_worker


def _init_worker(plan: Plan) -> None:
    global _WORKER_PLAN
    _WORKER_PLAN = plan


def _worker_range(fn: Callable[[Plan, int, int], Any], lo: int, hi: int) -> Any:
    assert _WORKER_PLAN is not None, "the worker was started without _init_worker"
    return fn(_WORKER_PLAN, lo, hi)


def _ordered_chunks(plan: Plan, workers: int, total: int, size: int,
                    fn: Callable[[Plan, int, int], Any]) -> Iterator[Any]:
    """``fn(plan, lo, hi)`` over ``[0, total)`` in chunks of ``size``, in index order, on ``workers`` processes.

    At most ``2 * workers`` chunks are in flight, so memory does not grow with the fixture.
    """
    ranges = ((lo, min(lo + size, total)) for lo in range(0, total, size))
    if workers == 1:
        yield from (fn(plan, lo, hi) for lo, hi in ranges)
        return
    pool = ProcessPoolExecutor(workers, mp_context=get_context("spawn"), initializer=_init_worker, initargs=(plan,))
    try:
        pending = deque(pool.submit(_worker_range, fn, lo, hi) for lo, hi in islice(ranges, 2 * workers))
        while pending:
            chunk = pending.popleft().result()
            pending.extend(pool.submit(_worker_range, fn, lo, hi) for lo, hi in islice(ranges, 1))
            yield chunk
    finally:
        pool.shutdown(cancel_futures=True)


def played_chunks(plan: Plan, workers: int) -> Iterator[list[Played]]:
    """Chunks of played battles in battle-index order, played on ``workers`` processes."""
    return _ordered_chunks(plan, workers, plan.battles, CHUNK_BATTLES, play_range)


def session_chunks(plan: Plan, workers: int) -> Iterator[SessionChunk]:
    """Chunks of player sessions and treatments in player-index order, drawn on ``workers`` processes."""
    total = len(plan.player_ids) if plan.sessions_per_player else 0
    return _ordered_chunks(plan, workers, total, CHUNK_PLAYERS, session_range)


# ---------------------------------------------------------------------------- the database

class _Tally:
    """What the summary reports, counted from the rows as they are written."""

    def __init__(self) -> None:
        self.battles = self.actions = 0
        self.kinds: Counter[str] = Counter()
        self.statuses: Counter[str] = Counter()
        self.broken: list[dict[str, str]] = []
        self.last_finished: datetime | None = None
        self.session_counts: Counter[str] = Counter()
        self.last_session_us = -1

    def add_sessions(self, chunk: SessionChunk) -> None:
        self.session_counts.update(chunk.counts)
        self.last_session_us = max(self.last_session_us, chunk.last_us)

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
                progress: Callable[[int, int], None] | None,
                session_progress: Callable[[int, int], None] | None = None) -> _Tally:
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
    with closing(session_chunks(plan, workers)) as chunks:
        done = 0
        for chunk in chunks:
            await conn.copy_records_to_table("player_sessions", records=chunk.sessions,
                                             columns=TABLE_COLUMNS["player_sessions"])
            await conn.copy_records_to_table("return_treatments", records=chunk.treatments,
                                             columns=TABLE_COLUMNS["return_treatments"])
            tally.add_sessions(chunk)
            done = min(done + CHUNK_PLAYERS, len(plan.player_ids))
            if session_progress is not None:
                session_progress(done, len(plan.player_ids))
    return tally


async def _build(dsn: str, plan: Plan, workers: int, reset: bool,
                 progress: Callable[[int, int], None] | None,
                 session_progress: Callable[[int, int], None] | None = None) -> _Tally:
    conn = await _connect(dsn)
    try:
        async with conn.transaction():
            await _create_schema(conn, reset)
            tally = await _fill(conn, plan, workers, progress, session_progress)
        # planner statistics, as a live database has them (autovacuum would take its time)
        await conn.execute("ANALYZE battles, battle_actions, player_sessions, return_treatments")
        return tally
    finally:
        await conn.close()


def _summary(plan: Plan, players: int, tally: _Tally) -> dict[str, Any]:
    # The window ends at the first whole hour after the last finished battle.
    # With sessions, the last session start or end counts too.
    last = tally.last_finished
    if tally.last_session_us >= 0:
        last = max(filter(None, (last, _at(plan, tally.last_session_us))))
    end = (last or plan.start).replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    c = tally.session_counts
    return {
        "params": {"seed": plan.seed, "battles": plan.battles, "players": players, "days": plan.days,
                   "start": plan.start.isoformat(), "sessions_per_player": plan.sessions_per_player,
                   "seq_base": plan.seq_base, "seq_step": plan.seq_step},
        "counts": {"battles": tally.battles, "actions": tally.actions, "kinds": dict(sorted(tally.kinds.items())),
                   "unfinished": tally.statuses["unfinished"], "late": tally.statuses["late"],
                   "late_actions": tally.statuses["late_actions"], "broken": len(tally.broken),
                   "sessions": {"total": c["sessions"], "open": c["sessions_open"],
                                "overlapping": c["sessions_overlapping"],
                                "same_instant_next": c["sessions_same_instant_next"],
                                "one_session_players": c["one_session_players"], "late": c["sessions_late"]},
                   "treatments": {"total": c["treatments"],
                                  "by_status": {s: c[f"status:{s}"] for s in TREATMENT_STATUSES},
                                  "by_placement": {p: c[f"placement:{p}"] for p in PLACEMENTS},
                                  "late": c["treatments_late"]}},
        "broken": tally.broken,
        "window": {"start_at": plan.start.isoformat(), "end_at": end.isoformat()},
        "player_ids": list(plan.player_ids),
    }


def _check_args(battles: int, players: int, days: int, seed: int, start: datetime, workers: int,
                sessions_per_player: int = 0, seq_base: int = 0, seq_step: int = 1) -> None:
    # Without sessions the fixture is its battles: at least one of each defect. With sessions,
    # battles may be 0 (a sessions-only fixture); any other count still carries every defect.
    min_battles = 0 if sessions_per_player and battles == 0 else len(DEFECTS)
    for name, value, low in (("battles", battles, min_battles), ("players", players, 2), ("days", days, 1),
                             ("seed", seed, 0), ("workers", workers, 1),
                             ("sessions_per_player", sessions_per_player, 0), ("seq_base", seq_base, 0),
                             ("seq_step", seq_step, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise InvalidArgument(f"{name} must be an integer >= {low}, got {value!r}")
    if seq_base > 2**30 or seq_step > 10_000:  # a battle's last seq stays far below 2**31 (seq is an integer)
        raise InvalidArgument(f"seq_base must be at most 2**30 and seq_step at most 10000, got {seq_base} and "
                              f"{seq_step}")
    if seed >= 2**63:
        raise InvalidArgument(f"seed must be below 2**63, got {seed}")
    if start.tzinfo is None:
        raise InvalidArgument("start must be timezone-aware (e.g. 2026-01-01T00:00:00+00:00)")


def build_fixture(dsn: str, *, battles: int, players: int, days: int, seed: int,
                  start: datetime = DEFAULT_START, workers: int | None = None, reset: bool = False,
                  progress: Callable[[int, int], None] | None = None, sessions_per_player: int = 0,
                  session_progress: Callable[[int, int], None] | None = None, seq_base: int = 0,
                  seq_step: int = 1) -> dict[str, Any]:
    """Create the production schema in ``dsn`` and fill it; returns the summary.

    ``sessions_per_player`` (mean sessions per player, 0 by default: no sessions, no
    treatments) also fills ``player_sessions`` and ``return_treatments``; then ``battles`` may
    be 0. ``seq_base``/``seq_step`` number each battle's actions ``seq_base, seq_base + seq_step,
    ...`` (default 0, 1): backends number from 1 or with gaps too, and nothing else changes. Raises :class:`FixtureRefused` when the tables already hold rows and ``reset`` is
    false, :class:`FixtureConnectError` (exception class only) when the database cannot be
    reached. ``progress(done, total)`` is called with battles written,
    ``session_progress(done, total)`` with players whose sessions are written.
    """
    workers = min(2, os.cpu_count() or 1) if workers is None else workers
    _check_args(battles, players, days, seed, start, workers, sessions_per_player, seq_base, seq_step)
    plan = make_plan(seed, battles, players, days, start.astimezone(timezone.utc), sessions_per_player, seq_base,
                     seq_step)
    tally = asyncio.run(_build(dsn, plan, workers, reset, progress, session_progress))
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
    parser.add_argument("--sessions-per-player", type=int, default=0, metavar="K",
                        help="mean player sessions per player (with return treatments); 0 (default): none. "
                             "With K > 0, --battles may be 0")
    parser.add_argument("--seq-base", type=int, default=0, metavar="N",
                        help="battle_actions.seq of each battle's first action (default 0; 1 as many backends do)")
    parser.add_argument("--seq-step", type=int, default=1, metavar="N",
                        help="step between two actions' seq (default 1; e.g. 10 for 10, 20, 30)")
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
        *_readable_sessions(counts),
        f"window [{summary['window']['start_at']}, {summary['window']['end_at']})",
    ])


def _readable_sessions(counts: dict[str, Any]) -> list[str]:
    sessions, treatments = counts["sessions"], counts["treatments"]
    if not sessions["total"]:
        return []
    statuses = ", ".join(f"{s} {n}" for s, n in treatments["by_status"].items())
    return [(f"sessions {sessions['total']:,}  open {sessions['open']}  overlapping {sessions['overlapping']}  "
             f"same_instant_next {sessions['same_instant_next']}  one_session_players "
             f"{sessions['one_session_players']}  late {sessions['late']}"),
            f"treatments {treatments['total']:,}  late {treatments['late']}  ({statuses})"]


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
                                progress=ProgressLine("fixture"), sessions_per_player=args.sessions_per_player,
                                session_progress=ProgressLine("fixture sessions", unit="players"),
                                seq_base=args.seq_base, seq_step=args.seq_step)
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
