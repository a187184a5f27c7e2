"""`dg` reads [tool.dg] in pyproject.toml and lists the code location's definitions; the Dagster
packages are one release (the dg CLI and dagster-postgres pin dagster exactly)."""

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_dg_list_defs_loads_the_code_location(tmp_path):
    # production opted in: its group is part of the code location only then (docs/dagster.md)
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path), "VIRTUAL_ENV": str(Path(sys.executable).parents[1]),
           "RLHF_ENABLE_PRODUCTION_DATASETS": "1"}
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    out = subprocess.run([str(Path(sys.executable).with_name("dg")), "list", "defs", "--json"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    listed = json.loads(out.stdout[out.stdout.index("{"):])
    assets = {a["asset_key"]: a for a in listed["assets"]}
    assert {"battle_sessions", "v5_dataset", "production_v5_export", "returnclock_training_split"} <= set(assets)
    assert assets["production_v5_export"]["group_name"] == "production"
    assert {j["name"] for j in listed["jobs"]} >= {"campaign_loop", "production_daily"}
    assert {"session_groups_sensor"} <= {s["name"] for s in listed["sensors"]}
    assert "production" in {r["name"] for r in listed["resources"]}


def test_the_dagster_packages_are_one_release():
    version = metadata.version("dagster")
    assert metadata.version("dagster-webserver") == version == metadata.version("dagster-dg-cli")
    for library in ("dagster-postgres", "dagster-dg-cli"):
        pins = [r for r in metadata.requires(library) or [] if r.replace(" ", "").startswith("dagster==")]
        assert pins == [f"dagster=={version}"], (library, pins)
