"""L0 tools (DESIGN section 8): ``train_policy``, ``benchmark_models``, ``promote_checkpoint``,
``run_pipeline``, plus ``rollback_promotion``, ``promotion_status`` and ``policy_ladder``.

Each tool is a thin facade over the core (extrarlhf.training, extrarlhf.policies.benchmarking,
extrarlhf.policies.promotion, extrarlhf.policies.pipeline): typed arguments, the server's directories, MCP
progress notifications for the long ones (run in a worker thread, like ``run_series``).
Call :func:`register` on a built server to add them.
"""

from __future__ import annotations

import logging
from typing import Annotated, Any, Callable, Literal

import anyio
import anyio.from_thread
from annotated_types import Ge, Le
from mcp.server.mcpserver import Context
from pydantic import Field, Strict

from extrarlhf.policies import benchmarking, ladder, pipeline, promotion
from extrarlhf.runtime.match import MAX_SEED
from extrarlhf.runtime.series import MAX_BATTLES
from extrarlhf.runtime.series import MAX_WORKERS as SERIES_MAX_WORKERS

from .cancel import run_cancellable, run_long
from .paging import Cursor, limit_arg, paged, paginate
from .progress import progress_bridge
from .tools_datasets import PolicyOverrides

log = logging.getLogger("mcp_server")

CheckpointName = Annotated[str, Strict(), Field(description="Checkpoint name.")]
ModelSpec = Annotated[str, Strict(), Field(description="A checkpoint, baseline or search spec.")]
# Every bound below is the core's own (tests/mcp_server/test_mcp_schemas.py calls the core at each
# bound): the schema refuses exactly what the core would refuse, before any work starts --
# run_pipeline in particular hands its arguments to stages that run hours apart.
Seed = Annotated[int, Strict(), Ge(0), Le(MAX_SEED)]
Imitate = Annotated[str, Strict(), Field(description="'all', 'winners', 'search' or an actor spec.")]
Target = Annotated[Literal["choice", "search_values"], Field(
    description="'choice' or 'search_values' (a teacher's values).")]
Temperature = Annotated[float, Strict(), Field(gt=0, le=10, allow_inf_nan=False,
                                               description="Temperature of search_values.")]
# extrarlhf.training.hyper.HyperParams: epochs 1..1000, hidden and hidden2 1..4096, depth 1..16, batch_size
# 1..65536, lr in (0, 1], threads 1..256, device cpu|cuda
Epochs = Annotated[int, Strict(), Ge(1), Le(1000), Field(description="Passes over the training split.")]
Width = Annotated[int, Strict(), Ge(1), Le(4096)]
Pairs = Annotated[int, Strict(), Ge(1), Le(benchmarking.MAX_PAIRS),
                  Field(description="Most pairs (SPRT stops earlier).")]
BaselinePairs = Annotated[int, Strict(), Ge(0), Le(benchmarking.MAX_PAIRS),
                          Field(description="Pairs against each baseline.")]
Elo = Annotated[float, Strict(), Field(gt=-1000, lt=1000, allow_inf_nan=False)]  # benchmarking: open (-1000, 1000)
ErrorRate = Annotated[float, Strict(), Field(gt=0, lt=0.5, allow_inf_nan=False)]  # open (0, 0.5)
Workers = Annotated[int, Strict(), Ge(1), Le(benchmarking.MAX_WORKERS),
                    Field(description="Worker processes.")]
# run_pipeline's workers play the series and the benchmark: within both cores' bounds
PipelineWorkers = Annotated[int, Strict(), Ge(1), Le(min(SERIES_MAX_WORKERS, benchmarking.MAX_WORKERS)),
                            Field(description="Worker processes.")]


def _stage_progress(ctx: Context, label: str) -> tuple[Callable[[float, float, str], None], dict[str, Any]]:
    """A thread-side progress reporter for fractional values (pipeline stages) that strictly
    increase, as MCP requires."""
    sent: dict[str, Any] = {"last": -1.0, "failures": 0}

    def report(done: float, total: float, message: str) -> None:
        if done <= sent["last"]:
            return
        sent["last"] = done
        try:
            anyio.from_thread.run(ctx.report_progress, done, total, message)
        except Exception as exc:  # noqa: BLE001 - a lost notification never stops the work
            if not sent["failures"]:
                log.warning("%s progress notification failed: %s", label, exc)
            sent["failures"] += 1

    return report, sent


MAX_PAIR_RESULTS = 200  # per tally in a tool result; the report file keeps them all


def bounded_report(report: dict[str, Any]) -> dict[str, Any]:
    """A benchmark report for a tool result: each tally's per-pair ``pair_results`` (one entry per
    pair, up to 100,000) cut to its first MAX_PAIR_RESULTS, with the total and where the whole
    list is (the report file); every other figure is unchanged."""
    def cut(tally: dict[str, Any]) -> dict[str, Any]:
        pairs = tally.get("pair_results") or []
        if len(pairs) <= MAX_PAIR_RESULTS:
            return tally
        return {**tally, "pair_results": pairs[:MAX_PAIR_RESULTS], "pair_results_total": len(pairs),
                "pair_results_truncated": f"first {MAX_PAIR_RESULTS} of {len(pairs)}; all of them in report_path"}

    out = dict(report)
    if isinstance(out.get("match"), dict):
        out["match"] = cut(out["match"])
    if isinstance(out.get("baselines"), list):
        out["baselines"] = [cut(b) for b in out["baselines"]]
    return out


def register(server: Any) -> None:
    """Add the L0 tools to ``server`` (an :class:`mcp_server.app.ExtraRLHFServer`)."""
    config = server.config
    tool = server.envelope_tool

    @tool(title="Train a policy")
    async def train_policy(
        dataset: Annotated[str, Strict(), Field(description="NAME, NAME/vN or @POINTER (V5-ready).")],
        name: CheckpointName,
        ctx: Context,
        seed: Annotated[Seed, Field(description="Training seed.")] = 0,
        imitate: Imitate = "all",
        epochs: Epochs = 5,
        hidden: Annotated[Width, Field(description="First hidden layer width.")] = 256,
        hidden2: Annotated[Width, Field(description="Later scoring layers' width.")] = 128,
        depth: Annotated[int, Strict(), Ge(1), Le(16), Field(description="Scoring layers of width hidden2.")] = 1,
        encoder: Annotated[Literal["flat", "sets"],
                           Field(description="'sets': per-card nets pooled over slots.")] = "flat",
        lr: Annotated[float, Strict(), Field(gt=0, le=1, allow_inf_nan=False,
                                             description="Adam learning rate.")] = 1e-3,
        batch_size: Annotated[int, Strict(), Ge(1), Le(1 << 16), Field(description="Decisions per batch.")] = 128,
        target: Target = "choice",
        temperature: Temperature = 0.05,
        threads: Annotated[int, Strict(), Ge(1), Le(256), Field(
            description="torch threads (same seed+threads: same weights).")] = 1,
        device: Annotated[Literal["cpu", "cuda"], Field(description="'cuda' needs a GPU torch can see.")] = "cpu",
        readiness_policy: PolicyOverrides = None,
        overwrite: Annotated[bool, Strict(),
                             Field(description="Replace a checkpoint (never the promoted one).")] = False,
    ) -> dict[str, Any]:
        """Behaviour cloning on a V5-ready dataset into a v5 checkpoint.

        An MLP scores each legal action (softmax over the legal set), trained with PyTorch on the
        dataset streamed in bounded batches, exported through
        torch.onnx as a v5 ONNX model (verified against torch), registered as checkpoint `name` and
        described by a model card next to it. Refuses a dataset
        that fails validation (validation_failed) or is not V5-ready (not_ready, with blockers).
        Sends a progress notification per epoch; cancellable (stops within a batch). One call may ask
        for at most 6e12 epochs x parameters x training decisions (work_cap_exceeded names the cap).
        Returns weights_hash, card_path, data sizes and train/val loss and top-1 agreement per epoch.
        """
        from extrarlhf.training import train_policy as core_train

        return await run_long(
            "train_policy", core_train, dataset, name, seed, imitate=imitate, epochs=epochs, hidden=hidden,
            hidden2=hidden2, depth=depth, encoder=encoder, lr=lr, batch_size=batch_size, target=target,
            temperature=temperature, threads=threads, device=device,
            datasets_dir=config.datasets_dir, checkpoints_dir=config.checkpoints_dir, policy=readiness_policy,
            overwrite=overwrite, progress=progress_bridge(ctx, "train_policy", "epochs"))

    @tool(title="Benchmark two models")
    async def benchmark_models(
        candidate: ModelSpec,
        ctx: Context,
        incumbent: Annotated[str | None, Strict(), Field(
            description="Default: the promoted one.")] = None,
        n_pairs: Pairs = 200,
        seed: Annotated[Seed, Field(description="Base seed of the pairs.")] = 0,
        elo0: Annotated[Elo, Field(description="SPRT H0: Elo at most elo0.")] = 0.0,
        elo1: Annotated[Elo, Field(description="SPRT H1: Elo at least elo1.")] = 10.0,
        alpha: Annotated[ErrorRate, Field(description="SPRT false-positive rate.")] = 0.05,
        beta: Annotated[ErrorRate, Field(description="SPRT false-negative rate.")] = 0.05,
        baseline_pairs: BaselinePairs = 20,
        max_workers: Workers = 1,
    ) -> dict[str, Any]:
        """Candidate vs incumbent on paired seeds: W/D/L, Elo (95% interval), SPRT.

        Candidate vs incumbent on paired seeds with seats swapped, batched ONNX inference: W/D/L,
        score, Elo with a 95% interval over pairs, and an SPRT (fishtest's pentanomial GSPRT) checked
        after every pair that stops early when decided; then each model against baseline:random and
        baseline:greedy. Any degraded battle invalidates the benchmark. The report (JSON and a
        markdown table in `markdown`) is stored under <checkpoints>/benchmarks/. passed=true only
        when valid and the SPRT accepted H1.
        """
        against = incumbent if incumbent is not None else promotion.current_incumbent(config.checkpoints_dir)
        return bounded_report(await run_cancellable(
            benchmarking.benchmark_models, candidate, against, n_pairs=n_pairs, seed=seed, elo0=elo0, elo1=elo1,
            alpha=alpha, beta=beta, baseline_pairs=baseline_pairs, max_workers=max_workers,
            checkpoints_dir=config.checkpoints_dir,
            progress=progress_bridge(ctx, "benchmark_models", "battles played")))

    @tool(title="Promote a checkpoint")
    def promote_checkpoint(
        name: CheckpointName,
        require_current_incumbent: Annotated[bool, Strict(), Field(
            description="Only if benchmarked against the current incumbent.")] = True,
    ) -> dict[str, Any]:
        """Make a checkpoint the promoted policy (its latest benchmark must have passed).

        Make `name` the promoted policy: only when its latest benchmark is valid and passed, its
        played weights_hash equals the registered one, and it was benchmarked against the current
        incumbent. Writes promoted.json atomically and appends to promoted_history.jsonl. A refusal
        (promotion_refused) lists every failed check in error.details.reasons.
        """
        return promotion.promote_checkpoint(name, checkpoints_dir=config.checkpoints_dir,
                                            require_current_incumbent=require_current_incumbent)

    @tool(title="Roll back the last promotion", destructive=True)
    def rollback_promotion() -> dict[str, Any]:
        """Re-install the previously promoted checkpoint.

        Re-install the checkpoint that was promoted before the current one (checked to be still
        registered with the same weights). Refused (promotion_refused) when there is no earlier
        promotion.
        """
        return promotion.rollback_promotion(checkpoints_dir=config.checkpoints_dir)

    @tool(title="Promotion status", read_only=True, idempotent=True)
    def promotion_status(limit: limit_arg(50, "history events") = 50, cursor: Cursor = None) -> dict[str, Any]:
        """The promoted checkpoint, what a rollback restores, the history.

        The promoted checkpoint (and whether its registry entry and file are still intact), the
        current incumbent spec, what a rollback would restore, and the promotion history, oldest
        first, paged: total, returned, next_cursor (pass it as cursor for the next page).
        """
        status = promotion.promotion_status(config.checkpoints_dir)
        page = paginate(status["history"], tool="promotion_status", limit=limit, cursor=cursor)
        return paged(status, "history", page)

    @tool(title="Policy ladder", idempotent=True)
    async def policy_ladder(
        ctx: Context,
        pairs: Annotated[int, Strict(), Ge(1), Le(benchmarking.MAX_PAIRS), Field(
            description="Pairs per rung and baseline (cached).")]
        = ladder.DEFAULT_PAIRS,
        seed: Annotated[Seed, Field(description="Base seed of the baseline pairs.")] = 0,
        max_workers: Workers = 1,
        measure: Annotated[bool, Strict(), Field(
            description="Play the pairs not cached yet.")] = True,
        limit: limit_arg(50, "rungs") = 50,
        cursor: Cursor = None,
    ) -> dict[str, Any]:
        """Each promotion's Elo against its predecessor and the baselines.

        Every promotion in order (rolled-back ones marked rolled_back): its Elo against its
        predecessor with the 95% interval and SPRT decision (recorded by the promotion's benchmark,
        never replayed), its cumulative Elo from the first incumbent (anchor), and its Elo against
        baseline:random and baseline:greedy with 95% intervals (measured over `pairs` paired battles,
        cached in <checkpoints>/ladder.json, which this call writes). Sends progress notifications
        while measuring; cancellable. Nothing promoted yet: empty=true with the reason (not an error).
        The rungs are paged: total, returned, next_cursor.
        """
        result = await run_cancellable(
            ladder.policy_ladder, config.checkpoints_dir, pairs=pairs, seed=seed, max_workers=max_workers,
            measure=measure, progress=progress_bridge(ctx, "policy_ladder", "baseline battles"))
        page = paginate(result["rungs"], tool="policy_ladder", limit=limit, cursor=cursor, scope=[pairs, seed])
        return paged(result, "rungs", page)

    @tool(title="Run the L0 pipeline")
    async def run_pipeline(
        group: Annotated[str, Strict(), Field(description="Session group (resumed if it exists).")],
        name: CheckpointName,
        ctx: Context,
        n_battles: Annotated[int, Strict(), Ge(1), Le(MAX_BATTLES),
                             Field(description="Battles the group should hold.")] = 300,
        p1_model: Annotated[str, Strict(), Field(description="Player 1's spec.")]
        = "baseline:greedy",
        opponent: Annotated[str, Strict(), Field(description="Player 2's spec.")]
        = "baseline:greedy",
        seed: Annotated[Seed, Field(description="Seed of series, training and benchmark.")] = 0,
        imitate: Imitate = "all",
        epochs: Epochs = 5,
        target: Target = "choice",
        temperature: Temperature = 0.05,
        incumbent: Annotated[str | None, Strict(), Field(
            description="Default: the promoted one.")]
        = None,
        n_pairs: Pairs = 200,
        baseline_pairs: BaselinePairs = 20,
        promote: Annotated[bool, Strict(), Field(description="Promote it when its benchmark passed.")] = True,
        require_current_incumbent: Annotated[bool, Strict(), Field(
            description="Only against the current incumbent.")] = True,
        max_workers: PipelineWorkers = 1,
        readiness_policy: PolicyOverrides = None,
    ) -> dict[str, Any]:
        """The L0 loop: collect, materialize, readiness, train, benchmark, promote.

        The whole L0 loop: collect (run_series) -> materialize -> readiness -> train -> benchmark
        against the incumbent -> promote, with a progress notification per step (stage i of 6 plus
        its fraction). Stops at readiness (with blockers) when the data is not V5-ready; a benchmark
        that does not pass leaves the candidate registered but not promoted, with the refusal's
        reasons. Returns a summary with every stage's result.
        """
        report, _ = _stage_progress(ctx, "run_pipeline")
        stages = pipeline.STAGES

        def progress(stage: str, done: int, total: int) -> None:
            index = stages.index(stage)
            fraction = min(done / total, 1.0) if total else 0.0
            report(index + fraction, float(len(stages)), f"{stage}: {done}/{total}")

        return await run_cancellable(
            pipeline.run_pipeline, group, name, n_battles=n_battles, p1_model=p1_model, opponent=opponent, seed=seed,
            imitate=imitate, epochs=epochs, train_options={"target": target, "temperature": temperature},
            incumbent=incumbent, n_pairs=n_pairs, baseline_pairs=baseline_pairs,
            promote=promote, require_current_incumbent=require_current_incumbent, max_workers=max_workers,
            readiness_policy=readiness_policy, sessions_dir=config.sessions_dir, datasets_dir=config.datasets_dir,
            checkpoints_dir=config.checkpoints_dir, progress=progress)

    @tool(title="Check the data", idempotent=True)
    async def check_data(
        repair: Annotated[bool, Strict(), Field(
            description="Also repair what is provably safe.")] = False,
    ) -> dict[str, Any]:
        """Every problem of sessions, datasets, checkpoints (read-only unless repair=true).

        Walk --sessions-dir, --datasets-dir and --checkpoints-dir and list every problem: damaged
        records (with path, line and field), datasets failing validation, stale or dangling pointers,
        missing or changed model files, stale model cards, torn promotion records, unreadable benchmark
        reports. Read-only unless repair=true. Returns ok (no error left), problems (area, severity,
        code, path, line, field, message, repairable), repaired (area, path, action), skipped (what
        could not be checked, with why), checked (counts) and counts.
        """
        from extrarlhf.maintenance.check import check_all

        return await run_long("check_data", check_all, config.sessions_dir, config.datasets_dir,
                              config.checkpoints_dir, repair=repair)
