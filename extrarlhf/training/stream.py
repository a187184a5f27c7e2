"""A V5 dataset's train/val/test decisions, streamed in bounded batches (DESIGN 11.1).

Two stages, neither holding a dataset in memory:

1. :meth:`DatasetStream.scan` reads the Parquet files row group by row group
   (``ParquetFile.iter_batches(row_groups=[g])``: one group's columns, never the file; the
   dataset writers cut row groups of a few thousand decisions at battle boundaries), turns each
   batch into decisions of its split (the keyed hash below, the imitate filter, the soft
   targets: data.from_table), counts them, and *spools* them to an LZ4-compressed Arrow IPC
   file per split in a temporary folder (one record batch per batch read);
2. every epoch, validation and test pass reads the spool record batch by record batch
   (``RecordBatchFileReader.get_batch``, no memory map, so nothing of the file stays resident).

Why a spool built by the run and not Parquet again per epoch: decoding the nested Parquet
columns and parsing ``policy_json`` for the soft targets cost more than the training step
itself (measured: about 1.3 s per pass over 21,708 decisions on this loaded machine); the
spool is decoded once, and an LZ4 record batch reads back in milliseconds. Why not a cache
kept per dataset version: it would be a second copy of every version to keep consistent and
collect; the spool lives as long as the training (:meth:`DatasetStream.close`, a ``with``
block) in ``TMPDIR``. A file written by another tool as one huge row group is still read in
``READ_ROWS`` batches, but pyarrow decodes the whole group's column chunks for it: rewrite
such a file with smaller row groups (benchmarks/train_memory.py measures the peak memory).

Per batch read, for a ``v5_decisions`` dataset, the split of each decision is the keyed hash
of its battle id (as ``split_v5_training_dataset`` assigns it; a ``v5_policy_split`` has one
file per split); then the imitate filter and the soft targets (data.from_table).

Shuffling (:meth:`DatasetStream.epoch`), deterministic for the run's generator: the spooled
record batches (or, before the scan, the row groups) in a seeded order, each into a buffer; when the buffer holds ``buffer`` decisions or
more it is permuted and all but ``buffer // 2`` of them are emitted (the rest stay to mix with
the next groups); at the end what is left, permuted. Memory: at most ``buffer`` + one record
batch of decisions. Every decision of the split is emitted exactly once per epoch.
:func:`batches` cuts that stream into training batches of ``batch_size`` decisions the policy
learns from (imitated, more than one legal action) together with the other decisions between
them (the value head learns from every decision). :func:`prefetched` reads ahead in a thread.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import shutil
import tempfile
import threading
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from queue import Empty, Full, Queue
from typing import Any, Self

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import engine

from ..core.errors import InvalidArgument
from ..core.fileio import writing
from .data import COLUMNS, Decisions, concat, from_table, take, window

SPLITS = ("train", "val", "test")
READ_ROWS = 4096  # decisions per record batch read (a row group of the writers, at most)


@dataclass
class SplitStats:
    """What one pass over a split counted (train_policy's ``data`` block, the card)."""

    decisions: int = 0
    imitated_decisions: int = 0
    imitated_with_choice: int = 0
    legal_actions: int = 0
    valued_with_choice: int | None = None  # imitated decisions with a choice whose target is the search's values
    battle_ids: set[str] = field(default_factory=set)
    actors: dict[str, int] = field(default_factory=dict)

    def add(self, part: Decisions) -> None:
        rows = part.policy_rows()
        self.decisions += len(part)
        self.imitated_decisions += int(part.imitated.sum())
        self.imitated_with_choice += int(rows.size)
        self.legal_actions += int(part.offsets[-1])
        if part.valued is not None:
            self.valued_with_choice = (self.valued_with_choice or 0) + int(part.valued[rows].sum())
        self.battle_ids.update(part.battle_ids.tolist())

    def describe(self) -> dict[str, Any]:
        return {"decisions": self.decisions, "battles": len(self.battle_ids),
                "imitated_decisions": self.imitated_decisions, "imitated_with_choice": self.imitated_with_choice,
                "legal_actions": self.legal_actions,
                "mean_legal_actions": round(self.legal_actions / self.decisions, 3) if self.decisions else 0.0,
                "actors": dict(sorted(self.actors.items()))}


@dataclass(frozen=True)
class _Unit:
    """One row group of one file, and the split it is read for (None: the file is that split)."""

    path: Path
    row_group: int
    split: str | None


class DatasetStream:
    """Batches of one checked dataset's splits (train.check_dataset's ``info``)."""

    def __init__(self, info: dict[str, Any], imitate: str, temperature: float | None = None) -> None:
        path, manifest = info["path"], info["manifest"]
        self.imitate, self.temperature = imitate, temperature
        self.columns = COLUMNS if temperature is None else [*COLUMNS, "policy_json"]
        if info["kind"] == "v5_policy_split":
            files = {s: (path / manifest["tables"][s]["file"], None) for s in SPLITS}
            self.how = {"method": "the dataset's own split",
                        **{k: manifest["split"].get(k) for k in ("split_key", "fractions", "group_key")}}
        else:
            from ..datasets import DEFAULT_FRACTIONS, DEFAULT_SPLIT_KEY

            one = path / manifest["tables"]["decisions"]["file"]
            files = {s: (one, s) for s in SPLITS}
            self.fractions = tuple(DEFAULT_FRACTIONS)
            self.how = {"method": "keyed hash of the battle id (as split_v5_training_dataset)",
                        "split_key": DEFAULT_SPLIT_KEY, "fractions": dict(zip(SPLITS, self.fractions)),
                        "group_key": "battle"}
        self.units: dict[str, list[_Unit]] = {}
        for split, (file, which) in files.items():
            groups = pq.ParquetFile(file).metadata.num_row_groups
            self.units[split] = [_Unit(file, g, which) for g in range(groups)]

    def _split_mask(self, battle_ids: pa.ChunkedArray | pa.Array, split: str) -> np.ndarray:
        from ..datasets import DEFAULT_SPLIT_KEY, bucket, split_of

        ids = battle_ids.to_pylist()
        assignment = {b: split_of(bucket(DEFAULT_SPLIT_KEY, "v5_policy", b), self.fractions) == split
                      for b in dict.fromkeys(ids)}
        return np.fromiter((assignment[b] for b in ids), dtype=bool, count=len(ids))

    def _read(self, unit: _Unit) -> Iterator[Decisions]:
        file = pq.ParquetFile(unit.path)
        for batch in file.iter_batches(batch_size=READ_ROWS, row_groups=[unit.row_group], columns=self.columns,
                                       use_threads=False):
            table = pa.Table.from_batches([batch])
            if unit.split is not None:
                keep = self._split_mask(table.column("battle_id"), unit.split)
                if not keep.any():
                    continue
                table = table.filter(pa.array(keep))
            if table.num_rows:
                yield from_table(table, self.imitate, self.temperature)

    def _parquet(self, split: str) -> Iterator[Decisions]:
        for unit in self.units[split]:
            yield from self._read(unit)

    def scan(self) -> dict[str, SplitStats]:
        """One pass over the Parquet files: every split's counts (module docstring), and its
        decisions spooled for the epochs. Call once, before the other readers."""
        self.spool = Path(tempfile.mkdtemp(prefix="extrarlhf-train-spool-"))
        self._remove = weakref.finalize(self, shutil.rmtree, self.spool, True)  # also when never closed
        self.batches: dict[str, int] = {}
        stats = {s: SplitStats() for s in SPLITS}
        options = pa.ipc.IpcWriteOptions(compression="lz4")
        with writing(self.spool, "spooling the training decisions"):
            for split in SPLITS:
                count = 0
                with pa.OSFile(str(self.spool / f"{split}.arrow"), "wb") as sink, \
                        pa.ipc.new_file(sink, _SPOOL_SCHEMA, options=options) as writer:
                    for part in self._parquet(split):
                        stats[split].add(part)
                        for actor, n in part.actors.items():
                            stats[split].actors[actor] = stats[split].actors.get(actor, 0) + n
                        writer.write_batch(_to_batch(part))
                        count += 1
                self.batches[split] = count
        return stats

    def close(self) -> None:
        """Delete the spool (the ``with`` block does)."""
        if getattr(self, "spool", None) is not None:
            self._remove()
            self.spool = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _spooled(self, split: str, order: Iterator[int] | None = None) -> Iterator[Decisions]:
        if getattr(self, "spool", None) is None:
            raise RuntimeError("DatasetStream.scan() builds the spool the readers read; call it first")
        with pa.OSFile(str(self.spool / f"{split}.arrow"), "rb") as source:
            reader = pa.ipc.open_file(source)
            for index in (range(reader.num_record_batches) if order is None else order):
                yield _from_batch(reader.get_batch(int(index)), self.temperature is not None)

    def chunks(self, split: str) -> Iterator[Decisions]:
        """The split's decisions in file order, one record batch at a time."""
        return self._spooled(split)

    def sample(self, split: str, n: int) -> Decisions | None:
        """The first ``n`` decisions of ``split`` (None when it has none)."""
        parts, have = [], 0
        for part in self.chunks(split):
            parts.append(part)
            have += len(part)
            if have >= n:
                break
        return take(concat(parts), np.arange(min(n, have))) if parts else None

    def epoch(self, split: str, rng: np.random.Generator, buffer: int,
              watermark: list[int] | None = None) -> Iterator[Decisions]:
        """The split's decisions shuffled within a bounded buffer (module docstring);
        ``watermark[0]`` (when given) records the most decisions the buffer held."""
        held: list[Decisions] = []
        size = 0
        for part in self._spooled(split, iter(rng.permutation(self.batches[split]))):
            held.append(part)
            size += len(part)
            if watermark is not None:
                watermark[0] = max(watermark[0], size)
            if size >= buffer:
                pool = concat(held)
                order = rng.permutation(size)
                keep = buffer // 2
                yield take(pool, order[:size - keep])
                held, size = ([take(pool, order[size - keep:])], keep) if keep else ([], 0)
                del pool
                _trim()
        if size:
            pool = concat(held)
            yield take(pool, rng.permutation(size))


def _malloc_trim() -> Callable[[], object]:
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc: nothing to trim
        return lambda *_: None


_MALLOC_TRIM = _malloc_trim()


def _trim() -> None:
    """Hand the heap's free pages back to the system after a buffer cycle. Why: the cycle's
    arrays are allocated in the reader thread (:func:`prefetched`) and freed in the trainer's,
    and glibc keeps each thread's arena's freed pages mapped: without this the peak RSS crept up
    with the number of cycles, i.e. with the rows (benchmarks/train_memory.py: 1.33x from 1x to
    16x; a single arena gave 1.22x)."""
    _MALLOC_TRIM(0)


_SPOOL_SCHEMA = pa.schema([
    ("battle_id", pa.string()), ("obs", pa.list_(pa.float32(), engine.OBS_DIM)),
    ("features", pa.list_(pa.list_(pa.float32(), engine.ACTION_FEATURE_DIM))),
    ("labels", pa.int64()), ("outcome", pa.float32()), ("imitated", pa.bool_()),
    ("targets", pa.list_(pa.float32())), ("valued", pa.bool_())])


def _to_batch(part: Decisions) -> pa.RecordBatch:
    offsets = pa.array(part.offsets.astype(np.int32))
    fixed = pa.FixedSizeListArray.from_arrays(pa.array(part.features.reshape(-1)), engine.ACTION_FEATURE_DIM)
    soft = part.targets is not None
    return pa.RecordBatch.from_arrays([
        pa.array(part.battle_ids.tolist(), pa.string()),
        pa.FixedSizeListArray.from_arrays(pa.array(part.obs.reshape(-1)), engine.OBS_DIM),
        pa.ListArray.from_arrays(offsets, fixed),
        pa.array(part.labels), pa.array(part.outcome), pa.array(part.imitated),
        pa.ListArray.from_arrays(offsets, pa.array(part.targets)) if soft else pa.nulls(len(part), pa.list_(pa.float32())),
        pa.array(part.valued) if soft else pa.nulls(len(part), pa.bool_())], schema=_SPOOL_SCHEMA)


def _from_batch(batch: pa.RecordBatch, soft: bool) -> Decisions:
    features = batch.column("features")
    offsets = features.offsets.to_numpy().astype(np.int64)
    return Decisions(
        obs=batch.column("obs").flatten().to_numpy().reshape(-1, engine.OBS_DIM),
        features=features.flatten().flatten().to_numpy().reshape(-1, engine.ACTION_FEATURE_DIM),
        offsets=offsets - offsets[0], labels=batch.column("labels").to_numpy(),
        outcome=batch.column("outcome").to_numpy(),
        imitated=batch.column("imitated").to_numpy(zero_copy_only=False),
        battle_ids=np.asarray(batch.column("battle_id").to_pylist(), dtype=object),
        targets=batch.column("targets").flatten().to_numpy() if soft else None,
        valued=batch.column("valued").to_numpy(zero_copy_only=False) if soft else None)


def batches(stream: Iterator[Decisions], batch_size: int) -> Iterator[Decisions]:
    """Training batches: ``batch_size`` policy decisions each (the last may have fewer) with the
    other decisions streamed between them; every decision of ``stream`` in exactly one batch.
    A batch within one part is a view of it; only one spanning two parts is copied."""
    carry: list[Decisions] = []
    for part in stream:
        policy = np.cumsum(part.imitated & (part.counts > 1))
        need = batch_size - sum(int(c.policy_rows().size) for c in carry)
        start = 0
        while len(part) and need <= int(policy[-1]) - (int(policy[start - 1]) if start else 0):
            # the batch ends at the decision that completes its need-th policy decision
            end = int(np.searchsorted(policy, (int(policy[start - 1]) if start else 0) + need)) + 1
            yield concat([*carry, window(part, start, end)]) if carry else window(part, start, end)
            carry, need, start = [], batch_size, end
        if start < len(part):
            carry.append(window(part, start, len(part)))
    if carry:
        yield concat(carry)


def prefetched(items: Iterator[Any], depth: int = 4) -> Iterator[Any]:
    """``items`` produced by a reader thread, at most ``depth`` ahead, in the same order (so the
    run stays deterministic): Parquet decoding and batching overlap the training step (both
    release the GIL for most of their work). Closing the consumer stops the thread."""
    queue: Queue[tuple[str, Any]] = Queue(maxsize=depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in items:
                while not stop.is_set():
                    try:
                        queue.put(("item", item), timeout=0.1)
                        break
                    except Full:
                        continue
                if stop.is_set():
                    return
            queue.put(("end", None))
        except Exception as exc:  # noqa: BLE001 - handed to the consumer, raised there
            queue.put(("error", exc))

    reader = threading.Thread(target=produce, name="training-stream-reader", daemon=True)
    reader.start()
    try:
        while True:
            what, item = queue.get()
            if what == "end":
                return
            if what == "error":
                raise item
            yield item
    finally:
        stop.set()
        while reader.is_alive():
            try:
                queue.get(timeout=0.1)
            except Empty:
                pass
        reader.join()


def check_split_sizes(stats: dict[str, SplitStats], dataset_id: str, imitate: str) -> None:
    """Refuses a train split with nothing to imitate, naming the actors present."""
    train = stats["train"]
    if train.imitated_with_choice == 0:
        raise InvalidArgument(
            f"no decision to imitate in the train split of {dataset_id} with imitate={imitate!r} "
            f"(imitated decisions with more than one legal action: 0); actors in the dataset: "
            f"{', '.join(f'{k} ({v})' for k, v in sorted(train.actors.items())) or 'none'}; use 'all', "
            f"'winners' or one of those specs")
