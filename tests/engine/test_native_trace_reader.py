"""The core's trace reader (``engine_native.read_decisions`` / ``read_turns``,
native/src/trace_reader.cc, issue 50) against the Python reader of datasets/battles.py.

The rule it must keep: where the core takes a file, its columns equal the Python reader's; where
the Python reader refuses a file (Corrupt, or any error), the core never takes it. It may decline
a file the Python reader takes (another JSON layout, escapes in a returned string): the Python
reader then reads it, so materialize's rows are the same either way. Checked on real traces (a
search teacher's policy objects, a v5 network's probabilities, people's rationales), on named
edits and on hypothesis-fuzzed lines; ``make sanitize`` runs this file under ASan + UBSan. Also
here: the core's sha256 (SHA-NI and the portable code) against hashlib, and its text of floats
against orjson's (the policy JSON is taken as written only where orjson would write it so)."""

from __future__ import annotations

import json
import math
import os
import random
import re
import struct
import subprocess
import sys
from typing import Any

import orjson
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import engine
from extrarlhf.datasets import battles, row_batches
from extrarlhf.datasets.tables import SCHEMAS
from extrarlhf.policies.champion import ensure_champion
from extrarlhf.runtime import trace_files
from extrarlhf.runtime.match import start_match
from extrarlhf.runtime.series import run_series
from extrarlhf.runtime.sessions import SessionStore
from tests.native_helpers import require_native

engine_native = require_native()
OBS_BYTES = 4 * engine.OBS_DIM
FUZZ = settings(deadline=None, max_examples=400, suppress_health_check=[HealthCheck.too_slow,
                                                                       HealthCheck.function_scoped_fixture])


class Traces(list):
    def __repr__(self) -> str:  # hypothesis prints its arguments
        return f"<{len(self)} traces>"


@pytest.fixture(scope="module")
def traces(tmp_path_factory) -> list[tuple[str, bytes, bytes]]:
    """(battle id, actions.jsonl, turns.jsonl) of a search teacher's, a network's and a person's battles."""
    root = tmp_path_factory.mktemp("reader")
    run_series(root, "teach", 2, p1_model="search:baseline:greedy?sims=4", opponent="baseline:greedy", seed=3)
    checkpoints = tmp_path_factory.mktemp("checkpoints")
    ensure_champion(checkpoints)  # the shipped champion (a sets-encoder v5 network), as make setup registers it
    run_series(root, "champ", 1, p1_model="champion", opponent="baseline:random", seed=4, checkpoints_dir=checkpoints)
    match = start_match(SessionStore(root), "people", "human", "baseline:greedy", seed=5)
    texts = ["I trade first", "café au lait", None, "plain"]
    k = 0
    while not match.done:
        match.submit(match.legal_actions()[-1]["action_id"], rationale=texts[k % 4])
        k += 1
    match.finish()
    out = []
    for v5 in sorted(root.glob("*/battles/*/v5")):
        if (trace_files.find(v5, "actions.jsonl") is not None
                and json.loads(trace_files.read(v5, "meta.jsonl"))["result"]["status"] == "finished"):
            out.append((v5.parent.name, trace_files.read(v5, "actions.jsonl"), trace_files.read(v5, "turns.jsonl")))
    assert len(out) == 4, [t[0] for t in out]  # 2 teacher battles, 1 network's, 1 person's
    return Traces(out)


def arrow(columns: dict[str, Any], table: str) -> dict[str, Any]:
    """Columns (lists or the core's Packed buffers) as the Arrow arrays materialize makes of them, as Python values."""
    types = {f.name: f.type for f in SCHEMAS[table]}
    return {name: row_batches._column([column], types[name], engine_native).to_pylist() for name, column in columns.items()}


def comparable(decisions: battles._Decisions) -> dict[str, Any]:
    out = decisions._asdict()
    out.pop("states")
    out["obs"] = b"".join(out["obs"])
    out["columns"] = arrow(out["columns"], "decisions")
    return out


def reference(data: bytes, battle_id: str) -> tuple[str, Any]:
    """('ok', columns) or ('refused', message) from the Python reader."""
    try:
        n = len(battles._lines(data, "w/actions.jsonl", battles._DECISIONS))
        return "ok", comparable(battles._decision_columns(data, "w", battle_id, n, native=False))
    except Exception as exc:  # noqa: BLE001 - any refusal counts
        return "refused", f"{type(exc).__name__}: {exc}"


def native(data: bytes, battle_id: str) -> dict[str, Any] | None:
    fast = engine_native.read_decisions(data, battle_id, 1, engine.OBS_VERSION, OBS_BYTES)
    return None if fast is None else comparable(battles._packed_decisions(fast))


def assert_kept(data: bytes, battle_id: str) -> bool:
    """The rule above for one actions file; True when the core took it."""
    got = native(data, battle_id)
    kind, want = reference(data, battle_id)
    if got is not None:
        assert kind == "ok", f"the core took a file the Python reader refuses ({want})"
        assert got == want
    return got is not None


TURN_COLUMNS = ("turn", "active_player", "events", "state_start_hash", "state_end_hash", "events_json",
                "state_start_json", "state_end_json")


def turn_reference(data: bytes) -> tuple[str, Any]:
    try:
        n = len(battles._lines(data, "w/turns.jsonl", battles._TURNS))
        cols = battles._turn_columns(data, n, [], "w", native=False)
        for e in cols["events_json"]:  # (raw bytes that are not UTF-8 would fail as an Arrow string column)
            e.decode()
    except Exception as exc:  # noqa: BLE001
        return "refused", f"{type(exc).__name__}: {exc}"
    return "ok", arrow({k: cols[k] for k in TURN_COLUMNS}, "turns")


def assert_turns_kept(data: bytes) -> bool:
    got = engine_native.read_turns(data, 1)
    kind, want = turn_reference(data)
    if got is not None:
        assert kind == "ok", f"the core took a turns file the Python reader refuses ({want})"
        assert sorted(got) == sorted(TURN_COLUMNS)
        assert arrow({k: battles.Packed(*v) for k, v in got.items()}, "turns") == want
    return got is not None


def test_the_core_takes_every_trace_as_written_and_its_columns_equal_the_python_readers(traces):
    kinds = set()
    for battle_id, actions, turns in traces:
        assert assert_kept(actions, battle_id)
        assert assert_turns_kept(turns)
        cols = reference(actions, battle_id)[1]["columns"]
        kinds |= {"probabilities" for p in cols["policy_probabilities"] if p is not None}
        kinds |= {"values" for v in cols["policy_value"] if v is not None}
        kinds |= {"rationale" for r in cols["rationale"] if r is not None}
    assert kinds == {"probabilities", "values", "rationale"}  # every kind of column was compared


def test_the_readers_datasets_battles_uses_give_the_same_columns_on_either_path(traces):
    for battle_id, actions, turns in traces:
        n = len(actions.splitlines())
        fast = battles._decision_columns(actions, "w", battle_id, n)
        slow = battles._decision_columns(actions, "w", battle_id, n, native=False)
        assert fast.states is None and slow.states is not None  # the first came from the core
        assert comparable(fast) == comparable(slow)
        m = len(turns.splitlines())
        fast_turns = battles._turn_columns(turns, m, fast.turn, "w")
        slow_turns = battles._turn_columns(turns, m, slow.turn, "w", native=False)
        assert isinstance(fast_turns["state_end_json"], battles.Packed)  # the core's
        assert arrow(fast_turns, "turns") == arrow(slow_turns, "turns")


def edit_line(data: bytes, index: int, change) -> bytes:
    lines = data.split(b"\n")
    lines[index] = change(lines[index])
    return b"\n".join(lines)


def relaid(line: bytes, **dumps: Any) -> bytes:
    return json.dumps(json.loads(line), **dumps).encode()


NAMED_EDITS = {
    # taken (the same columns)
    "keys_reordered": (lambda l: orjson.dumps(dict(reversed(list(orjson.loads(l).items())))), True),
    "unknown_field_added": (lambda l: l[:-1] + b',"extra":{"a":[1,2.5,"x\\u00e9"]}}', True),
    "crlf_line_end": (lambda l: l + b"\r", True),
    # declined (the Python reader decides)
    "spaces_after_separators": (lambda l: relaid(l, separators=(", ", ": ")), False),
    "ascii_escaped_non_ascii": (lambda l: l.replace(b'"actor":{', b'"actor":{"note":"caf\\u00e9",'), True),
    "battle_id_escaped": (lambda l: l.replace(b'"battle_id":"b', b'"battle_id":"\\u0062'), False),
    "duplicate_turn_key": (lambda l: l.replace(b'"turn":', b'"turn":1,"turn":', 1), False),
    "state_hash_wrong": (lambda l: l.replace(b'"state_hash_before":"', b'"state_hash_before":"0', 1), False),
    "rationale_with_escape": (lambda l: l.replace(b'"rationale":null', b'"rationale":"a\\nb"', 1), False),
    "decision_index_skipped": (lambda l: l.replace(b'"decision_index":', b'"decision_index":9', 1), False),
    "observation_not_base64": (lambda l: l.replace(b'"data":"', b'"data":"*', 1), False),
    "observation_short": (lambda l: l.replace(b'"encoding":"base64","data":"', b'"encoding":"base64","data":"AAAA', 1),
                          False),
    "space_inside_the_policy": (lambda l: l.replace(b'"visits":[', b'"visits":[ ', 1), False),
    "space_before_a_policy_number": (lambda l: l.replace(b'"policy":{', b'"policy":{"t": 1,', 1), False),
    "float_not_as_orjson_writes_it": (lambda l: l.replace(b'"policy":{', b'"policy":{"t":1E5,', 1), False),
    "integer_turn_as_float": (lambda l: l.replace(b'"turn":', b'"turn":1.0,"x":', 1), False),
    "not_json": (lambda l: l[: len(l) // 2], False),
    "invalid_utf8": (lambda l: l.replace(b'"actor":{', b'"actor":{"n":"\xff",', 1), False),
    "legal_id_past_int16": (lambda l: l.replace(b'"legal_actions":[', b'"legal_actions":[{"action_id":40000},', 1),
                            False),
    "player_three": (lambda l: l.replace(b'"player":1', b'"player":3', 1).replace(b'"player":2', b'"player":3', 1),
                     False),
}


@pytest.mark.parametrize("name", sorted(NAMED_EDITS))
def test_named_edits_are_taken_alike_or_left_to_the_python_reader(traces, name):
    change, taken = NAMED_EDITS[name]
    battle_id, actions, _ = traces[-1]  # a search teacher's (groups in name order: champ, people, teach)
    edited = edit_line(actions, 1, change)
    assert edited != actions
    assert assert_kept(edited, battle_id) is taken


def test_a_state_hash_mismatch_or_a_foreign_battle_is_refused_by_both(traces):
    battle_id, actions, turns = traces[-1]
    assert native(actions, battle_id + "x") is None and reference(actions, battle_id + "x")[0] == "refused"
    flipped = edit_line(actions, 2, lambda l: l.replace(b'"hand":[', b'"hand":[1,', 1))
    assert native(flipped, battle_id) is None
    assert "does not match its recorded state_hash_before" in reference(flipped, battle_id)[1]
    bad_turn = edit_line(turns, 0, lambda l: l.replace(b'"turn":1', b'"turn":70000', 1))
    assert engine_native.read_turns(bad_turn, 1) is None  # past int16: the Python reader decides
    assert engine_native.read_turns(turns, 2) is None and turn_reference(turns)[0] == "ok"  # another schema


def test_bad_arguments_are_refused_clearly():
    with pytest.raises(TypeError, match="data must be bytes"):
        engine_native.read_decisions("text", "b", 1, 1, OBS_BYTES)
    with pytest.raises(TypeError, match="data must be bytes"):
        engine_native.read_turns(bytearray(b"{}"), 1)
    assert engine_native.read_decisions(b"", "b", 1, 1, OBS_BYTES) is None  # no decisions: not taken
    assert {k: v[:2] for k, v in engine_native.read_turns(b"", 1).items()} == {k: (0, 0) for k in TURN_COLUMNS}


def test_the_cores_join_of_a_chunks_columns_is_arrows_concatenation(traces):
    """row_batches.battle_batches joins the battles' packed columns in the core (concat_columns): the
    same arrays as Arrow's own concatenation, nulls at any bit position included."""
    read = [battles._packed_decisions(engine_native.read_decisions(a, b, 1, engine.OBS_VERSION, OBS_BYTES))
            for b, a, _ in traces]
    read += read[::-1]  # battles of several lengths in both orders: bitmaps joined at every offset
    types = {f.name: f.type for f in SCHEMAS["decisions"]}
    nulls = 0
    for name, typ in types.items():
        pieces = [r.columns[name] for r in read if name in r.columns]
        if not pieces:
            continue
        joined = row_batches._column(pieces, typ, engine_native)
        joined.validate(full=True)
        assert joined.equals(pa.concat_arrays([row_batches._unpacked(p, typ) for p in pieces])), name
        nulls += joined.null_count
    assert nulls > 0  # nullable columns with nulls were joined


@pytest.mark.parametrize(("pieces", "item_bytes", "message"), [
    ("x", 1, "pieces must be a list"),
    ([(1, 0, None, None)], 1, "each piece must be a packed column"),
    ([(1, 0, None, None, "ab")], 1, "values must be bytes"),
    ([(2, 0, None, None, b"abc")], 1, "values do not match the lengths"),
    ([(2, 1, None, None, b"ab")], 1, "null_count does not match"),
    ([(2, 0, b"\x01", None, b"ab")], 1, "null_count does not match"),
    ([(2, 0, b"\x03\x00", None, b"ab")], 1, "validity must be None or bytes of 1"),
    ([(1, 0, None, b"\x00" * 4, b"")], 1, "offsets must be None or bytes of 8"),
    ([(1, 0, None, struct.pack("<2i", 1, 1), b"")], 1, "offsets must start at 0"),
    ([(2, 0, None, struct.pack("<3i", 0, 2, 1), b"a")], 1, "offsets must not decrease"),
    ([(1, 0, None, None, b"a"), (1, 0, None, struct.pack("<2i", 0, 1), b"a")], 1, "all have offsets or none"),
    ([(-1, 0, None, None, b"")], 1, "length must be in 0..2**31-1"),
    ([(1, 0, None, None, b"a")], 0, "item_bytes must be in 1..8"),
])
def test_bad_pieces_to_concat_columns_are_refused_clearly(pieces, item_bytes, message):
    with pytest.raises((TypeError, ValueError), match=re.escape(message)):
        engine_native.concat_columns(pieces, item_bytes)


TOKENS = [b" ", b"\\", b'"', b"{", b"}", b"[", b"]", b",", b":", b"null", b"-0", b"1e5", b"0.10", b"\\u00e9",
          b"\\ud800", b"\xff", b"\xc3\xa9", b"\x01", b"\n", b"9" * 20, b'"turn":', b'"policy":', b'"probabilities":[']


@FUZZ
@given(line=st.integers(0, 6), pos=st.floats(0, 1), cut=st.integers(0, 40), token=st.sampled_from(TOKENS),
       mode=st.sampled_from(["insert", "replace", "delete", "byte"]), byte=st.integers(0, 255))
def test_fuzzed_decision_lines_are_taken_alike_or_left_to_the_python_reader(traces, line, pos, cut, token, mode,
                                                                            byte):
    battle_id, actions, turns = traces[(line + cut) % len(traces)]
    lines = actions.split(b"\n")
    k = line % max(1, len(lines) - 1)
    target = lines[k]
    at = int(pos * len(target))
    if mode == "insert":
        target = target[:at] + token + target[at:]
    elif mode == "replace":
        target = target[:at] + token + target[at + len(token):]
    elif mode == "delete":
        target = target[:at] + target[at + cut:]
    else:
        target = target[:at] + bytes([byte]) + target[at + 1:]
    lines[k] = target
    assert_kept(b"\n".join(lines), battle_id)
    tl = turns.split(b"\n")
    j = line % max(1, len(tl) - 1)
    tl[j] = tl[j][:int(pos * len(tl[j]))] + token + tl[j][int(pos * len(tl[j])) + (cut % 3):]
    assert_turns_kept(b"\n".join(tl))


def test_the_cores_sha256_equals_hashlib_with_and_without_sha_ni():
    script = ("import hashlib, random, engine_native._core as c\n"
              "r = random.Random(7)\n"
              "for n in [*range(0, 300), 1000, 4096, 65543, 1 << 20]:\n"
              "    b = r.randbytes(n)\n"
              "    assert c._sha256_hex(b) == hashlib.sha256(b).hexdigest(), n\n"
              "print('ok')\n")
    for env in ({}, {"ENGINE_NATIVE_NO_SHANI": "1"}):
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                              env={**os.environ, **env})
        assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-10**20, 10**20) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4), max_leaves=30)


@FUZZ
@given(value=JSON_VALUES, spaces=st.booleans(), at=st.floats(0, 1), byte=st.sampled_from(list(b' ,:[]{}"\\-0e.tn')),
       mutate=st.booleans(), depth=st.integers(0, 70))
def test_any_skipped_value_is_taken_only_when_valid_json(traces, value, spaces, at, byte, mutate, depth):
    """An unknown field's value, which the core skips and validates without returning it: any JSON
    (nested up to depth, spaced or compact, unicode keys and strings), or one byte of it changed."""
    text = json.dumps(value, separators=(", ", ": ") if spaces else (",", ":"), ensure_ascii=False).encode()
    text = b"[" * depth + text + b"]" * depth
    if mutate:
        k = int(at * len(text))
        text = text[:k] + bytes([byte]) + text[k + 1:]
    battle_id, actions, _ = traces[-1]
    edited = edit_line(actions, 1, lambda l: l[:-1] + b',"extra":' + text + b"}")
    taken = assert_kept(edited, battle_id)
    if not mutate and depth <= 40 and b"\\" not in text:  # valid, not too deep, no escaped key: taken
        assert taken


BASE64_SCRIPT = """
import binascii, random, pybase64
import engine_native._core as c
r, refused, alphabet = random.Random(1), 0, b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
for trial in range(20000):
    raw = r.randbytes(r.choice([0, 1, 2, 3, 5, 11, 12, 17, 18, 30, 45, 100, 1904, r.randrange(0, 3000)]))
    text = bytearray(pybase64.b64encode(raw))
    if trial % 4 and text:  # one byte changed: outside the alphabet, padding, or another letter
        text[r.randrange(len(text))] = r.choice([r.randrange(256), 61, 45, 95, 128, 255, 32, r.choice(alphabet)])
    text = bytes(text)
    try:
        want = pybase64.b64decode(text, validate=True)
    except (ValueError, binascii.Error):
        want, refused = None, refused + 1
    got = c._base64_decode(text)
    # the same bytes, or refused where the Python reader would not write it so (non-zero unused bits, empty)
    assert got == want or (got is None and (not text or pybase64.b64encode(want) != text)), text[:80]
assert refused > 5000
print("ok")
"""


def test_the_cores_base64_is_pybase64s_with_and_without_ssse3():
    """The observation's base64: the core's (SSSE3 blocks, or the portable loop) against pybase64 strict."""
    for env in ({}, {"ENGINE_NATIVE_NO_SSSE3": "1"}):
        done = subprocess.run([sys.executable, "-c", BASE64_SCRIPT], capture_output=True, text=True, timeout=300,
                              env={**os.environ, **env})
        assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_the_float_text_taken_as_canonical_is_orjsons():
    r = random.Random(3)
    values = [m * 10.0 ** e for e in range(-300, 300) for m in (1.0, 1.2345, 9.999999999, -3.3, 5.0)]
    values += [struct.unpack("d", r.randbytes(8))[0] for _ in range(20000)]
    for edge in (1e-5, 1e16):
        values += [edge, math.nextafter(edge, 0), math.nextafter(edge, math.inf), -edge]
    values += [0.0, -0.0, 5e-324, 1.7976931348623157e308]
    checked = 0
    for v in values:
        if math.isfinite(v):
            assert engine_native._core._orjson_float(v) == orjson.dumps(v).decode(), v
            checked += 1
    assert checked > 20000
