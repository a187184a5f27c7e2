"""``policy_ladder``: the Elo of every promoted policy against its predecessor (recorded by its
promotion's benchmark) and against baseline:random and baseline:greedy (measured, cached),
with 95% intervals, as a chart and a table (extrarlhf.policies.ladder writes ``checkpoints/ladder.json``).

Downstream of ``promoted_policy``, so ``campaign_loop`` rebuilds it after each promotion (a run
that promotes nothing skips it with the pointer). Its cost is bounded: only the new rung is
measured (``pairs`` pairs against each baseline, 400 battles at the default 100, a few seconds
for a small network); earlier rungs come from the cache. An empty history materializes an
empty ladder with the reason: an outcome, not a failure."""

import dagster as dg

from extrarlhf.core.errors import RLHFError
from extrarlhf.policies.ladder import DEFAULT_PAIRS, format_markdown, policy_ladder

from ...metadata import OWNERS, interval_chart_md
from ...resources import CheckpointsResource
from .assets import TAGS


class LadderConfig(dg.Config):
    """``pairs`` against each baseline (cached per weights, pairs and seed: change them and every
    rung is measured again)."""

    pairs: int = DEFAULT_PAIRS
    seed: int = 0
    max_workers: int = 1


def _point(figure: dict) -> tuple[float, float, float] | None:
    ci = figure.get("elo_ci95")
    return None if figure.get("elo") is None or ci is None else (figure["elo"], ci[0], ci[1])


@dg.asset(
    name="policy_ladder",
    deps=["promoted_policy"],
    group_name="training",
    kinds={"json"},
    owners=OWNERS,
    tags=TAGS,
    code_version="1",
    description="The policy ladder (`checkpoints/ladder.json`): every promotion in order with its Elo against its "
                "predecessor (recorded by its benchmark), its cumulative Elo from the first incumbent, and its Elo "
                "against baseline:random and baseline:greedy (measured over `pairs` paired battles, cached), each "
                "with a 95% interval; rolled-back promotions are shown as such.",
)
def policy_ladder_asset(context: dg.AssetExecutionContext, config: LadderConfig,
                        checkpoints: CheckpointsResource) -> dg.MaterializeResult:
    logged = {"quarter": -1}

    def progress(done: int, total: int) -> None:  # a log line per quarter of the battles
        quarter = 4 * done // total if total else 4
        if quarter > logged["quarter"]:
            logged["quarter"] = quarter
            context.log.info(f"policy_ladder: {done}/{total} baseline battles")

    checkpoints.path.mkdir(parents=True, exist_ok=True)
    try:
        ladder = policy_ladder(checkpoints.path, pairs=config.pairs, seed=config.seed,
                               max_workers=config.max_workers, progress=progress)
    except RLHFError as exc:  # damaged promotion records, bad config: say what to do, no retry
        raise dg.Failure(f"policy_ladder: [{exc.code}] {exc}", allow_retries=False) from None
    rungs = ladder["rungs"]
    labels = [f"{r['rung']} {r['name']}" for r in rungs]
    chart = interval_chart_md("Elo per promotion", labels, {
        "vs predecessor": [_point(r["vs_predecessor"]) for r in rungs],
        "cumulative": [_point(r["cumulative"]) for r in rungs],
        "vs random": [_point(r["vs_baselines"]["baseline:random"]) for r in rungs],
        "vs greedy": [_point(r["vs_baselines"]["baseline:greedy"]) for r in rungs]}) if rungs else ""
    context.log.info(f"policy_ladder: {len(rungs)} rung(s), {ladder['measured']} measured, {ladder['cached']} cached"
                     + (f"; {ladder['reason']}" if ladder["empty"] else ""))
    metadata = {
        "ladder": dg.MetadataValue.md(format_markdown(ladder)),
        "dagster/row_count": len(rungs),
        "rungs": len(rungs), "current": ladder["current"] or "none", "anchor": ladder["anchor"] or "none",
        "measured": ladder["measured"], "cached": ladder["cached"], "battles_played": ladder["battles_played"],
        "pairs": config.pairs, "seed": config.seed,
        "engine_version": ladder["provenance"]["engine_version"], "ruleset": ladder["provenance"]["ruleset"],
        "path": dg.MetadataValue.path(ladder["path"] or str(checkpoints.path / "ladder.json")),
    }
    if rungs:
        metadata["chart"] = dg.MetadataValue.md(chart)
    else:
        metadata["reason"] = ladder["reason"]
    return dg.MaterializeResult(metadata=metadata)
