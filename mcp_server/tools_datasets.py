"""MCP tools of the local dataset plane (DESIGN section 9): thin wrappers over extrarlhf.datasets.

Every dataset path stays inside the server's --datasets-dir (the core confines it); a
dataset is named ``NAME`` (newest version), ``NAME/vN`` or ``@POINTER``.
"""

from __future__ import annotations

from dataclasses import fields
from typing import TYPE_CHECKING, Annotated, Any, Literal

from annotated_types import Ge
from mcp.server.mcpserver import Context
from pydantic import ConfigDict, Field, Strict, with_config
from typing_extensions import TypedDict

from extrarlhf import datasets
from extrarlhf.core.readiness import BOOLEAN_FIELDS, ReadinessPolicy
from extrarlhf.datasets.retention import prune_traces as prune_traces_core

from .cancel import run_cancellable, run_long
from .listing import NAMES_LISTED_ONCE
from .paging import Cursor, limit_arg, paged, paginate
from .progress import progress_bridge

if TYPE_CHECKING:  # pragma: no cover
    from .app import ExtraRLHFServer

DatasetRef = Annotated[str, Strict(), Field(description="NAME, NAME/vN or @POINTER.")]
NewName = Annotated[str, Strict(), Field(description="Dataset name.")]
Overwrite = Annotated[bool, Strict(), Field(description="Replace it.")]
Promote = Annotated[str | None, Strict(), Field(description="Pointer to set.")]
# extrarlhf.datasets.assign.check_fractions: three finite numbers >= 0 summing to 1 (the core also takes
# them by name; the tools take the one list form, which keeps argument errors plain: fractions[1])
Fraction = Annotated[float, Strict(), Field(ge=0, allow_inf_nan=False)]
Fractions = Annotated[list[Fraction] | None, Field(min_length=3, max_length=3,
                                                   description="train/val/test fractions.")]
# Readiness overrides are a closed object: an unknown key is refused by argument validation,
# located by position (policy.<key 2>) and never repeated (the core would name it).
# The policy's switches (metronome_arena_labels: count the arena's think times) are not thresholds and
# stay with the Python and CLI callers: an MCP override is counts only.
_Threshold = Annotated[int, Strict(), Ge(0)]
ReadinessThresholds = with_config(ConfigDict(extra="forbid"))(
    TypedDict("ReadinessThresholds", {f.name: _Threshold for f in fields(ReadinessPolicy)
                                      if f.name not in BOOLEAN_FIELDS}, total=False))
Policy = Annotated[ReadinessThresholds | None, Field(description='Threshold overrides, e.g. {"min_v5_battles": 50}.')]
# tools/list names the thresholds once, in dataset_readiness (DESIGN 8.1: every client reads the listing
# in every session); the other tools advertise an object of integers >= 0 (mcp_server/listing.py) and
# validate, and name a declared key in errors, exactly as above.
PolicyOverrides = Annotated[ReadinessThresholds | None, Field(
    description="As in dataset_readiness.", json_schema_extra={NAMES_LISTED_ONCE: True})]


VERSIONS_SHOWN = 20


def _list_datasets_page(listing: dict[str, Any], limit: int, cursor: str | None) -> dict[str, Any]:
    """One page of ``datasets.list_datasets``: its rows are versions, regrouped by dataset."""
    entries = {entry["name"]: entry for entry in listing["datasets"]}
    rows: list[tuple[str, int, dict[str, Any] | None]] = []
    for name, entry in entries.items():
        versions = entry.get("versions") or []
        rows.extend((name, int(row["version"]), row) for row in versions)
        if not versions:  # an unreadable dataset or only leftovers of unfinished publications
            rows.append((name, 0, None))
    page = paginate(rows, tool="list_datasets", limit=limit, cursor=cursor, key=lambda r: (r[0], r[1]),
                    render=lambda r: {"name": r[0], "row": r[2] if r[2] is not None else entries[r[0]]})
    shown: list[dict[str, Any]] = []
    for item in page.items:
        name, entry = item["name"], entries[item["name"]]
        if not shown or shown[-1]["name"] != name:
            shown.append({**entry, "versions": [], "versions_total": len(entry.get("versions") or [])})
        if entry.get("versions"):
            shown[-1]["versions"].append(item["row"])
    names = {entry["name"] for entry in listing["datasets"]}
    on_page = {entry["name"] for entry in shown}
    pointers = [p for p in listing["pointers"]
                if p.get("name") in on_page or (cursor is None and p.get("name") not in names)]
    return {"datasets_dir": listing["datasets_dir"], **paged({}, "datasets", page), "datasets": shown,
            "pointers": pointers}


def _inspect_dataset_page(info: dict[str, Any], limit: int, cursor: str | None) -> dict[str, Any]:
    """``datasets.inspect_dataset`` with its source groups paged and its version list capped."""
    manifest = dict(info["manifest"])
    sources = dict(manifest.get("sources") or {})
    groups = sources.get("groups") if isinstance(sources.get("groups"), list) else []
    page = paginate(groups, tool="inspect_dataset", limit=limit, cursor=cursor, scope=info["dataset_id"])
    if "groups" in sources:
        sources["groups"] = page.items
        manifest["sources"] = sources
    out = {**info, "manifest": manifest, **paged({}, "source_groups", page)}
    del out["source_groups"]  # the page is manifest.sources.groups itself
    if isinstance(info.get("sources_current"), list):
        names = {g.get("group") for g in page.items if isinstance(g, dict)}
        out["sources_current"] = [s for s in info["sources_current"] if s.get("group") in names]
    versions = info.get("versions") or []
    out["versions"] = versions[-VERSIONS_SHOWN:]
    out["versions_total"] = len(versions)
    return out


def register(server: "ExtraRLHFServer") -> None:
    tool = server.envelope_tool
    config = server.config
    where = {"datasets_dir": config.datasets_dir}

    async def in_thread(fn, /, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """Reading or writing a whole dataset is long work (bounded pool, cancellable per batch)."""
        return await run_long(fn.__name__, fn, *args, **kwargs)

    @tool(title="List datasets", read_only=True, idempotent=True)
    def list_datasets(limit: limit_arg(50, "dataset versions") = 50, cursor: Cursor = None) -> dict[str, Any]:
        """The datasets, their versions (kind, rows, size, readiness) and pointers.

        The datasets in --datasets-dir with their versions (kind, row counts, size, readiness),
        paged by version: a page holds up to `limit` versions, grouped under their dataset (a
        dataset with many versions continues on the next page; `versions_total` says how many it
        has). `pointers` are the promoted pointers naming the datasets of this page (pointers to
        a missing dataset come on the first page). total counts versions (plus one row per
        dataset with no readable version); pass next_cursor as cursor for the next page.
        """
        return _list_datasets_page(datasets.list_datasets(**where), limit, cursor)

    @tool(title="Inspect a dataset", read_only=True, idempotent=True)
    def inspect_dataset(dataset: DatasetRef, limit: limit_arg(20, "source groups") = 20,
                        cursor: Cursor = None) -> dict[str, Any]:
        """A dataset version's manifest and whether its sources changed.

        A dataset's manifest (id, kind, row counts, file hashes, column schemas, readiness) and
        whether its source session groups changed since. The source groups
        (manifest.sources.groups, with sources_current) are paged: total, returned, next_cursor
        (pass it as cursor for the next page); `versions` lists the newest versions of the name
        (versions_total says how many; list_datasets pages through all of them).
        """
        return _inspect_dataset_page(datasets.inspect_dataset(dataset, **where), limit, cursor)

    @tool(title="Validate a dataset", read_only=True, idempotent=True)
    async def validate_dataset(dataset: DatasetRef) -> dict[str, Any]:
        """Re-hash and re-check a dataset: valid, and every failure.

        Re-hash every file and re-check counts, schemas and invariants (chosen actions legal,
        contiguous decision indexes, no degraded battle in training tables). Returns `valid` and
        every failure with its code.
        """
        return await in_thread(datasets.validate_dataset, dataset, **where)

    @tool(title="Materialize a V5 dataset")
    async def materialize_v5_dataset(
        groups: Annotated[list[Annotated[str, Strict()]], Field(
            description="Session groups to read (from --sessions-dir).", min_length=1)],
        name: NewName,
        ctx: Context,
        overwrite: Overwrite = False,
        promote: Promote = None,
    ) -> dict[str, Any]:
        """Session groups into a versioned V5 Parquet dataset.

        Turn session groups into Parquet tables (decisions, turns, battles) with a manifest;
        only finished, non-degraded, never-peeked battles enter training tables (exclusions are
        listed). Streams in bounded memory; sends progress notifications. Returns the dataset id,
        row counts, exclusions and readiness.
        """
        return await run_cancellable(datasets.materialize_v5_dataset, groups, name, sessions_dir=config.sessions_dir,
                                     overwrite=overwrite, promote=promote,
                                     progress=progress_bridge(ctx, "materialize_v5_dataset", "battles"), **where)

    @tool(title="Prune traces", destructive=True)
    async def prune_traces(
        groups: Annotated[list[Annotated[str, Strict()]] | None, Field(description="Default: all.",
                                                                     min_length=1)] = None,
        keep: Annotated[Literal["compact", "none"], Field(description="none: delete.")] = "compact",
        dry_run: Annotated[bool, Strict(), Field(description="Report only.")] = False,
    ) -> dict[str, Any]:
        """Retention: compact or delete traces a published dataset holds.

        Battles a validated v5 dataset version holds, digests equal, are stored compact; keep
        none deletes each group wholly held (others only compacted). Nothing else is touched.
        """
        return await in_thread(prune_traces_core, sessions_dir=config.sessions_dir, groups=groups, keep=keep,
                               dry_run=dry_run, **where)

    @tool(title="Dataset readiness", read_only=True, idempotent=True)
    async def dataset_readiness(
        group: Annotated[str | None, Strict(), Field(description="A session group (or give dataset).")] = None,
        dataset: Annotated[str | None, Strict(), Field(description="A dataset (or give group).")] = None,
        policy: Policy = None,
    ) -> dict[str, Any]:
        """A group's or dataset's readiness per training contour, with blockers.

        Readiness of a group or dataset per contour, with blockers: v5_policy_training_ready (and
        the training_ready alias, scope v5_policy_only), Nemesis Lite and Standard
        (training_ready_standard, standard_readiness_blockers), metronome_ready and timestamp_ready
        (never from headless data).
        """
        return await in_thread(datasets.dataset_readiness, group, dataset, sessions_dir=config.sessions_dir,
                               policy=policy, **where)

    @tool(title="Split a V5 dataset")
    async def split_v5_training_dataset(
        dataset: DatasetRef,
        ctx: Context,
        name: Annotated[str | None, Strict(), Field(description="Split dataset name (default: from the "
                                                                "source).")] = None,
        fractions: Fractions = None,
        overwrite: Overwrite = False,
        promote: Promote = None,
        policy: PolicyOverrides = None,
    ) -> dict[str, Any]:
        """A battle-grouped train/val/test split of a V5-ready dataset.

        Deterministic train/val/test split grouped by battle (keyed hash): a battle never
        straddles splits and a row keeps its split when data is added. Refused with the blockers
        while the dataset is not v5-policy ready (thresholds: policy).
        """
        extra = {} if fractions is None else {"fractions": fractions}
        return await in_thread(datasets.split_v5_training_dataset, dataset, name=name, overwrite=overwrite,
                               promote=promote, policy=policy,
                               progress=progress_bridge(ctx, "split_v5_training_dataset", "rows"),
                               **extra, **where)

    @tool(title="Split a Nemesis dataset")
    async def split_nemesis_training_dataset(
        dataset: DatasetRef,
        ctx: Context,
        view: Annotated[Literal["lite", "standard"], Field(
            description="'lite' (any eligible battle) or 'standard' (human vs human).")] = "lite",
        name: Annotated[str | None, Strict(), Field(description="Name of the split dataset.")] = None,
        group_by: Annotated[Literal["battle", "opponent_deck"], Field(
            description="'battle' or 'opponent_deck' (held-out decks).")] = "battle",
        fractions: Fractions = None,
        overwrite: Overwrite = False,
        promote: Promote = None,
        policy: PolicyOverrides = None,
    ) -> dict[str, Any]:
        """An opponent-modelling split (Lite, or Standard once ready).

        Opponent-modelling split grouped by battle (default) or opponent deck (keyed hash).
        Human-bot and model-model rows train Lite only; Standard is refused with
        standard_readiness_blockers until ready.
        """
        extra = {} if fractions is None else {"fractions": fractions}
        return await in_thread(datasets.split_nemesis_training_dataset, dataset, view, name=name, group_by=group_by,
                               overwrite=overwrite, promote=promote, policy=policy,
                               progress=progress_bridge(ctx, "split_nemesis_training_dataset", "rows"),
                               **extra, **where)

    @tool(title="Promote a dataset")
    def promote_dataset(
        dataset: DatasetRef,
        pointer: Annotated[str, Strict(), Field(description="Pointer name to (re)point at the dataset.")],
    ) -> dict[str, Any]:
        """Validate a dataset, then point @NAME at it atomically.

        Validate the dataset, then point `pointer` at it by atomic replace (the previous target is
        reported).
        """
        return datasets.promote_dataset(dataset, pointer, **where)
