"""Decisions of a V5 dataset as numpy arrays: one record batch (or row group) at a time.

The trainer never holds a whole dataset: stream.py reads it in bounded batches and turns each
into a :class:`Decisions` with :func:`from_table`. A decision has a variable number of legal actions, so its action features are stored
*flat*: ``features[offsets[d]:offsets[d + 1]]`` are the rows of decision ``d`` (in
``legal_action_ids`` order) and ``labels[d]`` is the position of the chosen action among
them. Everything is read column by column with pyarrow (no Python object per row).

Which decisions are imitated (``imitate``):

* ``"all"``: every decision;
* ``"winners"``: decisions of the player who went on to win the battle (``outcome == 1``);
* ``"search"``: decisions of any search actor (``search:...``, whatever its rollout policy
  and sims: the improvement loop's teachers);
* an actor spec (``baseline:greedy``, a checkpoint name): decisions whose ``actor_spec``
  is that spec.

The value head learns the final outcome from every decision of the split, whatever
``imitate`` says (imitating winners only would leave it a constant).

Targets (``temperature``): ``None`` imitates the recorded choice (a one-hot target). A
number reads ``policy_json`` too and, for a decision of the search actor, imitates the
search's *action values* instead: ``softmax(values / temperature)`` over the actions it
searched (0 for those it did not). The search plays the lowest id among tied best values,
so a one-hot target would teach an arbitrary tie-break; the soft target shares the
probability between equally good actions and ranks the rest. Decisions without action
values keep the one-hot target. For a labelling search (``search:...&play=<spec>``, DAgger)
the recorded choice is the play policy's move, so only the soft target carries the teacher.
When *no* imitated decision has action values, the soft target asked for is the one-hot choice
everywhere: :func:`target_fallback` (given the train split's counts, stream.SplitStats) says so (what was asked, what was used, why), and the
training result, the CLI report, the model card and the Dagster metadata show it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import engine

from ..core.errors import InvalidArgument
from ..datasets.tables import fixed_vectors

COLUMNS = ["battle_id", "actor_spec", "outcome", "observation", "legal_action_features", "action_index"]
IMITATE_KEYWORDS = ("all", "winners", "search")


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
    targets: np.ndarray | None = None  # float32 [R], target probability of each action row (module docstring)
    valued: np.ndarray | None = None  # bool [D], decisions whose target is the search's values (with targets)

    def __len__(self) -> int:
        return int(self.obs.shape[0])

    @property
    def counts(self) -> np.ndarray:
        return np.diff(self.offsets)

    def policy_rows(self) -> np.ndarray:
        """Indexes of imitated decisions that had a choice (a forced move teaches nothing)."""
        return np.flatnonzero(self.imitated & (self.counts > 1))


def check_imitate(imitate: Any) -> str:
    if not isinstance(imitate, str) or not imitate.strip():
        raise InvalidArgument(f"imitate must be 'all', 'winners', 'search' or an actor spec such as 'baseline:greedy', "
                              f"got {imitate!r}")
    return imitate


def _imitated(table: pa.Table, imitate: str) -> np.ndarray:
    if imitate == "all":
        return np.ones(table.num_rows, dtype=bool)
    if imitate == "winners":
        return table.column("outcome").to_numpy() == 1
    if imitate == "search":
        return pc.fill_null(pc.starts_with(table.column("actor_spec"), "search:"), False).to_numpy(zero_copy_only=False)
    mask = pc.fill_null(pc.equal(table.column("actor_spec"), imitate), False)
    return mask.to_numpy(zero_copy_only=False)


def search_targets(policy_json: pa.ChunkedArray, offsets: np.ndarray, labels: np.ndarray,
                   temperature: float) -> tuple[np.ndarray, np.ndarray]:
    """Flat target probabilities: the softmax of the search's action values where a decision
    has them, else one-hot on the recorded choice (module docstring); and which decisions had them."""
    targets = np.zeros(int(offsets[-1]), dtype=np.float32)
    targets[offsets[:-1] + labels] = 1.0
    valued = np.zeros(len(labels), dtype=bool)
    for d, text in enumerate(policy_json.to_pylist()):
        if not text or "action_values" not in text:
            continue
        values = orjson.loads(text).get("action_values")
        start, stop = int(offsets[d]), int(offsets[d + 1])
        if not isinstance(values, list) or len(values) != stop - start or stop - start < 2:
            continue
        searched = np.array([v is not None for v in values])
        if searched.sum() < 2:
            continue
        v = np.array([x if x is not None else -np.inf for x in values], dtype=np.float64)
        w = np.exp((v - v[searched].max()) / temperature)
        targets[start:stop] = (w / w.sum()).astype(np.float32)
        valued[d] = True
    return targets, valued


def target_fallback(stats: Any, target: str) -> dict[str, Any] | None:
    """None when a train split (``stats``: its stream.SplitStats) is learnt with the ``target``
    asked for; for ``"search_values"`` on decisions of which no imitated one has search action
    values, what happened instead: ``{"asked", "used", "decisions", "decisions_with_values", "why"}``."""
    if target != "search_values" or stats.valued_with_choice is None:
        return None
    if stats.imitated_with_choice == 0 or stats.valued_with_choice:
        return None
    return {"asked": "search_values", "used": "choice", "decisions": stats.imitated_with_choice,
            "decisions_with_values": 0,
            "why": "no imitated decision of the train split carries a search's action values (only decisions of a "
                   "search actor, search:..., record them), so every target is the recorded choice, as with "
                   "target 'choice'; to learn a teacher's values collect with a search actor (or label battles "
                   "with search:<rollout>?play=<spec>) and imitate 'search'"}


def from_table(table: pa.Table, imitate: str, temperature: float | None = None) -> Decisions:
    """Dense arrays from a table with the ``decisions`` layout (at least :data:`COLUMNS`, and
    ``policy_json`` when ``temperature`` is set)."""
    n = table.num_rows
    obs = fixed_vectors(table.column("observation"), engine.OBS_DIM, "observation")
    legal = table.column("legal_action_features").combine_chunks()
    offsets = legal.offsets.to_numpy().astype(np.int64)
    offsets = offsets - offsets[0] if n else np.zeros(1, np.int64)
    features = fixed_vectors(legal.flatten(), engine.ACTION_FEATURE_DIM, "legal_action_features rows")
    labels = table.column("action_index").to_numpy().astype(np.int64)
    counts = np.diff(offsets)
    if n and ((labels < 0) | (labels >= counts)).any():
        raise InvalidArgument("a decision's action_index lies outside its legal actions; validate the dataset")
    actors = {str(item["values"]): int(item["counts"])
              for item in pc.value_counts(pc.fill_null(table.column("actor_spec"), "(none)")).to_pylist()}
    targets, valued = (None, None) if temperature is None else \
        search_targets(table.column("policy_json"), offsets, labels, temperature)
    return Decisions(obs=np.ascontiguousarray(obs), features=np.ascontiguousarray(features), offsets=offsets,
                     labels=labels, outcome=table.column("outcome").to_numpy().astype(np.float32),
                     imitated=_imitated(table, imitate),
                     battle_ids=np.asarray(table.column("battle_id").to_pylist(), dtype=object), actors=actors,
                     targets=targets, valued=valued)


def read_decisions(path: Path, imitate: str, temperature: float | None = None) -> Decisions:
    """Read a whole Parquet file with the ``decisions`` layout (``temperature``: module docstring);
    for a reader's own use, the trainer streams (stream.py)."""
    columns = COLUMNS if temperature is None else [*COLUMNS, "policy_json"]
    return from_table(pq.read_table(path, columns=columns, use_threads=False), imitate, temperature)


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
                     actors=dict(data.actors), targets=None if data.targets is None else data.targets[rows],
                     valued=None if data.valued is None else data.valued[index])


def window(data: Decisions, start: int, stop: int) -> Decisions:
    """Decisions ``start:stop`` as views of ``data``'s arrays (no copy)."""
    lo, hi = int(data.offsets[start]), int(data.offsets[stop])
    return Decisions(obs=data.obs[start:stop], features=data.features[lo:hi], offsets=data.offsets[start:stop + 1] - lo,
                     labels=data.labels[start:stop], outcome=data.outcome[start:stop],
                     imitated=data.imitated[start:stop], battle_ids=data.battle_ids[start:stop], actors={},
                     targets=None if data.targets is None else data.targets[lo:hi],
                     valued=None if data.valued is None else data.valued[start:stop])


def concat(parts: list[Decisions]) -> Decisions:
    """The decisions of ``parts``, in order, as one :class:`Decisions`."""
    if len(parts) == 1:
        return parts[0]
    counts = np.concatenate([p.counts for p in parts])
    offsets = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    soft = parts[0].targets is not None
    return Decisions(obs=np.concatenate([p.obs for p in parts]), features=np.concatenate([p.features for p in parts]),
                     offsets=offsets, labels=np.concatenate([p.labels for p in parts]),
                     outcome=np.concatenate([p.outcome for p in parts]),
                     imitated=np.concatenate([p.imitated for p in parts]),
                     battle_ids=np.concatenate([p.battle_ids for p in parts]), actors={},
                     targets=np.concatenate([p.targets for p in parts]) if soft else None,
                     valued=np.concatenate([p.valued for p in parts]) if soft else None)


def row_index(offsets: np.ndarray, index: np.ndarray, new_offsets: np.ndarray) -> np.ndarray:
    """Flat feature rows of decisions ``index``, concatenated; ``new_offsets`` are their
    offsets in the result (cumulative counts starting at 0)."""
    counts = np.diff(new_offsets)
    return np.repeat(offsets[index] - new_offsets[:-1], counts) + np.arange(new_offsets[-1])
