"""policy_ladder materialized on an ephemeral instance: after campaign_loop's real promotion
(the loop rebuilds it), alone again (cached: nothing replayed), on an empty registry (an empty
ladder with the reason, not a failure) and on damaged promotion records (a clear failure)."""

import json

import dagster as dg

from tests.dagster_helpers import loop_config, materialized, metadata, resources, run_loop


def _ladder_asset():
    from extrarlhf_assets.definitions import defs

    return [a for a in defs.assets if dg.AssetKey("policy_ladder") in getattr(a, "keys", ())]


def _materialize(instance, tmp_path, pairs: int = 10):
    return dg.materialize(_ladder_asset(), instance=instance, resources=resources(tmp_path), raise_on_error=False,
                          run_config={"ops": {"policy_ladder": {"config": {"pairs": pairs}}}})


def test_the_loop_rebuilds_the_ladder_after_a_promotion_and_a_rerun_replays_nothing(tmp_path):
    instance = dg.DagsterInstance.ephemeral()
    config = loop_config(30)
    config["ops"]["policy_ladder"] = {"config": {"pairs": 10}}
    result = run_loop(instance, "ladder", resources(tmp_path), config)
    assert result.success and {"promoted_policy", "policy_ladder"} <= materialized(result)
    meta = metadata(result, "policy_ladder")
    promoted = metadata(result, "promoted_policy")["promoted"]
    assert meta["dagster/row_count"] == 1 and meta["rungs"] == 1 and meta["current"] == promoted
    assert meta["measured"] == 2 and meta["battles_played"] == 2 * 2 * 10 and meta["pairs"] == 10
    assert meta["engine_version"] and meta["ruleset"]
    # in place on the page: a narrow table of every rung and the two charts; every column one click away
    [row] = [r.data for r in meta["ladder"].records]
    assert row == {"rung": 1, "policy": f"{promoted} (current)", "cumulative": row["cumulative"],
                   "vs greedy": row["vs greedy"]} and row["cumulative"].startswith("+")
    from extrarlhf_assets.metadata import INLINE_MD_LIMIT
    assert f"| 1 | {promoted} | current |" in meta["ladder_full"] and len(meta["ladder_full"]) >= INLINE_MD_LIMIT
    for chart in ("chart", "chart_vs_greedy"):
        assert meta[chart].startswith("![") and "data:image/svg+xml," in meta[chart]
        assert len(meta[chart]) < INLINE_MD_LIMIT, chart
    doc = json.loads((tmp_path / "checkpoints" / "ladder.json").read_text())
    assert meta["path"] == str(tmp_path / "checkpoints" / "ladder.json")
    assert [r["name"] for r in doc["rungs"]] == [promoted] and len(doc["measurements"]) == 2
    rung = doc["rungs"][0]
    assert rung["vs_predecessor"]["decision"] == "H1" and rung["vs_baselines"]["baseline:random"]["pairs"] == 10

    again = _materialize(instance, tmp_path)
    meta = metadata(again, "policy_ladder")
    assert again.success and meta["measured"] == 0 and meta["cached"] == 2 and meta["battles_played"] == 0


def test_an_empty_registry_materializes_an_empty_ladder(tmp_path):
    result = _materialize(dg.DagsterInstance.ephemeral(), tmp_path)
    assert result.success
    meta = metadata(result, "policy_ladder")
    assert meta["dagster/row_count"] == 0 and meta["current"] == "none" and "chart" not in meta
    assert "nothing has been promoted yet" in meta["reason"] and "**Empty ladder**" in meta["ladder_full"]
    assert meta["ladder"].records == []
    assert json.loads((tmp_path / "checkpoints" / "ladder.json").read_text())["rungs"] == []


def test_damaged_promotion_records_fail_clearly(tmp_path):
    ck = tmp_path / "checkpoints"
    ck.mkdir()
    (ck / "promoted_history.jsonl").write_text("not json\n")
    result = _materialize(dg.DagsterInstance.ephemeral(), tmp_path)
    assert not result.success and not materialized(result)
    [failure] = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    message = failure.step_failure_data.error.message
    assert "[corrupt_record]" in message and "promoted_history.jsonl line 1" in message
    assert not (ck / "ladder.json").exists()
