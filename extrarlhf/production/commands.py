"""``python -m extrarlhf production ...``: the production plane on the command line.

The DSN and the salt come from the environment only (there are no options for them).
Business errors (a closed gate included) are printed by extrarlhf/cli.py as one
``error [code]: message`` line (exit 2).
"""

from __future__ import annotations

import argparse
from typing import Any

from ..core.console import print_json
from ..core.progress import ProgressLine
from ..datasets.commands import parse_policy_overrides


def _cmd_status(args: argparse.Namespace) -> int:
    from .status import production_status

    result = production_status()
    if args.json:
        print_json(result)
        return 0
    print(f"production plane: {'ENABLED' if result['open'] else 'disabled'}")
    for name, info in result["variables"].items():
        if "ms" in info:  # an optional timeout: the value in effect
            print(f"  {name}: {info['problem'] or str(info['ms']) + ' ms' + ('' if info['set'] else ' (default)')}")
        else:
            print(f"  {name}: {info['problem'] or 'set'}")
    return 0


def _print_version(result: dict) -> None:
    """Whether an identical version was reused, and the name's latest complete export."""
    if result["reused"]:
        print(f"  reused: identical to {result['dataset_id']} (no new version written)")
    latest = result["latest_complete"]
    print(f"  latest complete export: {latest['dataset_id'] + ' (@' + latest['pointer'] + ')' if latest else 'none'}")


def _cmd_export_v5(args: argparse.Namespace) -> int:
    from .export import export_production_v5_dataset

    result = export_production_v5_dataset(
        args.end_at, name=args.name, start_at=args.start_at, ingested_before=args.ingested_before,
        datasets_dir=args.datasets_dir, max_rows=args.max_rows, overwrite=args.overwrite, promote=args.promote,
        publish_incomplete=args.publish_incomplete, workers=args.workers, policy=parse_policy_overrides(args.policy),
        progress=ProgressLine(f"production export {args.name}"))
    if args.json:
        print_json(result)
        return 0
    if not result["published"]:
        print(result["message"])
        return 0
    w = result["window"]
    print(f"{result['dataset_id']}: production window [{w['start_at'] or '-'}, {w['end_at']}), ingested before "
          f"{w['ingested_before']}; snapshot at {result['snapshot_at']}")
    print("  rows: " + ", ".join(f"{k} {n}" for k, n in result["row_counts"].items()))
    print("  streams read: " + ", ".join(f"{k} {s['rows']} rows in {s['pages']} pages"
                                         for k, s in result["streams"].items()))
    if result["exclusions"]["count"]:
        print(f"  excluded battles: {result['exclusions']['count']} {result['exclusions']['by_reason']}")
    implausible = result["labels"]["metronome_excluded"]
    if implausible["count"]:
        print(f"  think times outside [{implausible['min_decision_ms']}, {implausible['max_decision_ms']}] ms: "
              f"{implausible['count']} {implausible['by_reason']} (kept in metronome_excluded, not labels)")
    print(f"  complete: {result['complete']}" + ("" if result["complete"] else f" (stop_reason "
                                                 f"{result['stop_reason']} on {result['stopped_stream']})"))
    print(f"  pseudonymized with key {result['pseudonym_key_id']} (pseudonymized, not anonymous)")
    _print_version(result)
    r = result["readiness"]
    for key, label in (("v5_policy_training_ready", "V5 policy"), ("nemesis_lite_ready", "Nemesis Lite"),
                       ("training_ready_standard", "Nemesis Standard"), ("metronome_ready", "Metronome"),
                       ("timestamp_ready", "TimeStamp")):
        blockers = {"v5_policy_training_ready": "v5_policy_blockers", "nemesis_lite_ready": "nemesis_lite_blockers",
                    "training_ready_standard": "standard_readiness_blockers", "metronome_ready": "metronome_blockers",
                    "timestamp_ready": "timestamp_blockers"}[key]
        print(f"  {label}: {'ready' if r[key] else 'NOT ready: ' + '; '.join(r[blockers])}")
    print(f"  at {result['path']}")
    return 0


def _cmd_export_timestamp(args: argparse.Namespace) -> int:
    from .timestamp import export_timestamp_dataset

    result = export_timestamp_dataset(args.source, args.name, datasets_dir=args.datasets_dir,
                                      overwrite=args.overwrite, promote=args.promote,
                                      policy=parse_policy_overrides(args.policy))
    if args.json:
        print_json(result)
        return 0
    print(f"{result['dataset_id']}: TimeStamp dataset of {result['source']}: "
          + ", ".join(f"{k} {n}" for k, n in result["row_counts"].items()))
    print(f"  approved inputs: {', '.join(result['approved_inputs'])}")
    print(f"  TimeStamp: {'ready' if result['timestamp_ready'] else 'NOT ready: ' + '; '.join(result['timestamp_blockers'])}")
    print(f"  at {result['path']}")
    return 0


def _cmd_export_returnclock(args: argparse.Namespace) -> int:
    from .returnclock import export_returnclock_dataset

    result = export_returnclock_dataset(args.start_at, args.end_at, name=args.name,
                                        ingested_before=args.ingested_before, datasets_dir=args.datasets_dir,
                                        max_rows=args.max_rows, overwrite=args.overwrite,
                                        publish_incomplete=args.publish_incomplete,
                                        policy=parse_policy_overrides(args.policy),
                                        progress=ProgressLine(f"returnclock export {args.name}", unit="sessions"))
    if args.json:
        print_json(result)
        return 0
    if not result["published"]:
        print(result["message"])
        return 0
    print(f"{result['dataset_id']}: ReturnClock sessions ended in [{result['window']['start_at'] or '-'}, "
          f"{result['window']['end_at']}); snapshot at {result['snapshot_at']}")
    print("  rows: " + ", ".join(f"{k} {n}" for k, n in result["row_counts"].items()))
    if result["excluded_by_reason"]:
        print(f"  sessions without a row: {result['excluded_by_reason']}")
    print(f"  complete: {result['complete']}; pseudonymized with key {result['pseudonym_key_id']} (not anonymous)")
    _print_version(result)
    print(f"  at {result['path']}")
    return 0


def _cmd_split_returnclock(args: argparse.Namespace) -> int:
    from .returnclock import split_returnclock_training_dataset

    result = split_returnclock_training_dataset(args.dataset, name=args.name, datasets_dir=args.datasets_dir,
                                                overwrite=args.overwrite, policy=parse_policy_overrides(args.policy))
    print_json(result) if args.json else print(f"{result['dataset_id']}: organic-only split: "
                                         + ", ".join(f"{k} {n}" for k, n in result["row_counts"].items())
                                         + f"\n  at {result['path']}")
    return 0


def _window_args(p: argparse.ArgumentParser) -> None:
    """The window, cut-off, name and ceiling options every production export takes."""
    p.add_argument("--end-at", required=True, help="end of the window (exclusive), ISO 8601 with a timezone")
    p.add_argument("--start-at", default=None, help="start of the window (inclusive; default: the beginning)")
    p.add_argument("--ingested-before", default=None,
                   help="only rows ingested before this instant (default: 60 s before the snapshot, recorded in the manifest); not before --end-at")
    p.add_argument("--name", required=True, help="dataset name")
    p.add_argument("--max-rows", type=int, default=None, help="row ceiling per raw stream (default and most: 1000000)")


def add_parser(sub: Any) -> None:
    """Add the ``production`` command group to the CLI's subparsers."""
    production = sub.add_parser("production", help="opt-in, read-only, pseudonymized exports of the production "
                                                   "database (DSN and salt from the environment only)")
    psub = production.add_subparsers(dest="production_command", required=True)

    def common(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument("--datasets-dir", default="datasets", help="root of the datasets (default: datasets)")
        p.add_argument("--json", action="store_true", help="print the result as JSON")
        return p

    p = psub.add_parser("status", help="is the production plane enabled? (variable names only, never values)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=_cmd_status)

    p = common(psub.add_parser("export-v5", help="battles finished in a window -> a pseudonymized V5 dataset "
                                                 "(+ excluded, metronome, production_battles)"))
    _window_args(p)
    p.add_argument("--publish-incomplete", action="store_true",
                   help="publish an export stopped by the row ceiling (for inspection; never ready)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing version (rolled back on error)")
    p.add_argument("--promote", default=None, metavar="POINTER", help="promote this pointer to the new version")
    p.add_argument("--workers", type=int, default=None, help="replay processes, this one included")
    p.add_argument("--policy", action="append", metavar="KEY=N", help="override a readiness threshold")
    p.set_defaults(func=_cmd_export_v5)

    p = common(psub.add_parser("export-timestamp", help="a production V5 export -> TimeStamp inputs, labels, audit"))
    p.add_argument("source", help="the production V5 export: NAME, NAME/vN or @POINTER")
    p.add_argument("--name", required=True, help="name of the TimeStamp dataset")
    p.add_argument("--overwrite", action="store_true", help="replace an existing version")
    p.add_argument("--promote", default=None, metavar="POINTER", help="promote this pointer to the new version")
    p.add_argument("--policy", action="append", metavar="KEY=N", help="override a readiness threshold")
    p.set_defaults(func=_cmd_export_timestamp)

    p = common(psub.add_parser("export-returnclock", help="player sessions ended in a window -> a pseudonymized "
                                                          "ReturnClock export (raw, treated rows flagged)"))
    _window_args(p)
    p.add_argument("--publish-incomplete", action="store_true", help="publish an export stopped by the row ceiling")
    p.add_argument("--overwrite", action="store_true", help="replace an existing version")
    p.add_argument("--policy", action="append", metavar="KEY=N", help="override a readiness threshold")
    p.set_defaults(func=_cmd_export_returnclock)

    p = common(psub.add_parser("split-returnclock", help="a ReturnClock export -> organic-only train/val/test "
                                                         "grouped by player (the only trainer input); a local "
                                                         "operation on already-pseudonymized data: it reads no "
                                                         "production database and runs with the gate closed"))
    p.add_argument("dataset", help="the ReturnClock export: NAME, NAME/vN or @POINTER")
    p.add_argument("--name", default=None, help="name of the split (default: <source>-split)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing version")
    p.add_argument("--policy", action="append", metavar="KEY=N", help="override a readiness threshold")
    p.set_defaults(func=_cmd_split_returnclock)
