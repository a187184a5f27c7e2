"""``python -m extrarlhf demo | collect | replay | sessions list|show|expand|compact|cat``: battles
on the command line.

``collect`` runs (or resumes) a series with V5 traces (compact unless ``--plain-traces``),
``replay`` re-runs recorded battles and compares every state hash (exit 1 when one diverges),
``sessions`` lists or shows groups, converts a group's traces between the plain and the
compact form (trace_forms.py) or prints one trace file's plain bytes, and ``demo`` plays
untraced baseline series and prints a summary.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..core.errors import RLHFError
from ..core.progress import ProgressLine
from .demo import format_summary, run_demo
from .replay import replay_battle
from .series import run_series
from .sessions import SessionStore
from .trace_forms import cat_trace_file, convert_group


def _cmd_demo(args: argparse.Namespace) -> int:
    if args.seeds < 1:
        raise RLHFError("--seeds must be at least 1", "invalid_argument")
    print(f"ExtraArena demo - ruleset arena-1, {args.seeds} paired seeds per matchup "
          f"({2 * args.seeds} battles, sides swapped)", flush=True)
    print(format_summary(run_demo(args.seeds, args.base_seed)))
    return 0


def _cmd_collect(args: argparse.Namespace) -> int:
    result = run_series(args.sessions_dir, args.group, args.battles, p1_model=args.p1_model,
                        opponent=args.opponent, seed=args.seed, max_workers=args.workers, codename=args.codename,
                        progress=ProgressLine(f"collect {args.group}"), checkpoints_dir=args.checkpoints_dir,
                        compact_traces=not args.plain_traces)
    summary = result["summary"]
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"group {args.group}: played {result['ran']}, already done {result['skipped']} "
          f"({result['battles_per_s'] or '-'} battles/s)")
    _print_summary(summary)
    return 0


def _print_summary(summary: dict[str, Any]) -> None:
    status = ", ".join(f"{k} {v}" for k, v in summary["by_status"].items() if v)
    r = summary["results"]
    readiness = summary["readiness"]
    print(f"  battles {summary['battles']} ({status or 'none'})")
    print(f"  results: p1 wins {r['p1_wins']}, draws {r['draws']}, p2 wins {r['p2_wins']}; "
          f"decisions {summary['decisions']}; degraded {summary['degraded']}")
    ready = "ready" if readiness["v5_policy_training_ready"] else "not ready: " + "; ".join(readiness["v5_policy_blockers"])
    print(f"  v5 policy training: {ready}")


def _cmd_replay(args: argparse.Namespace) -> int:
    store = SessionStore(args.sessions_dir)
    ids = [args.battle] if args.battle else [b.battle_id for b in store.battles(args.group)]
    failures = 0
    for battle_id in ids:
        report = replay_battle(store, args.group, battle_id)
        if args.json:
            print(json.dumps(report))
        elif report["reproduces"]:
            print(f"{battle_id}: reproduces ({report['decisions_checked']} decisions)")
        else:
            d = report["first_divergence"]
            print(f"{battle_id}: DIVERGES at decision {d['decision_index']} ({d['field']}): "
                  f"expected {d['expected']}, got {d['actual']}")
        failures += not report["reproduces"]
    if not args.json:
        print(f"{len(ids) - failures}/{len(ids)} battles reproduce")
    return 1 if failures else 0


def _cmd_sessions_list(args: argparse.Namespace) -> int:
    store = SessionStore(args.sessions_dir)
    groups = store.list_groups()
    rows = {g: _row_or_error(store, g) for g in groups}
    if args.json:
        print(json.dumps([{"group": g, **row} for g, row in rows.items()], indent=2))
        return 0
    if not groups:
        print(f"no session groups under {store.root}")
        return 0
    print(f"{'group':<32}{'battles':>8}{'finished':>10}{'p1 W/D/L':>14}{'decisions':>11}  configuration")
    for g, row in rows.items():
        if "error" in row:  # one damaged group is reported, the others still listed
            print(f"{g:<32}  error [{row['error']['code']}]: {row['error']['message']}")
            continue
        print(f"{g:<32}{row['battles']:>8}{row['finished']:>10}{row['wdl']:>14}{row['decisions']:>11}  {row['config']}")
    return 0


def _row_or_error(store: SessionStore, group: str) -> dict[str, Any]:
    try:
        return _row(store, group)
    except RLHFError as exc:
        return {"error": {"code": exc.code, "message": str(exc)}}


def _row(store: SessionStore, group: str) -> dict[str, Any]:
    manifest, summary = store.read_manifest(group), store.compute_summary(group)
    c, r = manifest["configuration"], summary["results"]
    p1 = c["p1_actor_type"] + (f" ({c['p1_model']['spec']})" if c["p1_model"] else "")
    return {"battles": summary["battles"], "finished": summary["by_status"]["finished"],
            "wdl": f"{r['p1_wins']}/{r['draws']}/{r['p2_wins']}", "decisions": summary["decisions"],
            "config": f"{p1} vs {c['opponent']['spec']}"}


def _cmd_sessions_show(args: argparse.Namespace) -> int:
    store = SessionStore(args.sessions_dir)
    manifest, summary = store.read_manifest(args.group), store.compute_summary(args.group)
    if args.json:
        print(json.dumps({"manifest": manifest, "summary": summary,
                          "catalog": store.read_catalog(args.group) if args.battles else None}, indent=2))
        return 0
    c = manifest["configuration"]
    print(f"group {args.group} ({store.group_dir(args.group)})")
    print(f"  created {manifest['created_at']}, ruleset {manifest['ruleset']}, engine {manifest['engine_version']}, "
          f"obs v{manifest['obs_version']}")
    print(f"  {c['battle_tag']}: p1 {c['p1_actor_type']}"
          + (f" {c['p1_model']['spec']}" if c["p1_model"] else "") + f" vs {c['opponent']['spec']}; "
          f"seeds {manifest['seeds']}; codename {manifest['codename'] or '-'}")
    _print_summary(summary)
    if args.battles:
        print(f"  {'battle':<22}{'status':<12}{'winner':>7}{'turns':>7}{'decisions':>11}  seed")
        for e in store.read_catalog(args.group):
            print(f"  {e['battle_id']:<22}{e['status']:<12}{_fmt(e.get('winner')):>7}{_fmt(e.get('turns')):>7}"
                  f"{_fmt(e.get('decisions')):>11}  {e['seed']}")
    return 0


def _cmd_sessions_form(args: argparse.Namespace) -> int:
    progress = ProgressLine("compact" if args.compact else "expand") if not args.json else None
    result = convert_group(args.sessions_dir, args.group, compact=args.compact, battle=args.battle,
                           progress=progress)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"group {args.group}: {result['converted']} of {result['battles']} battles now {result['form']} "
              f"({result['unchanged']} already were, {len(result['skipped'])} skipped); stored trace bytes "
              f"{result['bytes_before']:,} -> {result['bytes_after']:,}")
        for skipped in result["skipped"][:20]:
            print(f"  skipped {skipped['battle_id']}: {skipped['reason']}")
    return 1 if result["skipped"] else 0


def _cmd_sessions_cat(args: argparse.Namespace) -> int:
    sys.stdout.buffer.write(cat_trace_file(args.path))
    sys.stdout.flush()
    return 0


def _fmt(value: Any) -> str:
    return "-" if value is None else str(value)


def add_parser(sub: Any) -> None:
    """Add the ``demo``, ``collect``, ``replay`` and ``sessions`` commands to the CLI's subparsers."""
    demo = sub.add_parser("demo", help="play headless baseline series (no traces) and print a summary")
    demo.add_argument("--seeds", type=int, default=100, help="paired seeds per matchup (2 battles each)")
    demo.add_argument("--base-seed", type=int, default=0)
    demo.set_defaults(func=_cmd_demo)

    def sessions_dir(p: argparse.ArgumentParser) -> None:
        p.add_argument("--sessions-dir", default="sessions", help="root of the session groups (default: sessions)")
        p.add_argument("--json", action="store_true", help="print JSON instead of text")

    collect = sub.add_parser("collect", help="run (or resume) a series of auto-played battles with V5 traces")
    collect.add_argument("--group", required=True, help="session group name")
    collect.add_argument("--battles", type=int, required=True, help="battles in the series (resume plays the rest)")
    collect.add_argument("--p1-model", default="baseline:greedy",
                         help="spec of player 1: baseline:random, baseline:greedy, a registered checkpoint name, "
                              "or search:<one of those>?sims=N (the search actor)")
    collect.add_argument("--opponent", default="baseline:greedy", help="spec of player 2 (same choices)")
    collect.add_argument("--seed", type=int, default=0, help="base seed of the series")
    collect.add_argument("--workers", type=int, default=1, help="worker processes (max_workers)")
    collect.add_argument("--codename", default=None, help="claim this codename for the series")
    collect.add_argument("--checkpoints-dir", default="checkpoints",
                         help="checkpoint registry that model specs resolve in (default: checkpoints)")
    collect.add_argument("--plain-traces", action="store_true",
                         help="store turns/actions as plain .jsonl (default: .jsonl.zst, the same bytes about 17x "
                              "smaller; `sessions expand` converts later)")
    sessions_dir(collect)
    collect.set_defaults(func=_cmd_collect)

    replay = sub.add_parser("replay", help="re-run recorded battles and compare every state hash")
    replay.add_argument("--group", required=True)
    replay.add_argument("--battle", default=None, help="one battle id (default: every battle of the group)")
    sessions_dir(replay)
    replay.set_defaults(func=_cmd_replay)

    sessions = sub.add_parser("sessions", help="list or show session groups")
    ssub = sessions.add_subparsers(dest="sessions_command", required=True)
    listing = ssub.add_parser("list", help="every group with its counts")
    sessions_dir(listing)
    listing.set_defaults(func=_cmd_sessions_list)
    show = ssub.add_parser("show", help="one group: manifest, summary, readiness")
    show.add_argument("group")
    show.add_argument("--battles", action="store_true", help="also list the battles")
    sessions_dir(show)
    show.set_defaults(func=_cmd_sessions_show)
    for verb, compact, what in (("expand", False, "store a group's traces as plain .jsonl files (to cat, grep, split)"),
                                ("compact", True, "store a group's traces as .jsonl.zst (the series default; about "
                                                  "17x smaller)")):
        form = ssub.add_parser(verb, help=what, description=what + ". Readers see the same bytes in either form; the "
                                                                  "catalog does not change.")
        form.add_argument("group")
        form.add_argument("--battle", default=None, help="one battle id (default: every battle of the group)")
        sessions_dir(form)
        form.set_defaults(func=_cmd_sessions_form, compact=compact)
    cat = ssub.add_parser("cat", help="print a trace file's plain JSONL, whether it is stored plain or as .zst")
    cat.add_argument("path", help="a battle's v5/meta.jsonl, v5/turns.jsonl or v5/actions.jsonl (or its .zst name)")
    cat.set_defaults(func=_cmd_sessions_cat)
