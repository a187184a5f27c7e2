"""MCP tools of the local dataset plane (DESIGN section 9): thin wrappers over extrarlhf.datasets.

Every dataset path stays inside the server's --datasets-dir (the core confines it); a
dataset is named ``NAME`` (newest version), ``NAME/vN`` or ``@POINTER``.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Annotated, Any, Literal

import anyio.to_thread
from mcp.server.mcpserver import Context
from pydantic import Field, Strict

from extrarlhf import datasets

from .progress import progress_bridge

if TYPE_CHECKING:  # pragma: no cover
    from .server import ExtraRLHFServer

DatasetRef = Annotated[str, Strict(), Field(description="A dataset: 'NAME' (newest version), 'NAME/vN' or "
                                                        "'@POINTER' (a promoted pointer), inside --datasets-dir.")]
NewName = Annotated[str, Strict(), Field(description="Name of the dataset to write: 1-64 letters, digits, '.', '_' "
                                                     "or '-'; a new version NAME/vN is created.")]
Overwrite = Annotated[bool, Strict(), Field(description="Replace an existing version (the old one stays until the "
                                                        "new one is complete). Default false: refused.")]
Promote = Annotated[str | None, Strict(), Field(description="Also point this pointer name at the result once it "
                                                            "validates.")]
Fractions = Annotated[list[float] | None, Field(description="train/val/test fractions, e.g. [0.8, 0.1, 0.1] "
                                                           "(default).")]
Policy = Annotated[dict[str, int] | None, Field(description="Readiness thresholds to override, e.g. "
                                                           "{\"min_v5_battles\": 50} (see dataset_readiness).")]


def register(server: "ExtraRLHFServer") -> None:
    tool = server.envelope_tool
    config = server.config
    where = {"datasets_dir": config.datasets_dir}

    async def in_thread(fn, /, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))

    @tool(title="List datasets", read_only=True, idempotent=True)
    def list_datasets() -> dict[str, Any]:
        """Every dataset in --datasets-dir with its versions, kinds, row counts and readiness, and
        the promoted pointers."""
        return datasets.list_datasets(**where)

    @tool(title="Inspect a dataset", read_only=True, idempotent=True)
    def inspect_dataset(dataset: DatasetRef) -> dict[str, Any]:
        """A dataset's manifest (id, kind, sources, row counts, file hashes, column schemas,
        readiness) and whether its source session groups changed since."""
        return datasets.inspect_dataset(dataset, **where)

    @tool(title="Validate a dataset", read_only=True, idempotent=True)
    async def validate_dataset(dataset: DatasetRef) -> dict[str, Any]:
        """Re-hash every file and re-check counts, schemas and invariants (chosen actions legal,
        contiguous decision indexes, no degraded battle in training tables). Returns `valid` and
        every failure with its code."""
        return await in_thread(datasets.validate_dataset, dataset, **where)

    @tool(title="Materialize a V5 dataset")
    async def materialize_v5_dataset(
        groups: Annotated[list[str], Field(description="Session groups to read (from --sessions-dir).",
                                           min_length=1)],
        name: NewName,
        ctx: Context,
        overwrite: Overwrite = False,
        promote: Promote = None,
    ) -> dict[str, Any]:
        """Turn session groups into Parquet tables (decisions, turns, battles) with a manifest;
        only finished, non-degraded, never-peeked battles enter training tables (exclusions are
        listed). Streams in bounded memory; sends progress notifications. Returns the dataset id,
        row counts, exclusions and readiness."""
        return await in_thread(datasets.materialize_v5_dataset, groups, name, sessions_dir=config.sessions_dir,
                               overwrite=overwrite, promote=promote,
                               progress=progress_bridge(ctx, "materialize_v5_dataset", "battles"), **where)

    @tool(title="Readiness per training contour", read_only=True, idempotent=True)
    async def dataset_readiness(
        group: Annotated[str | None, Strict(), Field(description="A session group to judge (give group or "
                                                                 "dataset).")] = None,
        dataset: Annotated[str | None, Strict(), Field(description="A dataset to judge (give group or "
                                                                   "dataset).")] = None,
        policy: Policy = None,
    ) -> dict[str, Any]:
        """Readiness of a group or dataset per contour, with blockers: v5_policy_training_ready (and
        the training_ready alias, scope v5_policy_only), Nemesis Lite and Standard
        (training_ready_standard, standard_readiness_blockers), metronome_ready and timestamp_ready
        (never from headless data)."""
        return await in_thread(datasets.dataset_readiness, group, dataset, sessions_dir=config.sessions_dir,
                               policy=policy, **where)

    @tool(title="Split a V5 dataset (battle-grouped)")
    async def split_v5_training_dataset(
        dataset: DatasetRef,
        ctx: Context,
        name: Annotated[str | None, Strict(), Field(description="Name of the split dataset (default derived "
                                                                "from the source).")] = None,
        fractions: Fractions = None,
        overwrite: Overwrite = False,
        promote: Promote = None,
        policy: Policy = None,
    ) -> dict[str, Any]:
        """Deterministic train/val/test split grouped by battle (keyed hash): a battle never
        straddles splits and a row keeps its split when data is added. Refused with the blockers
        while the dataset is not v5-policy ready (thresholds: policy)."""
        extra = {} if fractions is None else {"fractions": fractions}
        return await in_thread(datasets.split_v5_training_dataset, dataset, name=name, overwrite=overwrite,
                               promote=promote, policy=policy, progress=progress_bridge(ctx, "split_v5_training_dataset", "rows"),
                               **extra, **where)

    @tool(title="Split a Nemesis dataset (deck-grouped)")
    async def split_nemesis_training_dataset(
        dataset: DatasetRef,
        ctx: Context,
        view: Annotated[Literal["lite", "standard"], Field(
            description="'lite' (any eligible battle) or 'standard' (human-vs-human production rows only; "
                        "refused with its blockers until ready).")] = "lite",
        name: Annotated[str | None, Strict(), Field(description="Name of the split dataset.")] = None,
        fractions: Fractions = None,
        overwrite: Overwrite = False,
        promote: Promote = None,
        policy: Policy = None,
    ) -> dict[str, Any]:
        """Opponent-modelling split grouped by deck (keyed hash). Human-bot and model-model rows
        train Lite only; Standard is refused with standard_readiness_blockers until ready."""
        extra = {} if fractions is None else {"fractions": fractions}
        return await in_thread(datasets.split_nemesis_training_dataset, dataset, view, name=name,
                               overwrite=overwrite, promote=promote, policy=policy,
                               progress=progress_bridge(ctx, "split_nemesis_training_dataset", "rows"),
                               **extra, **where)

    @tool(title="Promote a dataset to a pointer")
    def promote_dataset(
        dataset: DatasetRef,
        pointer: Annotated[str, Strict(), Field(description="Pointer name to (re)point at the dataset.")],
    ) -> dict[str, Any]:
        """Validate the dataset, then point `pointer` at it by atomic replace (the previous target is
        reported)."""
        return datasets.promote_dataset(dataset, pointer, **where)
