"""Arrow record batches of trace rows (battles.trace_rows) and of rows appended one by one.

:func:`battle_batches` makes a chunk of battles' ``decisions``, ``turns`` and ``battles`` batches:
the columns the core's trace reader gives as Arrow buffers (``battles.Packed``) are joined in
the core and wrapped once; the columns of one value per battle or per acting player are spread
over the rows by ``take``; the float vectors are wrapped over their bytes. :class:`Columns`
buffers rows appended one at a time (the ``excluded`` table).

Flat columns from Python values are built from buffers by :func:`flat_array`, and values are
read back by :func:`numpy_values`: ``pa.array`` and ``Array.to_numpy`` import pandas on a first
call (0.15 CPU-s with its own imports), which a materializing process never needs.
"""

from __future__ import annotations

from array import array
from itertools import accumulate, chain
from typing import Any

import numpy as np
import pyarrow as pa

from engine import backend

from .battles import Packed
from .tables import ACTION_FEATURES, OBS, SCHEMAS


_INT_CODES = {pa.int8(): "b", pa.int16(): "h", pa.int32(): "i", pa.int64(): "q"}  # array module typecodes


def _bits(flags: Any, n: int) -> bytes:
    """An Arrow bitmap (least significant bit first) of ``n`` truth values."""
    return sum(1 << i for i, flag in enumerate(flags) if flag).to_bytes((n + 7) // 8, "little")


def _validity(values: list[Any]) -> tuple[bytes | None, int]:
    if None not in values:
        return None, 0
    return _bits((v is not None for v in values), len(values)), values.count(None)


def _ints(values: Any, code: str) -> array | None:
    """``values`` (None as 0) packed as typecode ``code`` when each is a plain int in its range, else None."""
    values = list(values)
    if any(type(v) is not int for v in values if v is not None):
        return None
    try:
        return array(code, [0 if v is None else v for v in values] if None in values else values)
    except OverflowError:
        return None


def flat_array(values: list[Any], typ: pa.DataType) -> pa.Array:
    """``pa.array(values, typ)`` for the tables' flat columns (strings, integers, booleans and
    fixed-size lists of integers, None as null), built from buffers: ``pa.array`` on a list or
    an ndarray imports pandas to ask whether it was handed pandas data, 0.15 CPU-s in each
    process that materializes. Values this does not take as they are (a wrong type, an integer
    out of range, text that is not UTF-8) go to ``pa.array``, which says what is wrong."""
    n = len(values)
    try:
        if pa.types.is_string(typ):
            if all(type(v) is str for v in values if v is not None):
                encoded = [b"" if v is None else v.encode() for v in values]
                offsets = array("q", accumulate(map(len, encoded), initial=0))
                if offsets[-1] < (1 << 31):
                    validity, nulls = _validity(values)
                    return pa.Array.from_buffers(typ, n, [validity and pa.py_buffer(validity),
                                                          pa.py_buffer(array("i", offsets)),
                                                          pa.py_buffer(b"".join(encoded))], null_count=nulls)
        elif typ in _INT_CODES:
            data = _ints(values, _INT_CODES[typ])
            if data is not None:
                validity, nulls = _validity(values)
                return pa.Array.from_buffers(typ, n, [validity and pa.py_buffer(validity), pa.py_buffer(data)],
                                             null_count=nulls)
        elif pa.types.is_boolean(typ):
            if all(type(v) is bool for v in values if v is not None):
                validity, nulls = _validity(values)
                return pa.Array.from_buffers(typ, n, [validity and pa.py_buffer(validity),
                                                      pa.py_buffer(_bits(values, n))], null_count=nulls)
        elif pa.types.is_fixed_size_list(typ) and typ.value_type in _INT_CODES and None not in values:
            size = typ.list_size
            if all(type(v) in (list, tuple) and len(v) == size for v in values):
                data = _ints(chain.from_iterable(values), _INT_CODES[typ.value_type])
                if data is not None:
                    child = pa.Array.from_buffers(typ.value_type, n * size, [None, pa.py_buffer(data)])
                    return pa.FixedSizeListArray.from_arrays(child, type=typ)
    except UnicodeEncodeError:
        pass
    return pa.array(values, typ)


def int_array(data: np.ndarray) -> pa.Array:
    """An integer ndarray as an Arrow array over its memory (``pa.array`` would import pandas)."""
    data = np.ascontiguousarray(data)
    return pa.Array.from_buffers(pa.from_numpy_dtype(data.dtype), len(data), [None, pa.py_buffer(data)])


def numpy_values(array: pa.Array) -> np.ndarray:
    """A primitive array's values as a read-only ndarray over its buffer, without
    ``Array.to_numpy`` (which imports pandas on a first call); one with nulls, or a type whose
    values are not a plain buffer (booleans, strings), goes through ``to_numpy``."""
    typ = array.type
    if array.null_count or not (pa.types.is_integer(typ) or pa.types.is_floating(typ)):
        return array.to_numpy(zero_copy_only=False)
    dtype = typ.to_pandas_dtype()
    return np.frombuffer(array.buffers()[1], dtype, len(array), array.offset * np.dtype(dtype).itemsize)


def float32_array(data: bytes) -> pa.Array:
    """Native float32 values as an Arrow array over the same memory (no numpy round trip)."""
    return pa.Array.from_buffers(pa.float32(), len(data) // 4, [None, pa.py_buffer(data)])


def _unpacked(column: Packed, typ: pa.DataType) -> pa.Array:
    """The Arrow array over a column's buffers as the core's reader gives them (no copy)."""
    validity = None if column.validity is None else pa.py_buffer(column.validity)
    values = pa.py_buffer(column.values)
    if pa.types.is_list(typ):
        item = typ.value_type
        child = pa.Array.from_buffers(item, len(column.values) // item.byte_width, [None, values])
        return pa.Array.from_buffers(typ, column.length, [validity, pa.py_buffer(column.offsets)],
                                     null_count=column.null_count, children=[child])
    offsets = [] if column.offsets is None else [pa.py_buffer(column.offsets)]
    return pa.Array.from_buffers(typ, column.length, [validity, *offsets, values], null_count=column.null_count)


def _item_bytes(typ: pa.DataType) -> int:
    if pa.types.is_string(typ):
        return 1
    return (typ.value_type if pa.types.is_list(typ) else typ).byte_width


def _column(pieces: list[Any], typ: pa.DataType, core: Any) -> pa.Array:
    """One column of some battles: each battle's piece a list of values or a :class:`Packed`
    (the core's, which ``core`` joins; wrapped once)."""
    packed = [isinstance(piece, Packed) for piece in pieces]
    if not any(packed):
        return flat_array(list(chain.from_iterable(pieces)), typ)
    if all(packed):
        one = pieces[0] if len(pieces) == 1 else Packed(*core.concat_columns(pieces, _item_bytes(typ)))
        return _unpacked(one, typ)
    return pa.concat_arrays([_unpacked(p, typ) if isinstance(p, Packed) else flat_array(p, typ) for p in pieces])


def _legal(battles: list[dict[str, Any]]) -> tuple[pa.Array, pa.Array]:
    """The battles' legal sets as one list column's int32 offsets and int16 ids."""
    parts, base = [], 0
    for b in battles:
        offsets = np.frombuffer(b["legal"][0], np.int32)
        parts.append(offsets[:-1] + base)
        base += int(offsets[-1])
    parts.append(np.array([base], np.int32))
    ids = b"".join(b["legal"][1] for b in battles)
    return int_array(np.concatenate(parts)), pa.Array.from_buffers(pa.int16(), base, [None, pa.py_buffer(ids)])


def _spread(values: list[Any], typ: pa.DataType, index: np.ndarray) -> pa.Array:
    """The column whose row i holds ``values[index[i]]`` (one value per battle, or per seat),
    without the all-valid bitmap ``take`` gives strings (the arrays, and their ``nbytes`` the
    card reports, are then those ``pa.array`` makes of the rows)."""
    out = flat_array(values, typ).take(int_array(index))
    buffers = out.buffers()
    if out.null_count == 0 and buffers[0] is not None:
        out = pa.Array.from_buffers(typ, len(out), [None, *buffers[1:]], null_count=0)
    return out


def battle_batches(battles: list[dict[str, Any]]) -> dict[str, pa.RecordBatch]:
    """The ``decisions``, ``turns`` and ``battles`` record batches of some battles' rows
    (as built by battles.trace_rows), in order."""
    out: dict[str, pa.RecordBatch] = {}
    core = backend.native()  # packed columns come from it, and it joins them
    offsets, legal_ids = _legal(battles)
    schema = SCHEMAS["decisions"]
    counts = np.array([b["decisions"] for b in battles], np.int64)
    battle_of_row = np.repeat(np.arange(len(battles)), counts)
    players = _column([b["dec"]["player"] for b in battles], schema.field("player").type, core)
    seat_of_row = 2 * battle_of_row + numpy_values(players).astype(np.int64) - 1
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    per_battle, per_seat = (battles[0]["per_battle"], battles[0]["per_seat"]) if battles else ({}, {})
    arrays = []
    for f in schema:
        if f.name == "observation":
            flat = float32_array(b"".join(chain.from_iterable(b["obs"] for b in battles)))
            arrays.append(pa.FixedSizeListArray.from_arrays(flat, type=OBS))
        elif f.name == "legal_action_ids":
            arrays.append(pa.ListArray.from_arrays(offsets, legal_ids, type=f.type))
        elif f.name == "legal_action_features":
            flat = float32_array(b"".join(chain.from_iterable(b["features"] for b in battles)))
            inner = pa.FixedSizeListArray.from_arrays(flat, type=ACTION_FEATURES)
            arrays.append(pa.ListArray.from_arrays(offsets, inner, type=f.type))
        elif f.name == "player":
            arrays.append(players)
        elif f.name == "decision_index":
            arrays.append(int_array((np.arange(len(battle_of_row)) - starts).astype(np.int32)))
        elif f.name in per_battle:
            arrays.append(_spread([b["per_battle"][f.name] for b in battles], f.type, battle_of_row))
        elif f.name in per_seat:
            arrays.append(_spread([v for b in battles for v in b["per_seat"][f.name]], f.type, seat_of_row))
        else:
            arrays.append(_column([b["dec"][f.name] for b in battles], f.type, core))
    out["decisions"] = pa.RecordBatch.from_arrays(arrays, schema=schema)
    turn_counts = np.array([len(b["turns"]["decisions"]) for b in battles], np.int64)
    battle_of_turn = np.repeat(np.arange(len(battles)), turn_counts)
    out["turns"] = pa.RecordBatch.from_arrays(
        [_spread([b["per_battle"][f.name] for b in battles], f.type, battle_of_turn) if f.name in per_battle
         else _column([b["turns"][f.name] for b in battles], f.type, core) for f in SCHEMAS["turns"]],
        schema=SCHEMAS["turns"])
    out["battles"] = pa.RecordBatch.from_arrays(
        [flat_array([b["battle"][f.name] for b in battles], f.type) for f in SCHEMAS["battles"]],
        schema=SCHEMAS["battles"])
    return out


class Columns:
    """Row-wise appends into per-column lists, turned into Arrow arrays at flush."""

    def __init__(self, table: str) -> None:
        self.schema = SCHEMAS[table]
        self.data: dict[str, list] = {name: [] for name in self.schema.names}

    def __len__(self) -> int:
        return len(next(iter(self.data.values())))

    def append(self, row: dict[str, Any]) -> None:
        for name, values in self.data.items():
            values.append(row[name])

    def arrays(self) -> list[pa.Array]:
        out = [flat_array(self.data[f.name], f.type) for f in self.schema]
        for values in self.data.values():
            values.clear()
        return out
