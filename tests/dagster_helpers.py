"""Shared helpers of the Dagster tests: resources on temp dirs with small thresholds."""

import os
import signal
import subprocess
import warnings

warnings.filterwarnings("ignore", module="dagster")

import dagster as dg  # noqa: E402

from extrarlhf_assets.resources import CheckpointsResource, DatasetsResource, SessionsResource  # noqa: E402


def resources(tmp_path, *, small: bool = True, settle_seconds: float = 0.0) -> dict:
    thresholds = dict(min_v5_battles=2, min_v5_decisions=10, min_nemesis_lite_battles=2, min_nemesis_lite_decks=2)
    return {"sessions": SessionsResource(sessions_dir=str(tmp_path / "sessions"), settle_seconds=settle_seconds),
            "datasets": DatasetsResource(datasets_dir=str(tmp_path / "datasets"), **(thresholds if small else {})),
            "checkpoints": CheckpointsResource(checkpoints_dir=str(tmp_path / "checkpoints"))}


def loop_config(n_battles: int, *, incumbent: str = "baseline:random", n_pairs: int = 150) -> dict:
    return {"ops": {
        "battle_sessions": {"config": {"n_battles": n_battles, "seed": 1}},
        "v5_policy_checkpoint": {"config": {"epochs": 3, "lr": 3e-3, "hidden": 64, "hidden2": 32}},
        "policy_benchmark": {"config": {"incumbent": incumbent, "n_pairs": n_pairs, "baseline_pairs": 1, "seed": 1}},
        "promoted_policy": {"config": {"require_current_incumbent": False}}}}


def run_loop(instance: dg.DagsterInstance, group: str, res: dict, config: dict):
    from extrarlhf_assets.definitions import defs

    if group not in instance.get_dynamic_partitions("session_groups"):
        instance.add_dynamic_partitions("session_groups", [group])
    return defs.resolve_job_def("campaign_loop").execute_in_process(
        instance=instance, partition_key=group, resources=res, run_config=config, raise_on_error=False)


def checks_of(result) -> dict[str, bool]:
    return {e.asset_check_key.name: e.passed for e in result.get_asset_check_evaluations()}


def materialized(result) -> set[str]:
    return {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}


def metadata(result, asset: str) -> dict:
    for e in result.get_asset_materialization_events():
        if e.asset_key.to_user_string() == asset:
            return {k: getattr(v, "value", v) for k, v in e.event_specific_data.materialization.metadata.items()}
    raise KeyError(asset)


def stop_group(proc: subprocess.Popen) -> None:
    """Stop a server started with ``start_new_session=True`` and all its children: SIGTERM to
    its process group, SIGKILL if it is still there after 30 s."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    except ProcessLookupError:
        pass
