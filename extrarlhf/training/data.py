"""Decisions of a V5 dataset as dense numpy arrays for behaviour cloning.

A decision has a variable number of legal actions, so its action features are stored
*flat*: ``features[offsets[d]:offsets[d + 1]]`` are the rows of decision ``d`` (in
``legal_action_ids`` order) and ``labels[d]`` is the position of the chosen action among
them. Everything is read column by column from the Parquet files with pyarrow (no Python
object per row), so loading 100k decisions takes well under a second.

Which decisions are imitated (``imitate``):

* ``"all"``: every decision;
* ``"winners"``: decisions of the player who went on to win the battle (``outcome == 1``);
* an actor spec (``baseline:greedy``, a checkpoint name): decisions whose ``actor_spec``
  is that spec.

The value head learns the final outcome from every decision of the split, whatever
``imitate`` says (imitating winners only would leave it a constant).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import engine

from ..errors import InvalidArgument

COLUMNS = ["battle_id", "actor_spec", "outcome", "observation", "legal_action_features", "action_index"]
IMITATE_KEYWORDS = ("all", "winners")


@dataclass
class Decisions:
    """Dense arrays of decisions; ``offsets`` has one more entry than there are decisions."""

    obs: np.ndarray          # float32 [D, OBS_DIM]
    features: np.ndarray     # float32 [R, ACTION_FEATURE_DIM], R = total legal actions
    offsets: np.ndarray      # int64 [D + 1]
    labels: np.ndarray       # int64 [D], position of the chosen action in its decision's rows
    outcome: np.ndarray      # float32 [D], 1 win, 0 draw, -1 loss (acting player's view)
    imitated: np.ndarray     # bool [D], decisions the policy learns from
    battle_ids: np.ndarray   # object [D]
    actors: dict[str, int] = field(default_factory=dict)  # decisions per actor spec in the file read

    def __len__(self) -> int:
        return int(self.obs.shape[0])

    @property
    def counts(self) -> np.ndarray:
        return np.diff(self.offsets)

    @property
    def nbytes(self) -> int:
        return int(self.obs.nbytes + self.features.nbytes + self.offsets.nbytes + self.labels.nbytes)

    def policy_rows(self) -> np.ndarray:
        """Indexes of imitated decisions that had a choice (a forced move teaches nothing)."""
        return np.flatnonzero(self.imitated & (self.counts > 1))

    def describe(self) -> dict[str, Any]:
        counts = self.counts
        rows = self.policy_rows()
        return {"decisions": len(self), "battles": int(len(set(self.battle_ids.tolist()))),
                "imitated_decisions": int(self.imitated.sum()), "imitated_with_choice": int(rows.size),
                "legal_actions": int(self.features.shape[0]),
                "mean_legal_actions": round(float(counts.mean()), 3) if len(self) else 0.0,
                "memory_mb": round(self.nbytes / 1e6, 1), "actors": dict(sorted(self.actors.items()))}


def check_imitate(imitate: Any) -> str:
    if not isinstance(imitate, str) or not imitate.strip():
        raise InvalidArgument(f"imitate must be 'all', 'winners' or an actor spec such as 'baseline:greedy', "
                              f"got {imitate!r}")
    return imitate


def _imitated(table: pa.Table, imitate: str) -> np.ndarray:
    if imitate == "all":
        return np.ones(table.num_rows, dtype=bool)
    if imitate == "winners":
        return table.column("outcome").to_numpy() == 1
    mask = pc.fill_null(pc.equal(table.column("actor_spec"), imitate), False)
    return mask.to_numpy(zero_copy_only=False)


def from_table(table: pa.Table, imitate: str) -> Decisions:
    """Dense arrays from a table with the ``decisions`` layout (at least :data:`COLUMNS`)."""
    n = table.num_rows
    obs_col = table.column("observation").combine_chunks()
    obs = obs_col.flatten().to_numpy().astype(np.float32, copy=False).reshape(n, engine.OBS_DIM)
    legal = table.column("legal_action_features").combine_chunks()
    offsets = legal.offsets.to_numpy().astype(np.int64)
    offsets = offsets - offsets[0] if n else np.zeros(1, np.int64)
    features = legal.flatten().flatten().to_numpy().astype(np.float32, copy=False)
    features = features.reshape(-1, engine.ACTION_FEATURE_DIM)
    labels = table.column("action_index").to_numpy().astype(np.int64)
    counts = np.diff(offsets)
    if n and ((labels < 0) | (labels >= counts)).any():
        raise InvalidArgument("a decision's action_index lies outside its legal actions; validate the dataset")
    actors = {str(item["values"]): int(item["counts"])
              for item in pc.value_counts(pc.fill_null(table.column("actor_spec"), "(none)")).to_pylist()}
    return Decisions(obs=np.ascontiguousarray(obs), features=np.ascontiguousarray(features), offsets=offsets,
                     labels=labels, outcome=table.column("outcome").to_numpy().astype(np.float32),
                     imitated=_imitated(table, imitate),
                     battle_ids=np.asarray(table.column("battle_id").to_pylist(), dtype=object), actors=actors)


def read_decisions(path: Path, imitate: str) -> Decisions:
    """Read a Parquet file with the ``decisions`` layout."""
    return from_table(pq.read_table(path, columns=COLUMNS, use_threads=False), imitate)


def take(data: Decisions, index: np.ndarray) -> Decisions:
    """The decisions at ``index`` (in that order), as a new :class:`Decisions`."""
    index = np.asarray(index, dtype=np.int64)
    counts = data.counts[index]
    offsets = np.zeros(index.size + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    rows = row_index(data.offsets, index, offsets)
    ids = data.battle_ids[index]
    return Decisions(obs=data.obs[index], features=data.features[rows], offsets=offsets, labels=data.labels[index],
                     outcome=data.outcome[index], imitated=data.imitated[index], battle_ids=ids,
                     actors=dict(data.actors))


def row_index(offsets: np.ndarray, index: np.ndarray, new_offsets: np.ndarray) -> np.ndarray:
    """Flat feature rows of decisions ``index``, concatenated; ``new_offsets`` are their
    offsets in the result (cumulative counts starting at 0)."""
    counts = np.diff(new_offsets)
    return np.repeat(offsets[index] - new_offsets[:-1], counts) + np.arange(new_offsets[-1])
