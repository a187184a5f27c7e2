"""``make prod-demo``: the production plane at work on a throwaway local database.

Starts a throwaway PostgreSQL (localdb.py), fills it with the fixture backend (fixture.py),
opens the gate for this process only (a fresh random salt, never printed), exports the
window as a pseudonymized V5 dataset, derives the TimeStamp dataset from it, prints where
everything went, and stops the server. Nothing here touches a real production database.
"""

from __future__ import annotations

import argparse
import secrets
import sys
from pathlib import Path

from ..core.errors import RLHFError
from ..core.progress import ProgressLine
from . import gate
from .export import export_production_v5_dataset
from .fixture import build_fixture
from .localdb import ThrowawayPostgres
from .timestamp import export_timestamp_dataset


def run(battles: int, players: int, days: int, seed: int, datasets_dir: Path, name: str) -> int:
    with ThrowawayPostgres() as server:
        dsn = server.create_database("prod_demo")
        print(f"throwaway PostgreSQL started (unix socket in {server.root}); filling it with {battles} battles "
              f"played by the engine...", flush=True)
        summary = build_fixture(dsn, battles=battles, players=players, days=days, seed=seed,
                                progress=ProgressLine("fixture", unit="battles"))
        counts = summary["counts"]
        print(f"  {counts['battles']} battles, {counts['actions']} action rows; {counts['unfinished']} unfinished, "
              f"{counts['late']} ingested late, {counts['broken']} deliberately broken")
        environ = {gate.ENABLE_VAR: "1", gate.DSN_VAR: dsn, gate.SALT_VAR: secrets.token_urlsafe(32),
                   gate.KEY_ID_VAR: "demo-key"}  # this process only; the salt is never shown
        window = summary["window"]
        print(f"exporting battles finished before {window['end_at']} (gate open for this process only)...",
              flush=True)
        v5 = export_production_v5_dataset(window["end_at"], name=name, datasets_dir=datasets_dir, environ=environ,
                                          progress=ProgressLine("export", unit="battles"))
        ts = export_timestamp_dataset(v5["dataset_id"], f"{name}-timestamp", datasets_dir=datasets_dir,
                                      environ=environ)
    r = v5["readiness"]
    print(f"\n{v5['dataset_id']} -> {v5['path']}")
    print("  " + ", ".join(f"{table} {rows}" for table, rows in v5["row_counts"].items()))
    print(f"  excluded: {v5['exclusions']['by_reason']}")
    print(f"  snapshot at {v5['snapshot_at']}; complete: {v5['complete']}; pseudonymized with key "
          f"{v5['pseudonym_key_id']} (pseudonymized, not anonymous)")
    for key, label in (("v5_policy_training_ready", "V5 policy"), ("training_ready_standard", "Nemesis Standard"),
                       ("metronome_ready", "Metronome"), ("timestamp_ready", "TimeStamp")):
        print(f"  {label}: {'ready' if r[key] else 'not ready'}")
    print(f"{ts['dataset_id']} -> {ts['path']} (inputs, labels and audit in separate files)")
    print("the throwaway server is stopped; the datasets stay. Inspect them with: "
          f"python -m extrarlhf datasets inspect {v5['dataset_id']} --datasets-dir {datasets_dir}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m extrarlhf.production.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--battles", type=int, default=600)
    parser.add_argument("--players", type=int, default=80)
    parser.add_argument("--days", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--datasets-dir", type=Path, default=Path("datasets"))
    parser.add_argument("--name", default="prod-demo", help="name of the V5 export (a new version each run)")
    args = parser.parse_args(argv)
    try:
        return run(args.battles, args.players, args.days, args.seed, args.datasets_dir, args.name)
    except RLHFError as exc:
        print(f"error [{exc.code}]: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
