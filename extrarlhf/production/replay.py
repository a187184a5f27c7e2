"""Production battles -> full V5 rows, by replaying their records with the engine.

A production battle is ``seed + decks + starting player + action ids``. :func:`replay_record`
plays the recorded actions on the engine, renders the battle's V5 trace in memory with the
same recorder as headless battles (trace.py), and reads it back into table rows with the same
code as local datasets (``datasets.battles.trace_rows``), so a production export has exactly
the layout, checks and features of a local one.

``battle_actions.seq`` is an ordering key, not an index: the actions are replayed in ``seq``
order whatever the numbering's base and spacing (0, 1, 2 / 1, 2, 3 / 10, 20, 30 / a shared
sequence with uneven steps). A missing action shows in the replay itself: each action's
recorded ``turn`` and ``player`` must be the replayed state's, the action must be legal there,
and the replay must end where the battle record does. A battle that does not replay to its
record is excluded with its reason, checked in this order:

- ``unfinished``       finished_at is NULL;
- ``unknown_ruleset``  a ruleset this engine does not play;
- ``invalid_record``   seat kinds, decks or starting player the engine refuses;
- ``missing_actions``  no action rows; the actions stop before the battle is over; an action
  recorded at a later turn than the replay has reached (the actions that ended the turns in
  between are absent); any failure (below too) after a hole in an evenly spaced numbering
  (see :func:`_hole`): then the detail names the hole first; or such a hole in a battle whose
  remaining actions still replay to the recorded end (issue 49: a hole is a missing action
  whether or not the replay notices; a backend numbering every battle's actions from one
  shared sequence rarely looks evenly spaced, and where it does a gap is read as a missing
  action: the battle is left out, never given wrong labels);
- ``illegal_action``   an action illegal in its state, recorded for the player not to move or
  for an earlier turn than the replay's, or after the battle ended;
- ``winner_mismatch`` / ``turns_mismatch``  the replay ends otherwise than recorded.

The reason is the replay's first failure; the detail says what was recorded and what the
replay gave, and names the hole when there is one.

:func:`replay_chunk` is the worker task (``extrarlhf.production.replay:replay_chunk``): a
list of records in, outcomes and Arrow record batches out.
"""

from __future__ import annotations

import hashlib
from typing import Any, NamedTuple

import engine

from ..datasets.battles import trace_rows
from ..runtime.trace import BattleRecorder

__all__ = ["BattleRecord", "replay_record", "replay_chunk", "plausible_labels", "PRODUCTION_GROUP", "ACTOR_TYPES",
           "EXCLUSION_REASONS"]

PRODUCTION_GROUP = "production"
# production seat kinds -> the actor types of V5 rows (a model plays as "rl", as in headless data)
ACTOR_TYPES = {"human": "human", "bot": "bot", "model": "rl"}
EXCLUSION_REASONS = ("unfinished", "unknown_ruleset", "invalid_record", "missing_actions", "illegal_action",
                     "winner_mismatch", "turns_mismatch")
AUDIT = {"not_a_label": True, "note": "replayed from production records: the observed timings are in the "
                                      "production_battles and metronome tables, not here"}


class BattleRecord(NamedTuple):
    """One production battle as read inside the snapshot (ids already keyed)."""

    index: int
    key: str
    ruleset: str
    seed: int
    decks: tuple[list[int], list[int]]
    deck_ids: tuple[str, str]
    starting_player: int
    kinds: tuple[str, str]
    players: tuple[str | None, str | None]  # pseudonyms
    finished: bool
    winner: int | None
    turns: int | None
    actions: list[tuple[int, int, int, int, int | None]]  # (seq, turn, player, action_id, decision_ms)
    audit: tuple = ()  # (started_at, finished_at, ingested_at, duration_seconds): never sent to the replay's output


class Excluded(Exception):
    """A battle left out: its reason, the detail in words and, for a failure at an action, the
    action's position in seq order (None: at the end of the replay)."""

    def __init__(self, reason: str, detail: str, position: int | None = None) -> None:
        super().__init__(detail)
        self.reason, self.detail, self.position = reason, detail, position


def _actor(kind: str) -> dict[str, Any]:
    return {"type": ACTOR_TYPES.get(kind, kind), "kind": kind, "spec": None, "weights_hash": None, "codename": None}


def _new_state(record: BattleRecord) -> engine.State:
    if record.ruleset != engine.RULESET:
        raise Excluded("unknown_ruleset", f"ruleset {record.ruleset!r}; this engine plays {engine.RULESET}")
    if any(kind not in ACTOR_TYPES for kind in record.kinds):
        raise Excluded("invalid_record", f"seat kinds {list(record.kinds)}; expected human, bot or model")
    try:
        return engine.new_battle(record.seed, list(record.decks[0]), list(record.decks[1]), record.starting_player)
    except (engine.EngineError, TypeError, ValueError) as exc:
        raise Excluded("invalid_record", f"the engine refuses its setup: {exc}") from None


def _hole(seqs: list[int], upto: int | None) -> tuple[int, int] | None:
    """The first hole in ``seqs[:upto + 1]`` (None: all of them) when the battle's numbering is
    evenly spaced: every step a multiple of the smallest step ``d`` and at least half of them
    ``d``, so a step of ``k*d`` means ``k - 1`` numbers never arrived. An uneven numbering (a
    sequence shared by every battle) has no holes to read: then only the replay speaks."""
    steps = [b - a for a, b in zip(seqs, seqs[1:])]
    if not steps:
        return None
    d = min(steps)
    if d <= 0 or any(step % d for step in steps) or 2 * steps.count(d) < len(steps):
        return None
    last = len(steps) if upto is None else min(upto, len(steps))
    return next(((seqs[i], seqs[i + 1]) for i in range(last) if steps[i] > d), None)


def _replay_actions(record: BattleRecord, state: engine.State, recorder: BattleRecorder,
                    actors: dict[int, dict[str, Any]]) -> None:
    """Apply the recorded actions in seq order; the first disagreement with the replay raises."""
    for position, (seq, turn, player, action_id, _ms) in enumerate(record.actions):
        if state.is_terminal:
            raise Excluded("illegal_action", f"action seq {seq} comes after the battle ended (turn {state.turn})",
                           position)
        if turn > state.turn:
            raise Excluded("missing_actions", f"action seq {seq} is recorded at turn {turn} but the actions before "
                                              f"it reach only turn {state.turn}: the actions that end turn "
                                              f"{state.turn} are missing", position)
        if turn != state.turn or player != state.to_move:
            raise Excluded("illegal_action", f"action seq {seq} is recorded at turn {turn} for player {player} but "
                                             f"the replay is at turn {state.turn} with player {state.to_move} to "
                                             f"move", position)
        before = state.clone()
        try:
            events = state.apply(action_id)
        except engine.IllegalActionError as exc:
            raise Excluded("illegal_action", f"action seq {seq} (id {action_id}) is illegal: {exc}",
                           position) from None
        recorder.record(before, action_id, events, actors[player], latency_s=0.0)
    if not state.is_terminal:
        raise Excluded("missing_actions", f"the {len(record.actions)} recorded actions stop at turn {state.turn} "
                                          f"before the battle is over")
    if state.winner != record.winner:
        raise Excluded("winner_mismatch", f"recorded winner {record.winner}; the replay gives {state.winner}")
    if state.turn != record.turns:
        raise Excluded("turns_mismatch", f"recorded {record.turns} turns; the replay gives {state.turn}")


def _play(record: BattleRecord) -> tuple[engine.State, dict[str, bytes]]:
    if not record.finished:
        raise Excluded("unfinished", "finished_at is NULL: still running or never closed by the backend")
    state = _new_state(record)
    actions = record.actions
    if not actions:
        raise Excluded("missing_actions", "no action rows (none recorded, or none ingested before the cut-off)")
    actors = {1: _actor(record.kinds[0]), 2: _actor(record.kinds[1])}
    types = [actors[1]["type"], actors[2]["type"]]
    header = {
        "battle_id": record.key, "group": PRODUCTION_GROUP, "index": record.index, "seed": record.seed,
        "ruleset": engine.RULESET, "engine_version": engine.ENGINE_VERSION, "obs_version": engine.OBS_VERSION,
        "state_schema_version": engine.STATE_SCHEMA_VERSION,
        "decks": {"p1": list(state.decks[0]), "p2": list(state.decks[1])},
        "deck_ids": {"p1": engine.deck_id(state.decks[0]), "p2": engine.deck_id(state.decks[1])},
        "starting_player": state.starting_player, "p1_actor_type": types[0],
        "battle_tag": f"{types[0]}-vs-{types[1]}", "codename": None, "actors": {"p1": actors[1], "p2": actors[2]},
    }
    recorder = BattleRecorder(header, state)
    try:
        _replay_actions(record, state, recorder, actors)
    except Excluded as exc:
        hole = _hole([a[0] for a in actions], exc.position)
        if hole is None:
            raise
        raise Excluded("missing_actions", f"the numbering skips from seq {hole[0]} to seq {hole[1]}, so the "
                                          f"action(s) between them are missing; the replay then fails: "
                                          f"{exc.detail}") from None
    hole = _hole([a[0] for a in actions], None)
    if hole is not None:  # the replay of what is left works, but an action is still missing
        raise Excluded("missing_actions", f"the numbering skips from seq {hole[0]} to seq {hole[1]}, so the "
                                          f"action(s) between them are missing (the {len(actions)} recorded "
                                          f"actions still replay to the recorded end)", len(actions) - 1)
    return state, recorder.finish(state, "finished", audit=AUDIT)


def replay_record(record: BattleRecord) -> tuple[dict[str, Any] | None, tuple[str, str] | None]:
    """(rows as ``trace_rows`` gives them, None) for a battle that replays to its record, else
    (None, (reason, detail))."""
    try:
        _state, files = _play(record)
    except Excluded as exc:
        return None, (exc.reason, exc.detail)
    digests = {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}
    rows = trace_rows(files, PRODUCTION_GROUP, record.key, record.index, f"production battle {record.key}", digests)
    return rows, None


def _metronome(record: BattleRecord, first_row: int, out: dict[str, list]) -> None:
    """The Metronome labels of one battle (its decisions from ``first_row`` of the decisions
    batch): one per human decision with an observed think time."""
    for i, (_seq, _turn, player, _action, ms) in enumerate(record.actions):
        if ms is None or record.kinds[player - 1] != "human":
            continue
        out["row"].append(first_row + i)
        out["player_pseudonym"].append(record.players[player - 1])
        out["opponent_kind"].append(record.kinds[2 - player])
        out["decision_ms"].append(ms)


def plausible_labels(metronome: Any, min_ms: int, max_ms: int) -> tuple[Any, Any]:
    """(the ``metronome`` rows whose ``decision_ms`` is within ``[min_ms, max_ms]``, the
    ``metronome_excluded`` rows of the others, with their reason): an implausible think time
    stays in the export for audit but is never a label."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from ..datasets.tables import SCHEMAS

    ms = metronome.column("decision_ms")
    low, high = pc.less(ms, min_ms), pc.greater(ms, max_ms)
    out = pc.or_(low, high)
    rejected = metronome.filter(out)
    reason = pc.if_else(low.filter(out), "below_min_decision_ms", "above_max_decision_ms")
    columns = [reason if f.name == "reason" else rejected.column(f.name) for f in SCHEMAS["metronome_excluded"]]
    return (metronome.filter(pc.invert(out)),
            pa.RecordBatch.from_arrays(columns, schema=SCHEMAS["metronome_excluded"]))


def replay_chunk(records: list[BattleRecord]) -> tuple[list[tuple[str, str] | None], dict[str, Any]]:
    """The worker task: per record its exclusion (or None when included), and the record
    batches ``decisions``, ``turns``, ``battles`` and ``metronome`` of the included ones."""
    import pyarrow as pa

    from ..datasets.row_batches import battle_batches
    from ..datasets.tables import SCHEMAS

    outcomes: list[tuple[str, str] | None] = []
    included: list[dict[str, Any]] = []
    labels: dict[str, list] = {"row": [], "player_pseudonym": [], "opponent_kind": [], "decision_ms": []}
    first_row = 0
    for record in records:
        rows, excluded = replay_record(record)
        outcomes.append(excluded)
        if rows is not None:
            included.append(rows)
            _metronome(record, first_row, labels)
            first_row += rows["decisions"]
    batches = battle_batches(included)
    decisions = batches["decisions"]
    rows_taken = pa.array(labels["row"], pa.int64())
    arrays = [pa.array(labels[f.name], f.type) if f.name in labels else decisions.column(f.name).take(rows_taken)
              for f in SCHEMAS["metronome"]]
    batches["metronome"] = pa.RecordBatch.from_arrays(arrays, schema=SCHEMAS["metronome"])
    return outcomes, batches
