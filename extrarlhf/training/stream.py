"""A V5 dataset's train/val/test decisions, streamed in bounded batches (DESIGN 11.1).

Why Parquet row groups and not an Arrow IPC cache: the dataset writers (materialize.py,
splits.py) already cut their files into row groups of a few thousand decisions at battle
boundaries, so ``ParquetFile.iter_batches(row_groups=[g])`` reads one group's columns and
never the file; a cache would be a second copy of every dataset version to build, keep
consistent and collect. A file written by another tool as one huge row group is still read
in ``READ_ROWS`` batches, but pyarrow decodes the whole group's column chunks for it: rewrite
such a file with smaller row groups (benchmarks/train_memory.py measures the peak memory).

Per batch read, for a ``v5_decisions`` dataset, the split of each decision is the keyed hash
of its battle id (as ``split_v5_training_dataset`` assigns it; a ``v5_policy_split`` has one
file per split); then the imitate filter and the soft targets (data.from_table).

Shuffling (:meth:`DatasetStream.epoch`), deterministic for the run's generator: the row
groups in a seeded order, each into a buffer; when the buffer holds ``buffer`` decisions or
more it is permuted and all but ``buffer // 2`` of them are emitted (the rest stay to mix with
the next groups); at the end what is left, permuted. Memory: at most ``buffer`` + one row
group of decisions. Every decision of the split is emitted exactly once per epoch.
:func:`batches` cuts that stream into training batches of ``batch_size`` decisions the policy
learns from (imitated, more than one legal action) together with the other decisions between
them (the value head learns from every decision). :func:`prefetched` reads ahead in a thread.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from queue import Empty, Full, Queue
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..core.errors import InvalidArgument
from .data import COLUMNS, Decisions, concat, from_table, take

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

    def chunks(self, split: str) -> Iterator[Decisions]:
        """The split's decisions in file order, one record batch at a time."""
        for unit in self.units[split]:
            yield from self._read(unit)

    def scan(self) -> dict[str, SplitStats]:
        """One pass over every split: its counts (and the actors of the whole dataset)."""
        stats = {s: SplitStats() for s in SPLITS}
        for split in SPLITS:
            for part in self.chunks(split):
                stats[split].add(part)
                for actor, n in part.actors.items():
                    stats[split].actors[actor] = stats[split].actors.get(actor, 0) + n
        return stats

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
        for index in rng.permutation(len(self.units[split])):
            for part in self._read(self.units[split][index]):
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
        if size:
            pool = concat(held)
            yield take(pool, rng.permutation(size))


def batches(stream: Iterator[Decisions], batch_size: int) -> Iterator[Decisions]:
    """Training batches: ``batch_size`` policy decisions each (the last may have fewer) with the
    other decisions streamed between them; every decision of ``stream`` in exactly one batch."""
    carry: Decisions | None = None
    for part in stream:
        pool = part if carry is None else concat([carry, part])
        counted = np.cumsum(pool.imitated & (pool.counts > 1))
        # cut after the decision that completes each batch_size-th policy decision
        ends = np.searchsorted(counted, np.arange(batch_size, int(counted[-1]) + 1, batch_size)) + 1 \
            if len(pool) else np.zeros(0, np.int64)
        start = 0
        for end in ends:
            yield take(pool, np.arange(start, int(end)))
            start = int(end)
        carry = take(pool, np.arange(start, len(pool))) if start < len(pool) else None
    if carry is not None and len(carry):
        yield carry


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
        except BaseException as exc:  # handed to the consumer, raised there
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
