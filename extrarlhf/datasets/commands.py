"""``python -m extrarlhf datasets ...``: the dataset plane on the command line.

Each subcommand calls one core function and prints a short readable report (or, with
``--json``, the function's result). Business errors are printed by extrarlhf/cli.py as one
``error [code]: message`` line (exit 2); ``validate`` exits 1 when the dataset is invalid.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..core.console import print_json
from ..core.errors import InvalidArgument
from ..core.progress import ProgressLine


def parse_policy_overrides(values: list[str] | None) -> dict[str, int] | None:
    """``--policy KEY=N`` options (readiness thresholds) as a dict, or None when absent."""
    if not values:
        return None
    out = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not value.strip().lstrip("-").isdigit():
            raise InvalidArgument(f"--policy takes KEY=INTEGER (e.g. min_v5_battles=5), got {item!r}")
        out[key.strip()] = int(value)
    return out


def _fractions(text: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",")]
    except ValueError:
        raise InvalidArgument(f"--fractions takes three numbers train,val,test (e.g. 0.8,0.1,0.1), got {text!r}") \
            from None


def _yes(flag: bool) -> str:
    return "ready" if flag else "NOT ready"


def _print_readiness(r: dict[str, Any], indent: str = "  ") -> None:
    for name, label in (("v5_policy", "V5 policy (training_ready, scope v5_policy_only)"),
                        ("nemesis_lite", "Nemesis Lite"), ("nemesis_standard", "Nemesis Standard"),
                        ("metronome", "Metronome"), ("timestamp", "TimeStamp"), ("returnclock", "ReturnClock")):
        contour = r["contours"].get(name)
        if contour is None:  # a contour this kind of dataset does not judge (ReturnClock only its own)
            continue
        print(f"{indent}{label}: {_yes(contour['ready'])}")
        for blocker in contour["blockers"]:
            print(f"{indent}  - {blocker}")


def _cmd_list(args: argparse.Namespace) -> int:
    from .catalog import list_datasets

    result = list_datasets(datasets_dir=args.datasets_dir)
    if args.json:
        print_json(result)
        return 0
    if not result["datasets"]:
        print(f"no datasets under {result['datasets_dir']}")
    for d in result["datasets"]:
        if "error" in d:
            print(f"{d['name']}: refused [{d['error']['code']}] {d['error']['message']}")
            continue
        pointers = f"  pointers: {', '.join(d['pointers'])}" if d["pointers"] else ""
        print(f"{d['name']}{pointers}")
        for v in d["versions"]:
            rows = ", ".join(f"{k} {n}" for k, n in (v.get("row_counts") or {}).items())
            print(f"  {v['dataset_id']:<32} {v.get('kind') or '?':<24} {v.get('created_at') or '':<26} {rows}")
        for item in d["incomplete"]:
            state = "in progress" if item["owner_alive"] else "left by a dead process (cleaned at next publish)"
            print(f"  {item['folder']}: {state}")
    for p in result["pointers"]:
        if "error" in p:
            print(f"pointer {p['pointer']}: unreadable [{p['error']['code']}]")
        else:
            print(f"pointer {p['pointer']} -> {p['dataset_id']} (promoted {p['promoted_at']})")
    return 0


def _cmd_inspect(args: argparse.Namespace) -> int:
    from .catalog import inspect_dataset

    result = inspect_dataset(args.dataset, datasets_dir=args.datasets_dir)
    if args.json:
        print_json(result)
        return 0
    m = result["manifest"]
    print(f"{result['dataset_id']} ({m['kind']}) at {result['path']}")
    print(f"  created {m['created_at']} by extrarlhf {m['code_version'].get('extrarlhf')} "
          f"(engine {m['code_version'].get('engine')}, commit {(m['code_version'].get('git_commit') or '-')[:12]}); "
          f"obs_version {m['obs_version']}")
    src = m["sources"]
    if src["kind"] == "session_groups":
        for g in src["groups"]:
            print(f"  source group {g['group']}: {g['battles']} battles {g['by_status']}, "
                  f"catalog sha256 {g['catalog_sha256'][:16]}...")
    elif src["kind"] == "production":  # a production export: its window, read in one snapshot
        w = src["window"]
        print(f"  source: production window [{w['start_at'] or '-'}, {w['end_at']}), ingested before "
              f"{w['ingested_before']}; snapshot at {src['snapshot_at']}; complete: {m.get('complete')}")
    else:
        print(f"  source dataset {src['dataset_id']} (manifest sha256 {src['manifest_sha256'][:16]}...)")
    for name, t in m["tables"].items():
        print(f"  {name:<12} {t['file']:<22} {t['rows']:>9} rows {t['row_groups']:>4} row groups "
              f"{t['bytes'] / 1e6:>8.2f} MB  sha256 {t['sha256'][:16]}...")
    if m.get("exclusions", {}).get("count"):
        print(f"  excluded battles: {m['exclusions']['count']} {m['exclusions']['by_reason']}")
    if "split" in m:
        s = m["split"]
        print(f"  split by {s['group_key']} ({s['contour']}), fractions {s['fractions']}, key {s['split_key']!r}; "
              f"groups {s['groups']}")
    for p in result["pointers"]:
        print(f"  pointer {p['pointer']}{' (STALE)' if p['stale'] else ''}, promoted {p['promoted_at']}")
    for s in result.get("sources_current") or []:
        if s["state"] != "unchanged":
            print(f"  note: source group {s['group']} {s['state']} since materialization")
    print("  readiness:")
    _print_readiness(m["readiness"], "    ")
    return 0


def _cmd_validate(args: argparse.Namespace) -> int:
    from .validate import validate_dataset

    result = validate_dataset(args.dataset, datasets_dir=args.datasets_dir)
    if args.json:
        print_json(result)
    elif result["valid"]:
        rows = ", ".join(f"{k} {n}" for k, n in (result["row_counts"] or {}).items())
        print(f"{result['dataset_id']}: valid ({rows})")
    else:
        print(f"{result['dataset_id']}: INVALID, {sum(result['failure_codes'].values())} failure(s) "
              f"{result['failure_codes']}")
        for f in result["failures"]:
            print(f"  [{f['code']}] {f['message']}")
    return 0 if result["valid"] else 1


def _cmd_materialize(args: argparse.Namespace) -> int:
    from .materialize import materialize_v5_dataset

    result = materialize_v5_dataset(args.group, args.name, sessions_dir=args.sessions_dir,
                                    datasets_dir=args.datasets_dir, version=args.version, overwrite=args.overwrite,
                                    promote=args.promote, policy=parse_policy_overrides(args.policy),
                                    exclude_corrupt=args.exclude_corrupt, workers=args.workers,
                                    progress=ProgressLine(f"materialize {args.name}"))
    if args.json:
        print_json(result)
        return 0
    rows = ", ".join(f"{k} {n}" for k, n in result["row_counts"].items())
    print(f"{result['dataset_id']}: {rows}" + (" (replaced the previous content)" if result["replaced"] else ""))
    print(f"  at {result['path']}")
    if result["exclusions"]["count"]:
        print(f"  excluded battles: {result['exclusions']['count']} {result['exclusions']['by_reason']}")
    for line in result["recovered"]:
        print(f"  recovered: {line}")
    if result["pointer"]:
        print(f"  pointer {result['pointer']['pointer']} -> {result['dataset_id']}")
    r = result["readiness"]
    print(f"  V5 policy: {_yes(r['v5_policy_training_ready'])}"
          + (": " + "; ".join(r["v5_policy_blockers"]) if r["v5_policy_blockers"] else ""))
    print(f"  Nemesis Lite: {_yes(r['nemesis_lite_ready'])}"
          + (": " + "; ".join(r["nemesis_lite_blockers"]) if r["nemesis_lite_blockers"] else ""))
    return 0


def _cmd_readiness(args: argparse.Namespace) -> int:
    from .contours import dataset_readiness

    result = dataset_readiness(group=args.group, dataset=args.dataset, sessions_dir=args.sessions_dir,
                               datasets_dir=args.datasets_dir, policy=parse_policy_overrides(args.policy),
                               verify=not args.no_verify)
    if args.json:
        print_json(result)
        return 0
    src = result["source"]
    name = f"group {src['group']}" if src["kind"] == "session_group" else f"dataset {src['dataset_id']}"
    ev = result["evidence"]
    print(f"{name}: {ev.get('eligible_battles', 0)} eligible battles, {ev.get('eligible_decisions', 0)} decisions, "
          f"{ev.get('distinct_decks', 0)} distinct decks")
    _print_readiness(result)
    return 0


def _split_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("dataset", help="source: NAME (latest version), NAME/vN or @POINTER")
    p.add_argument("--name", default=None, help="name of the split dataset (default: derived from the source)")
    p.add_argument("--fractions", default="0.8,0.1,0.1", help="train,val,test fractions (default 0.8,0.1,0.1)")
    p.add_argument("--split-key", default=None, help="key of the keyed hash (default: the project's fixed key)")
    p.add_argument("--version", type=int, default=None, help="version to write (default: the next one)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing version (rolled back on error)")
    p.add_argument("--promote", default=None, metavar="POINTER", help="promote this pointer to the result")
    p.add_argument("--policy", action="append", metavar="KEY=N", help="override a readiness threshold")


def _print_split(result: dict[str, Any]) -> None:
    s = result["split"]
    print(f"{result['dataset_id']}: {s['contour']} split of {result['source']} by {s['group_key']}")
    for name in ("train", "val", "test"):
        print(f"  {name:<5} {s['rows'][name]:>9} rows  {s['groups'][name]:>7} groups")
    if s.get("battles_straddling_splits"):
        print(f"  {s['battles_straddling_splits']} battle(s) have rows in more than one split (grouped by "
              f"{s['group_key']}: their trajectories are shared between splits)")
    print(f"  at {result['path']}")
    if result["pointer"]:
        print(f"  pointer {result['pointer']['pointer']} -> {result['dataset_id']}")


def _split_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    from .assign import DEFAULT_SPLIT_KEY

    return {"name": args.name, "fractions": _fractions(args.fractions),
            "split_key": args.split_key or DEFAULT_SPLIT_KEY, "datasets_dir": args.datasets_dir,
            "version": args.version, "overwrite": args.overwrite, "promote": args.promote,
            "policy": parse_policy_overrides(args.policy)}


def _cmd_split_v5(args: argparse.Namespace) -> int:
    from .splits import split_v5_training_dataset

    result = split_v5_training_dataset(args.dataset, **_split_kwargs(args),
                                       progress=ProgressLine("split-v5", unit="decisions"))
    print_json(result) if args.json else _print_split(result)
    return 0


def _cmd_split_nemesis(args: argparse.Namespace) -> int:
    from .splits import split_nemesis_training_dataset

    result = split_nemesis_training_dataset(args.dataset, args.view, group_by=args.group_by, **_split_kwargs(args),
                                            progress=ProgressLine(f"split-nemesis {args.view}", unit="decisions"))
    print_json(result) if args.json else _print_split(result)
    return 0


def _cmd_card(args: argparse.Namespace) -> int:
    from .card import write_dataset_card

    result = write_dataset_card(args.name, datasets_dir=args.datasets_dir)
    print_json(result) if args.json else print(f"{result['name']}: card of v{', v'.join(map(str, result['versions']))} "
                                          f"written to {result['path']}")
    return 0


def _cmd_promote(args: argparse.Namespace) -> int:
    from .catalog import promote_dataset

    result = promote_dataset(args.dataset, args.pointer, datasets_dir=args.datasets_dir)
    if args.json:
        print_json(result)
    else:
        before = f" (was {result['previous']})" if result["previous"] else ""
        print(f"pointer {result['pointer']} -> {result['dataset_id']}{before}")
    return 0


def _cmd_prune_traces(args: argparse.Namespace) -> int:
    from .retention import prune_traces

    result = prune_traces(sessions_dir=args.sessions_dir, datasets_dir=args.datasets_dir, groups=args.group,
                          keep=args.keep, dry_run=args.dry_run)
    if args.json:
        print_json(result)
        return 0
    verb = "would be" if args.dry_run else "were"
    for row in result["groups"]:
        size = (f"{row['bytes_before']:,} -> {row['bytes_after']:,} bytes" if row.get("bytes_after") is not None
                else f"{row['bytes_before']:,} bytes")
        held = f"held by {', '.join(row['datasets'])}" if row["datasets"] else "held by a published version"
        action = {"none": "left as it is", "already_compact": "already compact"}.get(row["action"], row["action"])
        print(f"{row['group']}: {action} ({row['covered']} of {row['traced']} traced battles {held}; {size})"
              + (f"; {row['reason']}" if row.get("reason") else ""))
    for skipped in result["datasets_skipped"]:
        print(f"  dataset {skipped['dataset_id']} not counted: {skipped['reason']}")
    print(f"{result['bytes_freed']:,} bytes {verb} freed" + ("" if args.dry_run else f"; log: {result['log']}"))
    return 0


def add_parser(sub: Any) -> None:
    """Add the ``datasets`` command group to the CLI's subparsers."""
    datasets = sub.add_parser("datasets", help="materialize, validate, split and promote datasets")
    dsub = datasets.add_subparsers(dest="datasets_command", required=True)

    def common(p: argparse.ArgumentParser, sessions: bool = False) -> argparse.ArgumentParser:
        p.add_argument("--datasets-dir", default="datasets", help="root of the datasets (default: datasets)")
        if sessions:
            p.add_argument("--sessions-dir", default="sessions", help="root of the session groups (default: sessions)")
        p.add_argument("--json", action="store_true", help="print the result as JSON")
        return p

    common(dsub.add_parser("list", help="datasets, versions and pointers")).set_defaults(func=_cmd_list)
    p = common(dsub.add_parser("inspect", help="one dataset version: manifest, files, pointers, readiness"))
    p.add_argument("dataset", help="NAME (latest version), NAME/vN or @POINTER")
    p.set_defaults(func=_cmd_inspect)
    p = common(dsub.add_parser("validate", help="re-check hashes, counts, schemas and invariants (exit 1 if invalid)"))
    p.add_argument("dataset", help="NAME (latest version), NAME/vN or @POINTER")
    p.set_defaults(func=_cmd_validate)

    p = common(dsub.add_parser("materialize", help="session groups -> a new V5 dataset version (Parquet)"),
               sessions=True)
    p.add_argument("--group", action="append", required=True, help="a session group (repeat for several)")
    p.add_argument("--name", required=True, help="dataset name")
    p.add_argument("--version", type=int, default=None, help="version to write (default: the next one)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing version (rolled back on error)")
    p.add_argument("--promote", default=None, metavar="POINTER", help="promote this pointer to the new version")
    p.add_argument("--exclude-corrupt", action="store_true",
                   help="leave out battles whose traces fail their checks instead of stopping")
    p.add_argument("--workers", type=int, default=None, help="processes reading traces, this one included (default: one per core up to 4, for 64 battles or more)")
    p.add_argument("--policy", action="append", metavar="KEY=N", help="override a readiness threshold")
    p.set_defaults(func=_cmd_materialize)

    p = common(dsub.add_parser("readiness", help="every training contour with its blockers"), sessions=True)
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--group", help="a session group")
    which.add_argument("--dataset", help="a dataset: NAME, NAME/vN or @POINTER")
    p.add_argument("--no-verify", action="store_true", help="(groups) skip re-hashing the trace files")
    p.add_argument("--policy", action="append", metavar="KEY=N", help="override a readiness threshold")
    p.set_defaults(func=_cmd_readiness)

    p = common(dsub.add_parser("split-v5", help="battle-grouped train/val/test of a V5 dataset"))
    _split_common(p)
    p.set_defaults(func=_cmd_split_v5)
    p = common(dsub.add_parser("split-nemesis", help="battle- or deck-grouped Nemesis train/val/test (lite or "
                                                     "standard)"))
    _split_common(p)
    p.add_argument("--view", choices=("lite", "standard"), default="lite")
    p.add_argument("--group-by", choices=("battle", "opponent_deck"), default="battle",
                   help="battle (default: both seats of a battle in one split) or opponent_deck (held-out decks; "
                        "battles then straddle splits, see docs/data-format.md 10.8)")
    p.set_defaults(func=_cmd_split_nemesis)

    p = common(dsub.add_parser("card", help="(re)write the Hugging Face dataset card NAME/README.md"))
    p.add_argument("name", help="dataset name")
    p.set_defaults(func=_cmd_card)
    p = common(dsub.add_parser("promote", help="validate a version and point POINTER at it (atomic replace)"))
    p.add_argument("dataset", help="NAME (latest version), NAME/vN or @POINTER")
    p.add_argument("pointer", help="pointer name")
    p.set_defaults(func=_cmd_promote)
    p = common(dsub.add_parser("prune-traces", help="retention: keep only compact copies of (or delete) the raw traces "
                                                    "a validated published dataset version holds"), sessions=True)
    p.add_argument("--group", action="append", default=None, help="a session group (repeat; default: every group)")
    p.add_argument("--keep", choices=("compact", "none"), default="compact",
                   help="compact (default): store covered battles as .jsonl.zst; none: delete each group that "
                        "published versions wholly hold (other groups are only compacted)")
    p.add_argument("--dry-run", action="store_true", help="say what would be done; change nothing")
    p.set_defaults(func=_cmd_prune_traces)
