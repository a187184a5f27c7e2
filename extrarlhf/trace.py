"""Builds the V5 trace of one battle in memory: ``meta``, ``turns`` and ``actions`` records.

The records follow DESIGN section 6. ``actions`` and ``turns`` depend only on the battle
(seed, decks, actors, actions), so they are byte-identical whenever a battle is replayed;
everything that depends on the clock lives in ``meta.audit`` and is marked ``not_a_label``.
"""

from __future__ import annotations

import base64
import hashlib
import time
from datetime import datetime, timezone
from typing import Any

import orjson

import engine

V5_SCHEMA_VERSION = 1
AUDIT_NOTE = ("headless wall-clock/CPU times and synthetic actor latency: audit data only, "
              "never a human decision-time label")


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _dumps(obj: Any) -> str:
    return orjson.dumps(obj).decode()


class _Snapshot:
    """A state's canonical JSON and hash, computed once and shared by records.

    orjson with sorted keys gives the same bytes as ``engine.State.canonical_json`` (the
    state holds only ints, ASCII strings, bools and nulls) at a tenth of the cost; the
    replay check compares the two on every decision.
    """

    __slots__ = ("json", "hash")

    def __init__(self, state: engine.State) -> None:
        raw = orjson.dumps(state.to_dict(), option=orjson.OPT_SORT_KEYS)
        self.json = raw.decode()
        self.hash = hashlib.sha256(raw).hexdigest()


def encode_observation(obs) -> dict[str, Any]:
    """float32 vector as base64 of its little-endian bytes (lossless and compact)."""
    data = obs.astype("<f4", copy=False).tobytes()  # no copy on little-endian machines
    return {"obs_version": engine.OBS_VERSION, "dtype": "float32", "shape": [int(obs.shape[0])],
            "encoding": "base64", "data": base64.b64encode(data).decode()}


class BattleRecorder:
    """Collects records while a battle is played; :meth:`lines` renders the three files."""

    def __init__(self, header: dict[str, Any], state: engine.State) -> None:
        self.header = header
        self.actions: list[str] = []
        self.turns: list[str] = []
        self.policy_warnings: list[dict[str, Any]] = []
        self.degraded = False
        self.latency_ms: dict[str, list[float]] = {"1": [], "2": []}
        self.started_at = utc_now()
        self._t0 = time.perf_counter()
        self._cpu0 = time.process_time()
        self._last = _Snapshot(state)
        self._turn = self._open_turn(state, state.last_events, self._last)

    @staticmethod
    def _open_turn(state: engine.State, events: list[dict], snap: _Snapshot) -> dict[str, Any]:
        return {"turn": state.turn, "active_player": state.active + 1, "start_hash": snap.hash,
                "start_json": snap.json, "events": list(events)}

    def _close_turn(self, end: _Snapshot) -> None:
        t = self._turn
        head = _dumps({"schema_version": V5_SCHEMA_VERSION, "battle_id": self.header["battle_id"],
                       "turn": t["turn"], "active_player": t["active_player"], "events": t["events"],
                       "state_start_hash": t["start_hash"], "state_end_hash": end.hash})
        self.turns.append(head[:-1] + ',"state_start":' + t["start_json"] + ',"state_end":' + end.json + "}")

    def begin(self, state: engine.State, action_id: int, actor: dict[str, Any], *, latency_s: float,
              rationale: str | None = None, policy: dict[str, Any] | None = None) -> dict[str, Any]:
        """Start recording a decision about to be applied to ``state`` (call before ``apply``)."""
        player = state.active + 1
        legal = state.legal_actions()
        descriptions = state.describe_actions(legal)
        self.latency_ms[str(player)].append(round(latency_s * 1000.0, 3))
        return {
            "schema_version": V5_SCHEMA_VERSION,
            "battle_id": self.header["battle_id"],
            "decision_index": len(self.actions),
            "turn": state.turn,
            "player": player,
            "actor": actor,
            "state_hash_before": self._last.hash,
            "observation": encode_observation(state.observation(player)),
            "legal_actions": [{"action_id": a, "description": d} for a, d in zip(legal, descriptions)],
            "action_id": action_id,
            "action": state.action_json(action_id, descriptions[legal.index(action_id)]),
            "policy": policy,
            "rationale": rationale,
        }

    def end(self, record: dict[str, Any], state: engine.State, events: list[dict]) -> None:
        """Complete the decision begun with :meth:`begin`, once ``state`` has applied it."""
        snap_before = self._last
        snap_after = _Snapshot(state)
        record["events"] = events
        record["state_hash_after"] = snap_after.hash
        self.actions.append(_dumps(record)[:-1] + ',"state_before":' + snap_before.json + "}")
        # Turn bookkeeping: END_TURN closes this turn at the state it was ended in.
        turn_start = next((i for i, e in enumerate(events) if e["type"] == "turn_start"), None)
        if turn_start is None:
            self._turn["events"].extend(events)
        else:
            self._turn["events"].extend(events[:turn_start])
            self._close_turn(snap_before)
            self._turn = self._open_turn(state, events[turn_start:], snap_after)
        self._last = snap_after

    def warn(self, warning: dict[str, Any]) -> None:
        """A policy could not act as asked and a fallback played: the battle is degraded."""
        self.degraded = True
        self.policy_warnings.append(warning)

    def finish(self, state: engine.State, status: str, reason: str | None = None) -> dict[str, bytes]:
        """Close the trace; returns the file contents keyed by file name."""
        self._close_turn(self._last)
        meta = {
            "schema_version": V5_SCHEMA_VERSION,
            **self.header,
            "result": {"status": status, "winner": state.winner, "reason": state.end_reason or reason,
                       "turns": state.turn, "decisions": len(self.actions),
                       "final_state_hash": self._last.hash},
            "degraded": self.degraded,
            "policy_warnings": self.policy_warnings,
            "audit": {"not_a_label": True, "note": AUDIT_NOTE, "started_at": self.started_at,
                      "finished_at": utc_now(), "wall_seconds": round(time.perf_counter() - self._t0, 6),
                      "cpu_seconds": round(time.process_time() - self._cpu0, 6),
                      "decision_latency_ms": self.latency_ms},
        }
        return {
            "meta.jsonl": (_dumps(meta) + "\n").encode(),
            "turns.jsonl": ("\n".join(self.turns) + "\n").encode(),
            "actions.jsonl": (("\n".join(self.actions) + "\n") if self.actions else "").encode(),
        }
