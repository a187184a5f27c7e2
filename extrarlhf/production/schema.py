"""The production schema (DESIGN section 10), owned by the game backend; the exports read exactly this.

``DDL`` is the four CREATE TABLE statements verbatim; ``TABLE_COLUMNS`` lists every table's
columns in their declared order (the order COPY and ``SELECT *`` use).
"""

from __future__ import annotations

DDL = """\
CREATE TABLE battles (
  battle_id text PRIMARY KEY, ruleset text NOT NULL, seed bigint NOT NULL,
  p1_player_id text, p2_player_id text,             -- raw user ids; NULL for non-humans
  p1_kind text NOT NULL, p2_kind text NOT NULL,       -- 'human' | 'bot' | 'model'
  p1_deck jsonb NOT NULL, p2_deck jsonb NOT NULL,     -- arrays of 30 card ids
  p1_deck_id text NOT NULL, p2_deck_id text NOT NULL,
  starting_player smallint NOT NULL,                  -- 1 | 2
  started_at timestamptz NOT NULL, finished_at timestamptz,  -- NULL: unfinished
  winner smallint, turns integer, duration_seconds double precision,  -- winner 0 = draw
  ingested_at timestamptz NOT NULL);
CREATE TABLE battle_actions (
  battle_id text NOT NULL REFERENCES battles, seq integer NOT NULL,
  turn integer NOT NULL, player smallint NOT NULL,
  action_id integer NOT NULL,                         -- arena-1 action id, 0..162
  decision_ms integer,                                -- observed human think time; NULL for bots
  acted_at timestamptz NOT NULL, ingested_at timestamptz NOT NULL,
  PRIMARY KEY (battle_id, seq));
CREATE TABLE player_sessions (
  session_id text PRIMARY KEY, player_id text NOT NULL,
  started_at timestamptz NOT NULL, ended_at timestamptz,   -- NULL: still open
  ingested_at timestamptz NOT NULL);
CREATE TABLE return_treatments (
  assignment_id text PRIMARY KEY, player_id text NOT NULL, treatment text NOT NULL,
  assigned_at timestamptz NOT NULL, status text NOT NULL,   -- assigned|sent|delivered|cancelled|failed
  status_updated_at timestamptz NOT NULL, ingested_at timestamptz NOT NULL);
"""

TABLE_COLUMNS: dict[str, tuple[str, ...]] = {
    "battles": (
        "battle_id", "ruleset", "seed", "p1_player_id", "p2_player_id", "p1_kind", "p2_kind",
        "p1_deck", "p2_deck", "p1_deck_id", "p2_deck_id", "starting_player", "started_at",
        "finished_at", "winner", "turns", "duration_seconds", "ingested_at",
    ),
    "battle_actions": (
        "battle_id", "seq", "turn", "player", "action_id", "decision_ms", "acted_at", "ingested_at",
    ),
    "player_sessions": ("session_id", "player_id", "started_at", "ended_at", "ingested_at"),
    "return_treatments": (
        "assignment_id", "player_id", "treatment", "assigned_at", "status", "status_updated_at", "ingested_at",
    ),
}
