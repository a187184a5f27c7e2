"""``python -m extrarlhf ladder``: the policy ladder (extrarlhf.ladder) on the command line.

Prints one row per promotion: its Elo against its predecessor (recorded by the promotion's
benchmark), the cumulative Elo from the anchor and its Elo against baseline:random and
baseline:greedy, each with its 95% interval; a progress line (stderr) while the baselines
are measured. ``--json``: the ladder document (also written to ``checkpoints/ladder.json``).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from .ladder import DEFAULT_PAIRS, elo_text, policy_ladder
from .progress import ProgressLine


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
        print(json.dumps(ladder, indent=2, sort_keys=True))
    else:
        print(format_table(ladder), end="")
    return 0


def add_parser(sub: Any) -> None:
    """Add the ``ladder`` command to the CLI's subparsers."""
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
