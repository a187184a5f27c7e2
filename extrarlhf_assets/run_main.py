"""``make run``: the whole loop through Dagster on a persistent local Dagster home.

    python -m extrarlhf_assets.run_main [--group G] [--battles N] [--epochs E] [--pairs P] ...

Creates ``.dagster_home/`` (SQLite storage, telemetry and nux off) unless DAGSTER_HOME is
set, adds the session group as a ``session_groups`` partition and executes the
``campaign_loop`` job for it: collect -> v5_dataset (+ checks) -> Nemesis splits ->
v5_policy_checkpoint -> policy_benchmark (+ benchmark_passed) -> promoted_policy. The runs
and materializations are then visible in ``make ui`` (same DAGSTER_HOME).

Each run is one round of expert iteration (DESIGN section 14): the group grows by
``ROUND_BATTLES`` battles of the search teacher (``TEACHER``) against ``baseline:greedy``, the
candidate (a sets-encoder network) learns the teacher's action values from every battle of the
group, and it is
benchmarked against the incumbent. With nothing promoted yet the incumbent is
``baseline:random`` (the first-promotion rule, extrarlhf/policies/promotion.py), so the first run ends
with a promoted policy; a second run trains a new candidate on more battles and benchmarks it
against that promoted one.

On a shared instance (a DAGSTER_HOME whose storage is PostgreSQL, deploy/dagster.yaml) it runs
nothing: running in this process would bypass the instance's run queue, ``max_concurrent_runs``
and the one-run-per-partition limit, so it exits with status 2 and prints the ``dagster job
launch`` command that queues the same run for the daemon.

A gate that holds (a dataset not ready, an inconclusive benchmark, a refused promotion) is a
normal outcome: the run succeeds, the summary says what was not built and why (each reason
once), and the exit status is 0. Dagster's full log of the run is written to
``DAGSTER_HOME/logs/<run id>.log`` (its path is printed).
"""

import argparse
import datetime as _dt
import json
import os
import sys
import time
import warnings
from pathlib import Path

from extrarlhf.core.extras import MissingExtra, require

TEACHER = "search:baseline:greedy?sims=32"
# One run from nothing ends, inside about a minute of the job on 2 cores, with a policy that beats
# baseline:greedy (docs/training.md, the improvement loop): as many teacher battles as the native
# core collects in its share of that minute, a sets-encoder student, large batches.
ROUND_BATTLES = 2000
EPOCHS = 6
ENCODER = "sets"
HIDDEN = 256
HIDDEN2 = 128
EMBED = 64
BATCH_SIZE = 512
LR = 3e-3
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
    p.add_argument("--battles", type=int, default=None,
                   help="battles the group should hold (default: --more-battles more than it holds)")
    p.add_argument("--more-battles", type=int, default=ROUND_BATTLES,
                   help=f"without --battles: battles this run adds to the group (default {ROUND_BATTLES})")
    p.add_argument("--p1-model", default=TEACHER, help=f"player 1, the teacher (default {TEACHER})")
    p.add_argument("--opponent", default="baseline:greedy")
    p.add_argument("--imitate", default="search", help="decisions to learn from (default: the search actor's)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    p.add_argument("--epochs", type=int, default=EPOCHS, help=f"training epochs (default {EPOCHS})")
    p.add_argument("--encoder", default=ENCODER, choices=("flat", "sets"),
                   help=f"how the student reads the observation (default {ENCODER})")
    p.add_argument("--hidden", type=int, default=HIDDEN, help=f"first hidden layer's width (default {HIDDEN})")
    p.add_argument("--hidden2", type=int, default=HIDDEN2, help=f"second hidden layer's width (default {HIDDEN2})")
    p.add_argument("--embed", type=int, default=EMBED, help=f"the sets encoder's per-card width (default {EMBED})")
    p.add_argument("--batch-size", type=int, default=BATCH_SIZE, help=f"training batch (default {BATCH_SIZE})")
    p.add_argument("--lr", type=float, default=LR, help=f"AdamW learning rate (default {LR:g})")
    p.add_argument("--train-threads", type=int, default=min(2, os.cpu_count() or 1),
                   help="PyTorch threads while training (default: up to 2)")
    p.add_argument("--pairs", type=int, default=400, help="benchmark pairs vs the incumbent (SPRT may stop early)")
    p.add_argument("--baseline-pairs", type=int, default=4)
    p.add_argument("--incumbent", default="", help="default: the promoted checkpoint, else baseline:random (the first-promotion rule)")
    p.add_argument("--no-require-current-incumbent", dest="require_current_incumbent", action="store_false",
                   help="promote a candidate that passed against --incumbent even when that is not the current "
                        "incumbent (e.g. a first promotion decided against baseline:random)")
    p.add_argument("--dagster-home", default=None)
    p.add_argument("--quiet", action="store_true", help="only warnings from Dagster's own log on the console "
                                                         "(the log file keeps everything)")
    return p


def run_config(args: argparse.Namespace) -> dict:
    return {
        "ops": {
            "battle_sessions": {"config": {"n_battles": args.battles, "p1_model": args.p1_model,
                                           "opponent": args.opponent, "seed": args.seed,
                                           "max_workers": args.workers}},
            "v5_policy_checkpoint": {"config": {"epochs": args.epochs, "seed": args.seed, "imitate": args.imitate,
                                                "encoder": args.encoder, "hidden": args.hidden,
                                                "hidden2": args.hidden2, "embed": args.embed,
                                                "batch_size": args.batch_size, "lr": args.lr,
                                                "threads": args.train_threads}},
            "policy_benchmark": {"config": {"incumbent": args.incumbent, "n_pairs": args.pairs,
                                            "baseline_pairs": args.baseline_pairs, "seed": args.seed,
                                            "max_workers": args.workers}},
            "promoted_policy": {"config": {"require_current_incumbent": args.require_current_incumbent}},
        },
        "loggers": {"console": {"config": {"log_level": "WARNING" if args.quiet else "INFO"}}},
    }


def held_battles(group: str) -> int:
    """Battles already in the group's catalog (0 for a new group)."""
    from extrarlhf.runtime.sessions import SessionStore

    store = SessionStore(os.environ.get("RLHF_SESSIONS_DIR") or "sessions")
    return len(store.read_catalog(group)) if store.catalog_path(group).exists() else 0


def _plain(meta) -> dict:
    return {k: getattr(v, "value", v) for k, v in meta.items()}


def _reasons(text: str) -> list[str]:
    """A check's or a skip's reasons (a markdown bullet list or one line) as separate lines."""
    return [line.strip().lstrip("-").strip() for line in str(text).strip().splitlines() if line.strip()]


def check_states(result) -> dict[str, str]:
    """{check: "pass" | "warn" | "FAIL"}: a failed WARN check is a warning, a failed ERROR one an error."""
    import dagster as dg

    return {e.asset_check_key.name: "pass" if e.passed else
            ("warn" if e.severity == dg.AssetCheckSeverity.WARN else "FAIL")
            for e in result.get_asset_check_evaluations()}


def summarize(result, group: str) -> tuple[list[str], bool]:
    """Lines describing what the run produced (from its events), and whether it was promoted."""
    from .metadata import GATE_HELD

    meta = {m.asset_key.to_user_string(): _plain(m.metadata)
            for m in (e.event_specific_data.materialization for e in result.get_asset_materialization_events())}
    skips = {}
    for e in result.all_events:
        if e.event_type_value == "ASSET_OBSERVATION":
            obs = e.event_specific_data.asset_observation
            reasons = _plain(obs.metadata).get("skipped_reasons")
            if reasons:
                skips[obs.asset_key.to_user_string()] = list(reasons)
    lines = [f"partition (session group): {group}"]
    s = meta.get("battle_sessions")
    if s:
        lines.append(f"battle_sessions   {s['battles']} battles, W/D/L (p1) {s['p1_wins']}/{s['draws']}/{s['p2_wins']}, "
                     f"{s['decisions']} decisions, {s['degraded']} degraded -> {s['path']}")
    d = meta.get("v5_dataset")
    if d:
        kept = " (unchanged group: version kept)" if d.get("reused") else ""
        lines.append(f"v5_dataset        {d['dataset_id']}{kept}: {d['dagster/row_count']} decisions, {d['battles']} "
                     f"battles -> {d['path']}")
    lite = meta.get("nemesis_lite_split")
    lines.append("nemesis_lite_split " + (f"{lite['dataset_id']} -> {lite['path']}" if lite else "not built"))
    c = meta.get("v5_policy_checkpoint")
    lines.append("checkpoint        " + (f"{c['checkpoint']} (train loss {c['train_loss']:.4f}, top-1 "
                                         f"{c['train_top1']:.3f}) -> {c['path']}" if c else "not trained"))
    b = meta.get("policy_benchmark")
    if b:
        lines.append(f"benchmark         {b['candidate']} vs {b['incumbent']}: W/D/L {b['wins']}/{b['draws']}/"
                     f"{b['losses']} over {b['pairs']} pairs, score {b['score']:.3f}, Elo {b['elo']:+.1f}")
        lines.append(f"                  {b['verdict']} -> {b['report_path']}")
        from extrarlhf.policies.promotion import DEFAULT_INCUMBENT

        if b["incumbent"] == DEFAULT_INCUMBENT:
            lines.append(f"                  (first-promotion rule: nothing was promoted, so the incumbent is "
                         f"{DEFAULT_INCUMBENT}; the next run's candidate must beat the promoted policy)")
    p = meta.get("promoted_policy")
    lines.append(f"promotion         {'PROMOTED ' + p['promoted'] + ' (previous: ' + p['previous'] + ')' if p else 'not promoted'}")
    lad = meta.get("policy_ladder")
    if lad and lad.get("rungs"):
        from extrarlhf.policies.ladder import elo_text, read_ladder

        doc = read_ladder(Path(lad["path"]).parent) or {"rungs": []}
        lines.append(f"policy_ladder     {lad['rungs']} promotion(s), Elo with 95% intervals -> {lad['path']}")
        for r in doc["rungs"]:
            base = r["vs_baselines"]
            lines.append(f"  {r['rung']:>2} {r['name']:<32} vs {r['predecessor']['spec']}: "
                         f"{elo_text(r['vs_predecessor'])}; vs greedy {elo_text(base['baseline:greedy'])}; "
                         f"vs random {elo_text(base['baseline:random'])}")
    states = check_states(result)
    lines.append("checks            " + ", ".join(f"{k}={v}" for k, v in states.items()))
    seen: set[str] = set()

    def once(label: str, reasons: list[str]) -> None:
        fresh = [r for r in reasons if r not in seen]
        seen.update(fresh)
        for i, r in enumerate(fresh):
            lines.append(f"  {label if i == 0 else '':<24} {r}")

    checks = {e.asset_check_key.name: e for e in result.get_asset_check_evaluations()}
    for name, state in states.items():
        if state != "pass":
            detail = _plain(checks[name].metadata)
            once(f"{name} ({state}):", _reasons(detail.get("blockers") or detail.get("verdict")
                                                or detail.get("failures") or ""))
    for asset, reasons in skips.items():  # a gate already explained above is named, not repeated
        once(f"{asset} not built:", [f"held by {r.split()[0]} (above)" if r.split()[0] in states
                                     and r.split(" ", 1)[1].startswith(GATE_HELD) else r for r in reasons])
    return lines, p is not None


def write_log(instance, run_id: str, home: Path) -> Path:
    """Dagster's full event log of the run (every level, errors with their stack) as a text file."""
    folder = home / "logs"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{run_id}.log"
    with open(path, "w", encoding="utf-8") as out:
        for entry in instance.all_logs(run_id):
            when = _dt.datetime.fromtimestamp(entry.timestamp, _dt.timezone.utc).isoformat(timespec="milliseconds")
            level = {10: "DEBUG", 20: "INFO", 30: "WARNING", 40: "ERROR", 50: "CRITICAL"}.get(entry.level, entry.level)
            event = entry.dagster_event
            text = entry.user_message or (event.message if event else "") or ""
            out.write(f"{when} {level} {entry.step_key or '-'} {text}\n")
            error = getattr(getattr(event, "event_specific_data", None), "error", None) if event else None
            if error is not None:
                out.write(error.to_string() + "\n")
    return path


def shared_instance_refusal(instance, home: Path, args: argparse.Namespace) -> str | None:
    """Why ``make run`` must not run on ``instance``, or None. It executes the job inside this
    process, past the instance's run queue (``max_concurrent_runs``, one run per partition, the
    production limit): fine on its own SQLite home, wrong on a shared (PostgreSQL-backed) one,
    where other runs count on those limits. The refusal says how to queue the same run instead."""
    from dagster._core.storage.runs import SqliteRunStorage

    if isinstance(instance.run_storage, SqliteRunStorage):
        return None
    tags = json.dumps({"dagster/partition": args.group})
    config = json.dumps({k: v for k, v in run_config(args).items() if k != "loggers"}, separators=(",", ":"))
    return (f"error [shared_instance]: DAGSTER_HOME={home} is a shared instance ({type(instance.run_storage).__name__}): "
            "make run executes campaign_loop inside this process, outside its run queue (max_concurrent_runs, one "
            "run per partition, the pools' queue), so it does not run here. Nothing was run or written.\n"
            "Queue the same run through the daemon instead (the group must be a session_groups partition: "
            "session_groups_sensor adds groups found on disk, or add it on the asset's page):\n"
            f"  dagster job launch -w deploy/workspace.grpc.yaml -j campaign_loop --tags '{tags}' "
            f"--config-json '{config}'\n"
            "or launch campaign_loop for that partition from the UI; for make run's own instance, unset "
            "DAGSTER_HOME or pass --dagster-home with a new folder (SQLite).")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        dg = require("dagster", "make run (python -m extrarlhf_assets.run_main)")
    except MissingExtra as error:  # before anything is written
        print(f"error [{error.code}]: {error}", file=sys.stderr)
        return 2
    home = prepare_home(args.dagster_home)
    warnings.filterwarnings("ignore", module="dagster")

    from .definitions import defs

    instance = dg.DagsterInstance.get()
    if args.battles is None:
        args.battles = held_battles(args.group) + args.more_battles
    from extrarlhf.policies.promotion import DEFAULT_INCUMBENT, current_incumbent

    incumbent = args.incumbent or current_incumbent(os.environ.get("RLHF_CHECKPOINTS_DIR") or "checkpoints")
    refusal = shared_instance_refusal(instance, home, args)
    if refusal:
        print(refusal, file=sys.stderr)
        return 2
    print(f"[extrarlhf] DAGSTER_HOME={home}", flush=True)
    if args.group not in instance.get_dynamic_partitions("session_groups"):
        instance.add_dynamic_partitions("session_groups", [args.group])
    if incumbent == DEFAULT_INCUMBENT and not args.incumbent:
        print(f"[extrarlhf] nothing is promoted yet: the incumbent is {DEFAULT_INCUMBENT} (the first-promotion rule: "
              f"a first policy must beat random play; each later one must beat the promoted policy)", flush=True)
    print(f"[extrarlhf] campaign_loop for partition {args.group!r}: the group holds {args.battles} battles "
          f"({args.p1_model} vs {args.opponent}) -> dataset -> readiness -> train -> benchmark vs {incumbent} "
          f"-> promote", flush=True)
    t0 = time.perf_counter()
    job = defs.resolve_job_def("campaign_loop")
    result = job.execute_in_process(instance=instance, partition_key=args.group, run_config=run_config(args),
                                    raise_on_error=False)
    lines, _ = summarize(result, args.group)
    log = write_log(instance, result.run_id, home)
    status = "success" if result.success else "FAILED"
    print(f"\n== ExtraRLHF campaign summary (run {result.run_id}, {time.perf_counter() - t0:.1f}s, {status}) ==")
    for line in lines:
        print(line)
    if not result.success:
        for e in result.all_events:
            if e.is_step_failure:
                print(f"error in {e.step_key}: {e.step_failure_data.error.message.strip().splitlines()[0]}")
    print(f"\nDagster's full log of the run: {log}")
    print(f"See it in the UI: make ui  (DAGSTER_HOME={home})")
    return 0 if result.success else 1


if __name__ == "__main__":
    sys.exit(main())
