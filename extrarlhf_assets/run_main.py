"""``make run``: the whole loop through Dagster on a persistent local Dagster home.

    python -m extrarlhf_assets.run_main [--group G] [--battles N] [--epochs E] [--pairs P] ...

Creates ``.dagster_home/`` (SQLite storage, telemetry and nux off) unless DAGSTER_HOME is
set, adds the session group as a ``session_groups`` partition and executes the
``campaign_loop`` job for it: collect -> v5_dataset (+ checks) -> Nemesis splits ->
v5_policy_checkpoint -> policy_benchmark (+ benchmark_passed) -> promoted_policy. The runs
and materializations are then visible in ``make ui`` (same DAGSTER_HOME).
"""

import argparse
import datetime as _dt
import os
import sys
import time
import warnings
from pathlib import Path

DAGSTER_YAML = """\
telemetry:
  enabled: false
nux:
  enabled: false
"""


def prepare_home(path: str | os.PathLike[str] | None = None) -> Path:
    """An absolute DAGSTER_HOME with a dagster.yaml (telemetry and nux off); sets the env var."""
    home = Path(path or os.environ.get("DAGSTER_HOME") or ".dagster_home").absolute()
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists():
        config.write_text(DAGSTER_YAML, encoding="utf-8")
    os.environ["DAGSTER_HOME"] = str(home)
    return home


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m extrarlhf_assets.run_main", description=__doc__.split("\n\n")[0])
    p.add_argument("--group", default="campaign-" + _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d"),
                   help="session group = partition key (default: campaign-<UTC date>; an existing group resumes)")
    p.add_argument("--battles", type=int, default=60)
    p.add_argument("--p1-model", default="baseline:greedy")
    p.add_argument("--opponent", default="baseline:greedy")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--pairs", type=int, default=100, help="benchmark pairs vs the incumbent (SPRT may stop early)")
    p.add_argument("--baseline-pairs", type=int, default=4)
    p.add_argument("--incumbent", default="", help="default: the promoted checkpoint, else baseline:greedy")
    p.add_argument("--dagster-home", default=None)
    p.add_argument("--quiet", action="store_true", help="only warnings from Dagster's own log")
    return p


def run_config(args: argparse.Namespace) -> dict:
    return {
        "ops": {
            "battle_sessions": {"config": {"n_battles": args.battles, "p1_model": args.p1_model,
                                           "opponent": args.opponent, "seed": args.seed,
                                           "max_workers": args.workers}},
            "v5_policy_checkpoint": {"config": {"epochs": args.epochs, "seed": args.seed}},
            "policy_benchmark": {"config": {"incumbent": args.incumbent, "n_pairs": args.pairs,
                                            "baseline_pairs": args.baseline_pairs, "seed": args.seed,
                                            "max_workers": args.workers}},
        },
        "loggers": {"console": {"config": {"log_level": "WARNING" if args.quiet else "INFO"}}},
    }


def summarize(result, group: str) -> tuple[list[str], bool]:
    """Lines describing what the run produced (from its events), and whether it was promoted."""
    meta = {m.asset_key.to_user_string(): {k: getattr(v, "value", v) for k, v in m.metadata.items()}
            for m in (e.event_specific_data.materialization for e in result.get_asset_materialization_events())}
    checks = {e.asset_check_key.name: e for e in result.get_asset_check_evaluations()}
    lines = [f"partition (session group): {group}"]
    s = meta.get("battle_sessions")
    if s:
        lines.append(f"battle_sessions   {s['battles']} battles, W/D/L (p1) {s['p1_wins']}/{s['draws']}/{s['p2_wins']}, "
                     f"{s['decisions']} decisions, {s['degraded']} degraded -> {s['path']}")
    d = meta.get("v5_dataset")
    if d:
        lines.append(f"v5_dataset        {d['dataset_id']}: {d['dagster/row_count']} decisions, {d['battles']} battles "
                     f"-> {d['path']}")
    for name in ("nemesis_lite_split", "nemesis_standard_split"):
        if name in meta:
            lines.append(f"{name:<17} {meta[name]['dataset_id']} -> {meta[name]['path']}")
        else:
            lines.append(f"{name:<17} not built")
    c = meta.get("v5_policy_checkpoint")
    if c:
        lines.append(f"checkpoint        {c['checkpoint']} (train loss {c['train_loss']:.4f}, top-1 {c['train_top1']:.3f}) "
                     f"-> {c['path']}")
    b = meta.get("policy_benchmark")
    if b:
        lines.append(f"benchmark         {b['candidate']} vs {b['incumbent']}: W/D/L {b['wins']}/{b['draws']}/"
                     f"{b['losses']} over {b['pairs']} pairs, score {b['score']:.3f}, Elo {b['elo']:+.1f}")
        lines.append(f"                  {b['verdict']} -> {b['report_path']}")
    p = meta.get("promoted_policy")
    lines.append(f"promotion         {'PROMOTED ' + p['promoted'] + ' (previous: ' + p['previous'] + ')' if p else 'not promoted'}")
    lines.append("checks            " + ", ".join(f"{k}={'pass' if e.passed else 'FAIL'}" for k, e in checks.items()))
    for name, e in checks.items():
        if not e.passed:
            detail = {k: getattr(v, "value", v) for k, v in e.metadata.items()}
            why = detail.get("blockers") or detail.get("verdict") or detail.get("failures") or ""
            lines.append(f"  {name}: {str(why).strip()}")
    return lines, p is not None


def stopped_by_gates_only(result) -> bool:
    """True when every failed step failed only because a blocking check did not pass."""
    failures = [e for e in result.all_events if e.is_step_failure]
    return bool(failures) and all(
        (e.step_failure_data.error is not None and e.step_failure_data.error.cls_name == "DagsterAssetCheckFailedError")
        for e in failures)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    home = prepare_home(args.dagster_home)
    warnings.filterwarnings("ignore", module="dagster")
    import dagster as dg

    from .definitions import defs

    instance = dg.DagsterInstance.get()
    print(f"[extrarlhf] DAGSTER_HOME={home}", flush=True)
    if args.group not in instance.get_dynamic_partitions("session_groups"):
        instance.add_dynamic_partitions("session_groups", [args.group])
    print(f"[extrarlhf] campaign_loop for partition {args.group!r}: collect {args.battles} battles "
          f"({args.p1_model} vs {args.opponent}) -> dataset -> readiness -> train -> benchmark -> promote", flush=True)
    t0 = time.perf_counter()
    job = defs.resolve_job_def("campaign_loop")
    result = job.execute_in_process(instance=instance, partition_key=args.group, run_config=run_config(args),
                                    raise_on_error=False)
    lines, _ = summarize(result, args.group)
    gated = stopped_by_gates_only(result)
    status = "success" if result.success else ("stopped at a blocking check (a gate, not an error)" if gated
                                               else "FAILED (see the log above)")
    print(f"\n== ExtraRLHF campaign summary (run {result.run_id}, {time.perf_counter() - t0:.1f}s, {status}) ==")
    for line in lines:
        print(line)
    print(f"\nSee it in the UI: make ui  (DAGSTER_HOME={home})")
    return 0 if result.success or gated else 1


if __name__ == "__main__":
    sys.exit(main())
