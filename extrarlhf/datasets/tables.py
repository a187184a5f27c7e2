"""Column schemas of every dataset table, and a streaming Parquet writer.

Each table is declared once, as ``(name, arrow type, nullable, description)`` rows: the
Arrow schema, the manifest's ``columns`` block and the validator's expectations all come
from here. Bump DATASET_SCHEMA_VERSION when a table changes shape or meaning, and say what
changed in FORMAT_CHANGES (readers refuse older versions with that sentence).

Every vector whose size is fixed is an Arrow ``FixedSizeList`` (``observation``: OBS_DIM floats,
each legal action's feature row: ACTION_FEATURE_DIM floats, a deck: DECK_SIZE card ids), so
pyarrow, pandas and polars read arrays of that shape (the size travels in the Arrow schema the
Parquet file embeds).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
import weakref
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

import engine
from adapters import work

from ..core.errors import InvalidArgument

DATASET_SCHEMA_VERSION = 2
FORMAT_CHANGES = {
    2: "decks (battles.p1_deck/p2_deck, timestamp inputs' p1_deck/p2_deck) became "
       "fixed_size_list<int16>[30] instead of variable-length lists",
}
COMPRESSION = "zstd"
COMPRESSION_LEVEL = 1



def _list(item: pa.DataType, size: int = -1) -> pa.DataType:
    """A list type whose child is named ``element``, as Parquet's compliant nested types read back."""
    return pa.list_(pa.field("element", item), size)


OBS = _list(pa.float32(), engine.OBS_DIM)
ACTION_FEATURES = _list(pa.float32(), engine.ACTION_FEATURE_DIM)
DECK = _list(pa.int16(), engine.DECK_SIZE)

_ACTOR = "who acted"

DECISIONS = [
    ("battle_id", pa.string(), False, "battle the decision belongs to"),
    ("group", pa.string(), False, "session group of the battle"),
    ("battle_index", pa.int32(), False, "index of the battle in its group"),
    ("decision_index", pa.int32(), False, "0-based position of the decision in its battle (contiguous)"),
    ("turn", pa.int16(), False, "battle turn of the decision"),
    ("player", pa.int8(), False, "acting player, 1 or 2"),
    ("actor_type", pa.string(), False, "acting actor's type: human, llm, rl (player 1) or bot, rl (player 2)"),
    ("actor_spec", pa.string(), True, "acting policy's registry spec; null for a human or LLM"),
    ("actor_kind", pa.string(), False, "acting actor's adapter kind (baseline, v5, ...; human/llm for those)"),
    ("actor_weights_hash", pa.string(), True, "sha256 of the acting model's weights; null for baselines/humans"),
    ("actor_codename", pa.string(), True, "codename of the worker that played player 1; null otherwise"),
    ("opponent_type", pa.string(), False, "the other seat's actor type"),
    ("opponent_spec", pa.string(), True, "the other seat's registry spec"),
    ("opponent_kind", pa.string(), False, "the other seat's adapter kind"),
    ("opponent_weights_hash", pa.string(), True, "the other seat's weights hash"),
    ("battle_tag", pa.string(), False, "match kind, {p1_actor_type}-vs-{bot|rl}"),
    ("own_deck_id", pa.string(), False, "deck id of the acting player"),
    ("opponent_deck_id", pa.string(), False, "deck id of the other player"),
    ("state_hash_before", pa.string(), False,
     "hash of the omniscient state the decision was taken in (verified against the recorded state)"),
    ("obs_version", pa.int16(), False, "layout version of observation (engine.OBS_VERSION)"),
    ("observation", OBS, False, "acting player's observation, float32[OBS_DIM], no hidden information"),
    ("legal_action_ids", _list(pa.int16()), False, "legal action ids, ascending"),
    ("legal_action_features", _list(ACTION_FEATURES), False,
     "features of each legal action, float32[len(legal)][ACTION_FEATURE_DIM], same order as legal_action_ids"),
    ("action_id", pa.int16(), False, "the chosen action id"),
    ("action_index", pa.int16(), False, "position of action_id in legal_action_ids (the imitation label)"),
    ("rationale", pa.string(), True, "free-text rationale of a human or LLM move; null otherwise"),
    ("policy_probabilities", _list(pa.float32()), True,
     "policy probabilities over the legal actions when the actor reported them; null otherwise"),
    ("policy_value", pa.float32(), True, "policy value estimate when reported; null otherwise"),
    ("policy_json", pa.string(), True, "the full recorded policy object as JSON; null when none"),
    ("winner", pa.int8(), False, "battle winner: 0 draw, 1 or 2"),
    ("outcome", pa.int8(), False, "result from the acting player's view: 1 win, 0 draw, -1 loss"),
]

TURNS = [
    ("battle_id", pa.string(), False, "battle the turn belongs to"),
    ("group", pa.string(), False, "session group of the battle"),
    ("turn", pa.int16(), False, "turn number (1..60; both players' turns count)"),
    ("active_player", pa.int8(), False, "player whose turn it is"),
    ("decisions", pa.int32(), False, "decisions taken in the turn"),
    ("events", pa.int32(), False, "number of engine events in the turn"),
    ("state_start_hash", pa.string(), False, "hash of the state when the turn's first decision was due (verified)"),
    ("state_end_hash", pa.string(), False, "hash of the state when the turn ended (verified)"),
    ("events_json", pa.string(), False, "the turn's engine events, JSON array"),
    ("state_start_json", pa.string(), False, "omniscient state at the turn's start, canonical JSON"),
    ("state_end_json", pa.string(), False, "omniscient state at the turn's end, canonical JSON"),
]

BATTLES = [
    ("battle_id", pa.string(), False, "the battle"),
    ("group", pa.string(), False, "its session group"),
    ("battle_index", pa.int32(), False, "its index in the group"),
    ("seed", pa.int64(), False, "battle seed (with decks and starting player it determines the battle)"),
    ("ruleset", pa.string(), False, "ruleset, arena-1"),
    ("engine_version", pa.string(), False, "engine that played"),
    ("obs_version", pa.int16(), False, "observation layout of its decisions"),
    ("battle_tag", pa.string(), False, "match kind"),
    ("p1_type", pa.string(), False, "player 1's actor type"),
    ("p1_spec", pa.string(), True, "player 1's registry spec"),
    ("p1_kind", pa.string(), False, "player 1's adapter kind"),
    ("p1_weights_hash", pa.string(), True, "player 1's weights hash"),
    ("p1_codename", pa.string(), True, "codename of the worker that played player 1"),
    ("p2_type", pa.string(), False, "player 2's actor type"),
    ("p2_spec", pa.string(), True, "player 2's registry spec"),
    ("p2_kind", pa.string(), False, "player 2's adapter kind"),
    ("p2_weights_hash", pa.string(), True, "player 2's weights hash"),
    ("starting_player", pa.int8(), False, "player who took turn 1"),
    ("p1_deck", DECK, False, "player 1's 30 card ids"),
    ("p2_deck", DECK, False, "player 2's 30 card ids"),
    ("p1_deck_id", pa.string(), False, "player 1's deck id"),
    ("p2_deck_id", pa.string(), False, "player 2's deck id"),
    ("status", pa.string(), False, "always finished in a training table"),
    ("winner", pa.int8(), False, "0 draw, 1 or 2"),
    ("reason", pa.string(), False, "end reason"),
    ("turns", pa.int16(), False, "turns played (= its rows in turns)"),
    ("decisions", pa.int32(), False, "decisions (= its rows in decisions)"),
    ("degraded", pa.bool_(), False, "always false in a training table"),
    ("omniscient_peeks", pa.int32(), False, "times the omniscient view was shown mid-battle: always 0 in a training table"),
    ("policy_warnings", pa.int32(), False, "policy warnings recorded (0 when not degraded)"),
    ("final_state_hash", pa.string(), False, "hash of the battle's last state"),
    ("replay_verified", pa.bool_(), False,
     "the decisions replayed on this engine to the recorded final state (features then come from the replay, "
     "which equals the recorded states)"),
    ("meta_sha256", pa.string(), False, "sha256 of the source meta.jsonl (equals its catalog line)"),
    ("turns_sha256", pa.string(), False, "sha256 of the source turns.jsonl"),
    ("actions_sha256", pa.string(), False, "sha256 of the source actions.jsonl"),
]

EXCLUDED = [
    ("battle_id", pa.string(), False, "a battle of the source groups left out of the training tables"),
    ("group", pa.string(), False, "its session group"),
    ("battle_index", pa.int32(), False, "its index in the group"),
    ("status", pa.string(), False, "its folded catalog status"),
    ("reason", pa.string(), False, "why: unfinished, abandoned, crashed, degraded, omniscient_peek or integrity"),
    ("detail", pa.string(), False, "the reason in words"),
    ("decisions", pa.int32(), True, "its decisions, when it has a trace"),
]

ASSIGNMENTS = [
    ("group_key", pa.string(), False, "the split group key (battle id for V5 and for Nemesis by default, "
                                      "opponent deck id for Nemesis with group_by=\"opponent_deck\")"),
    ("split", pa.string(), False, "train, val or test"),
    ("bucket", pa.float64(), False, "keyed-hash bucket in [0, 1) the split was read from"),
    ("rows", pa.int64(), False, "rows of this group in the split files"),
]

NEMESIS = [
    ("battle_id", pa.string(), False, "battle of the row"),
    ("group", pa.string(), False, "session group"),
    ("decision_index", pa.int32(), False, "the viewer's decision the row is taken at"),
    ("turn", pa.int16(), False, "its turn"),
    ("viewer", pa.int8(), False, "the player whose public view is the input (the acting player)"),
    ("viewer_type", pa.string(), False, "the viewer's actor type"),
    ("opponent", pa.int8(), False, "the player whose next action is predicted"),
    ("opponent_type", pa.string(), False, "the opponent's actor type (human, bot, rl, llm)"),
    ("opponent_spec", pa.string(), True, "the opponent's registry spec"),
    ("opponent_kind", pa.string(), False, "the opponent's adapter kind"),
    ("battle_tag", pa.string(), False, "match kind"),
    ("viewer_deck_id", pa.string(), False, "the viewer's deck id"),
    ("opponent_deck_id", pa.string(), False, "the opponent's deck id: the split group key"),
    ("obs_version", pa.int16(), False, "observation layout"),
    ("observation", OBS, False, "the viewer's observation at its decision (its public view)"),
    ("target_action_id", pa.int16(), False, "the opponent's next action (0..162): the label"),
    ("target_decision_index", pa.int32(), False, "decision index of that action"),
    ("target_turn", pa.int16(), False, "turn of that action"),
]

# ------------------------------------------------------------------ production exports (DESIGN 10.1)
_UTC = pa.timestamp("us", tz="UTC")

PRODUCTION_EXCLUDED = [
    ("battle_id", pa.string(), False, "the production battle's keyed id (b-..., never the backend's id)"),
    ("reason", pa.string(), False, "why it is out of the training tables: unfinished, unknown_ruleset, invalid_record, "
                                   "missing_actions, illegal_action, winner_mismatch or turns_mismatch"),
    ("detail", pa.string(), False, "the reason in words (which action, what was recorded, what the replay gave)"),
    ("p1_kind", pa.string(), False, "player 1's kind in production: human, bot or model"),
    ("p2_kind", pa.string(), False, "player 2's kind in production: human, bot or model"),
    ("actions", pa.int32(), False, "action rows read for it"),
]

PRODUCTION_BATTLES = [
    ("battle_id", pa.string(), False, "the production battle's keyed id (b-...)"),
    ("included", pa.bool_(), False, "true when it replayed and sits in battles/decisions/turns; else see excluded"),
    ("p1_kind", pa.string(), False, "player 1's kind: human, bot or model"),
    ("p2_kind", pa.string(), False, "player 2's kind: human, bot or model"),
    ("p1_player", pa.string(), True, "player 1's pseudonym (p-..., keyed HMAC; null for bots and models)"),
    ("p2_player", pa.string(), True, "player 2's pseudonym (null for bots and models)"),
    ("p1_deck_id", pa.string(), False, "player 1's deck id as recorded"),
    ("p2_deck_id", pa.string(), False, "player 2's deck id as recorded"),
    ("starting_player", pa.int8(), False, "player who took turn 1"),
    ("started_at", _UTC, False, "audit: when the battle started"),
    ("finished_at", _UTC, True, "audit: when it finished (null: unfinished)"),
    ("ingested_at", _UTC, False, "audit: when the battle row reached the database"),
    ("duration_seconds", pa.float64(), True, "TimeStamp label: observed battle duration (null: unfinished)"),
    ("recorded_winner", pa.int8(), True, "winner recorded by the backend (0 draw, 1, 2; null: unfinished)"),
    ("recorded_turns", pa.int16(), True, "turns recorded by the backend (TimeStamp label)"),
    ("actions", pa.int32(), False, "action rows read for it"),
]

METRONOME = [
    ("battle_id", pa.string(), False, "battle of the decision (keyed id)"),
    ("decision_index", pa.int32(), False, "position of the decision in its battle (joins decisions)"),
    ("turn", pa.int16(), False, "battle turn of the decision"),
    ("player", pa.int8(), False, "acting player, 1 or 2 (a human)"),
    ("player_pseudonym", pa.string(), True, "the acting human's pseudonym (p-...)"),
    ("opponent_kind", pa.string(), False, "the other seat's kind: human, bot or model"),
    ("own_deck_id", pa.string(), False, "deck id of the acting player"),
    ("opponent_deck_id", pa.string(), False, "deck id of the other player"),
    ("obs_version", pa.int16(), False, "layout version of observation"),
    ("observation", OBS, False, "the acting player's observation: its public inputs, float32[OBS_DIM]"),
    ("legal_action_ids", _list(pa.int16()), False, "legal action ids, ascending"),
    ("action_id", pa.int16(), False, "the chosen action id"),
    ("action_index", pa.int16(), False, "position of action_id in legal_action_ids"),
    ("decision_ms", pa.int32(), False, "Metronome label: the observed human think time in milliseconds"),
]

METRONOME_EXCLUDED = [
    ("battle_id", pa.string(), False, "battle of the decision (keyed id)"),
    ("decision_index", pa.int32(), False, "position of the decision in its battle (joins decisions)"),
    ("turn", pa.int16(), False, "battle turn of the decision"),
    ("player", pa.int8(), False, "acting player, 1 or 2 (a human)"),
    ("player_pseudonym", pa.string(), True, "the acting human's pseudonym (p-...)"),
    ("decision_ms", pa.int32(), False, "audit: the think time as recorded, outside the plausible bounds"),
    ("reason", pa.string(), False, "below_min_decision_ms or above_max_decision_ms (the export's readiness policy): "
                                   "never a Metronome label"),
]

TIMESTAMP_INPUTS = [
    ("battle_id", pa.string(), False, "this dataset's own keyed id of the battle (t-...): joins its labels and "
                                      "audit, nothing of any other dataset"),
    ("p1_deck", DECK, False, "player 1's 30 card ids"),
    ("p2_deck", DECK, False, "player 2's 30 card ids"),
    ("p1_deck_id", pa.string(), False, "player 1's deck id"),
    ("p2_deck_id", pa.string(), False, "player 2's deck id"),
    ("starting_player", pa.int8(), False, "player who takes turn 1"),
    ("p1_mean_cost", pa.float32(), False, "approved prebattle feature: mean mana cost of player 1's deck"),
    ("p2_mean_cost", pa.float32(), False, "approved prebattle feature: mean mana cost of player 2's deck"),
    ("p1_creatures", pa.int8(), False, "approved prebattle feature: creature cards in player 1's deck"),
    ("p2_creatures", pa.int8(), False, "approved prebattle feature: creature cards in player 2's deck"),
]

TIMESTAMP_LABELS = [
    ("battle_id", pa.string(), False, "the row's keyed id (t-..., as in inputs)"),
    ("duration_seconds", pa.float64(), False, "label: observed battle duration in seconds"),
    ("turns", pa.int16(), False, "label: turns the battle lasted"),
]

TIMESTAMP_AUDIT = [
    ("battle_id", pa.string(), False, "the row's keyed id (t-..., as in inputs)"),
    ("started_at", _UTC, False, "when the battle started"),
    ("finished_at", _UTC, False, "when it finished"),
    ("ingested_at", _UTC, False, "when its row reached the database"),
]

RETURNCLOCK = [
    ("player", pa.string(), False, "the player's pseudonym (p-..., keyed HMAC): the split group key"),
    ("session_key", pa.string(), False, "keyed id of the session whose end starts the clock (s-...)"),
    ("started_at", _UTC, False, "when that session started"),
    ("ended_at", _UTC, False, "when it ended: the clock starts here"),
    ("next_start", _UTC, True, "the player's next session start before end_at (null: censored)"),
    ("duration_seconds", pa.float64(), False, "next_start - ended_at (event) or end_at - ended_at (censored); > 0"),
    ("event", pa.int8(), False, "1 the player returned before end_at, 0 censored at end_at"),
    ("session_seconds", pa.float64(), False, "covariate known at ended_at: ended_at - started_at"),
    ("end_hour_utc", pa.float64(), False, "covariate known at ended_at: hour of day of ended_at, UTC, 0..24"),
    ("treated", pa.bool_(), False, "a treatment was assigned to the player in [ended_at, min(next_start, end_at))"),
    ("treatments", pa.int16(), False, "audit: how many such assignments"),
    ("treatment", pa.string(), True, "audit: the first such assignment's treatment"),
    ("treatment_status", pa.string(), True, "audit: its status in the snapshot (assigned, sent, delivered, ...)"),
    ("exposed", pa.bool_(), False, "audit: any such assignment is sent or delivered"),
]

RETURNCLOCK_EXCLUDED = [
    ("player", pa.string(), False, "the player's pseudonym"),
    ("session_key", pa.string(), False, "keyed id of a session that ended in the window but gives no row"),
    ("ended_at", _UTC, False, "when it ended"),
    ("reason", pa.string(), False, "overlapped: another session of the player was running at its end (or started "
                                   "at that very instant), so the player did not leave; ended_before_start: its "
                                   "ended_at is before its started_at (a backend error)"),
]

RETURNCLOCK_TRAIN = [
    ("player", pa.string(), False, "the player's pseudonym: the split group key"),
    ("session_key", pa.string(), False, "keyed id of the session whose end starts the clock"),
    ("duration_seconds", pa.float64(), False, "lifelines duration: > 0"),
    ("event", pa.int8(), False, "lifelines event: 1 returned, 0 censored"),
    ("session_seconds", pa.float64(), False, "covariate: length of the session that ended"),
    ("end_hour_utc", pa.float64(), False, "covariate: hour of day (UTC) of the session end"),
]

PREFERENCES = [
    ("task_id", pa.string(), False, "the judgment task (one decision point and two candidate actions)"),
    ("pool", pa.string(), False, "preference pool the task was sampled into"),
    ("source", pa.string(), False, "where the two candidates came from: search_top2 or 'A vs B'"),
    ("source_dataset", pa.string(), False, "V5 dataset id the decision point was sampled from"),
    ("battle_id", pa.string(), False, "battle of the decision point (the split group key)"),
    ("group", pa.string(), False, "session group of that battle"),
    ("decision_index", pa.int32(), False, "position of the decision in its battle"),
    ("turn", pa.int16(), False, "battle turn of the decision"),
    ("player", pa.int8(), False, "acting player, 1 or 2: the side the judge saw"),
    ("state_hash", pa.string(), False, "hash of the state (verified by replay when the pool was made)"),
    ("board", pa.string(), False, "the acting player's view the judge was shown (no hidden information)"),
    ("a_action_id", pa.int16(), False, "candidate A's action id"),
    ("b_action_id", pa.int16(), False, "candidate B's action id (never equal to A's)"),
    ("a_description", pa.string(), False, "candidate A as the judge read it"),
    ("b_description", pa.string(), False, "candidate B as the judge read it"),
    ("a_origin", pa.string(), False, "who proposed A (search:top1, a spec, recorded); not shown to the judge"),
    ("b_origin", pa.string(), False, "who proposed B; not shown to the judge"),
    ("observation", OBS, False, "acting player's observation in the state, float32[OBS_DIM]"),
    ("a_features", ACTION_FEATURES, False, "candidate A's action features, float32[ACTION_FEATURE_DIM]"),
    ("b_features", ACTION_FEATURES, False, "candidate B's action features, float32[ACTION_FEATURE_DIM]"),
    ("choice", pa.string(), False, "the judgment: A, B or tie (skips are not rows)"),
    ("judge", pa.string(), False, "keyed pseudonym of the judge"),
    ("judge_kind", pa.string(), False, "human (arena), llm (MCP) or synthetic"),
    ("reason", pa.string(), True, "the judge's optional reason"),
    ("think_ms", pa.int64(), True, "time from showing to answer (observed, provenance: judging; not production)"),
    ("judged_at", pa.string(), False, "UTC time of the judgment"),
    ("consensus", pa.string(), True, "the strict-majority answer of the kept judges on this task (A, B or tie); "
                                     "null when fewer than two answered or none has a majority"),
    ("consensus_ds", pa.string(), True, "the Dawid-Skene estimate from the kept judges' answers (per-judge "
                                        "confusion over A, B, tie; gold answers anchor it); null when fewer than two "
                                        "kept judges answered"),
    ("consensus_judges", pa.int16(), False, "how many kept judges answered this task"),
]

TABLES = {"decisions": DECISIONS, "turns": TURNS, "battles": BATTLES, "excluded": EXCLUDED,
          "assignments": ASSIGNMENTS, "nemesis": NEMESIS, "production_excluded": PRODUCTION_EXCLUDED,
          "production_battles": PRODUCTION_BATTLES, "metronome": METRONOME,
          "metronome_excluded": METRONOME_EXCLUDED, "timestamp_inputs": TIMESTAMP_INPUTS,
          "timestamp_labels": TIMESTAMP_LABELS, "timestamp_audit": TIMESTAMP_AUDIT,
          "returnclock": RETURNCLOCK, "returnclock_excluded": RETURNCLOCK_EXCLUDED,
          "returnclock_train": RETURNCLOCK_TRAIN, "preferences": PREFERENCES}


def schema_of(columns: list[tuple]) -> pa.Schema:
    return pa.schema([pa.field(name, typ, nullable=nullable) for name, typ, nullable, _ in columns])


SCHEMAS = {name: schema_of(cols) for name, cols in TABLES.items()}


def describe_columns(columns: list[tuple]) -> list[dict[str, Any]]:
    """The manifest's description of a table's columns."""
    return [{"name": name, "type": str(typ), "nullable": nullable, "description": desc}
            for name, typ, nullable, desc in columns]


def schema_types(schema: pa.Schema) -> list[dict[str, Any]]:
    """Name, type and nullability of an actual file's columns (compared with the manifest)."""
    return [{"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in schema]


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            work.check()  # a cancelled caller stops within a chunk
            digest.update(block)
    return digest.hexdigest()


class StreamingTable:
    """A Parquet file written one row group at a time: memory holds one row group at most."""

    def __init__(self, path: Path, table: str, row_group_rows: int) -> None:
        self.path, self.table = path, table
        self.schema = SCHEMAS[table]
        self.row_group_rows = row_group_rows
        # dictionary encoding pays off for the repetitive text columns only; on float vectors it
        # costs twice the write time for little size gain
        # (and min/max statistics, for the flat columns only)
        strings = [f.name for f in self.schema if pa.types.is_string(f.type)]
        flat = [f.name for f in self.schema if not pa.types.is_nested(f.type)]
        import pyarrow.parquet as pq  # here, not at the top: worker processes never write Parquet

        # the sink is opened here, not by ParquetWriter: a writer whose construction fails (a full
        # disk while it writes the header) would otherwise keep the file open
        self.sink = pa.OSFile(str(path), "wb")
        try:
            self.writer = pq.ParquetWriter(self.sink, self.schema, compression=COMPRESSION,
                                           compression_level=COMPRESSION_LEVEL, use_dictionary=strings,
                                           write_statistics=flat)
        except BaseException:
            self.sink.close()
            raise
        self.rows = 0
        self.row_groups = 0
        self.arrow_bytes = 0  # Table.nbytes of the row groups as written: the card's num_bytes
        self.pending: list[pa.RecordBatch] = []
        self.pending_rows = 0
        with _OPEN_LOCK:
            _OPEN_WRITERS.add(self)

    def write(self, arrays: list[pa.Array]) -> None:
        """Write one row group from arrays in schema order."""
        batch = pa.RecordBatch.from_arrays(arrays, schema=self.schema)
        if batch.num_rows:
            self.writer.write_batch(batch, row_group_size=batch.num_rows)
            self.arrow_bytes += batch.nbytes
            self.rows += batch.num_rows
            self.row_groups += 1

    def append(self, arrays: list[pa.Array]) -> None:
        """Buffer rows (arrays in schema order) and write a row group of ``row_group_rows`` each
        time that many are buffered; :meth:`close` writes the rest."""
        batch = pa.RecordBatch.from_arrays(arrays, schema=self.schema)
        self.pending.append(batch)
        self.pending_rows += batch.num_rows
        if self.pending_rows >= self.row_group_rows:
            table = pa.Table.from_batches(self.pending, schema=self.schema)
            cut = self.pending_rows - self.pending_rows % self.row_group_rows
            for start in range(0, cut, self.row_group_rows):
                self.write_table(table.slice(start, self.row_group_rows))
            self.pending = table.slice(cut).to_batches()
            self.pending_rows -= cut

    def write_table(self, table: pa.Table) -> None:
        if table.num_rows:
            if not table.schema.equals(self.schema):  # a cast copies nested columns: only when needed
                table = table.cast(self.schema)
            self.writer.write_table(table, row_group_size=table.num_rows)
            self.arrow_bytes += table.nbytes
            self.rows += table.num_rows
            self.row_groups += 1

    @property
    def is_open(self) -> bool:
        return bool(getattr(self.writer, "is_open", False))

    def close(self) -> dict[str, Any]:
        """Finish the file (footer) and close it; the descriptor is released even if that fails."""
        try:
            if self.pending_rows:
                self.write_table(pa.Table.from_batches(self.pending, schema=self.schema))
                self.pending, self.pending_rows = [], 0
            if self.is_open:
                self.writer.close()
            if not self.sink.closed:
                self.sink.close()
        except BaseException:
            self.abort()
            raise
        with _OPEN_LOCK:
            _OPEN_WRITERS.discard(self)
        return {"file": self.path.name, "rows": self.rows, "row_groups": self.row_groups,
                "arrow_bytes": self.arrow_bytes}

    def abort(self) -> None:
        """Release the file without caring about its content (a failed build, whose folder is
        deleted next): never raises, idempotent."""
        writer = self.writer
        if getattr(writer, "is_open", False):
            with contextlib.suppress(Exception):
                writer.writer.close()  # the footer; may fail on a full disk
            writer.is_open = False  # never retried by ParquetWriter.__del__
        if not self.sink.closed:
            with contextlib.suppress(Exception):
                self.sink.close()
        with _OPEN_LOCK:
            _OPEN_WRITERS.discard(self)

    def __enter__(self) -> "StreamingTable":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self.abort()


# Every StreamingTable not yet closed: publication aborts those under a failed build's temp
# folder, so a writer no error path closed (or one kept alive by a traceback) never keeps a
# descriptor to a deleted file.
_OPEN_WRITERS: "weakref.WeakSet[StreamingTable]" = weakref.WeakSet()
_OPEN_LOCK = threading.Lock()  # publications run on several threads in the MCP server


def abort_writers_under(folder: Path) -> int:
    """Abort every open :class:`StreamingTable` writing inside ``folder``; returns how many."""
    root = os.path.abspath(folder)
    aborted = 0
    with _OPEN_LOCK:
        tables = list(_OPEN_WRITERS)
    for table in tables:
        if os.path.commonpath([os.path.abspath(table.path), root]) == root:
            table.abort()
            aborted += 1
    return aborted


def fixed_vectors(column: pa.Array | pa.ChunkedArray, dim: int, what: str) -> np.ndarray:
    """float32 ``[rows, dim]`` of a column of float vectors, column-wise (no Python object per
    row). The tables store them as ``fixed_size_list<float>[dim]``; a variable-size list column
    (a file rewritten by a tool that drops Arrow's fixed sizes, such as DuckDB's ``COPY``) is read
    too when every row holds ``dim`` values. Anything else is ``invalid_argument`` naming the
    column and the first row that is wrong."""
    if isinstance(column, pa.ChunkedArray):  # one chunk (a file read whole) is used as is, not copied
        array = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    else:
        array = column
    typ = array.type
    if pa.types.is_fixed_size_list(typ):
        if typ.list_size != dim:
            raise InvalidArgument(f"{what} holds vectors of {typ.list_size} values, this code reads {dim} "
                                  f"(another observation or feature layout: check the manifest's obs_version)")
    elif pa.types.is_list(typ) or pa.types.is_large_list(typ):
        lengths = np.diff(array.offsets.to_numpy())
        bad = np.flatnonzero(lengths != dim)
        if bad.size:
            raise InvalidArgument(f"{what}: row {int(bad[0])} has {int(lengths[bad[0]])} values where every row "
                                  f"must have {dim} (float32[{dim}])")
    else:
        raise InvalidArgument(f"{what} must be a column of float32[{dim}] vectors, got Arrow type {typ}")
    if array.null_count:
        raise InvalidArgument(f"{what}: {array.null_count} row(s) are null where a float32[{dim}] vector is required")
    values = array.flatten()
    if values.null_count:
        raise InvalidArgument(f"{what}: {values.null_count} value(s) are null inside the vectors")
    return values.to_numpy().astype(np.float32, copy=False).reshape(len(array), dim)


def iter_batches(path: Path, columns: list[str] | None = None, batch_size: int = 2048):
    """The file's rows as record batches, one row group at a time, without pre-buffering:
    memory stays at about one batch whatever the file's size (``ParquetFile.iter_batches``
    over the whole file pre-buffers every row group's column chunks, so its memory grows
    with the file). A cancelled caller (:mod:`adapters.work`) stops within a batch."""
    import pyarrow.parquet as pq

    reader = pq.ParquetFile(path, pre_buffer=False, buffer_size=1 << 20)
    for i in range(reader.metadata.num_row_groups):
        for batch in reader.iter_batches(batch_size=batch_size, row_groups=[i], columns=columns, use_threads=False):
            work.check()
            yield batch
