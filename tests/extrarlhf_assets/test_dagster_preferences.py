"""The preference assets on an ephemeral instance (issue 30): the pools sensor adds a partition
per pool on disk; ``preference_dataset`` publishes the judgments (then keeps the version while
they are unchanged) with its ``preference_ready`` check; ``reward_model`` skips with the blockers
while the pool is not ready, then trains and registers ``rm-<pool>`` with its above-chance check."""

from __future__ import annotations

import dagster as dg
import pytest

from extrarlhf.datasets import materialize_v5_dataset
from extrarlhf.preferences import create_preference_pool, judge_synthetically
from extrarlhf.runtime.series import run_series
from extrarlhf_assets.defs.preferences.assets import (PREFERENCE_POOLS, preference_dataset,
                                                      preference_leaderboard_asset, preference_pools_sensor, reward_model)
from extrarlhf_assets.resources import CheckpointsResource, DatasetsResource, PreferencesResource
from tests.dagster_helpers import checks_of, materialized, metadata


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("dagster-prefs")
    run_series(root / "sessions", "g", 40, p1_model="search:baseline:greedy?sims=4", opponent="baseline:greedy",
               seed=3)
    materialize_v5_dataset("g", "g", sessions_dir=root / "sessions", datasets_dir=root / "datasets")
    create_preference_pool("pp", "g", sources=["search_top2", "baseline:random vs recorded"], n_tasks=300,
                           datasets_dir=root / "datasets", preferences_dir=root / "preferences")
    judge_synthetically("pp", judges=1, noise=0.02, tie_margin=0.03, datasets_dir=root / "datasets",
                        preferences_dir=root / "preferences")
    return root


def _resources(root, **policy):
    return {"preferences": PreferencesResource(preferences_dir=str(root / "preferences"), **policy),
            "datasets": DatasetsResource(datasets_dir=str(root / "datasets")),
            "checkpoints": CheckpointsResource(checkpoints_dir=str(root / "checkpoints"))}


def test_pools_become_partitions_and_judgments_a_dataset_then_a_reward_model(dirs):
    instance = dg.DagsterInstance.ephemeral()
    context = dg.build_sensor_context(instance=instance, resources=_resources(dirs))
    found = preference_pools_sensor(context)
    assert [r.partition_keys for r in found.dynamic_partitions_requests] == [["pp"]]
    instance.add_dynamic_partitions(PREFERENCE_POOLS, ["pp"])
    assert isinstance(preference_pools_sensor(dg.build_sensor_context(instance=instance, resources=_resources(dirs))),
                      dg.SkipReason)

    held = dg.materialize([preference_dataset, reward_model], partition_key="pp", instance=instance,
                          resources=_resources(dirs))  # one judge: the default policy asks for two
    assert held.success and checks_of(held) == {"preference_ready": False, "judges_trusted": True}
    assert materialized(held) == {"preference_dataset"}  # the reward model waits: a normal outcome
    first = metadata(held, "preference_dataset")
    assert first["dataset_id"] == "prefs-pp/v1" and first["reused"] is False and first["judges"] == 1

    ready = dg.materialize([preference_dataset, reward_model], partition_key="pp", instance=instance,
                           resources=_resources(dirs, min_judges=1, min_judgments=50, min_states=50))
    assert ready.success and materialized(ready) == {"preference_dataset", "reward_model"}
    assert metadata(ready, "preference_dataset")["reused"] is True  # unchanged judgments: no copy
    model = metadata(ready, "reward_model")
    assert model["checkpoint"] == "rm-pp" and model["test_pairs"] > 0
    assert set(checks_of(ready)) == {"preference_ready", "judges_trusted", "reward_model_above_chance"}
    assert checks_of(ready)["preference_ready"] is True
    assert (dirs / "checkpoints" / "rm-pp.card.json").exists()


def test_judges_trusted_warns_on_a_flagged_judge_and_the_leaderboard_ranks_specs(dirs):
    """Issue 54: ``judges_trusted`` names a judge at chance; ``preference_leaderboard`` rates the
    specs of an 'A vs B' pool and is skipped (not failed) for a pool without one."""
    where = {"datasets_dir": dirs / "datasets", "preferences_dir": dirs / "preferences"}
    create_preference_pool("lb", "g", sources=["baseline:greedy vs baseline:random"], n_tasks=60, gold_share=0.3,
                           **where)
    judge_synthetically("lb", judges=2, sims=8, **where)
    judge_synthetically("lb", judges=1, kind="random", prefix="coin", **where)
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(PREFERENCE_POOLS, ["lb", "pp"])
    run = dg.materialize([preference_dataset, preference_leaderboard_asset], partition_key="lb", instance=instance,
                         resources=_resources(dirs, min_judges=1, min_judgments=10, min_states=10))
    assert run.success and checks_of(run)["judges_trusted"] is False
    board = metadata(run, "preference_leaderboard")
    assert board["order"] == ["baseline:greedy", "baseline:random"] and "rating" in board["ratings"]
    plain = dg.materialize([preference_leaderboard_asset], partition_key="pp", instance=instance,
                           resources=_resources(dirs))
    assert plain.success and materialized(plain) == set()  # no 'A vs B' specs: skipped, a normal outcome
