"""Group-aware train/val/test splits of a V5 decisions dataset, published as new datasets.

- ``split_v5_training_dataset``: the decisions rows, grouped by **battle** (every decision of
  a battle lands in one split). Files ``train/val/test.parquet`` have the ``decisions``
  layout.
- ``split_nemesis_training_dataset(view="lite"|"standard", group_by="battle"|"opponent_deck")``:
  opponent-modelling rows, grouped by **battle** (default) or by the **opponent's deck**. A Nemesis row is taken at each decision of the
  acting player (the *viewer*): its input is the viewer's own observation (its public view:
  own hand, both boards, public counts; never the opponent's hand or any deck order) and its
  label is the opponent's next action (the first decision of the other player after it, in
  the same battle). Decisions with no later opponent decision give no row. Files
  ``train/val/test.parquet`` have the ``nemesis`` layout.

  **Lite** may use any eligible battle (headless, human-bot, model-model). **Standard** is
  refused with its blockers until ready (it needs human-vs-human production rows), and even
  then keeps only rows whose viewer and opponent are both human: human-bot and model-model
  rows never enter it.

  Grouping and leakage. One battle gives Nemesis rows from both seats: viewer A predicting
  B's moves (opponent deck = B's) and viewer B predicting A's (opponent deck = A's). Grouped
  by opponent deck, the two halves of a battle land in different splits whenever the two
  decks do (94 of 300 battles in the issue-19 report; ``battles_straddling_splits`` in the
  manifest counts them): a val/test row's label (B's next action) then sits in a training
  row of the same battle (B's own decision, seen from B, with the board that follows it),
  so a model can score on test by remembering the battle. That is why ``battle`` is the
  default: no battle, hence no trajectory, is shared between splits. Its limit: the same
  decks occur in every split, so the test score measures unseen *battles* from a familiar
  deck pool (the case when production decks recur), not unseen *decks*. Use
  ``group_by="opponent_deck"`` to measure generalization to new opponent decks, knowing
  that the straddling battles above leak trajectories into that measurement.

Both write ``assignments.parquet`` (group key -> split, bucket, rows) and a manifest whose
``split`` block records the key, the contour, the fractions and the battles whose rows went to
more than one split (always 0 when grouped by battle), so ``validate_dataset``
recomputes every assignment. Assignment is by keyed hash (assign.py): deterministic, no
group straddles splits, and a group's split never changes as data is added.

Both refuse a source that fails validation, and a contour that is not ready (``not_ready``
with the blockers; thresholds can be overridden with ``policy``). Streaming: the source is
read in batches (a battle is carried over a batch boundary when it straddles one); memory
holds one batch, one buffered row group per split and one small entry per group key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..core.errors import InvalidArgument, NotReady
from ..core.readiness import ReadinessPolicy, contour_readiness
from .assign import DEFAULT_FRACTIONS, DEFAULT_SPLIT_KEY, SPLITS, bucket, check_fractions, check_split_key, split_of
from .manifest import privacy_of, write_manifest
from .paths import DatasetsDir, check_dataset_name, check_pointer_name, check_positive_int
from .pointers import PointerStep, manifest_sha256
from .publish import publish_version
from .tables import SCHEMAS, StreamingTable, iter_batches
from .validate import validate_dir, validated_source

__all__ = ["split_v5_training_dataset", "split_nemesis_training_dataset", "nemesis_rows"]

DEFAULT_ROW_GROUP_ROWS = 8192
# group_by of the Nemesis splits -> (group key column, its name in the manifest)
NEMESIS_GROUPINGS = {"battle": ("battle_id", "battle"), "opponent_deck": ("opponent_deck_id", "opponent deck")}


class _SplitWriter:
    """Routes rows to train/val/test by their group key; buffers up to a row group per split."""

    def __init__(self, folder: Path, layout: str, key_column: str, contour: str, fractions: tuple,
                 split_key: str, row_group_rows: int) -> None:
        self.layout, self.key_column, self.contour = layout, key_column, contour
        self.fractions, self.split_key, self.row_group_rows = fractions, split_key, row_group_rows
        self.writers: dict[str, StreamingTable] = {}
        self.assignments_writer: StreamingTable | None = None
        try:
            for s in SPLITS:
                self.writers[s] = StreamingTable(folder / f"{s}.parquet", layout, row_group_rows)
            self.assignments_writer = StreamingTable(folder / "assignments.parquet", "assignments", 1 << 20)
        except BaseException:
            self.abort()
            raise
        self.pending: dict[str, list[pa.Table]] = {s: [] for s in SPLITS}
        self.pending_rows = dict.fromkeys(SPLITS, 0)
        self.groups: dict[str, list] = {}  # key -> [split, bucket, rows]
        self.battle_splits: dict[str, set[str]] = {}  # battle id -> the splits its rows went to

    def write(self, table: pa.Table) -> None:
        if not table.num_rows:
            return
        keys = table.column(self.key_column)
        unique = pc.unique(keys).to_pylist()
        for key in unique:
            if key not in self.groups:
                position = bucket(self.split_key, self.contour, key)
                self.groups[key] = [split_of(position, self.fractions), position, 0]
        counts = pc.value_counts(keys).to_pylist()
        for item in counts:
            self.groups[item["values"]][2] += item["counts"]
        for split in SPLITS:
            members = [k for k in unique if self.groups[k][0] == split]
            if not members:
                continue
            part = table.filter(pc.is_in(keys, value_set=pa.array(members, pa.string())))
            if "battle_id" in part.column_names:  # ReturnClock rows have no battle
                for battle_id in pc.unique(part.column("battle_id")).to_pylist():
                    self.battle_splits.setdefault(battle_id, set()).add(split)
            self.pending[split].append(part)
            self.pending_rows[split] += part.num_rows
            if self.pending_rows[split] >= self.row_group_rows:
                self._flush(split)

    def _flush(self, split: str) -> None:
        if self.pending[split]:
            self.writers[split].write_table(pa.concat_tables(self.pending[split]).combine_chunks())
            self.pending[split], self.pending_rows[split] = [], 0

    def abort(self) -> None:
        """Release every writer after a failed build (its folder is deleted next); never raises."""
        for writer in [*self.writers.values(), self.assignments_writer]:
            if writer is not None:
                writer.abort()

    def __enter__(self) -> "_SplitWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self.abort()

    def close(self) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
        for split in SPLITS:
            self._flush(split)
        keys = sorted(self.groups)
        self.assignments_writer.write([
            pa.array(keys, pa.string()), pa.array([self.groups[k][0] for k in keys], pa.string()),
            pa.array([self.groups[k][1] for k in keys], pa.float64()),
            pa.array([self.groups[k][2] for k in keys], pa.int64())])
        tables = {s: {**w.close(), "table": self.layout} for s, w in self.writers.items()}
        tables["assignments"] = {**self.assignments_writer.close(), "table": "assignments"}
        groups = {s: sum(1 for g in self.groups.values() if g[0] == s) for s in SPLITS}
        straddling = sum(1 for splits in self.battle_splits.values() if len(splits) > 1)
        return tables, {"groups": groups, "rows": {s: tables[s]["rows"] for s in SPLITS},
                        "battles": len(self.battle_splits), "battles_straddling_splits": straddling}


def _battle_chunks(path: Path, columns: list[str] | None) -> Iterator[pa.Table]:
    """Tables of whole battles, a batch at a time (rows of a battle are contiguous in a valid
    source; a battle that straddles a batch boundary is carried over)."""
    carry: pa.Table | None = None
    for batch in iter_batches(path, columns, 4096):
        table = pa.Table.from_batches([batch])
        if carry is not None and carry.num_rows:
            table = pa.concat_tables([carry, table])
        if not table.num_rows:
            continue
        ids = table.column("battle_id").combine_chunks()
        same = pc.equal(ids, ids[len(ids) - 1]).to_numpy(zero_copy_only=False)
        start = 0 if same.all() else len(same) - int(np.argmin(same[::-1]))
        if start == 0:
            carry = table
            continue
        carry = table.slice(start)
        yield table.slice(0, start).combine_chunks()
    if carry is not None and carry.num_rows:
        yield carry.combine_chunks()


def nemesis_rows(chunk: pa.Table) -> pa.Table:
    """Nemesis rows of decisions rows holding whole battles in decision order (see the module
    docstring): one row per decision that has a later decision of the other player."""
    n = chunk.num_rows
    if n == 0:
        return SCHEMAS["nemesis"].empty_table()
    ids = chunk.column("battle_id").combine_chunks()
    player = chunk.column("player").to_numpy()
    new_battle = np.ones(n, dtype=bool)
    if n > 1:
        new_battle[1:] = pc.not_equal(ids.slice(1), ids.slice(0, n - 1)).to_numpy(zero_copy_only=False)
    new_block = new_battle.copy()
    new_block[1:] |= player[1:] != player[:-1]
    starts = np.flatnonzero(new_block)
    block_of = np.cumsum(new_block) - 1
    has_next = np.zeros(len(starts), dtype=bool)
    has_next[:-1] = ~new_battle[starts[1:]]  # the next block continues the same battle: the other player
    next_start = np.append(starts[1:], 0)
    rows = np.flatnonzero(has_next[block_of])
    targets = next_start[block_of[rows]]
    take, target = pa.array(rows), pa.array(targets)
    col = chunk.column
    viewer = col("player").take(take)
    arrays = [
        col("battle_id").take(take), col("group").take(take), col("decision_index").take(take),
        col("turn").take(take), viewer, col("actor_type").take(take),
        pc.subtract(pa.scalar(3, pa.int8()), viewer), col("opponent_type").take(take),
        col("opponent_spec").take(take), col("opponent_kind").take(take), col("battle_tag").take(take),
        col("own_deck_id").take(take), col("opponent_deck_id").take(take), col("obs_version").take(take),
        col("observation").take(take), col("action_id").take(target), col("decision_index").take(target),
        col("turn").take(target),
    ]
    return pa.Table.from_arrays([a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a for a in arrays],
                                schema=SCHEMAS["nemesis"])


_NEMESIS_SOURCE_COLUMNS = ["battle_id", "group", "decision_index", "turn", "player", "actor_type", "opponent_type",
                           "opponent_spec", "opponent_kind", "battle_tag", "own_deck_id", "opponent_deck_id",
                           "obs_version", "observation", "action_id"]


def _source(dirs: DatasetsDir, dataset: str) -> tuple[Any, dict[str, Any]]:
    return validated_source(
        dirs, dataset, lambda m: None if m.get("kind") == "v5_decisions" else
        f"is a {m.get('kind')} dataset; splits are made from a v5_decisions dataset (materialize_v5_dataset)",
        "fix or re-materialize it before splitting")


def _split(dataset: str, *, contour: str, kind: str, layout: str, key_column: str, key_name: str, default_suffix: str,
           rows_of: Callable[[pa.Table], pa.Table] | None, columns: list[str] | None, name: str | None,
           fractions: Any, split_key: Any, datasets_dir: Any, version: int | None, overwrite: bool,
           promote: str | None, policy: Any, row_group_rows: int,
           progress: Callable[[int, int], None] | None, extra_split: dict[str, Any] | None = None) -> dict[str, Any]:
    fractions = check_fractions(fractions)
    split_key = check_split_key(split_key)
    if promote is not None:
        check_pointer_name(promote)
    check_positive_int(row_group_rows, "row_group_rows")
    policy = ReadinessPolicy.coerce(policy)
    dirs = datasets_dir if isinstance(datasets_dir, DatasetsDir) else DatasetsDir(datasets_dir)
    resolved, source_manifest = _source(dirs, dataset)
    name = check_dataset_name(name if name is not None else f"{resolved.name}-{default_suffix}")
    if name == resolved.name:
        raise InvalidArgument("a split is a new dataset: give it another name than its source")
    pointer = PointerStep(dirs, promote, name) if promote else None  # its place is checked before any work
    readiness = contour_readiness((source_manifest.get("readiness") or {}).get("evidence") or {}, policy)
    contour_state = readiness["contours"][contour]
    if not contour_state["ready"]:
        raise NotReady(f"{contour} is not ready for {resolved.dataset_id}: " + "; ".join(contour_state["blockers"]),
                       contour_state["blockers"])
    source_sha = manifest_sha256(resolved.path)
    total = source_manifest["row_counts"]["decisions"]

    def build(folder: Path, dataset_id: str, version: int) -> dict[str, Any]:
        # a failure anywhere (reading, writing, closing) aborts the writers: no descriptor outlives the build
        with _SplitWriter(folder, layout, key_column, contour, fractions, split_key, row_group_rows) as writer:
            done = 0
            for chunk in _battle_chunks(resolved.path / "decisions.parquet", columns):
                writer.write(rows_of(chunk) if rows_of else chunk)
                done += chunk.num_rows
                if progress:
                    progress(done, total)
            if progress and done == 0:
                progress(0, 0)
            tables, summary = writer.close()
        split_block = {"contour": contour, "group_key": key_name, "group_key_column": key_column,
                       "fractions": dict(zip(SPLITS, fractions)), "split_key": split_key,
                       "assignment": "HMAC-SHA256(split_key, contour + '\\0' + group_key)[:8] / 2**64 -> "
                                     "train < f_train <= val < f_train + f_val <= test",
                       **summary, **(extra_split or {})}
        manifest = write_manifest(
            folder, dataset_id=dataset_id, name=name, version=version, kind=kind, tables=tables,
            sources={"kind": "dataset", "dataset_id": resolved.dataset_id, "manifest_sha256": source_sha,
                     "row_counts": source_manifest["row_counts"], "groups": source_manifest["sources"].get("groups")},
            readiness=readiness, extra={"split": split_block, **privacy_of(source_manifest)})
        return {"kind": kind, "source": resolved.dataset_id, "row_counts": manifest["row_counts"],
                "split": {k: split_block[k] for k in ("contour", "group_key", "fractions", "groups", "rows",
                                                      "battles_straddling_splits")}}

    result = publish_version(dirs, name, build, version=version, overwrite=overwrite, validate=validate_dir,
                             before_commit=pointer)
    result["pointer"] = pointer.doc if pointer else None
    return result


def split_v5_training_dataset(dataset: str, *, name: str | None = None, fractions: Any = DEFAULT_FRACTIONS,
                              split_key: str = DEFAULT_SPLIT_KEY, datasets_dir: Any = "datasets",
                              version: int | None = None, overwrite: bool = False, promote: str | None = None,
                              policy: ReadinessPolicy | dict | None = None,
                              row_group_rows: int = DEFAULT_ROW_GROUP_ROWS,
                              progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Battle-grouped train/val/test of a V5 decisions dataset, published as ``name``
    (default ``<source>-v5split``). Refused when the source fails validation or the V5 policy
    contour is not ready."""
    return _split(dataset, contour="v5_policy", kind="v5_policy_split", layout="decisions", key_column="battle_id",
                  key_name="battle", default_suffix="v5split", rows_of=None, columns=None, name=name,
                  fractions=fractions, split_key=split_key, datasets_dir=datasets_dir, version=version,
                  overwrite=overwrite, promote=promote, policy=policy, row_group_rows=row_group_rows,
                  progress=progress)


def _standard_rows(chunk: pa.Table) -> pa.Table:
    rows = nemesis_rows(chunk)
    human = pc.and_(pc.equal(rows.column("viewer_type"), "human"), pc.equal(rows.column("opponent_type"), "human"))
    return rows.filter(human)


def split_nemesis_training_dataset(dataset: str, view: str = "lite", *, name: str | None = None,
                                   group_by: str = "battle",
                                   fractions: Any = DEFAULT_FRACTIONS, split_key: str = DEFAULT_SPLIT_KEY,
                                   datasets_dir: Any = "datasets", version: int | None = None,
                                   overwrite: bool = False, promote: str | None = None,
                                   policy: ReadinessPolicy | dict | None = None,
                                   row_group_rows: int = DEFAULT_ROW_GROUP_ROWS,
                                   progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Nemesis split (``view`` ``lite`` or ``standard``) of a V5 decisions dataset, published as
    ``name`` (default ``<source>-nemesis-<view>``), grouped by ``group_by`` (see the module
    doc: ``battle``, the default, or ``opponent_deck``). Standard is refused with its blockers
    until ready and keeps human-vs-human rows only."""
    if view not in ("lite", "standard"):
        raise InvalidArgument(f"view must be 'lite' or 'standard', got {view!r}")
    if group_by not in NEMESIS_GROUPINGS:
        raise InvalidArgument(f"group_by must be one of {', '.join(NEMESIS_GROUPINGS)}, got {group_by!r}")
    standard = view == "standard"
    key_column, key_name = NEMESIS_GROUPINGS[group_by]
    return _split(dataset, contour=f"nemesis_{view}", kind=f"nemesis_{view}_split", layout="nemesis",
                  key_column=key_column, key_name=key_name, default_suffix=f"nemesis-{view}",
                  rows_of=_standard_rows if standard else nemesis_rows, columns=_NEMESIS_SOURCE_COLUMNS, name=name,
                  fractions=fractions, split_key=split_key, datasets_dir=datasets_dir, version=version,
                  overwrite=overwrite, promote=promote, policy=policy, row_group_rows=row_group_rows,
                  progress=progress,
                  extra_split={"view": view, "group_by": group_by,
                               "rows_definition": "viewer's observation at its decision -> the "
                               "opponent's next action in the same battle",
                               "pairs": "human-vs-human only" if standard else "any eligible battle"})
