"""Command line: ``python -m extrarlhf <command>``."""

from __future__ import annotations

import argparse
import sys

from .demo import format_summary, run_demo


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m extrarlhf", description="ExtraRLHF command line")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="play headless baseline series and print a summary")
    demo.add_argument("--seeds", type=int, default=100, help="paired seeds per matchup (2 battles each)")
    demo.add_argument("--base-seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.command == "demo":
        if args.seeds < 1:
            parser.error("--seeds must be at least 1")
        print(f"ExtraArena demo - ruleset arena-1, {args.seeds} paired seeds per matchup "
              f"({2 * args.seeds} battles, sides swapped)", flush=True)
        print(format_summary(run_demo(args.seeds, args.base_seed)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
