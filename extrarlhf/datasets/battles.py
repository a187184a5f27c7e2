"""Reading one battle's V5 trace into table rows (used by materialize.py, in this process or in
worker processes; deliberately free of pyarrow so workers start fast).

:func:`battle_rows` checks the trace files against their catalog digests, parses the three
files, checks the records (contiguous decision indexes, legal chosen actions, observation
layout, embedded states matching their recorded hashes, counts matching ``meta.result``) and
computes the action features of each legal set. Any problem raises :class:`Corrupt` with a
message naming the file and the record.

On the native backend the core reads the decision and turn lines into these columns in one call
each (``engine_native.read_decisions`` / ``read_turns``, native/src/trace_reader.cc), with the same
checks, where the files are as the trace writer writes them; for anything else it declines and
the Python reader below decides (another JSON layout is read, a corrupt file is named). The core
gives each column as the buffers of an Arrow array (:class:`Packed`: no Python object per row),
the Python reader as a list; row_batches.battle_batches makes the same Arrow arrays of either
(tests/engine/test_native_trace_reader.py).

Decision and turn lines are decoded with msgspec into typed structs that declare only the
fields the tables take: the rest of a line (descriptions, events of a decision, the chosen
action's details) is skipped without building Python objects, type errors come with the
field's path, and the embedded states come back as raw JSON bytes (``msgspec.Raw``) to hash
without parsing them. Observations are decoded with pybase64 (SIMD base64, several times
faster than ``binascii`` on these 2.5 kB strings).
"""

from __future__ import annotations

import hashlib
from array import array
from collections import Counter
from itertools import accumulate, chain
from pathlib import Path
from typing import Any, NamedTuple, Optional

import msgspec
import orjson
import pybase64

import engine
from engine import backend
from engine.features import action_feature_parts

from ..runtime import trace_files
from ..runtime.trace import V5_SCHEMA_VERSION

OBS_BYTES = 4 * engine.OBS_DIM
TRACE_FILES = trace_files.TRACE_FILES

__all__ = ["Corrupt", "Packed", "battle_rows", "trace_rows", "read_battles"]


class Corrupt(Exception):
    """A trace that cannot be trusted; the message says which file and record, and why."""


class Packed(NamedTuple):
    """One battle's column as the buffers of an Arrow array, as the core's reader gives it:
    ``length`` values, ``null_count`` of them null (``validity``: Arrow's bitmap, None when none
    is), ``offsets`` (int32, ``length + 1``, for strings and lists; else None) and ``values``
    (the values, or a list's child values, in native byte order)."""

    length: int
    null_count: int
    validity: bytes | None
    offsets: bytes | None
    values: bytes


def _values(column: Packed, code: str) -> list[int]:
    """A packed fixed-width column's values as Python ints (``code``: the array module's type code)."""
    return memoryview(column.values).cast(code).tolist()


# gc=False: these records hold no reference cycles, so the cyclic collector need not track them
class _Legal(msgspec.Struct, gc=False):
    action_id: int


class _Actor(msgspec.Struct, gc=False):
    type: str
    kind: str
    spec: Optional[str] = None
    weights_hash: Optional[str] = None
    codename: Optional[str] = None


class _Observation(msgspec.Struct, gc=False):
    obs_version: int
    dtype: str
    encoding: str
    data: str


class _Decision(msgspec.Struct, gc=False):
    schema_version: int
    battle_id: str
    decision_index: int
    turn: int
    player: int
    actor: _Actor
    state_hash_before: str
    observation: _Observation
    legal_actions: list[_Legal]
    action_id: int
    state_before: msgspec.Raw
    rationale: Optional[str] = None
    policy: Any = None


class _Turn(msgspec.Struct, gc=False):
    schema_version: int
    turn: int
    active_player: int
    events: list[msgspec.Raw]
    state_start_hash: str
    state_end_hash: str
    state_start: msgspec.Raw
    state_end: msgspec.Raw


_DECISIONS = msgspec.json.Decoder(_Decision)
_TURNS = msgspec.json.Decoder(_Turn)


def _read_trace(battle_dir: Path, files: dict[str, str] | None, compact_sha256: str | None = None) -> dict[str, bytes]:
    """The plain bytes of a battle's three trace files, each proven to be the bytes its catalog
    digest (``files``) describes: by hashing them, or, for ``turns`` and ``actions`` stored
    compact as written (their ``compact_sha256``, trace_files.py), by hashing the stored bytes."""
    out = {}
    v5 = battle_dir / "v5"
    stored = trace_files.read_compact(v5) if compact_sha256 is not None else None
    as_written = stored is not None and trace_files.compact_digest(stored) == compact_sha256
    for name in TRACE_FILES:
        path = v5 / name
        try:
            data = trace_files.read_from(v5, name, stored)  # plain, or stored compact (.zst)
        except FileNotFoundError:
            raise Corrupt(f"{path} is missing although the catalog records the battle as final") from None
        except trace_files.CompactFileError as exc:
            raise Corrupt(str(exc)) from None
        out[name] = data
        if as_written and name in trace_files.COMPACT_FILES:
            continue  # proven by the stored bytes' digest
        expected = (files or {}).get(name)
        actual = hashlib.sha256(data).hexdigest()
        if expected != actual:  # named as stored; the digest is of the plain bytes either way
            raise Corrupt(f"{trace_files.find(path.parent, name) or path}: sha256 {actual[:12]}... (of its plain "
                          f"bytes) does not match its catalog digest "
                          f"{str(expected)[:12]}... (the file changed after it was written)")
    return out


def _lines(data: bytes, path: str, decoder: msgspec.json.Decoder) -> list:
    """The records of a JSON-lines file (blank lines skipped); a bad line is :class:`Corrupt`
    naming its number and the field at fault."""
    try:
        return decoder.decode_lines(data)
    except (msgspec.DecodeError, msgspec.ValidationError):
        pass
    for number, line in enumerate(data.splitlines(), 1):  # find the line, for the message
        if line.strip():
            try:
                decoder.decode(line)
            except msgspec.ValidationError as exc:
                raise Corrupt(f"{path} line {number}: {exc}") from None
            except msgspec.DecodeError as exc:
                raise Corrupt(f"{path} line {number} is not valid JSON ({exc})") from None
    raise Corrupt(f"{path} is not JSON lines")


def _verified_state(raw: msgspec.Raw, recorded: str) -> bytes | None:
    """The embedded state as canonical JSON bytes, proven by its sha256 equalling the recorded
    hash; None when it does not. The writer embeds canonical JSON, so the raw bytes usually hash
    right away; other layouts (re-indented, keys reordered) are re-serialized canonically first."""
    data = bytes(raw)
    if hashlib.sha256(data).hexdigest() == recorded:
        return data
    try:
        data = orjson.dumps(orjson.loads(data), option=orjson.OPT_SORT_KEYS)
    except orjson.JSONDecodeError:
        return None
    return data if hashlib.sha256(data).hexdigest() == recorded else None


def _state(state_json: bytes) -> engine.State:
    return engine.State.from_dict(orjson.loads(state_json))


def _start(first: bytes, meta: dict[str, Any]) -> engine.State:
    """Decision 0's state (``first``, verified canonical JSON). On the native core it is first
    rebuilt as the battle's start from the meta's seed, decks and starting player (0.02 ms, where
    parsing the recorded state takes 0.1), kept only when its hash is the recorded state's
    (the same canonical JSON); any other trace is parsed from the recorded state."""
    if backend.native() is not None:
        try:
            decks = meta["decks"]
            state = engine.new_battle(meta["seed"], decks["p1"], decks["p2"], meta["starting_player"])
            if state.state_hash() == hashlib.sha256(first).hexdigest():
                return state
        except (ValueError, KeyError, TypeError):  # EngineError is a ValueError
            pass
    return _state(first)


def _features(decisions: "_Decisions", final_hash: str, meta: dict[str, Any]) -> tuple[list[bytes], bool] | None:
    """Features of every legal set as float32 pieces (joined: the rows in order): by replay from the
    first recorded state (checked against every recorded legal set and the final state hash; in
    one call on the native core), else from each recorded state (None where the columns came
    without them: the caller reads the file again with the reference reader)."""
    state = _start(decisions.first, meta)
    replay = getattr(getattr(state, "_core", None), "replay_features", None)
    if replay is not None:
        data, offsets, ids, after = replay(decisions.action_id)
        if (offsets, ids) == decisions.legal and after.state_hash() == final_hash:
            return [data], True
    else:
        parts = _replayed(state, decisions.action_id, _legal_lists(decisions.legal), final_hash)
        if parts is not None:
            return parts, True
    if decisions.states is None:
        return None
    parts = []
    for state_json, ids in zip(decisions.states, _legal_lists(decisions.legal)):  # every state was verified
        action_feature_parts(_state(state_json), ids, parts)
    return parts, False


def _legal_lists(legal: tuple[bytes, bytes]) -> list[list[int]]:
    offsets, ids = memoryview(legal[0]).cast("i"), memoryview(legal[1]).cast("h").tolist()
    return [ids[offsets[k]:offsets[k + 1]] for k in range(len(offsets) - 1)]


def _replayed(state: engine.State, action_ids: list[int], legal: list[list[int]],
              final_hash: str) -> list[bytes] | None:
    """The replay of :func:`_features` step by step (the Python engine); None where it departs
    from the trace."""
    parts: list[bytes] = []
    try:
        for action_id, ids in zip(action_ids, legal):
            if state.legal_actions() != ids:
                return None
            action_feature_parts(state, ids, parts)
            state.apply(action_id)
    except engine.EngineError:
        return None
    return parts if state.state_hash() == final_hash else None


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _policy(policy: Any, n_legal: int) -> tuple[Any, Any, Any]:
    """(probabilities or None, value or None, policy JSON or None) of a recorded policy object."""
    if not isinstance(policy, dict):
        return None, None, None
    p = policy.get("probabilities")
    ok = isinstance(p, list) and len(p) == n_legal and all(_number(x) for x in p)
    v = policy.get("value")
    return p if ok else None, v if _number(v) else None, orjson.dumps(policy).decode()


def battle_rows(group: str, battle_id: str, index: int, battle_dir: str | Path,
                files: dict[str, str] | None, compact_sha256: str | None = None) -> dict[str, Any]:
    """Every row one finished, non-degraded battle contributes (see the module docstring); ``files``
    and ``compact_sha256``: its catalog line's digests."""
    battle_dir = Path(battle_dir)
    return trace_rows(_read_trace(battle_dir, files, compact_sha256), group, battle_id, index,
                      str(battle_dir / "v5"), files)


class _Decisions(NamedTuple):
    """One battle's decisions: ``columns``, the decisions table's columns the trace holds by name
    (lists, or :class:`Packed` from the core), and what the rest of the reading needs."""

    columns: dict[str, Any]
    turn: list[int]
    player: list[int]
    action_id: list[int]
    legal: tuple[bytes, bytes]  # every decision's legal ids: int32 offsets (n + 1) into int16 ids
    obs: list[bytes]  # the float32 observations in pieces (joined: one vector a decision, in order)
    first: bytes  # decision 0's verified state, where the replay starts
    states: list[bytes] | None  # every decision's verified state (the reference reader only)


def _check_count(path: str, what: str, n: int, expected: Any, empty_ok: bool = True) -> None:
    if n != expected or not (n or empty_ok):
        raise Corrupt(f"{path} holds {n} {what}; meta records {expected}")


def _native_reader(name: str) -> Any:
    core = backend.native()
    return getattr(core, name, None) if core is not None else None


def _legal_buffers(legal: list[list[int]], where: str) -> tuple[bytes, bytes]:
    try:
        return (array("i", [0, *accumulate(map(len, legal))]).tobytes(),
                array("h", chain.from_iterable(legal)).tobytes())
    except OverflowError:
        bad = next(ids for ids in legal if any(not -32768 <= a <= 32767 for a in ids))
        raise Corrupt(f"{where}: legal actions {bad} are not action ids") from None


def _packed_decisions(fast: tuple[dict[str, tuple], bytes, bytes]) -> _Decisions:
    """The decisions as ``engine_native.read_decisions`` gives them (columns, observations, first state)."""
    packed, obs, first = fast
    columns = {name: Packed(*column) for name, column in packed.items()}
    legal = columns.pop("legal_action_ids")
    return _Decisions(columns, _values(columns["turn"], "h"), _values(columns["player"], "b"),
                      _values(columns["action_id"], "h"), (legal.offsets, legal.values), [obs], first, None)


def _decision_columns(data: bytes, where: str, battle_id: str, decisions: Any, native: bool = True) -> _Decisions:
    """The decisions of ``actions.jsonl`` (``decisions``: their number in the meta), checked."""
    read = _native_reader("read_decisions") if native else None
    fast = read(data, battle_id, V5_SCHEMA_VERSION, engine.OBS_VERSION, OBS_BYTES) if read is not None else None
    if fast is not None:
        out = _packed_decisions(fast)
        _check_count(f"{where}/actions.jsonl", "decisions", len(out.turn), decisions)
        return out
    where_actions = f"{where}/actions.jsonl"
    records = _lines(data, where_actions, _DECISIONS)
    _check_count(where_actions, "decisions", len(records), decisions, empty_ok=False)
    legal = [[a.action_id for a in r.legal_actions] for r in records]
    positions: list[int] = []
    obs: list[bytes] = []
    states: list[bytes] = []
    probabilities: list[Any] = []
    values: list[Any] = []
    policies: list[Any] = []
    decode = pybase64.b64decode
    for i, (r, ids) in enumerate(zip(records, legal)):
        if r.decision_index != i or r.battle_id != battle_id or r.schema_version != V5_SCHEMA_VERSION:
            raise Corrupt(f"{where_actions} record {i + 1}: decision_index {r.decision_index!r} (expected {i}, "
                          f"contiguous) of battle {r.battle_id!r}, trace schema_version {r.schema_version!r} "
                          f"(expected {V5_SCHEMA_VERSION})")
        try:
            positions.append(ids.index(r.action_id))
        except ValueError:
            raise Corrupt(f"{where_actions} decision {i}: chosen action {r.action_id} is not among the legal "
                          f"actions {ids}") from None
        o = r.observation
        if o.obs_version != engine.OBS_VERSION or o.encoding != "base64" or o.dtype != "float32":
            raise Corrupt(f"{where_actions} decision {i}: observation is not base64 float32 of obs_version "
                          f"{engine.OBS_VERSION}")
        try:
            vector = decode(o.data, validate=True)
        except ValueError:
            vector = b""
        if len(vector) != OBS_BYTES:
            raise Corrupt(f"{where_actions} decision {i}: observation data is not the base64 of {engine.OBS_DIM} "
                          f"float32 values")
        obs.append(vector)
        state = _verified_state(r.state_before, r.state_hash_before)
        if state is None:
            raise Corrupt(f"{where_actions} decision {i}: state_before does not match its recorded state_hash_before")
        states.append(state)
        p, v, j = _policy(r.policy, len(ids)) if r.policy is not None else (None, None, None)
        probabilities.append(p)
        values.append(v)
        policies.append(j)
    acting = [r.actor for r in records]
    turn, player, action_id = [r.turn for r in records], [r.player for r in records], [r.action_id for r in records]
    columns = {
        "turn": turn, "player": player, "actor_type": [a.type for a in acting], "actor_spec": [a.spec for a in acting],
        "actor_kind": [a.kind for a in acting], "actor_weights_hash": [a.weights_hash for a in acting],
        "actor_codename": [a.codename for a in acting], "state_hash_before": [r.state_hash_before for r in records],
        "action_id": action_id, "action_index": positions, "rationale": [r.rationale for r in records],
        "policy_probabilities": probabilities, "policy_value": values, "policy_json": policies,
    }
    return _Decisions(columns, turn, player, action_id, _legal_buffers(legal, where_actions), obs, states[0], states)


def trace_rows(raw: dict[str, bytes], group: str, battle_id: str, index: int, where: str,
               files: dict[str, str]) -> dict[str, Any]:
    """The rows of one battle's trace files already read (``raw``: file name -> bytes, whose
    sha256 digests are ``files``); ``where`` names the trace in messages."""
    meta = _meta(raw["meta.jsonl"], where, battle_id)
    result = meta["result"]
    decisions = _decision_columns(raw["actions.jsonl"], where, battle_id, result["decisions"])
    turns = _turn_columns(raw["turns.jsonl"], result["turns"], decisions.turn, where)
    try:
        features = _features(decisions, result["final_state_hash"], meta)
        if features is None:  # the core's replay departs from the trace: every recorded state is needed
            decisions = _decision_columns(raw["actions.jsonl"], where, battle_id, result["decisions"], native=False)
            features = _features(decisions, result["final_state_hash"], meta)
    except engine.EngineError as exc:
        raise Corrupt(f"{where}/actions.jsonl: a recorded state cannot be rebuilt ({exc})") from None
    features, verified = features
    winner = result["winner"]
    actors, deck_ids = meta["actors"], meta["deck_ids"]
    bad = set(decisions.player) - {1, 2}
    if bad:
        raise Corrupt(f"{where}/actions.jsonl: player {min(bad)} is not 1 or 2")
    p1, p2 = actors["p1"], actors["p2"]
    return {
        "dec": decisions.columns, "decisions": len(decisions.turn),
        # columns of one value per battle, and of one per acting player (player 1's, player 2's)
        "per_battle": {"battle_id": battle_id, "group": group, "battle_index": index,
                       "battle_tag": meta["battle_tag"], "obs_version": engine.OBS_VERSION, "winner": winner},
        "per_seat": {"opponent_type": (p2["type"], p1["type"]), "opponent_spec": (p2.get("spec"), p1.get("spec")),
                     "opponent_kind": (p2["kind"], p1["kind"]),
                     "opponent_weights_hash": (p2.get("weights_hash"), p1.get("weights_hash")),
                     "own_deck_id": (deck_ids["p1"], deck_ids["p2"]),
                     "opponent_deck_id": (deck_ids["p2"], deck_ids["p1"]),
                     "outcome": tuple(0 if winner == 0 else (1 if winner == p else -1) for p in (1, 2))},
        "obs": decisions.obs, "legal": decisions.legal, "features": features, "turns": turns,
        "battle": _battle_row(meta, group, battle_id, index, verified, files)}


def _meta(data: bytes, where: str, battle_id: str) -> dict[str, Any]:
    lines = [line for line in data.splitlines() if line.strip()]
    if len(lines) != 1:
        raise Corrupt(f"{where}/meta.jsonl holds {len(lines)} records, not 1")
    try:
        meta = orjson.loads(lines[0])
    except orjson.JSONDecodeError as exc:
        raise Corrupt(f"{where}/meta.jsonl line 1 is not valid JSON ({exc})") from None
    if not isinstance(meta, dict) or meta.get("schema_version") != V5_SCHEMA_VERSION:
        raise Corrupt(f"{where}/meta.jsonl line 1: not a trace record of schema_version {V5_SCHEMA_VERSION}")
    result = meta["result"]
    if (meta.get("battle_id") != battle_id or result.get("status") != "finished" or meta.get("degraded")
            or meta.get("omniscient_peeks")):
        raise Corrupt(f"{where}/meta.jsonl does not describe a finished, non-degraded, unpeeked battle {battle_id} "
                      f"(status {result.get('status')!r}, degraded {meta.get('degraded')!r}, omniscient peeks "
                      f"{meta.get('omniscient_peeks')!r}) although its catalog line does")
    if meta.get("obs_version") != engine.OBS_VERSION:
        raise Corrupt(f"{where}: obs_version {meta.get('obs_version')!r}; this engine computes observation layout "
                      f"{engine.OBS_VERSION} (materialize with a matching ExtraRLHF)")
    return meta


def _compact(data: bytes) -> bytes:
    """JSON as the writer writes it (compact, keys in their order, UTF-8): bytes without
    whitespace or escapes already are; others (a re-formatted trace) are re-serialized."""
    if b" " in data or b"\t" in data or b"\\u" in data:
        return orjson.dumps(orjson.loads(data))
    return data


def _turn_columns(data: bytes, expected: Any, decision_turns: list[int], where: str,
                  native: bool = True) -> dict[str, Any]:
    """The rows of ``turns.jsonl`` (``expected``: their number in the meta), checked."""
    path = f"{where}/turns.jsonl"
    read = _native_reader("read_turns") if native else None
    fast = read(data, V5_SCHEMA_VERSION) if read is not None else None
    if fast is not None:
        columns: dict[str, Any] = {name: Packed(*column) for name, column in fast.items()}
        turn = _values(columns["turn"], "h")
        _check_count(path, "turns", len(turn), expected)
    else:
        turns = _lines(data, path, _TURNS)
        _check_count(path, "turns", len(turns), expected)  # before the per-turn checks
        starts, ends = [], []
        for number, t in enumerate(turns, 1):
            if t.schema_version != V5_SCHEMA_VERSION:
                raise Corrupt(f"{path} line {number}: trace schema_version is not {V5_SCHEMA_VERSION}")
            for raw, recorded, key, out in ((t.state_start, t.state_start_hash, "state_start", starts),
                                            (t.state_end, t.state_end_hash, "state_end", ends)):
                state = _verified_state(raw, recorded)
                if state is None:
                    raise Corrupt(f"{path} line {number}: {key} does not match its recorded {key}_hash")
                out.append(state.decode())
        turn = [t.turn for t in turns]
        columns = {
            "turn": turn, "active_player": [t.active_player for t in turns], "events": [len(t.events) for t in turns],
            "state_start_hash": [t.state_start_hash for t in turns], "state_end_hash": [t.state_end_hash for t in turns],
            "events_json": [_compact(b"[" + b",".join(t.events) + b"]") for t in turns],
            "state_start_json": starts, "state_end_json": ends,
        }
    per_turn = Counter(decision_turns)
    return {**columns, "decisions": [per_turn.get(t, 0) for t in turn]}


def _battle_row(meta: dict[str, Any], group: str, battle_id: str, index: int, verified: bool,
                files: dict[str, str]) -> dict[str, Any]:
    result, deck_ids = meta["result"], meta["deck_ids"]
    p1, p2 = meta["actors"]["p1"], meta["actors"]["p2"]
    return {
        "battle_id": battle_id, "group": group, "battle_index": index, "seed": meta["seed"],
        "ruleset": meta["ruleset"], "engine_version": meta["engine_version"], "obs_version": meta["obs_version"],
        "battle_tag": meta["battle_tag"], "p1_type": p1["type"], "p1_spec": p1.get("spec"), "p1_kind": p1["kind"],
        "p1_weights_hash": p1.get("weights_hash"), "p1_codename": p1.get("codename"), "p2_type": p2["type"],
        "p2_spec": p2.get("spec"), "p2_kind": p2["kind"], "p2_weights_hash": p2.get("weights_hash"),
        "starting_player": meta["starting_player"], "p1_deck": meta["decks"]["p1"], "p2_deck": meta["decks"]["p2"],
        "p1_deck_id": deck_ids["p1"], "p2_deck_id": deck_ids["p2"], "status": "finished", "winner": result["winner"],
        "reason": result["reason"], "turns": result["turns"], "decisions": result["decisions"],
        "degraded": False, "omniscient_peeks": 0, "policy_warnings": len(meta.get("policy_warnings") or []),
        "final_state_hash": result["final_state_hash"], "replay_verified": verified,
        "meta_sha256": files["meta.jsonl"], "turns_sha256": files["turns.jsonl"],
        "actions_sha256": files["actions.jsonl"],
    }


def read_battles(tasks: list[tuple]) -> tuple[list[tuple[str, str | None]], list[dict[str, Any]]]:
    """Rows of each task ``(group, battle_id, index, battle_dir, files, compact_sha256)``: returns
    the outcome per task (``("ok", None)`` or ``("corrupt", message)``) and the rows of the good
    ones, in order."""
    outcomes: list[tuple[str, str | None]] = []
    rows: list[dict[str, Any]] = []
    for group, battle_id, index, battle_dir, files, compact_sha256 in tasks:
        try:
            rows.append(battle_rows(group, battle_id, index, battle_dir, files, compact_sha256))
            outcomes.append(("ok", None))
        except Corrupt as exc:
            outcomes.append(("corrupt", str(exc)))
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
            outcomes.append(("corrupt", f"battle {battle_id} of group {group}: malformed trace "
                                        f"({type(exc).__name__}: {exc})"))
    return outcomes, rows
