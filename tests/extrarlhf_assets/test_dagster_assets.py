"""The asset graph on an ephemeral instance: real campaigns, real files, checks asserted."""

import json

import dagster as dg
import pytest

from extrarlhf.promotion import read_promoted
from extrarlhf.runtime.sessions import SessionStore
from tests.dagster_helpers import checks_of, loop_config, materialized, metadata, resources, run_loop

ALL_ASSETS = {"battle_sessions", "v5_dataset", "nemesis_lite_split", "v5_policy_checkpoint", "policy_benchmark",
              "promoted_policy"}


def test_full_loop_promotes_a_candidate_that_passes(tmp_path):
    instance = dg.DagsterInstance.ephemeral()
    res = resources(tmp_path)
    result = run_loop(instance, "tiny", res, loop_config(30))
    assert result.success
    assert materialized(result) == ALL_ASSETS  # the Standard split waits for production data
    checks = checks_of(result)
    assert checks == {"trace_integrity": True, "no_degraded_play": True, "v5_policy_training_ready": True,
                      "v5_dataset_valid": True, "nemesis_lite_ready": True, "nemesis_standard_ready": False,
                      "benchmark_passed": True}

    sessions = metadata(result, "battle_sessions")
    assert sessions["dagster/row_count"] == 30 and sessions["degraded"] == 0
    assert sessions["p1_wins"] + sessions["draws"] + sessions["p2_wins"] == 30
    assert "data:image/svg+xml;base64," in sessions["results_chart"]
    dataset = metadata(result, "v5_dataset")
    assert dataset["dataset_id"] == "tiny/v1" and dataset["battles"] == 30
    names = {c.name for c in dataset["dagster/column_schema"].columns}
    assert {"battle_id", "action_id"} <= names
    checkpoint = metadata(result, "v5_policy_checkpoint")
    assert checkpoint["dataset_id"] == "tiny/v1" and "Loss per epoch" in checkpoint["training_curves"]
    bench = metadata(result, "policy_benchmark")
    assert bench["passed"] and bench["incumbent"] == "baseline:random"
    assert "| match | pairs | W | D | L |" in bench["benchmark_table"]
    promoted = metadata(result, "promoted_policy")
    assert promoted["promoted"] == checkpoint["checkpoint"] == read_promoted(tmp_path / "checkpoints")["name"]

    # the Standard readiness gate reports its blockers and writes nothing
    standard = [e for e in result.get_asset_check_evaluations() if e.asset_check_key.name == "nemesis_standard_ready"][0]
    assert "human-vs-human" in standard.metadata["blockers"].value
    assert not list((tmp_path / "datasets").glob("*nemesis-standard*"))
    assert (tmp_path / "datasets" / "tiny-nemesis-lite").is_dir()


def test_blocking_readiness_check_stops_training(tmp_path):
    """Default thresholds (20 battles, 1000 decisions) with 4 battles: the blocking check fails
    and nothing downstream of v5_dataset runs in that run."""
    instance = dg.DagsterInstance.ephemeral()
    result = run_loop(instance, "small", resources(tmp_path, small=False), loop_config(4))
    assert not result.success
    checks = checks_of(result)
    assert checks["v5_policy_training_ready"] is False and checks["trace_integrity"] is True
    assert materialized(result) == {"battle_sessions", "v5_dataset"}
    ev = [e for e in result.get_asset_check_evaluations() if e.asset_check_key.name == "v5_policy_training_ready"][0]
    assert "need 20" in ev.metadata["blockers"].value
    assert not (tmp_path / "checkpoints").exists() or not list((tmp_path / "checkpoints").glob("*.onnx"))


def test_failed_benchmark_blocks_promotion(tmp_path):
    """A short match against greedy is inconclusive: benchmark_passed fails, promotion is skipped."""
    instance = dg.DagsterInstance.ephemeral()
    result = run_loop(instance, "short", resources(tmp_path), loop_config(8, incumbent="baseline:greedy", n_pairs=2))
    checks = checks_of(result)
    assert checks["benchmark_passed"] is False
    assert "policy_benchmark" in materialized(result) and "promoted_policy" not in materialized(result)
    assert read_promoted(tmp_path / "checkpoints") is None


def test_trace_integrity_fails_on_a_tampered_trace(tmp_path):
    instance = dg.DagsterInstance.ephemeral()
    res = resources(tmp_path)
    from extrarlhf.runtime.series import run_series
    from extrarlhf_assets.definitions import defs

    run_series(tmp_path / "sessions", "tampered", 3, seed=2, checkpoints_dir=tmp_path / "checkpoints")
    store = SessionStore(tmp_path / "sessions")
    battle = next(store.battles("tampered"))
    actions = battle.path / "v5" / "actions.jsonl" if hasattr(battle, "path") else None
    if actions is None:
        actions = store.battle_dir("tampered", battle.battle_id) / "v5" / "actions.jsonl"
    actions.write_bytes(actions.read_bytes() + b"\n")
    instance.add_dynamic_partitions("session_groups", ["tampered"])
    job = defs.resolve_job_def("campaign_loop")
    result = job.execute_in_process(instance=instance, partition_key="tampered", resources=res,
                                    run_config={"ops": {"battle_sessions": {"config": {"n_battles": 0}}}},
                                    raise_on_error=False)
    assert checks_of(result)["trace_integrity"] is False
    assert materialized(result) == {"battle_sessions"}  # blocking: no dataset from a tampered group


def test_recording_a_missing_group_fails_clearly(tmp_path):
    instance = dg.DagsterInstance.ephemeral()
    result = run_loop(instance, "nowhere", resources(tmp_path), {"ops": {"battle_sessions": {"config": {"n_battles": 0}}}})
    assert not result.success
    failure = [e for e in result.all_events if e.is_step_failure][0]
    assert "not on disk" in failure.step_failure_data.error.message
