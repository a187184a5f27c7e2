"""Builds the V5 trace of one battle in memory: ``meta``, ``turns`` and ``actions`` records.

The records follow DESIGN section 6. ``actions`` and ``turns`` depend only on the battle
(seed, decks, actors, actions), so they are byte-identical whenever a battle is replayed;
everything that depends on the clock lives in ``meta.audit`` and is marked ``not_a_label``.
The one observed human timing, a browser arena player's think time per decision, is kept in
``meta.audit.think_times`` with its provenance (``arena``: observed, not production), never
mixed with the synthetic latencies; Metronome readiness counts it only when a readiness policy
opts in (``metronome_arena_labels``).
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

import orjson
import pybase64

import engine
from engine.native_state import NativeState

from ..core.clock import utc_now

V5_SCHEMA_VERSION = 1
AUDIT_NOTE = ("headless wall-clock/CPU times and synthetic actor latency: audit data only, "
              "never a human decision-time label")
THINK_TIME_PROVENANCES = ("arena",)  # where observed (non-production) think times come from
THINK_TIMES_NOTE = ("observed think times of a person at the browser arena (page shown to move received, "
                    "server side): not production labels; Metronome readiness counts them only when the "
                    "readiness policy sets metronome_arena_labels")


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
        raw = (state.canonical_json().encode() if isinstance(state, NativeState)  # written by the core
               else orjson.dumps(state.to_dict(), option=orjson.OPT_SORT_KEYS))
        self.json = raw.decode()
        self.hash = hashlib.sha256(raw).hexdigest()


def encode_observation(obs) -> dict[str, Any]:
    """float32 vector as base64 of its little-endian bytes (lossless and compact; pybase64's SIMD
    encoder gives the bytes of ``base64.b64encode`` about 6x faster)."""
    data = obs.astype("<f4", copy=False).tobytes()  # no copy on little-endian machines
    return {"obs_version": engine.OBS_VERSION, "dtype": "float32", "shape": [int(obs.shape[0])],
            "encoding": "base64", "data": pybase64.b64encode_as_string(data)}


class _Decision:
    """What play keeps of one decision; rendered into records when the battle ends."""

    __slots__ = ("before", "action_id", "events", "actor", "rationale", "policy")

    def __init__(self, before: engine.State, action_id: int, events: list[dict], actor: dict[str, Any],
                 rationale: str | None, policy: dict[str, Any] | None) -> None:
        self.before, self.action_id, self.events = before, action_id, events
        self.actor, self.rationale, self.policy = actor, rationale, policy


class BattleRecorder:
    """Keeps each decision (a clone of the state it was taken in, the action, its events) while
    the battle is played, and renders the three trace files in one pass at the end.

    Rendering in one pass keeps the per-decision cost during play to a clone, and runs the
    hashing, observation and description work back to back, which is markedly faster than
    interleaving it with the policies' own work.
    """

    def __init__(self, header: dict[str, Any], state: engine.State) -> None:
        self.header = header
        self.initial = state.clone()
        self.decisions: list[_Decision] = []
        self.policy_warnings: list[dict[str, Any]] = []
        self.degraded = False
        self.omniscient_peeks: list[int] = []  # decision indexes before which the omniscient view was shown
        self.latency_ms: dict[str, list[float]] = {"1": [], "2": []}
        self.think_provenance: str | None = None  # set (``arena``) when player 1's think times are observed
        self.think_ms: list[dict[str, int]] = []  # {"decision_index", "ms"} of each observed decision
        self.started_at = utc_now()
        self._t0 = time.perf_counter()
        self._cpu0 = time.process_time()

    def record(self, before: engine.State, action_id: int, events: list[dict], actor: dict[str, Any], *,
               latency_s: float, rationale: str | None = None, policy: dict[str, Any] | None = None) -> None:
        """Keep one decision; ``before`` is a clone of the state it was taken in (not mutated later)."""
        self.decisions.append(_Decision(before, action_id, events, actor, rationale, policy))
        self.latency_ms[str(before.active + 1)].append(round(latency_s * 1000.0, 3))

    def observe_think_time(self, latency_s: float) -> None:
        """The last decision's latency is an observed human think time (see ``think_provenance``)."""
        self.think_ms.append({"decision_index": len(self.decisions) - 1, "ms": max(0, round(latency_s * 1000.0))})

    def _audit(self) -> dict[str, Any]:
        audit = {"not_a_label": True, "note": AUDIT_NOTE, "started_at": self.started_at, "finished_at": utc_now(),
                 "wall_seconds": round(time.perf_counter() - self._t0, 6),
                 "cpu_seconds": round(time.process_time() - self._cpu0, 6), "decision_latency_ms": self.latency_ms}
        if self.think_provenance is not None:
            audit["think_times"] = {"provenance": self.think_provenance, "observed": True, "production": False,
                                    "player": 1, "note": THINK_TIMES_NOTE, "decisions": self.think_ms}
        return audit

    def warn(self, warning: dict[str, Any]) -> None:
        """A policy could not act as asked and a fallback played: the battle is degraded.

        A warning of the same kind for the same player (a model that failed to load warns on
        every decision) is kept once, with its first decision and message, and a ``count``.
        """
        self.degraded = True
        key = (warning.get("player"), warning["kind"])
        for seen in self.policy_warnings:
            if (seen.get("player"), seen["kind"]) == key:
                seen["count"] += 1
                return
        self.policy_warnings.append({**warning, "count": 1})

    def _render(self, final: engine.State) -> tuple[list[str], list[str], _Snapshot]:
        battle_id = self.header["battle_id"]
        snaps = [_Snapshot(d.before) for d in self.decisions] or [_Snapshot(self.initial)]
        snaps.append(_Snapshot(final))
        actions: list[str] = []
        turns: list[str] = []
        turn = {"turn": self.initial.turn, "active_player": self.initial.active + 1, "start": snaps[0],
                "events": list(self.initial.last_events)}

        def close(end: _Snapshot) -> None:
            head = _dumps({"schema_version": V5_SCHEMA_VERSION, "battle_id": battle_id, "turn": turn["turn"],
                           "active_player": turn["active_player"], "events": turn["events"],
                           "state_start_hash": turn["start"].hash, "state_end_hash": end.hash})
            turns.append(head[:-1] + ',"state_start":' + turn["start"].json + ',"state_end":' + end.json + "}")

        observations = engine.observations([(d.before, d.before.active + 1) for d in self.decisions])
        for i, d in enumerate(self.decisions):
            state, player = d.before, d.before.active + 1
            legal = state.legal_actions()
            descriptions = state.describe_actions(legal)
            record = {
                "schema_version": V5_SCHEMA_VERSION,
                "battle_id": battle_id,
                "decision_index": i,
                "turn": state.turn,
                "player": player,
                "actor": d.actor,
                "state_hash_before": snaps[i].hash,
                "observation": encode_observation(observations[i]),
                "legal_actions": [{"action_id": a, "description": t} for a, t in zip(legal, descriptions)],
                "action_id": d.action_id,
                "action": state.action_json(d.action_id, descriptions[legal.index(d.action_id)]),
                "policy": d.policy,
                "rationale": d.rationale,
                "events": d.events,
                "state_hash_after": snaps[i + 1].hash,
            }
            actions.append(_dumps(record)[:-1] + ',"state_before":' + snaps[i].json + "}")
            # END_TURN closes the turn at the state it was ended in; the next opens after its draw.
            start = next((k for k, e in enumerate(d.events) if e["type"] == "turn_start"), None)
            if start is None:
                turn["events"].extend(d.events)
            else:
                turn["events"].extend(d.events[:start])
                close(snaps[i])
                after = self.decisions[i + 1].before if i + 1 < len(self.decisions) else final
                turn = {"turn": after.turn, "active_player": after.active + 1, "start": snaps[i + 1],
                        "events": list(d.events[start:])}
        close(snaps[-1])
        return actions, turns, snaps[-1]

    def finish(self, state: engine.State, status: str, reason: str | None = None,
               audit: dict[str, Any] | None = None) -> dict[str, bytes]:
        """Render the trace; returns the file contents keyed by file name. ``audit`` replaces the
        headless timings (a battle replayed from records has none of its own)."""
        actions, turns, last = self._render(state)
        meta = {
            "schema_version": V5_SCHEMA_VERSION,
            **self.header,
            "result": {"status": status, "winner": state.winner, "reason": state.end_reason or reason,
                       "turns": state.turn, "decisions": len(actions), "final_state_hash": last.hash},
            "degraded": self.degraded,
            "policy_warnings": self.policy_warnings,
            "omniscient_peeks": self.omniscient_peeks,
            "audit": audit if audit is not None else self._audit(),
        }
        return {
            "meta.jsonl": (_dumps(meta) + "\n").encode(),
            "turns.jsonl": ("\n".join(turns) + "\n").encode(),
            "actions.jsonl": (("\n".join(actions) + "\n") if actions else "").encode(),
        }
