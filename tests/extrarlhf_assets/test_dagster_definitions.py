"""The code location loads and validates with Dagster's own CLI."""

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg

ROOT = Path(__file__).resolve().parents[2]


def test_definitions_validate(tmp_path):
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\nnux:\n  enabled: false\n")
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path), "PYTHONPATH": str(ROOT)}
    dagster = Path(sys.executable).with_name("dagster")
    out = subprocess.run([str(dagster), "definitions", "validate", "-w", "workspace.yaml"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "All code locations passed validation" in out.stdout + out.stderr


def test_definitions_content():
    from extrarlhf_assets.definitions import defs
    from extrarlhf_assets.defs.production import with_production

    defs = with_production(defs)  # as the code location is with RLHF_ENABLE_PRODUCTION_DATASETS set

    graph = defs.resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    # no nemesis_standard_split: a session group never has the human-vs-human rows it needs
    assert keys == {"battle_sessions", "v5_dataset", "nemesis_lite_split", "v5_policy_checkpoint", "policy_benchmark",
                    "promoted_policy", "policy_ladder", "production_v5_export", "timestamp_dataset", "metronome_dataset",
                    "returnclock_export", "returnclock_training_split", "preference_dataset", "reward_model",
                    "preference_leaderboard", "trace_retention", "production_nemesis_lite_split",
                    "production_nemesis_standard_split"}
    groups = {k.to_user_string(): graph.get(k).group_name for k in graph.get_all_asset_keys()}
    assert groups["battle_sessions"] == "collection" and groups["v5_dataset"] == "datasets"
    assert groups["promoted_policy"] == "training"
    checks = {(c.asset_key.to_user_string(), c.name) for c in graph.asset_check_keys}
    assert {("battle_sessions", "trace_integrity"), ("battle_sessions", "no_degraded_play"),
            ("v5_dataset", "v5_policy_training_ready"), ("nemesis_lite_split", "nemesis_lite_ready"),
            ("policy_benchmark", "benchmark_passed"), ("preference_dataset", "preference_ready"),
            ("reward_model", "reward_model_above_chance"), ("preference_dataset", "judges_trusted")} <= checks
    blocking = {c.name for c in graph.asset_check_keys if graph.get_check_spec(c).blocking}
    assert {"trace_integrity", "v5_policy_training_ready", "benchmark_passed", "preference_ready"} <= blocking
    assert groups["reward_model"] == "preferences" and defs.resolve_sensor_def("preference_pools_sensor")
    assert defs.resolve_sensor_def("session_groups_sensor") is not None
    nightly = defs.resolve_sensor_def("nightly_campaign")  # a sensor: only a sensor can add its partition
    assert nightly.default_status == dg.DefaultSensorStatus.STOPPED
    assert graph.get(next(k for k in graph.get_all_asset_keys() if k.to_user_string() == "v5_dataset")
                     ).automation_condition is not None
