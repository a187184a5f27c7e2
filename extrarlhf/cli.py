"""Command line: ``python -m extrarlhf <command>`` (also installed as ``extrarlhf``): a thin
dispatcher over each domain's ``commands.py`` (runtime, datasets, training, policies,
production, preferences, maintenance, agent_setup).

Business errors print one ``error [code]: message`` line on stderr and exit with 2; never a
traceback.
"""

from __future__ import annotations

import argparse
import os
import sys

import engine

from .agent_setup.commands import add_parser as add_agent_setup_parser
from .core.echo import safe_text
from .core.errors import RLHFError
from .core.extras import require
from .datasets.commands import add_parser as add_datasets_parser
from .maintenance.check import add_parser as add_check_parser
from .maintenance.cleanup import add_parser as add_gc_parser
from .policies.commands import add_parser as add_policies_parser
from .preferences.commands import add_parser as add_preferences_parser
from .production.commands import add_parser as add_production_parser
from .runtime.commands import add_parser as add_runtime_parser
from .training.commands import add_parser as add_training_parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="extrarlhf", description="ExtraRLHF: ExtraArena battles to training data")
    sub = parser.add_subparsers(dest="command", required=True)

    add_runtime_parser(sub)  # demo, collect, replay, sessions list|show
    add_datasets_parser(sub)  # python -m extrarlhf datasets list|inspect|validate|materialize|...
    add_training_parser(sub)  # train
    add_policies_parser(sub)  # benchmark, promote, pipeline, improve, champion ensure|publish, ladder
    add_production_parser(sub)  # production status|export-v5|export-timestamp (opt-in)
    add_preferences_parser(sub)  # preferences pool|judge|synthetic|list|materialize|reward|export-trl
    add_gc_parser(sub)  # gc: temp folders, unfinished publications and unused locks of dead processes
    add_check_parser(sub)  # check (alias fsck): every problem of sessions, datasets, checkpoints; --repair
    add_agent_setup_parser(sub)  # skills install (skills + MCP config for a client), doctor
    _add_arena_parser(sub)  # arena: people play in a browser (the web facade, DESIGN 17)
    return parser


def _add_arena_parser(sub: argparse._SubParsersAction) -> None:
    arena = sub.add_parser("arena", help="serve the browser arena: people play player 1 against any spec",
                           description="Serve the browser arena (make play): a page where a person picks an opponent "
                                       "and plays player 1 with the mouse or the keyboard; battles are recorded like "
                                       "MCP play (actor type human).")
    arena.add_argument("--host", default="127.0.0.1",
                       help="address to bind (default 127.0.0.1; any other needs --token)")
    arena.add_argument("--port", type=int, default=8765, help="port (default 8765)")
    arena.add_argument("--sessions-dir", default="sessions", help="where battles are recorded (default sessions)")
    arena.add_argument("--checkpoints-dir", default="checkpoints",
                       help="the checkpoint registry opponents are looked up in (default checkpoints)")
    arena.add_argument("--preferences-dir", default="preferences",
                       help="the preference pools people judge at /judge (default preferences)")
    arena.add_argument("--token", default=None,
                       help="access token every request must carry (or RLHF_ARENA_TOKEN); required to bind beyond "
                            "the loopback interface")
    arena.add_argument("--idle-timeout", type=float, default=None, metavar="SECONDS",
                       help="a live battle or judge session untouched this long expires (default 1800; an expired "
                            "battle is recorded as abandoned)")
    arena.add_argument("--starts-per-minute", type=int, default=None, metavar="N",
                       help="battles one client address may start per minute (default 10)")
    arena.add_argument("--no-free-text", dest="free_text", action="store_false", default=None,
                       help="do not record rationales and judges' reasons (or RLHF_ARENA_FREE_TEXT=0); the pages "
                            "then offer no text field")
    arena.set_defaults(func=_arena)


def _arena(args: argparse.Namespace) -> int:
    serve = require("web.serve", "the browser arena").serve  # MissingExtra names the arena extra
    return serve(args.host, args.port, args.sessions_dir, args.checkpoints_dir, args.token, args.preferences_dir,
                 args.idle_timeout, args.starts_per_minute, args.free_text)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)  # a feature missing its extra raises MissingExtra (core/extras.py)
    except (RLHFError, engine.EngineError) as exc:
        code = getattr(exc, "code", "invalid_argument")
        print(f"error [{code}]: {safe_text(str(exc))}", file=sys.stderr)  # engine errors are not the core's
        return 2
    except KeyboardInterrupt:
        print("interrupted; run the same command again to resume", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into `head` and the like: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
