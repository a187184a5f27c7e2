"""MCP tools of the production plane (DESIGN sections 8, 10): thin wrappers over extrarlhf.production.

The gate is the server process's environment: a closed gate makes every export refuse with
``production_disabled`` (naming the variables, never their values) before any connection.
The DSN, the salt and raw player ids are never arguments (the guards refuse them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from annotated_types import Ge, Le
from mcp.server.mcpserver import Context
from pydantic import Field, Strict

from extrarlhf import production
from extrarlhf.production.reader import MAX_ROWS

from .cancel import run_cancellable
from .progress import progress_bridge
from .tools_datasets import DatasetRef, NewName, Overwrite, PolicyOverrides, Promote

if TYPE_CHECKING:  # pragma: no cover
    from .app import ExtraRLHFServer

Instant = Annotated[str, Strict(), Field(description="ISO 8601 with timezone.")]


IngestedBefore = Annotated[Instant | None, Field(description="Only rows ingested before (default: now).")]
MaxRows = Annotated[int | None, Strict(), Ge(1), Le(MAX_ROWS),
                    Field(description="Row ceiling per stream.")]
PublishIncomplete = Annotated[bool, Strict(), Field(description="Publish it even if stopped by the row ceiling.")]


def register(server: "ExtraRLHFServer") -> None:
    tool = server.envelope_tool
    where = {"datasets_dir": server.config.datasets_dir}

    @tool(title="Production plane status", read_only=True, idempotent=True)
    def production_status() -> dict[str, Any]:
        """Which production variables are set and valid (names only): is the gate open.

        Whether production exports are enabled in this server's environment: each of the four
        variables (RLHF_ENABLE_PRODUCTION_DATASETS, RLHF_PRODUCTION_DSN, RETURNCLOCK_DATASET_SALT,
        RETURNCLOCK_DATASET_SALT_KEY_ID) by name, set or not, valid or not - never a value - and the
        optional RLHF_PRODUCTION_STATEMENT_TIMEOUT_MS and RLHF_PRODUCTION_LOCK_TIMEOUT_MS with the
        milliseconds in effect. Opens no connection.
        """
        return production.production_status()

    @tool(title="Export production V5 battles")
    async def export_production_v5_dataset(
        end_at: Instant,
        name: NewName,
        ctx: Context,
        start_at: Annotated[Instant | None, Field(description="Window start (inclusive).")] = None,
        ingested_before: IngestedBefore = None,
        max_rows: MaxRows = None,
        publish_incomplete: PublishIncomplete = False,
        overwrite: Overwrite = False,
        promote: Promote = None,
        policy: PolicyOverrides = None,
    ) -> dict[str, Any]:
        """Opt-in, read-only V5 export of production battles in [start_at, end_at).

        Opt-in, read-only export of the production battles that finished in [start_at, end_at):
        one database snapshot, keyset paging, replayed by the engine into the local V5 layout
        (decisions, turns, battles) plus excluded (reason per battle), metronome (human decision
        times) and production_battles (kinds, pseudonyms, TimeStamp labels). Player and battle ids
        are keyed pseudonyms (pseudonymized, not anonymous). A window above the row ceiling stops
        with complete=false, stop_reason=row_ceiling. Every statement runs under the server's
        statement_timeout and lock_timeout (production_read_failed names which one ran out);
        cancelling the request cancels the running statement on the server. Sends progress
        notifications.
        """
        return await run_cancellable(production.export_production_v5_dataset, end_at, name=name, start_at=start_at,
                                     ingested_before=ingested_before, max_rows=max_rows,
                                     publish_incomplete=publish_incomplete, overwrite=overwrite, promote=promote,
                                     policy=policy, progress=progress_bridge(ctx, "export_production_v5_dataset",
                                                                             "battles"), **where)

    @tool(title="Export a TimeStamp dataset")
    async def export_timestamp_dataset(
        source: DatasetRef,
        name: NewName,
        overwrite: Overwrite = False,
        promote: Promote = None,
        policy: PolicyOverrides = None,
    ) -> dict[str, Any]:
        """TimeStamp dataset (inputs, labels, audit) of a production V5 export.

        From a production V5 export, write three separate files: inputs.parquet (decks, starting
        player, approved prebattle features), labels.parquet (duration_seconds, turns) and
        audit.parquet (timestamps). Trainers read inputs only, through load_inputs, which refuses
        any column not on the approved list.
        """
        return await run_cancellable(production.export_timestamp_dataset, source, name, overwrite=overwrite,
                                     promote=promote, policy=policy, **where)

    @tool(title="Export ReturnClock sessions")
    async def export_returnclock_dataset(
        end_at: Instant,
        name: NewName,
        ctx: Context,
        start_at: Annotated[Instant | None, Field(description="Sessions ended at or after (default: all).")] = None,
        ingested_before: IngestedBefore = None,
        max_rows: MaxRows = None,
        publish_incomplete: PublishIncomplete = False,
        overwrite: Overwrite = False,
        policy: PolicyOverrides = None,
    ) -> dict[str, Any]:
        """Opt-in, read-only ReturnClock export of sessions ended in [start_at, end_at).

        Opt-in, read-only ReturnClock export: one row per player session that ended in
        [start_at, end_at), the clock starting at ended_at; event 1 with duration_seconds = the gap
        when the player's next session started before end_at, else censored (event 0) at end_at.
        A treatment assigned in [ended_at, min(next_start, end_at)) marks the row treated whatever
        its later status (status and exposed kept as audit). One snapshot, streamed; player ids are
        keyed pseudonyms. Trainers never read this raw export: split it with
        split_returnclock_training_dataset. Bounded by the server's statement_timeout and
        lock_timeout; cancelling the request cancels the running statement. Sends progress
        notifications.
        """
        return await run_cancellable(production.export_returnclock_dataset, start_at, end_at, name=name,
                                     ingested_before=ingested_before, max_rows=max_rows,
                                     publish_incomplete=publish_incomplete, overwrite=overwrite, policy=policy,
                                     progress=progress_bridge(ctx, "export_returnclock_dataset", "sessions"),
                                     **where)

    @tool(title="Split a ReturnClock export")
    async def split_returnclock_training_dataset(
        dataset: DatasetRef,
        name: Annotated[str | None, Strict(), Field(description="Name of the split dataset (default "
                                                                "<source>-split).")] = None,
        overwrite: Overwrite = False,
        policy: PolicyOverrides = None,
    ) -> dict[str, Any]:
        """Organic-only train/val/test split of a ReturnClock export (needs no gate).

        Organic-only (treated rows dropped) train/val/test files of a complete ReturnClock export,
        grouped by player pseudonym with the keyed hash (a player never straddles splits), with
        lifelines-ready columns duration_seconds (> 0) and event (1 returned, 0 censored). The only
        trainer input (load_returnclock_training refuses the raw export). Refused with its blockers
        while the export is incomplete or too small. A local operation on already-pseudonymized
        data: it reads no production database and runs with the production gate closed.
        """
        return await run_cancellable(production.split_returnclock_training_dataset, dataset, name=name,
                                     overwrite=overwrite, policy=policy, **where)
