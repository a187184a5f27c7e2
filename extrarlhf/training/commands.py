"""``python -m extrarlhf train|finetune``: behaviour cloning and the policy-gradient fine-tune on
the command line (the rest of the L0 loop,
``benchmark|promote|pipeline|improve``, is ``extrarlhf/policies/commands.py``).

Each subcommand calls one core function and prints a short readable report (``--json``:
the function's result). Business errors are printed by extrarlhf/cli.py as one
``error [code]: message`` line (exit 2).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from ..core.console import percent, print_json
from ..core.progress import ProgressLine
from ..datasets.commands import parse_policy_overrides
from .hyper import ENCODERS


def _cmd_train(args: argparse.Namespace) -> int:
    from .train import train_policy

    result = train_policy(args.dataset, args.name, args.seed, imitate=args.imitate, epochs=args.epochs,
                          hidden=args.hidden, hidden2=args.hidden2, depth=args.depth, value_hidden=args.value_hidden,
                          encoder=args.encoder, embed=args.embed,
                          lr=args.lr, threads=args.threads, device=args.device,
                          lr_decay=args.lr_decay, batch_size=args.batch_size, weight_decay=args.weight_decay,
                          target=args.target, temperature=args.temperature, datasets_dir=args.datasets_dir, checkpoints_dir=args.checkpoints_dir,
                          policy=parse_policy_overrides(args.policy), overwrite=args.overwrite,
                          progress=ProgressLine(f"train {args.name}", unit="epochs"))
    if args.json:
        print_json(result)
        return 0
    d = result["data"]
    print(f"{result['name']}: v5 checkpoint trained on {result['dataset_id']} (imitate {result['imitate']}, "
          f"seed {result['seed']})")
    print(f"  data: train {d['train']['decisions']} decisions ({d['train']['imitated_with_choice']} imitated with a "
          f"choice), val {d['val']['decisions']}, test {d['test']['decisions']}")
    print("  epoch  train_loss  train_top1  val_loss  val_top1  decisions/s")
    for m in result["history"]:
        val_loss = "-" if m["val_loss"] is None else f"{m['val_loss']:.4f}"
        print(f"  {m['epoch']:>5}  {m['train_loss']:>10.4f}  {percent(m['train_top1']):>10}  {val_loss:>8}  "
              f"{percent(m['val_top1']):>8}  {m['decisions_per_s'] or 0:>11,.0f}")
    final = result["final"]
    if final.get("test_top1") is not None:
        print(f"  held-out test: loss {final['test_loss']:.4f}, top-1 {percent(final['test_top1'])}")
    print(f"  weights_hash {result['weights_hash']}")
    print(f"  model card {result['card_path']}")
    if result["target_fallback"]:
        fallback = result["target_fallback"]
        print(f"  warning: target {fallback['asked']} fell back to {fallback['used']}: {fallback['why']}")
    return 0


def _cmd_finetune(args: argparse.Namespace) -> int:
    from .finetune import finetune_policy

    line = ProgressLine(f"finetune {args.name}", unit="s")
    budget, started = max(1, round(60 * args.minutes)), time.perf_counter()

    def progress(updates: int, figures: dict[str, Any]) -> None:  # the time budget is the bar; updates in the note
        if "eval_score" in figures:
            line.note = f"update {updates}, argmax score {figures['eval_score']:.3f}"
        elif "stage" in figures:  # several learners: how many have finished, then the selection's candidates
            line.note = f"{figures['stage']} {figures['done']}/{figures['total']} done"
        line(min(round(time.perf_counter() - started), budget - 1), budget)

    settings = {"opponents": args.opponent or ["baseline:greedy"], "lr": args.lr, "temperature": args.temperature,
                "num_envs": args.envs, "threads": args.threads, "learners": args.learners,
                "stages": args.stages, **({} if args.ema is None else {"ema": args.ema})}
    result = finetune_policy(args.base, args.name, args.seed, minutes=args.minutes,
                             checkpoints_dir=args.checkpoints_dir, overwrite=args.overwrite, progress=progress,
                             **settings)
    line(budget, budget)
    if args.json:
        print_json(result)
        return 0
    start, best = result["start"], result["best"]
    print(f"{result['name']}: v5 checkpoint fine-tuned from {result['base']} with PPO against "
          f"{', '.join(result['settings']['opponents'])} ({result['updates']} updates, {result['seconds'] / 60:.1f} min)")
    print(f"  against {start['opponent']} on its {start['battles']} evaluation battles: {start['score']:.3f} -> "
          f"{best['score']:.3f}" + ("" if result["improved"] else " (no update improved: the base network is kept)"))
    print(f"  weights_hash {result['weights_hash']}")
    print(f"  model card {result['card_path']}")
    print(f"  next: python -m extrarlhf benchmark {result['name']} {result['base']}")
    return 0


def add_dir_options(p: argparse.ArgumentParser, datasets: bool = False, sessions: bool = False) -> None:
    """--sessions-dir / --datasets-dir (when asked), --checkpoints-dir and --json."""
    if sessions:
        p.add_argument("--sessions-dir", default="sessions", help="root of the session groups (default: sessions)")
    if datasets:
        p.add_argument("--datasets-dir", default="datasets", help="root of the datasets (default: datasets)")
    p.add_argument("--checkpoints-dir", default="checkpoints", help="checkpoint registry (default: checkpoints)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def add_training_options(p: argparse.ArgumentParser) -> None:
    """--seed, --imitate and --epochs, shared by train, pipeline and improve."""
    p.add_argument("--seed", type=int, default=0, help="training seed (same data + seed: same weights_hash)")
    p.add_argument("--imitate", default="all",
                   help="decisions to learn from: all, winners, or an actor spec such as baseline:greedy")
    p.add_argument("--epochs", type=int, default=5, help="passes over the training split (default 5)")


def add_parser(sub: Any) -> None:
    """Add the ``train`` command to the CLI's subparsers."""
    p = sub.add_parser("train", help="behaviour cloning on a V5 dataset -> a registered v5 checkpoint + model card")
    p.add_argument("dataset", help="NAME (latest version), NAME/vN or @POINTER; must validate and be V5-ready")
    p.add_argument("--name", required=True, help="checkpoint name to register")
    add_training_options(p)
    p.add_argument("--hidden", type=int, default=256, help="first hidden layer width (default 256)")
    p.add_argument("--hidden2", type=int, default=128, help="width of the scoring layers after the first (default 128)")
    p.add_argument("--depth", type=int, default=1, help="scoring layers of width hidden2 (default 1)")
    p.add_argument("--value-hidden", type=int, default=64, help="value head hidden width (default 64)")
    p.add_argument("--encoder", default="flat", choices=ENCODERS,
                   help="the observation as one vector, or through per-card networks pooled over slots")
    p.add_argument("--embed", type=int, default=64, help="width of the sets encoder's per-card networks (default 64)")
    p.add_argument("--lr", type=float, default=1e-3, help="AdamW learning rate (default 1e-3)")
    p.add_argument("--lr-decay", type=float, default=0.8, help="learning rate factor per epoch (default 0.8)")
    p.add_argument("--batch-size", type=int, default=128, help="decisions per batch (default 128)")
    p.add_argument("--weight-decay", type=float, default=0.0, help="decoupled weight decay (default 0)")
    p.add_argument("--target", default="choice", choices=("choice", "search_values"),
                   help="imitate the recorded choice, or a search teacher's action values (soft targets)")
    p.add_argument("--temperature", type=float, default=0.05, help="of the search_values target (default 0.05)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (same data + seed + threads: same weights)")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"), help="where to train (cuda needs a GPU)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing checkpoint of that name")
    p.add_argument("--policy", action="append", metavar="KEY=N", help="override a readiness threshold")
    add_dir_options(p, datasets=True)
    p.set_defaults(func=_cmd_train)

    p = sub.add_parser("finetune", help="policy-gradient fine-tune (PPO) of a v5 checkpoint against opponents the "
                                        "native core plays -> a registered v5 checkpoint + model card")
    p.add_argument("base", help="the v5 checkpoint to start from (trained by train or finetune)")
    p.add_argument("--name", required=True, help="checkpoint name to register")
    p.add_argument("--minutes", type=float, default=10.0, help="time budget (default 10)")
    p.add_argument("--seed", type=int, default=0, help="seed (same base, settings, seed and updates: same weights)")
    p.add_argument("--opponent", action="append", metavar="SPEC",
                   help="baseline:greedy (default), baseline:random or search:baseline:greedy?sims=N; repeat for several")
    p.add_argument("--lr", type=float, default=1e-4, help="Adam learning rate (default 1e-4)")
    p.add_argument("--temperature", type=float, default=0.3, help="the policy played is softmax(logits / T) (default 0.3)")
    p.add_argument("--envs", type=int, default=128, help="battles per opponent stepped at once (default 128)")
    p.add_argument("--ema", type=float, default=None,
                   help="decay per update of the weight average that is evaluated and registered "
                        "(0: the learner itself; default 0.99)")
    p.add_argument("--threads", type=int, default=1, help="torch threads per learner (default 1)")
    p.add_argument("--learners", type=int, default=1,
                   help="independent learners, one process each; the best of the base, each learner, their "
                        "weight average and their ensemble (one network, the mean of their logits) on fresh "
                        "battles is kept (default 1)")
    p.add_argument("--stages", type=int, default=1,
                   help="with --learners >= 2: stages of learners, each later stage starting from the earlier "
                        "learners' ensemble distilled into one network (default 1)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing checkpoint of that name")
    add_dir_options(p)
    p.set_defaults(func=_cmd_finetune)
