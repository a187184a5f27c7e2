"""``python -m extrarlhf train``: behaviour cloning on the command line (the rest of the L0 loop,
``benchmark|promote|pipeline|improve``, is ``extrarlhf/policies/commands.py``).

Each subcommand calls one core function and prints a short readable report (``--json``:
the function's result). Business errors are printed by extrarlhf/cli.py as one
``error [code]: message`` line (exit 2).
"""

from __future__ import annotations

import argparse
from typing import Any

from ..core.console import percent, print_json
from ..core.progress import ProgressLine
from ..datasets.commands import parse_policy_overrides


def _cmd_train(args: argparse.Namespace) -> int:
    from .train import train_policy

    result = train_policy(args.dataset, args.name, args.seed, imitate=args.imitate, epochs=args.epochs,
                          hidden=args.hidden, hidden2=args.hidden2, depth=args.depth, value_hidden=args.value_hidden,
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
