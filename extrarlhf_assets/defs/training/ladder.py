"""``policy_ladder``: the Elo of every promoted policy against its predecessor (recorded by its
promotion's benchmark) and against baseline:random and baseline:greedy (measured, cached),
with 95% intervals (extrarlhf.policies.ladder writes ``checkpoints/ladder.json``). The asset's
page shows, without a click, a narrow table of every rung and two charts (cumulative Elo, Elo
against greedy, the latest rungs that fit; see metadata.INLINE_MD_LIMIT); the full table with
every column and note is one click away (``ladder_full``).

Downstream of ``promoted_policy``, so ``campaign_loop`` rebuilds it after each promotion (a run
that promotes nothing skips it with the pointer). Its cost is bounded: only the new rung is
measured (``pairs`` pairs against each baseline, 400 battles at the default 100, a few seconds
for a small network); earlier rungs come from the cache. An empty history materializes an
empty ladder with the reason: an outcome, not a failure."""

import dagster as dg

from extrarlhf.core.errors import RLHFError
from extrarlhf.policies.ladder import DEFAULT_PAIRS, elo_text, format_markdown, policy_ladder

from ...metadata import OWNERS, interval_chart_md, records_table
from ...resources import CheckpointsResource
from .assets import TAGS


class LadderConfig(dg.Config):
    """``pairs`` against each baseline (cached per weights, pairs and seed: change them and every
    rung is measured again)."""

    pairs: int = DEFAULT_PAIRS
    seed: int = 0
    max_workers: int = 1


LADDER_COLUMNS = [("rung", "int"), ("policy", "string"), ("cumulative", "string"), ("vs greedy", "string")]
STATUS_MARK = {"current": " (current)", "rolled_back": " (rolled back)"}  # superseded rungs: no mark
LADDER_LEGEND = """
How to read it:

- **Elo vs predecessor**: the promotion's own benchmark against the policy it replaced (paired seeds, sides
  swapped), never replayed; **SPRT** is that benchmark's decision (H1: stronger).
- **cumulative**: the sum of the recorded steps along the predecessor chain from the anchor (the first
  incumbent, Elo 0); its interval adds the steps' interval endpoints (conservative).
- **vs random** / **vs greedy**: measured against the fixed baselines over the pairs above (cached per
  weights, pairs and seed), so rungs compare on one scale.
- A rolled-back promotion keeps its rung and says so in **status** (and in the table above the charts).
"""


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
    labels = [str(r["rung"]) for r in rungs]
    context.log.info(f"policy_ladder: {len(rungs)} rung(s), {ladder['measured']} measured, {ladder['cached']} cached"
                     + (f"; {ladder['reason']}" if ladder["empty"] else ""))
    # in place on the asset's page, first: the two charts and a narrow table of every rung; every
    # column and the notes behind "[Show Markdown]" (ladder_full, long enough not to be inlined)
    metadata = {} if not rungs else {
        "chart": dg.MetadataValue.md(interval_chart_md(
            "Cumulative Elo per promotion (95% CI)", labels, {"cumulative": [_point(r["cumulative"]) for r in rungs]})),
        "chart_vs_greedy": dg.MetadataValue.md(interval_chart_md(
            "Elo vs baseline:greedy per promotion (95% CI)", labels,
            {"vs greedy": [_point(r["vs_baselines"]["baseline:greedy"]) for r in rungs]}))}
    metadata |= {
        "ladder": records_table([{
            "rung": r["rung"], "policy": r["name"] + STATUS_MARK.get(r["status"], ""),
            "cumulative": elo_text(r["cumulative"]), "vs greedy": elo_text(r["vs_baselines"]["baseline:greedy"])}
            for r in rungs], LADDER_COLUMNS),
        "ladder_full": dg.MetadataValue.md(format_markdown(ladder) + ("" if not rungs else LADDER_LEGEND)),
        "dagster/row_count": len(rungs),
        "rungs": len(rungs), "current": ladder["current"] or "none", "anchor": ladder["anchor"] or "none",
        "measured": ladder["measured"], "cached": ladder["cached"], "battles_played": ladder["battles_played"],
        "pairs": config.pairs, "seed": config.seed,
        "engine_version": ladder["provenance"]["engine_version"], "ruleset": ladder["provenance"]["ruleset"],
        "path": dg.MetadataValue.path(ladder["path"] or str(checkpoints.path / "ladder.json")),
    }
    if not rungs:
        metadata["reason"] = ladder["reason"]
    return dg.MaterializeResult(metadata=metadata)
