"""Reading one battle's V5 trace into table rows (used by materialize.py, in this process or in
worker processes; deliberately free of pyarrow so workers start fast).

:func:`battle_rows` checks the trace files against their catalog digests, parses the three
files, checks the records (contiguous decision indexes, legal chosen actions, observation
layout, counts matching ``meta.result``) and computes the action features of each legal set.
Any problem raises :class:`Corrupt` with a message naming the file and the record.
"""

from __future__ import annotations

import binascii
import hashlib
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import orjson

import engine

from ..trace import V5_SCHEMA_VERSION

OBS_BYTES = 4 * engine.OBS_DIM
TRACE_FILES = ("meta.jsonl", "turns.jsonl", "actions.jsonl")

__all__ = ["Corrupt", "battle_rows", "read_battles", "DECISION_SCALARS"]

# decisions columns built here as Python lists (the others are assembled by the writer)
DECISION_SCALARS = (
    "battle_id", "group", "battle_index", "decision_index", "turn", "player", "actor_type", "actor_spec",
    "actor_kind", "actor_weights_hash", "actor_codename", "opponent_type", "opponent_spec", "opponent_kind",
    "opponent_weights_hash", "battle_tag", "own_deck_id", "opponent_deck_id", "state_hash_before", "obs_version",
    "action_id", "action_index", "rationale", "policy_value", "policy_json", "winner", "outcome",
)


class Corrupt(Exception):
    """A trace that cannot be trusted; the message says which file and record, and why."""


def _read_trace(battle_dir: Path, files: dict[str, str] | None) -> dict[str, bytes]:
    out = {}
    for name in TRACE_FILES:
        path = battle_dir / "v5" / name
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise Corrupt(f"{path} is missing although the catalog records the battle as final") from None
        expected = (files or {}).get(name)
        actual = hashlib.sha256(data).hexdigest()
        if expected != actual:
            raise Corrupt(f"{path}: sha256 {actual[:12]}... does not match its catalog digest "
                          f"{str(expected)[:12]}... (the file changed after it was written)")
        out[name] = data
    return out


def _records(data: bytes, path: str, states: tuple[tuple[str, str], ...] = ()) -> list[dict[str, Any]]:
    """The records of a trace file. Embedded states (``states``: (key, hash field) pairs, in the
    order the writer appends them at the end of each line) are not parsed: each record gets
    ``"_raw": {key: canonical JSON bytes}``, checked against the record's own state hash.

    The writer appends ``,"<key>":<canonical state JSON>`` after the other fields, so the fast
    path cuts the line there and parses only the head; the cut is proven right by the sha256
    of the cut-off text equalling the recorded state hash. Any other layout takes the slow
    path (full parse, canonical re-serialization, same hash check). A state that does not
    match its recorded hash makes the trace corrupt.
    """
    out = []
    loads, sha256 = orjson.loads, hashlib.sha256
    markers = [(key, hash_field, b',"' + key.encode() + b'":') for key, hash_field in states]
    for number, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        record = raw = None
        if markers and line.endswith(b"}"):
            view, end, raw = memoryview(line), len(line) - 1, {}
            for key, hash_field, marker in reversed(markers):
                cut = line.rfind(marker, 0, end)
                if cut < 0:
                    raw = None
                    break
                raw[key], end = view[cut + len(marker):end], cut
            if raw is not None:
                try:
                    record = loads(line[:end] + b"}")
                except orjson.JSONDecodeError:
                    record = None
                if not isinstance(record, dict) or any(
                        sha256(raw[key]).hexdigest() != record.get(hash_field) for key, hash_field, _ in markers):
                    record = None
        if record is None:
            try:
                record = loads(line)
            except orjson.JSONDecodeError as exc:
                raise Corrupt(f"{path} line {number} is not valid JSON ({exc})") from None
            if not isinstance(record, dict):
                raise Corrupt(f"{path} line {number} is not a JSON object")
            raw = {}
            for key, hash_field, _ in markers:
                if key not in record:
                    raise Corrupt(f"{path} line {number} has no {key}")
                raw[key] = orjson.dumps(record.pop(key), option=orjson.OPT_SORT_KEYS)
                if sha256(raw[key]).hexdigest() != record.get(hash_field):
                    raise Corrupt(f"{path} line {number}: {key} does not match its recorded {hash_field}")
        if record.get("schema_version") != V5_SCHEMA_VERSION:
            raise Corrupt(f"{path} line {number}: trace schema_version is not {V5_SCHEMA_VERSION}")
        if markers:
            record["_raw"] = raw
        out.append(record)
    return out


def _state(record: dict[str, Any]) -> engine.State:
    return engine.State.from_dict(orjson.loads(bytes(record["_raw"]["state_before"])))


def _features(records: list[dict[str, Any]], legal: list[list[int]], final_hash: str) -> tuple[list, bool]:
    """Per-decision features of the legal set: by replay from the first recorded state (checked
    against every recorded legal set and the final state hash), else from each recorded state."""
    state = _state(records[0])
    out = []
    try:
        for record, ids in zip(records, legal):
            if state.legal_actions() != ids:
                break
            out.append(state.action_features(ids))
            state.apply(record["action_id"])
        else:
            if state.state_hash() == final_hash:
                return out, True
    except engine.EngineError:
        pass
    return [_state(r).action_features(ids) for r, ids in zip(records, legal)], False


def battle_rows(group: str, battle_id: str, index: int, battle_dir: str | Path,
                files: dict[str, str] | None) -> dict[str, Any]:
    """Every row one finished, non-degraded battle contributes (see the module docstring)."""
    battle_dir = Path(battle_dir)
    raw = _read_trace(battle_dir, files)
    where = str(battle_dir / "v5")
    metas = _records(raw["meta.jsonl"], f"{where}/meta.jsonl")
    if len(metas) != 1:
        raise Corrupt(f"{where}/meta.jsonl holds {len(metas)} records, not 1")
    meta = metas[0]
    result = meta["result"]
    if (meta.get("battle_id") != battle_id or result.get("status") != "finished" or meta.get("degraded")
            or meta.get("omniscient_peeks")):
        raise Corrupt(f"{where}/meta.jsonl does not describe a finished, non-degraded, unpeeked battle {battle_id} "
                      f"(status {result.get('status')!r}, degraded {meta.get('degraded')!r}, omniscient peeks "
                      f"{meta.get('omniscient_peeks')!r}) although its catalog line does")
    if meta.get("obs_version") != engine.OBS_VERSION:
        raise Corrupt(f"{where}: obs_version {meta.get('obs_version')!r}; this engine computes observation layout "
                      f"{engine.OBS_VERSION} (materialize with a matching ExtraRLHF)")
    records = _records(raw["actions.jsonl"], f"{where}/actions.jsonl", (("state_before", "state_hash_before"),))
    turns = _records(raw["turns.jsonl"], f"{where}/turns.jsonl",
                     (("state_start", "state_start_hash"), ("state_end", "state_end_hash")))
    n = len(records)
    if n != result["decisions"] or not records:
        raise Corrupt(f"{where}/actions.jsonl holds {n} decisions; meta records {result['decisions']}")
    if len(turns) != result["turns"]:
        raise Corrupt(f"{where}/turns.jsonl holds {len(turns)} turns; meta records {result['turns']}")
    winner = result["winner"]
    actors, deck_ids = meta["actors"], meta["deck_ids"]

    legal: list[list[int]] = []
    positions: list[int] = []
    obs: list[bytes] = []
    probabilities: list[Any] = []
    values: list[Any] = []
    policies: list[Any] = []
    b64decode = binascii.a2b_base64
    for i, r in enumerate(records):
        if r.get("decision_index") != i or r.get("battle_id") != battle_id:
            raise Corrupt(f"{where}/actions.jsonl record {i + 1}: decision_index {r.get('decision_index')!r} "
                          f"(expected {i}, contiguous) of battle {r.get('battle_id')!r}")
        ids = [a["action_id"] for a in r["legal_actions"]]
        try:
            positions.append(ids.index(r["action_id"]))
        except ValueError:
            raise Corrupt(f"{where}/actions.jsonl decision {i}: chosen action {r['action_id']} is not among the "
                          f"legal actions {ids}") from None
        legal.append(ids)
        o = r["observation"]
        if o.get("obs_version") != engine.OBS_VERSION or o.get("encoding") != "base64" or o.get("dtype") != "float32":
            raise Corrupt(f"{where}/actions.jsonl decision {i}: observation is not base64 float32 of obs_version "
                          f"{engine.OBS_VERSION}")
        vector = b64decode(o["data"])
        if len(vector) != OBS_BYTES:
            raise Corrupt(f"{where}/actions.jsonl decision {i}: observation has {len(vector) // 4} floats, "
                          f"not {engine.OBS_DIM}")
        obs.append(vector)
        policy = r.get("policy")
        if isinstance(policy, dict):
            p = policy.get("probabilities")
            ok = isinstance(p, list) and len(p) == len(ids) and all(
                isinstance(x, (int, float)) and not isinstance(x, bool) for x in p)
            v = policy.get("value")
            probabilities.append(p if ok else None)
            values.append(v if isinstance(v, (int, float)) and not isinstance(v, bool) else None)
            policies.append(orjson.dumps(policy).decode())
        else:
            probabilities.append(None)
            values.append(None)
            policies.append(None)
    try:
        features, verified = _features(records, legal, result["final_state_hash"])
    except engine.EngineError as exc:
        raise Corrupt(f"{where}/actions.jsonl: a recorded state cannot be rebuilt ({exc})") from None

    players = [r["player"] for r in records]
    seat = {1: ("p1", "p2"), 2: ("p2", "p1")}
    opp = [actors[seat[p][1]] for p in players]
    dec = {
        "battle_id": [battle_id] * n, "group": [group] * n, "battle_index": [index] * n,
        "decision_index": list(range(n)), "turn": [r["turn"] for r in records], "player": players,
        "actor_type": [r["actor"]["type"] for r in records], "actor_spec": [r["actor"].get("spec") for r in records],
        "actor_kind": [r["actor"]["kind"] for r in records],
        "actor_weights_hash": [r["actor"].get("weights_hash") for r in records],
        "actor_codename": [r["actor"].get("codename") for r in records],
        "opponent_type": [a["type"] for a in opp], "opponent_spec": [a.get("spec") for a in opp],
        "opponent_kind": [a["kind"] for a in opp], "opponent_weights_hash": [a.get("weights_hash") for a in opp],
        "battle_tag": [meta["battle_tag"]] * n,
        "own_deck_id": [deck_ids[seat[p][0]] for p in players],
        "opponent_deck_id": [deck_ids[seat[p][1]] for p in players],
        "state_hash_before": [r["state_hash_before"] for r in records],
        "obs_version": [engine.OBS_VERSION] * n,
        "action_id": [r["action_id"] for r in records], "action_index": positions,
        "rationale": [r.get("rationale") for r in records],
        "policy_value": values, "policy_json": policies, "winner": [winner] * n,
        "outcome": [0 if winner == 0 else (1 if winner == p else -1) for p in players],
    }
    per_turn = Counter(dec["turn"])
    dumps = orjson.dumps
    m = len(turns)
    turn_cols = {
        "battle_id": [battle_id] * m, "group": [group] * m, "turn": [t["turn"] for t in turns],
        "active_player": [t["active_player"] for t in turns],
        "decisions": [per_turn.get(t["turn"], 0) for t in turns], "events": [len(t["events"]) for t in turns],
        "state_start_hash": [t["state_start_hash"] for t in turns],
        "state_end_hash": [t["state_end_hash"] for t in turns],
        "events_json": [dumps(t["events"]).decode() for t in turns],
        "state_start_json": [str(t["_raw"]["state_start"], "utf-8") for t in turns],
        "state_end_json": [str(t["_raw"]["state_end"], "utf-8") for t in turns],
    }
    p1, p2 = actors["p1"], actors["p2"]
    battle = {
        "battle_id": battle_id, "group": group, "battle_index": index, "seed": meta["seed"],
        "ruleset": meta["ruleset"], "engine_version": meta["engine_version"], "obs_version": meta["obs_version"],
        "battle_tag": meta["battle_tag"], "p1_type": p1["type"], "p1_spec": p1.get("spec"), "p1_kind": p1["kind"],
        "p1_weights_hash": p1.get("weights_hash"), "p1_codename": p1.get("codename"), "p2_type": p2["type"],
        "p2_spec": p2.get("spec"), "p2_kind": p2["kind"], "p2_weights_hash": p2.get("weights_hash"),
        "starting_player": meta["starting_player"], "p1_deck": meta["decks"]["p1"], "p2_deck": meta["decks"]["p2"],
        "p1_deck_id": deck_ids["p1"], "p2_deck_id": deck_ids["p2"], "status": "finished", "winner": winner,
        "reason": result["reason"], "turns": result["turns"], "decisions": result["decisions"],
        "degraded": False, "omniscient_peeks": 0, "policy_warnings": len(meta.get("policy_warnings") or []),
        "final_state_hash": result["final_state_hash"], "replay_verified": verified,
        "meta_sha256": files["meta.jsonl"], "turns_sha256": files["turns.jsonl"],
        "actions_sha256": files["actions.jsonl"],
    }
    return {"dec": dec, "obs": b"".join(obs), "legal": legal, "features": np.concatenate(features),
            "probabilities": probabilities, "turns": turn_cols, "battle": battle}


def read_battles(tasks: list[tuple]) -> tuple[list[tuple[str, str | None]], list[dict[str, Any]]]:
    """Rows of each task ``(group, battle_id, index, battle_dir, files)``: returns the outcome
    per task (``("ok", None)`` or ``("corrupt", message)``) and the rows of the good ones, in order."""
    outcomes: list[tuple[str, str | None]] = []
    rows: list[dict[str, Any]] = []
    for group, battle_id, index, battle_dir, files in tasks:
        try:
            rows.append(battle_rows(group, battle_id, index, battle_dir, files))
            outcomes.append(("ok", None))
        except Corrupt as exc:
            outcomes.append(("corrupt", str(exc)))
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
            outcomes.append(("corrupt", f"battle {battle_id} of group {group}: malformed trace "
                                        f"({type(exc).__name__}: {exc})"))
    return outcomes, rows
