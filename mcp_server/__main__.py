"""``python -m mcp_server [--sessions-dir DIR] [--datasets-dir DIR] [--checkpoints-dir DIR] [--preferences-dir DIR]
[limits]``.

Serves MCP over stdio. stdout is the wire: everything else (logs, warnings) goes to stderr.
"""

from __future__ import annotations

import argparse
import logging
import sys

from extrarlhf.core.extras import MissingExtra, require

from .limits import Limits


def _count(text: str, low: int) -> int:
    if not (text.isascii() and text.isdigit()) or not low <= int(text) <= 1024:
        raise argparse.ArgumentTypeError(f"must be an integer in {low}..1024")
    return int(text)


def _positive(text: str) -> int:
    return _count(text, 1)


def _non_negative(text: str) -> int:
    return _count(text, 0)


def _positive_rollouts(text: str) -> int:
    if not (text.isascii() and text.isdigit() and len(text) <= 9) or int(text) < 1:
        raise argparse.ArgumentTypeError("must be an integer in 1..999999999")
    return int(text)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 3600:
        raise argparse.ArgumentTypeError("must be a number of seconds in 0..3600")
    return value


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m mcp_server",
                                     description="ExtraRLHF MCP server over stdio (play battles, run campaigns).")
    parser.add_argument("--sessions-dir", default="sessions",
                        help="where session groups (traces, catalogs, codename leases) live (default: sessions)")
    parser.add_argument("--datasets-dir", default="datasets",
                        help="root of the local dataset plane (default: datasets); file arguments of tools must lie "
                             "inside it or inside the checkpoints dir")
    parser.add_argument("--checkpoints-dir", default="checkpoints",
                        help="the checkpoint registry (default: checkpoints)")
    parser.add_argument("--preferences-dir", default="preferences",
                        help="the preference pools judged with preference_task (default: preferences)")
    parser.add_argument("--long-slots", type=_positive, default=None,
                        help="long calls (series, benchmarks, training, exports, moves against a search actor) run "
                             "at once (default: the machine's cores, at least 2)")
    parser.add_argument("--long-waiting", type=_non_negative, default=None,
                        help="long calls that may wait for a slot; more are refused with 'busy' (default: 2 x "
                             "--long-slots)")
    parser.add_argument("--max-rollouts-per-call", type=_positive_rollouts, default=Limits.max_rollouts_per_call,
                        help="search rollouts one play call (start_battle, submit_action, advance_bot) may spend "
                             "before it returns with 'paused' (default: %(default)s)")
    parser.add_argument("--drain-seconds", type=_seconds, default=Limits.drain_seconds,
                        help="at the end of input, how long running calls may finish before their work is stopped "
                             "and they are answered 'shutting_down' (default: %(default)s)")
    parser.add_argument("--log-level", default="WARNING", choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                        help="stderr log level (default: WARNING)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=args.log_level,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True)
    try:
        require("mcp", "the MCP server (python -m mcp_server)")
    except MissingExtra as error:
        print(f"error [{error.code}]: {error}", file=sys.stderr)
        return 2
    from .server import build_server  # after logging is set up

    limits = Limits(long_slots=args.long_slots, long_waiting=args.long_waiting,
                    max_rollouts_per_call=args.max_rollouts_per_call, drain_seconds=args.drain_seconds)
    server = build_server(args.sessions_dir, args.datasets_dir, args.checkpoints_dir, limits,
                          preferences_dir=args.preferences_dir)
    logging.getLogger().setLevel(args.log_level)  # the SDK configures logging on construction; ours wins
    logging.getLogger("mcp_server").info("serving on stdio: sessions=%s datasets=%s checkpoints=%s",
                                         server.config.sessions_dir, server.config.datasets_dir,
                                         server.config.checkpoints_dir)
    try:
        server.run("stdio")
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
