"""The session-group sensor ticks on real session folders; the nightly campaign requests each
night once, with its partition, and starts with the next night when turned on."""

import datetime
import json
import os
import time

import dagster as dg

from extrarlhf.runtime.series import run_series
from extrarlhf_assets.defs.collection.nightly import nightly_campaign, nightly_request
from extrarlhf_assets.defs.collection.sensors import session_groups_sensor
from tests.dagster_helpers import materialized, resources


def _tick(instance, res, cursor=None):
    ctx = dg.build_sensor_context(instance=instance, cursor=cursor, resources={"sessions": res["sessions"]})
    return session_groups_sensor(ctx), ctx


def test_sensor_turns_finished_groups_into_partitions_and_runs(tmp_path):
    instance = dg.DagsterInstance.ephemeral()
    res = resources(tmp_path)
    sessions = tmp_path / "sessions"
    run_series(sessions, "alpha", 3, seed=1, checkpoints_dir=tmp_path / "checkpoints")
    run_series(sessions, "beta", 2, seed=2, checkpoints_dir=tmp_path / "checkpoints")

    result, _ = _tick(instance, res)
    assert [r.partition_key for r in result.run_requests] == ["alpha", "beta"]
    assert all(r.run_config["ops"]["battle_sessions"]["config"]["n_battles"] == 0 for r in result.run_requests)
    assert list(result.dynamic_partitions_requests[0].partition_keys) == ["alpha", "beta"]
    cursor = result.cursor
    assert set(json.loads(cursor)) == {"alpha", "beta"}

    # nothing new: no runs, no partitions
    instance.add_dynamic_partitions("session_groups", ["alpha", "beta"])
    again, _ = _tick(instance, res, cursor)
    assert again.run_requests == [] and not again.dynamic_partitions_requests

    # the group grows (e.g. more battles through the MCP server): one run for its new content
    run_series(sessions, "alpha", 5, seed=1, checkpoints_dir=tmp_path / "checkpoints")
    grown, _ = _tick(instance, res, cursor)
    assert [r.partition_key for r in grown.run_requests] == ["alpha"] and not grown.dynamic_partitions_requests

    # the requested run records the group without playing (n_battles 0) and the datasets follow
    from extrarlhf_assets.definitions import defs
    request = grown.run_requests[0]
    out = dg.materialize([a for a in defs.assets if "battle_sessions" in str(getattr(a, "keys", ""))],
                         instance=instance, partition_key="alpha", resources=res, run_config=request.run_config)
    assert out.success and materialized(out) == {"battle_sessions"}
    # a fresh cursor: the group's recorded digest already matches, so it is not requested again
    fresh, _ = _tick(instance, res)
    assert [r.partition_key for r in fresh.run_requests] == ["beta"]


def test_sensor_waits_for_groups_to_settle(tmp_path):
    instance = dg.DagsterInstance.ephemeral()
    res = resources(tmp_path, settle_seconds=3600)
    run_series(tmp_path / "sessions", "busy", 2, seed=3, checkpoints_dir=tmp_path / "checkpoints")
    result, _ = _tick(instance, res)
    assert result.run_requests == []
    # an older catalog has settled
    catalog = tmp_path / "sessions" / "busy" / "catalog.jsonl"
    old = time.time() - 7200
    os.utime(catalog, (old, old))
    result, _ = _tick(instance, res)
    assert [r.partition_key for r in result.run_requests] == ["busy"]


def test_sensor_skips_groups_with_unfinished_battles(tmp_path):
    instance = dg.DagsterInstance.ephemeral()
    res = resources(tmp_path)
    run_series(tmp_path / "sessions", "torn", 2, seed=4, checkpoints_dir=tmp_path / "checkpoints")
    catalog = tmp_path / "sessions" / "torn" / "catalog.jsonl"
    first = json.loads(catalog.read_text().splitlines()[0])
    started = {**first, "battle_id": "b999999-0000000000", "index": 99, "status": "started"}
    with catalog.open("a") as f:
        f.write(json.dumps(started) + "\n")
    result, _ = _tick(instance, res)
    assert result.run_requests == []


UTC = datetime.timezone.utc


def test_nightly_campaign_requests_each_night_once_with_its_partition():
    morning = datetime.datetime(2026, 11, 29, 9, 30, tzinfo=UTC)
    first = nightly_request(morning, "2026-11-28", set())
    [request] = first.run_requests
    assert request.partition_key == "nightly-2026-11-29" and first.cursor == "2026-11-29"
    assert request.run_config["ops"]["battle_sessions"]["config"]["n_battles"] > 0
    # the partition travels with the request: the daemon adds it on a real tick, a preview does not
    assert list(first.dynamic_partitions_requests[0].partition_keys) == ["nightly-2026-11-29"]
    # same night again: nothing; before 02:00 the latest night is yesterday's
    again = nightly_request(morning, "2026-11-29", {"nightly-2026-11-29"})
    assert isinstance(again, dg.SkipReason) and "nightly-2026-11-30 at 02:00 UTC" in again.skip_message
    early = nightly_request(datetime.datetime(2026, 11, 30, 1, 59, tzinfo=UTC), "2026-11-29", set())
    assert isinstance(early, dg.SkipReason) and "02:00 UTC" in early.skip_message
    nxt = nightly_request(datetime.datetime(2026, 11, 30, 2, 0, tzinfo=UTC), "2026-11-29", {"nightly-2026-11-29"})
    assert [r.partition_key for r in nxt.run_requests] == ["nightly-2026-11-30"]


def test_nightly_campaign_turned_on_in_the_evening_starts_with_the_next_night():
    """Switched on at 21:00 UTC: the first tick requests nothing, records the night that passed
    and names the next one; the 02:00 tick after it requests that next night."""
    evening = datetime.datetime(2026, 11, 29, 21, 0, tzinfo=UTC)
    first = nightly_request(evening, None, set(), first_tick=True)
    assert not first.run_requests and not first.dynamic_partitions_requests and first.cursor == "2026-11-29"
    assert "the first campaign is nightly-2026-11-30 at 02:00 UTC" in first.skip_reason.skip_message
    assert "RLHF_NIGHTLY_CATCH_UP=1" in first.skip_reason.skip_message
    later = nightly_request(datetime.datetime(2026, 11, 29, 23, 50, tzinfo=UTC), first.cursor, set())
    assert isinstance(later, dg.SkipReason) and "passed before the sensor was turned on" in later.skip_message
    night = nightly_request(datetime.datetime(2026, 11, 30, 2, 5, tzinfo=UTC), first.cursor, set())
    assert [r.partition_key for r in night.run_requests] == ["nightly-2026-11-30"]
    # turned off for a week and on again: the missed nights are not run on the spot either
    back = nightly_request(datetime.datetime(2026, 12, 7, 12, 0, tzinfo=UTC), "2026-11-30", set(), first_tick=True)
    assert not back.run_requests and back.cursor == "2026-12-07"


def test_nightly_campaign_catches_up_only_when_asked():
    evening = datetime.datetime(2026, 11, 29, 21, 0, tzinfo=UTC)
    asked = nightly_request(evening, None, set(), first_tick=True, catch_up=True)
    assert [r.partition_key for r in asked.run_requests] == ["nightly-2026-11-29"]
    # the cursor of a running sensor set to an earlier day: the next tick requests the latest night
    reset = nightly_request(evening, "2026-11-01", {"nightly-2026-11-29"})
    assert [r.partition_key for r in reset.run_requests] == ["nightly-2026-11-29"]
    assert not reset.dynamic_partitions_requests  # the partition exists already


def test_nightly_campaign_reads_the_catch_up_variable(tmp_path, monkeypatch):
    """The sensor itself: its first tick (a fresh context) skips unless RLHF_NIGHTLY_CATCH_UP is set,
    and evaluating it (what "Test sensor" does) adds no partition either way."""
    instance = dg.DagsterInstance.local_temp(str(tmp_path))
    monkeypatch.delenv("RLHF_NIGHTLY_CATCH_UP", raising=False)
    skipped = nightly_campaign(dg.build_sensor_context(instance=instance))
    assert not skipped.run_requests and skipped.skip_reason and skipped.cursor
    monkeypatch.setenv("RLHF_NIGHTLY_CATCH_UP", "1")
    result = nightly_campaign(dg.build_sensor_context(instance=instance))
    assert result.run_requests and result.dynamic_partitions_requests
    assert instance.get_dynamic_partitions("session_groups") == []
