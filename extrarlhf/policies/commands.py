"""``python -m extrarlhf benchmark|promote|pipeline|improve|ladder|champion``: the L0 loop on the command line.

Each subcommand calls one core function and prints a short readable report (``--json``: the
function's result). Business errors are printed by extrarlhf/cli.py as one ``error [code]:
message`` line (exit 2). ``benchmark`` exits 1 when the benchmark did not pass (invalid, H0,
inconclusive, or H1 under settings below the promotion policy), so a script can gate on it. The
promotion policy is not a CLI option: it is changed in code (``PromotionPolicy``), never per run.

``ladder`` prints the policy ladder (ladder.py):

Prints one row per promotion: its Elo against its predecessor (recorded by the promotion's
benchmark), the cumulative Elo from the anchor and its Elo against baseline:random and
baseline:greedy, each with its 95% interval; a progress line (stderr) while the baselines
are measured. ``--json``: the ladder document (also written to ``checkpoints/ladder.json``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..core.console import percent, print_json
from ..core.errors import InvalidArgument
from ..core.progress import ProgressLine
from ..datasets.commands import parse_policy_overrides
from ..training.commands import add_dir_options, add_training_options
from ..training.hyper import ENCODERS
from .ladder import DEFAULT_PAIRS, elo_text, policy_ladder


def format_table(ladder: dict[str, Any]) -> str:
    """A plain-text table of the ladder, then the notes (why a figure is missing)."""
    if ladder["empty"]:
        return f"empty ladder: {ladder['reason']}\n"
    header = ("rung", "name", "status", "vs predecessor [95% CI]", "cumulative [CI]", "vs random [CI]",
              "vs greedy [CI]")
    rows = []
    for r in ladder["rungs"]:
        pred = r["predecessor"]
        b = r["vs_baselines"]
        rows.append((str(r["rung"]), r["name"], r["status"],
                     f"{elo_text(r['vs_predecessor'])} vs {pred['spec']}", elo_text(r["cumulative"]),
                     elo_text(b["baseline:random"]), elo_text(b["baseline:greedy"])))
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in [header, *rows]]
    s = ladder["settings"]
    lines.append(f"anchor {ladder['anchor']} (cumulative Elo 0); baselines over {s['pairs']} pairs (seed "
                 f"{s['seed']}): measured {ladder['measured']}, cached {ladder['cached']}, "
                 f"{ladder['battles_played']} battles played")
    for r in ladder["rungs"]:
        for opponent, figure in r["vs_baselines"].items():
            if figure["reason"]:
                lines.append(f"  rung {r['rung']} vs {opponent}: {figure['reason']}")
        if r["cumulative"]["reason"]:
            lines.append(f"  rung {r['rung']} cumulative: {r['cumulative']['reason']}")
    if ladder["path"]:
        lines.append(f"ladder: {ladder['path']}")
    return "\n".join(lines) + "\n"


def _cmd_ladder(args: argparse.Namespace) -> int:
    ladder = policy_ladder(args.checkpoints_dir, pairs=args.pairs, seed=args.seed, max_workers=args.workers,
                           measure=not args.no_measure, progress=ProgressLine("ladder: baselines"))
    if args.json:
        print_json(ladder)
    else:
        print(format_table(ladder), end="")
    return 0


def _cmd_benchmark(args: argparse.Namespace) -> int:
    from .benchmarking import benchmark_models
    from .champion import CHAMPION_NAME, ensure_champion
    from .promotion import current_incumbent

    incumbent = args.incumbent or current_incumbent(args.checkpoints_dir)
    if CHAMPION_NAME in (args.candidate, incumbent):  # the shipped champion is playable in any registry
        _say_champion(ensure_champion(args.checkpoints_dir), quiet=True)
    result = benchmark_models(args.candidate, incumbent, n_pairs=args.pairs, seed=args.seed, elo0=args.elo0,
                              elo1=args.elo1, alpha=args.alpha, beta=args.beta, baseline_pairs=args.baseline_pairs,
                              max_workers=args.workers, stop_early=not args.no_early_stop,
                              checkpoints_dir=args.checkpoints_dir,
                              progress=ProgressLine(f"benchmark {args.candidate}"))
    if args.json:
        print_json(result)
    else:
        print(result["markdown"], end="")
        print(f"report: {result['report_path']}")
    return 0 if result["passed"] else 1


def _say_champion(report: dict[str, Any], quiet: bool = False) -> None:
    """One line about the champion's registration: on stdout, or on stderr (``quiet``: only
    when something was done or refused, so a benchmark's output stays its report)."""
    if not quiet:
        print(report["message"])
    elif report["state"] != "present":
        print(f"champion: {report['message']}", file=sys.stderr)


def _cmd_champion(args: argparse.Namespace) -> int:
    from .champion import ensure_champion, publish_champion

    if args.action == "ensure":
        report = ensure_champion(args.checkpoints_dir)
        if args.json:
            print_json(report)
        else:
            _say_champion(report)
        return 0
    record = publish_champion(args.name, checkpoints_dir=args.checkpoints_dir, made_by=args.made_by,
                              pairs=args.pairs, seed=args.seed, workers=args.workers,
                              **({"into": args.into} if args.into else {}))
    if args.json:
        print_json(record)
    else:
        b = record["benchmark"]
        print(f"published {args.name} as the champion ({record['sha256'][:12]}): {b['score']:.4f} "
              f"[{b['score_ci95'][0]:.4f}, {b['score_ci95'][1]:.4f}] against {b['opponent']} over {b['pairs']} pairs; "
              f"reproduce: {b['command']}")
    return 0


def _cmd_promote(args: argparse.Namespace) -> int:
    from .promotion import promote_checkpoint, promotion_status, rollback_promotion

    if sum(bool(x) for x in (args.name, args.rollback, args.status)) != 1:
        raise InvalidArgument("give exactly one of NAME (promote it), --rollback or --status")
    if args.status:
        result = promotion_status(args.checkpoints_dir)
        if args.json:
            print_json(result)
            return 0
        p = result["promoted"]
        if p is None:
            print(f"nothing promoted; incumbent {result['incumbent']}")
        else:
            state = "intact" if result["promoted_intact"] else "PROBLEM: " + "; ".join(result["promoted_problems"])
            print(f"promoted: {p['name']} (weights_hash {p['weights_hash'][:16]}..., since "
                  f"{p.get('restored_at') or p['promoted_at']}; {state})")
        for line in result["repaired"]:
            print(f"repaired: {line}")
        for line in result["torn"]:
            print(f"TORN: {line}")
        for e in result["history"]:
            print(f"  {e['at']}  {e['event']:<8} {e['name']}" + (f" (from {e['from']['name']})" if e["from"] else ""))
        return 0
    if args.rollback:
        result = rollback_promotion(checkpoints_dir=args.checkpoints_dir)
        if args.json:
            print_json(result)
        else:
            print(f"rolled back: {result['rolled_back']['name']} -> {result['promoted']['name']}")
        return 0
    result = promote_checkpoint(args.name, checkpoints_dir=args.checkpoints_dir,
                                require_current_incumbent=not args.any_incumbent)
    if args.json:
        print_json(result)
    else:
        b = result["promoted"]["benchmark"]
        before = f" (was {result['previous']['name']})" if result["previous"] else ""
        print(f"promoted {args.name}{before}: benchmark #{b['sequence']} vs {b['incumbent']}, score "
              f"{b['score']:.3f}, Elo {b['elo']:+.1f}, SPRT {b['decision']}")
    return 0


class StageLines:
    """One :class:`ProgressLine` per stage of a pipeline (``"train"`` counts epochs), with the
    running SPRT (pairs, W/D/L, LLR between its bounds) on the benchmark's line."""

    def __init__(self) -> None:
        self.bars: dict[str, ProgressLine] = {}

    def __call__(self, stage: str, done: int, total: int) -> None:
        if stage not in self.bars:
            self.bars[stage] = ProgressLine(stage, unit="epochs" if stage.endswith("train") else "battles")
        if total:
            self.bars[stage](done, total)

    def sprt(self, state: dict[str, Any]) -> None:
        bar = next((b for k, b in reversed(self.bars.items()) if k.endswith("benchmark")), None)
        if bar is not None:
            bar.note = (f"pairs {state['pairs']} W/D/L {state['wins']}/{state['draws']}/{state['losses']} "
                        f"LLR {state['llr']:+.2f} in ({state['lower']:+.2f}, {state['upper']:+.2f})")


def _cmd_pipeline(args: argparse.Namespace) -> int:
    from .pipeline import run_pipeline

    progress = StageLines()

    result = run_pipeline(args.group, args.name, n_battles=args.battles, p1_model=args.p1_model,
                          opponent=args.opponent, seed=args.seed, dataset=args.dataset, imitate=args.imitate,
                          epochs=args.epochs, incumbent=args.incumbent, n_pairs=args.pairs,
                          baseline_pairs=args.baseline_pairs, promote=not args.no_promote,
                          require_current_incumbent=not args.any_incumbent, max_workers=args.workers,
                          readiness_policy=parse_policy_overrides(args.policy), sessions_dir=args.sessions_dir,
                          datasets_dir=args.datasets_dir, checkpoints_dir=args.checkpoints_dir, progress=progress,
                          sprt_progress=progress.sprt)
    if args.json:
        print_json(result)
        return 0
    s = result["stages"]
    c = s["collect"]
    print(f"collect: group {c['group']}: played {c['ran']}, already there {c['skipped']}")
    if "materialize" in s:
        print(f"materialize: {s['materialize']['dataset_id']} {s['materialize']['row_counts']}")
    if result["stopped_at"] == "readiness":
        print(f"stopped: {result['reason']}")
        return 1
    t = s["train"]
    print(f"train: {t['name']} val top-1 {percent(t['final'].get('val_top1'))}, weights_hash {t['weights_hash'][:16]}...")
    b = s["benchmark"]
    print(f"benchmark vs {b['incumbent']}: {b['verdict']}")
    for row in b["baselines"]:
        print(f"  {row['model']} vs {row['opponent']}: W/D/L {row['wins']}/{row['draws']}/{row['losses']}, "
              f"score {row['score']:.3f}")
    p = s.get("promote", {})
    if p.get("promoted"):
        print(f"promoted {t['name']}" + (f" (was {p['previous']})" if p.get("previous") else ""))
    else:
        print(f"not promoted: {p.get('refused') or p.get('skipped')}")
    return 0


def _cmd_improve(args: argparse.Namespace) -> int:
    from .improve import improve_policy

    progress = StageLines()

    def round_done(r: dict[str, Any]) -> None:
        if args.json:
            return
        b = r.get("benchmark")
        if r["kind"] == "finetune":
            t = r["finetune"]
            head = (f"round {r['round']}: {r['student']} fine-tuned from {r['base']} ({t['updates']} updates in "
                    f"{r['minutes']:.1f} min; against greedy on its own evaluation battles {t['start']['score']:.3f} "
                    f"-> {t['best']['score']:.3f})")
        else:
            head = f"round {r['round']}: {r['student']} on {r['groups_trained_on']} group(s)"
        if "&play=" in (r.get("collector") or ""):
            head += f" (the new battles: {r['collector'].split('&play=')[1]} played, the teacher labelled)"
        if b is None:
            print(f"{head}: stopped at {r['stopped_at']}: {r.get('not_promoted')}")
            return
        print(f"{head} vs {r['incumbent']}: W/D/L {b['wins']}/{b['draws']}/{b['losses']} over {b['pairs']} pairs, "
              f"Elo {b['elo']:+.0f} [{b['elo_ci95'][0]:+.0f}, {b['elo_ci95'][1]:+.0f}] -> "
              + ("PROMOTED" if r["promoted"] else f"not promoted: {b['verdict']}"))
        for row in b["baselines"]:
            if row["model"] == r["student"]:
                print(f"  {row['model']} vs {row['opponent']}: score {row['score']:.3f} over {row['pairs']} pairs")

    result = improve_policy(args.prefix, minutes=args.minutes, max_rounds=args.rounds,
                            first_battles=args.first_battles, battles_per_round=args.battles,
                            growth=args.growth, sims=args.sims,
                            rollout=args.rollout, opponent=args.opponent, seed=args.seed, epochs=args.epochs,
                            dagger=args.dagger, n_pairs=args.pairs, max_workers=args.workers,
                            finetune_minutes=args.finetune_minutes, finetune_round_minutes=args.finetune_round_minutes,
                            train_options={"encoder": args.encoder}, sessions_dir=args.sessions_dir,
                            datasets_dir=args.datasets_dir, checkpoints_dir=args.checkpoints_dir,
                            progress=progress, sprt_progress=progress.sprt, round_done=round_done,
                            guide=args.guide)
    if args.json:
        print_json(result)
        return 0
    print(f"{len(result['rounds'])} round(s) in {result['seconds'] / 60:.1f} min with teacher {result['teacher']}; "
          f"promoted: {', '.join(result['promotions']) or 'none'}; incumbent now {result['incumbent']}")
    if result["imitation_stopped"] != result["stop_reason"]:
        print(f"imitation stopped: {result['imitation_stopped']}")
    print(f"stopped: {result['stop_reason']}")
    return 0


def add_parser(sub: Any) -> None:
    """Add the ``benchmark``, ``promote``, ``pipeline``, ``improve``, ``champion`` and ``ladder`` commands to the
    CLI's subparsers."""
    def bench_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--pairs", type=int, default=200, help="maximum pairs (2 battles each, seats swapped)")
        p.add_argument("--baseline-pairs", type=int, default=20, help="pairs of each model vs each baseline")
        p.add_argument("--workers", type=int, default=1, help="worker processes (results do not depend on it)")

    p = sub.add_parser("benchmark", help="candidate vs incumbent: paired seeds, Elo, SPRT; exit 1 unless passed")
    p.add_argument("candidate", help="checkpoint name (or baseline spec)")
    p.add_argument("incumbent", nargs="?", default=None,
                   help="checkpoint name or baseline spec (default: the promoted checkpoint, else baseline:random, the first-promotion rule)")
    bench_options(p)
    p.add_argument("--seed", type=int, default=0, help="base seed of the pairs")
    p.add_argument("--elo0", type=float, default=0.0, help="SPRT H0 Elo (default 0)")
    p.add_argument("--elo1", type=float, default=10.0, help="SPRT H1 Elo (default 10)")
    p.add_argument("--alpha", type=float, default=0.05, help="SPRT false-positive rate (default 0.05)")
    p.add_argument("--beta", type=float, default=0.05, help="SPRT false-negative rate (default 0.05)")
    p.add_argument("--no-early-stop", action="store_true", help="play every pair even once the SPRT decides")
    add_dir_options(p)
    p.set_defaults(func=_cmd_benchmark)

    p = sub.add_parser("promote", help="promote a benchmarked checkpoint, roll back, or show the status")
    p.add_argument("name", nargs="?", default=None, help="checkpoint to promote")
    p.add_argument("--rollback", action="store_true", help="re-install the previously promoted checkpoint")
    p.add_argument("--status", action="store_true", help="show the promoted checkpoint and the history")
    p.add_argument("--any-incumbent", action="store_true",
                   help="accept a passed benchmark against another incumbent than the current one")
    add_dir_options(p)
    p.set_defaults(func=_cmd_promote)

    p = sub.add_parser("pipeline", help="collect -> materialize -> readiness -> train -> benchmark -> promote")
    p.add_argument("--group", required=True, help="session group to collect into (resumed if it exists)")
    p.add_argument("--name", required=True, help="checkpoint name to train")
    p.add_argument("--battles", type=int, default=300, help="battles the group should hold (default 300)")
    p.add_argument("--p1-model", default="baseline:greedy", help="player 1 of the collected battles")
    p.add_argument("--opponent", default="baseline:greedy", help="player 2 of the collected battles")
    p.add_argument("--dataset", default=None, help="dataset name (default: the group's name)")
    add_training_options(p)
    p.add_argument("--incumbent", default=None, help="benchmark against this spec (default: the promoted one, else "
                                                     "baseline:greedy)")
    bench_options(p)
    p.add_argument("--no-promote", action="store_true", help="stop after the benchmark")
    p.add_argument("--any-incumbent", action="store_true",
                   help="promote after a passed benchmark even against another incumbent than the current one")
    p.add_argument("--policy", action="append", metavar="KEY=N", help="override a readiness threshold")
    add_dir_options(p, datasets=True, sessions=True)
    p.set_defaults(func=_cmd_pipeline)

    p = sub.add_parser("improve", help="expert iteration: collect with the search teacher, train on its choices, "
                                       "benchmark against the incumbent, promote; repeat within a time budget")
    p.add_argument("--prefix", default="exit", help="name of the rounds' groups, checkpoints and dataset "
                                                    "(<prefix>-rNN; earlier rounds are reused)")
    p.add_argument("--minutes", type=float, default=60.0, help="time budget (default 60)")
    p.add_argument("--rounds", type=int, default=50, help="at most this many rounds (default 50)")
    p.add_argument("--first-battles", type=int, default=150, help="battles of round 1 (default 150)")
    p.add_argument("--battles", type=int, default=300, help="battles of round 2 (default 300)")
    p.add_argument("--growth", type=float, default=2.0, help="each later round is this many times the one "
                                                            "before (default 2)")
    p.add_argument("--sims", type=int, default=32, help="the teacher's rollouts per decision (default 32)")
    p.add_argument("--rollout", default="baseline:greedy", help="the teacher's rollout policy (default greedy)")
    p.add_argument("--opponent", default="baseline:greedy", help="who the teacher plays while collecting")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--epochs", type=int, default=6, help="training epochs per round (default 6)")
    p.add_argument("--encoder", default="flat", choices=ENCODERS,
                   help="how the students read the observation: one vector, or per-card networks pooled over slots")
    p.add_argument("--pairs", type=int, default=10_000,
                   help="most benchmark pairs per round (default 10,000, about 10 ms each; the SPRT stops early)")
    p.add_argument("--no-dagger", dest="dagger", action="store_false",
                   help="the teacher plays every round's battles (default: once a policy is promoted, the teacher "
                        "labels the incumbent's own battles, DAgger)")
    p.add_argument("--finetune-minutes", type=float, default=0.0,
                   help="the last minutes of the budget go to policy-gradient rounds: PPO against greedy from the "
                        "incumbent, benchmarked and promoted like the others (default 0: imitation rounds only)")
    p.add_argument("--finetune-round-minutes", type=float, default=8.0, help="minutes per fine-tune round (default 8)")
    p.add_argument("--guide", default=None, choices=("value", "mix", "rollout"),
                   help="once a policy is promoted, the teacher is the search guided by it (search:<incumbent>?"
                        "guide=...: its prior and value) instead of the greedy-rollout search (default: off)")
    p.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    add_dir_options(p, datasets=True, sessions=True)
    p.set_defaults(func=_cmd_improve)

    champion = sub.add_parser("champion", help="the network shipped with the project: register it, or publish a "
                                               "better one").add_subparsers(dest="action", required=True)
    p = champion.add_parser("ensure", help="register the shipped champion as 'champion' (make setup does); a model "
                                           "of your own with that name is never overwritten")
    add_dir_options(p)
    p.set_defaults(func=_cmd_champion)
    p = champion.add_parser("publish", help="make a registered checkpoint the shipped champion: copy it and its card "
                                            "into extrarlhf/champion/ and benchmark it against greedy")
    p.add_argument("name", help="the registered checkpoint, or @promoted (it must have its model card)")
    p.add_argument("--made-by", required=True, help="the command that made it (recorded in champion.json)")
    p.add_argument("--pairs", type=int, default=1000, help="benchmark pairs against greedy, no early stop "
                                                           "(default 1000)")
    p.add_argument("--seed", type=int, default=0, help="base seed of the benchmark pairs (default 0)")
    p.add_argument("--workers", type=int, default=1, help="worker processes (results do not depend on it)")
    p.add_argument("--into", default=None, help="the folder to publish into (default: the package's "
                                                 "extrarlhf/champion/)")
    add_dir_options(p)
    p.set_defaults(func=_cmd_champion)

    p = sub.add_parser("ladder", help="Elo of every promoted policy vs its predecessor and the baselines, with "
                                      "95%% intervals")
    p.add_argument("--pairs", type=int, default=DEFAULT_PAIRS,
                   help=f"pairs (2 battles each, seats swapped) against each baseline (default {DEFAULT_PAIRS})")
    p.add_argument("--seed", type=int, default=0, help="base seed of the baseline pairs (default 0)")
    p.add_argument("--workers", type=int, default=1, help="worker processes (results do not depend on it)")
    p.add_argument("--no-measure", action="store_true",
                   help="play nothing: cached measurements, else the promotion reports' baseline rows")
    p.add_argument("--checkpoints-dir", default="checkpoints", help="checkpoint registry (default: checkpoints)")
    p.add_argument("--json", action="store_true", help="print the ladder as JSON")
    p.set_defaults(func=_cmd_ladder)
