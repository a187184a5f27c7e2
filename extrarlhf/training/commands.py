"""``python -m extrarlhf train|benchmark|promote|pipeline|improve``: the L0 loop on the command line.

Each subcommand calls one core function and prints a short readable report (``--json``:
the function's result). Business errors are printed by extrarlhf/cli.py as one
``error [code]: message`` line (exit 2). ``benchmark`` exits 1 when the benchmark did not
pass (invalid, H0, inconclusive, or H1 under settings below the promotion policy), so a
script can gate on it. The promotion policy is not a CLI option: it is changed in code
(``PromotionPolicy``), never per run.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..datasets.commands import parse_policy_overrides
from ..errors import InvalidArgument
from ..progress import ProgressLine


def _dump(result: Any) -> None:
    print(json.dumps(result, indent=2, sort_keys=True, default=str))


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _cmd_train(args: argparse.Namespace) -> int:
    from .train import train_policy

    result = train_policy(args.dataset, args.name, args.seed, imitate=args.imitate, epochs=args.epochs,
                          hidden=args.hidden, hidden2=args.hidden2, value_hidden=args.value_hidden, lr=args.lr,
                          lr_decay=args.lr_decay, batch_size=args.batch_size, weight_decay=args.weight_decay,
                          target=args.target, temperature=args.temperature, datasets_dir=args.datasets_dir, checkpoints_dir=args.checkpoints_dir,
                          policy=parse_policy_overrides(args.policy), overwrite=args.overwrite,
                          progress=ProgressLine(f"train {args.name}", unit="epochs"))
    if args.json:
        _dump(result)
        return 0
    d = result["data"]
    print(f"{result['name']}: v5 checkpoint trained on {result['dataset_id']} (imitate {result['imitate']}, "
          f"seed {result['seed']})")
    print(f"  data: train {d['train']['decisions']} decisions ({d['train']['imitated_with_choice']} imitated with a "
          f"choice), val {d['val']['decisions']}, test {d['test']['decisions']}")
    print("  epoch  train_loss  train_top1  val_loss  val_top1  decisions/s")
    for m in result["history"]:
        val_loss = "-" if m["val_loss"] is None else f"{m['val_loss']:.4f}"
        print(f"  {m['epoch']:>5}  {m['train_loss']:>10.4f}  {_pct(m['train_top1']):>10}  {val_loss:>8}  "
              f"{_pct(m['val_top1']):>8}  {m['decisions_per_s'] or 0:>11,.0f}")
    final = result["final"]
    if final.get("test_top1") is not None:
        print(f"  held-out test: loss {final['test_loss']:.4f}, top-1 {_pct(final['test_top1'])}")
    print(f"  weights_hash {result['weights_hash']}")
    print(f"  model card {result['card_path']}")
    if result["target_fallback"]:
        fallback = result["target_fallback"]
        print(f"  warning: target {fallback['asked']} fell back to {fallback['used']}: {fallback['why']}")
    return 0


def _cmd_benchmark(args: argparse.Namespace) -> int:
    from ..benchmarking import benchmark_models
    from ..promotion import current_incumbent

    incumbent = args.incumbent or current_incumbent(args.checkpoints_dir)
    result = benchmark_models(args.candidate, incumbent, n_pairs=args.pairs, seed=args.seed, elo0=args.elo0,
                              elo1=args.elo1, alpha=args.alpha, beta=args.beta, baseline_pairs=args.baseline_pairs,
                              max_workers=args.workers, stop_early=not args.no_early_stop,
                              checkpoints_dir=args.checkpoints_dir,
                              progress=ProgressLine(f"benchmark {args.candidate}"))
    if args.json:
        _dump(result)
    else:
        print(result["markdown"], end="")
        print(f"report: {result['report_path']}")
    return 0 if result["passed"] else 1


def _cmd_promote(args: argparse.Namespace) -> int:
    from ..promotion import promote_checkpoint, promotion_status, rollback_promotion

    if sum(bool(x) for x in (args.name, args.rollback, args.status)) != 1:
        raise InvalidArgument("give exactly one of NAME (promote it), --rollback or --status")
    if args.status:
        result = promotion_status(args.checkpoints_dir)
        if args.json:
            _dump(result)
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
            _dump(result)
        else:
            print(f"rolled back: {result['rolled_back']['name']} -> {result['promoted']['name']}")
        return 0
    result = promote_checkpoint(args.name, checkpoints_dir=args.checkpoints_dir,
                                require_current_incumbent=not args.any_incumbent)
    if args.json:
        _dump(result)
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
    from ..pipeline import run_pipeline

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
        _dump(result)
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
    print(f"train: {t['name']} val top-1 {_pct(t['final'].get('val_top1'))}, weights_hash {t['weights_hash'][:16]}...")
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
    from ..improve import improve_policy

    progress = StageLines()

    def round_done(r: dict[str, Any]) -> None:
        if args.json:
            return
        b = r.get("benchmark")
        head = f"round {r['round']}: {r['student']} on {r['groups_trained_on']} group(s)"
        if "&play=" in r["collector"]:
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
                            dagger=args.dagger, n_pairs=args.pairs, max_workers=args.workers, sessions_dir=args.sessions_dir,
                            datasets_dir=args.datasets_dir, checkpoints_dir=args.checkpoints_dir,
                            progress=progress, sprt_progress=progress.sprt, round_done=round_done)
    if args.json:
        _dump(result)
        return 0
    print(f"{len(result['rounds'])} round(s) in {result['seconds'] / 60:.1f} min with teacher {result['teacher']}; "
          f"promoted: {', '.join(result['promotions']) or 'none'}; incumbent now {result['incumbent']}")
    print(f"stopped: {result['stop_reason']}")
    return 0


def add_parser(sub: Any) -> None:
    """Add the ``train``, ``benchmark``, ``promote``, ``pipeline`` and ``improve`` commands to
    the CLI's subparsers."""

    def dirs(p: argparse.ArgumentParser, datasets: bool = False, sessions: bool = False) -> None:
        if sessions:
            p.add_argument("--sessions-dir", default="sessions", help="root of the session groups (default: sessions)")
        if datasets:
            p.add_argument("--datasets-dir", default="datasets", help="root of the datasets (default: datasets)")
        p.add_argument("--checkpoints-dir", default="checkpoints", help="checkpoint registry (default: checkpoints)")
        p.add_argument("--json", action="store_true", help="print the result as JSON")

    def training(p: argparse.ArgumentParser) -> None:
        p.add_argument("--seed", type=int, default=0, help="training seed (same data + seed: same weights_hash)")
        p.add_argument("--imitate", default="all",
                       help="decisions to learn from: all, winners, or an actor spec such as baseline:greedy")
        p.add_argument("--epochs", type=int, default=5, help="passes over the training split (default 5)")

    p = sub.add_parser("train", help="behaviour cloning on a V5 dataset -> a registered v5 checkpoint + model card")
    p.add_argument("dataset", help="NAME (latest version), NAME/vN or @POINTER; must validate and be V5-ready")
    p.add_argument("--name", required=True, help="checkpoint name to register")
    training(p)
    p.add_argument("--hidden", type=int, default=256, help="first hidden layer width (default 256)")
    p.add_argument("--hidden2", type=int, default=128, help="second hidden layer width (default 128)")
    p.add_argument("--value-hidden", type=int, default=64, help="value head hidden width (default 64)")
    p.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate (default 1e-3)")
    p.add_argument("--lr-decay", type=float, default=0.8, help="learning rate factor per epoch (default 0.8)")
    p.add_argument("--batch-size", type=int, default=128, help="decisions per batch (default 128)")
    p.add_argument("--weight-decay", type=float, default=0.0, help="decoupled weight decay (default 0)")
    p.add_argument("--target", default="choice", choices=("choice", "search_values"),
                   help="imitate the recorded choice, or a search teacher's action values (soft targets)")
    p.add_argument("--temperature", type=float, default=0.05, help="of the search_values target (default 0.05)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing checkpoint of that name")
    p.add_argument("--policy", action="append", metavar="KEY=N", help="override a readiness threshold")
    dirs(p, datasets=True)
    p.set_defaults(func=_cmd_train)

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
    dirs(p)
    p.set_defaults(func=_cmd_benchmark)

    p = sub.add_parser("promote", help="promote a benchmarked checkpoint, roll back, or show the status")
    p.add_argument("name", nargs="?", default=None, help="checkpoint to promote")
    p.add_argument("--rollback", action="store_true", help="re-install the previously promoted checkpoint")
    p.add_argument("--status", action="store_true", help="show the promoted checkpoint and the history")
    p.add_argument("--any-incumbent", action="store_true",
                   help="accept a passed benchmark against another incumbent than the current one")
    dirs(p)
    p.set_defaults(func=_cmd_promote)

    p = sub.add_parser("pipeline", help="collect -> materialize -> readiness -> train -> benchmark -> promote")
    p.add_argument("--group", required=True, help="session group to collect into (resumed if it exists)")
    p.add_argument("--name", required=True, help="checkpoint name to train")
    p.add_argument("--battles", type=int, default=300, help="battles the group should hold (default 300)")
    p.add_argument("--p1-model", default="baseline:greedy", help="player 1 of the collected battles")
    p.add_argument("--opponent", default="baseline:greedy", help="player 2 of the collected battles")
    p.add_argument("--dataset", default=None, help="dataset name (default: the group's name)")
    training(p)
    p.add_argument("--incumbent", default=None, help="benchmark against this spec (default: the promoted one, else "
                                                     "baseline:greedy)")
    bench_options(p)
    p.add_argument("--no-promote", action="store_true", help="stop after the benchmark")
    p.add_argument("--any-incumbent", action="store_true",
                   help="promote after a passed benchmark even against another incumbent than the current one")
    p.add_argument("--policy", action="append", metavar="KEY=N", help="override a readiness threshold")
    dirs(p, datasets=True, sessions=True)
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
    p.add_argument("--pairs", type=int, default=10_000,
                   help="most benchmark pairs per round (default 10,000, about 10 ms each; the SPRT stops early)")
    p.add_argument("--no-dagger", dest="dagger", action="store_false",
                   help="the teacher plays every round's battles (default: once a policy is promoted, the teacher "
                        "labels the incumbent's own battles, DAgger)")
    p.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    dirs(p, datasets=True, sessions=True)
    p.set_defaults(func=_cmd_improve)
