"""The asset graph on an ephemeral instance: real campaigns, real files, checks asserted."""

import re

import dagster as dg

from extrarlhf.policies.promotion import read_promoted
from extrarlhf.runtime.sessions import SessionStore
from tests.dagster_helpers import checks_of, loop_config, materialized, metadata, resources, run_loop
from tests.trace_helpers import read_trace, write_trace

ALL_ASSETS = {"battle_sessions", "v5_dataset", "nemesis_lite_split", "v5_policy_checkpoint", "policy_benchmark",
              "promoted_policy", "policy_ladder"}


def test_full_loop_promotes_a_candidate_that_passes(tmp_path):
    instance = dg.DagsterInstance.ephemeral()
    res = resources(tmp_path)
    result = run_loop(instance, "tiny", res, loop_config(30))
    assert result.success
    assert materialized(result) == ALL_ASSETS
    checks = checks_of(result)
    assert checks == {"trace_integrity": True, "no_degraded_play": True, "v5_policy_training_ready": True,
                      "v5_dataset_valid": True, "nemesis_lite_ready": True, "benchmark_passed": True}

    sessions = metadata(result, "battle_sessions")
    assert sessions["dagster/row_count"] == 30 and sessions["degraded"] == 0
    assert sessions["p1_wins"] + sessions["draws"] + sessions["p2_wins"] == 30
    # every chart is short enough for the UI to show it in place (test_dagster_ui checks it in Chromium)
    from extrarlhf_assets.metadata import INLINE_MD_LIMIT
    assert sessions["results_chart"].startswith("![P1 results (W/D/L)](<data:image/svg+xml,")
    assert len(sessions["results_chart"]) < INLINE_MD_LIMIT
    dataset = metadata(result, "v5_dataset")
    assert dataset["dataset_id"] == "tiny/v1" and dataset["battles"] == 30
    names = {c.name for c in dataset["dagster/column_schema"].columns}
    assert {"battle_id", "action_id"} <= names
    checkpoint = metadata(result, "v5_policy_checkpoint")
    assert checkpoint["dataset_id"] == "tiny/v1" and checkpoint["loss_chart"].startswith("![Loss per epoch](")
    assert max(len(checkpoint["loss_chart"]), len(checkpoint["top1_chart"])) < INLINE_MD_LIMIT
    curves = checkpoint["training_curves"]  # every epoch's numbers, a table the UI shows in place
    assert [r.data["epoch"] for r in curves.records] == [1, 2, 3]
    assert curves.records[-1].data["train_loss"] == round(checkpoint["train_loss"], 4)
    # greedy-vs-greedy battles carry no search values: the default search_values target says it fell back
    assert checkpoint["target_fallback"]["asked"] == "search_values" and checkpoint["target_fallback"]["used"] == "choice"
    bench = metadata(result, "policy_benchmark")
    assert bench["passed"] and bench["incumbent"] == "baseline:random"
    rows = [r.data for r in bench["benchmark_table"].records]
    assert rows[0]["match"] == "candidate vs incumbent" and rows[0]["pairs"] == bench["pairs"]
    assert rows[0]["W/D/L"] == f"{bench['wins']}/{bench['draws']}/{bench['losses']}"
    assert "| match | pairs | W | D | L |" in bench["benchmark_report"]  # the whole report, one click away
    promoted = metadata(result, "promoted_policy")
    assert promoted["promoted"] == checkpoint["checkpoint"] == read_promoted(tmp_path / "checkpoints")["name"]

    # columns carry their descriptions and their lineage; downstreams name the upstream run they read
    columns = {c.name: c for c in dataset["dagster/column_schema"].columns}
    assert all(c.description for c in columns.values())
    lineage = dataset["dagster/column_lineage"].deps_by_column
    assert lineage["battle_id"][0].asset_key == dg.AssetKey("battle_sessions")
    assert dataset["battle_sessions_run_id"] == result.run_id
    assert checkpoint["v5_dataset_run_id"] == result.run_id and bench["v5_policy_checkpoint_run_id"] == result.run_id

    # the Lite split reports its split tables (not assignments.parquet): rows and columns
    import pyarrow.parquet as pq
    lite = metadata(result, "nemesis_lite_split")
    folder = tmp_path / "datasets" / "tiny-nemesis-lite" / "v1"
    split_rows = sum(pq.ParquetFile(folder / f"{k}.parquet").metadata.num_rows for k in ("train", "val", "test"))
    assert lite["dagster/row_count"] == split_rows
    assert lite["assignments"] == pq.ParquetFile(folder / "assignments.parquet").metadata.num_rows
    assert [c.name for c in lite["dagster/column_schema"].columns] == pq.read_schema(folder / "train.parquet").names
    assert lite["dagster/column_lineage"].deps_by_column["battle_id"][0].asset_key == dg.AssetKey("v5_dataset")

    # no Standard split per session group (it needs human-vs-human rows, which headless data
    # never has): its readiness is on the dataset, no asset or check warns per partition
    assert dataset["nemesis_standard_ready"] is False and "human-vs-human" in dataset["nemesis_standard_blockers"]
    assert not list((tmp_path / "datasets").glob("*nemesis-standard*"))
    assert (tmp_path / "datasets" / "tiny-nemesis-lite").is_dir()


def _skip_reasons(result) -> dict[str, list[str]]:
    out = {}
    for e in result.all_events:
        if e.event_type_value == "ASSET_OBSERVATION":
            obs = e.event_specific_data.asset_observation
            if "skipped_reasons" in obs.metadata:
                out[obs.asset_key.to_user_string()] = obs.metadata["skipped_reasons"].value
    return out


def test_readiness_gate_holds_without_failing_the_run(tmp_path):
    """Default thresholds (20 battles, 1000 decisions) with 4 battles: the readiness check warns,
    the run succeeds (a gate that holds is not an error), and nothing downstream of v5_dataset
    is built; each skipped asset says why."""
    instance = dg.DagsterInstance.ephemeral()
    result = run_loop(instance, "small", resources(tmp_path, small=False), loop_config(4))
    assert result.success
    assert not [e for e in result.all_events if e.is_step_failure]
    evaluations = {e.asset_check_key.name: e for e in result.get_asset_check_evaluations()}
    ready = evaluations["v5_policy_training_ready"]
    assert not ready.passed and ready.severity == dg.AssetCheckSeverity.WARN
    assert "need 20" in ready.metadata["blockers"].value
    assert evaluations["trace_integrity"].passed
    assert materialized(result) == {"battle_sessions", "v5_dataset"}
    reasons = _skip_reasons(result)
    assert set(reasons) == {"nemesis_lite_split", "v5_policy_checkpoint"}
    assert all(r[0].startswith("v5_policy_training_ready did not pass:") and "need 20" in r[0]
               for r in reasons.values())
    assert not evaluations["nemesis_lite_ready"].passed  # reported, with the gate as its blocker
    skipped_steps = {e.step_key for e in result.all_events if e.event_type_value == "STEP_SKIPPED"}
    assert skipped_steps == {"policy_benchmark", "promoted_policy", "policy_ladder"}
    assert not (tmp_path / "checkpoints").exists() or not list((tmp_path / "checkpoints").glob("*.onnx"))


def test_inconclusive_benchmark_skips_promotion_with_its_reason(tmp_path):
    """A short match against greedy is inconclusive: benchmark_passed warns, the run succeeds,
    promotion is skipped and says why."""
    instance = dg.DagsterInstance.ephemeral()
    result = run_loop(instance, "short", resources(tmp_path), loop_config(8, incumbent="baseline:greedy", n_pairs=2))
    assert result.success
    bench = [e for e in result.get_asset_check_evaluations() if e.asset_check_key.name == "benchmark_passed"][0]
    assert not bench.passed and bench.severity == dg.AssetCheckSeverity.WARN
    assert "policy_benchmark" in materialized(result) and "promoted_policy" not in materialized(result)
    [reason] = _skip_reasons(result)["promoted_policy"]
    assert reason.startswith("benchmark_passed did not pass:") and "INCONCLUSIVE" in reason
    assert read_promoted(tmp_path / "checkpoints") is None
    # nothing is red: the partitions that were not built are missing, not failed
    from dagster._core.storage.partition_status_cache import AssetPartitionStatus

    from extrarlhf_assets.partitions import session_groups
    for asset in ("v5_policy_checkpoint", "policy_benchmark"):
        status = (instance.get_status_by_partition(dg.AssetKey(asset), ["short"], session_groups) or {}).get("short")
        assert status != AssetPartitionStatus.FAILED, asset


def test_refused_promotion_is_skipped_with_each_reason_once(tmp_path):
    """Benchmarked against baseline:random while the incumbent is a promoted checkpoint: the
    core refuses (current_incumbent); the asset records the reason once and the run succeeds.
    require_current_incumbent false then promotes."""
    instance = dg.DagsterInstance.ephemeral()
    config = loop_config(30)
    config["ops"]["promoted_policy"]["config"]["require_current_incumbent"] = True
    # nothing promoted: baseline:random is the incumbent (the first-promotion rule), so it promotes
    first = run_loop(instance, "first", resources(tmp_path), config)
    assert first.success and metadata(first, "promoted_policy")["previous"] == "none"
    promoted = read_promoted(tmp_path / "checkpoints")
    result = run_loop(instance, "strict", resources(tmp_path), config)
    assert result.success and checks_of(result)["benchmark_passed"] is True
    [reason] = _skip_reasons(result)["promoted_policy"]
    assert reason.count("[current_incumbent]") == 1 and reason.count("was played against") == 1
    assert read_promoted(tmp_path / "checkpoints") == promoted

    candidate = metadata(result, "policy_benchmark")["candidate"]
    promote = dg.materialize([a for a in _defs().assets if "promoted_policy" in str(getattr(a, "keys", ""))],
                             instance=instance, resources=resources(tmp_path),
                             run_config={"ops": {"promoted_policy": {"config": {
                                 "candidate": candidate, "require_current_incumbent": False}}}})
    assert promote.success and metadata(promote, "promoted_policy")["promoted"] == candidate
    assert read_promoted(tmp_path / "checkpoints")["name"] == candidate


def test_promotion_alone_never_guesses_a_candidate(tmp_path):
    """promoted_policy is one global pointer (unpartitioned): run alone without a candidate it
    skips with a clear reason instead of promoting the latest benchmark of some partition."""
    instance = dg.DagsterInstance.ephemeral()
    result = dg.materialize([a for a in _defs().assets if "promoted_policy" in str(getattr(a, "keys", ""))],
                            instance=instance, resources=resources(tmp_path))
    assert result.success and not materialized(result)
    [reason] = _skip_reasons(result)["promoted_policy"]
    assert "ops.promoted_policy.config.candidate" in reason


def _defs():
    from extrarlhf_assets.definitions import defs

    return defs


def test_an_unchanged_group_keeps_its_dataset_version(tmp_path):
    """Re-materializing an unchanged group reuses the version (reported as reused); once the
    group grows, a new version is written."""
    from extrarlhf.runtime.series import run_series

    instance = dg.DagsterInstance.ephemeral()
    res = resources(tmp_path)
    record = {"ops": {"battle_sessions": {"config": {"n_battles": 0}}}}
    selection = [a for a in _defs().assets if {"battle_sessions", "v5_dataset", "nemesis_lite_split"} &
                 {k.to_user_string() for k in getattr(a, "keys", ())}]
    run_series(tmp_path / "sessions", "steady", 6, seed=5, checkpoints_dir=tmp_path / "checkpoints")
    instance.add_dynamic_partitions("session_groups", ["steady"])

    def once():
        out = dg.materialize(selection, instance=instance, partition_key="steady", resources=res, run_config=record)
        assert out.success
        return metadata(out, "v5_dataset"), metadata(out, "nemesis_lite_split")

    first, first_lite = once()
    again, again_lite = once()
    assert (first["dataset_id"], first["reused"]) == ("steady/v1", False)
    assert (again["dataset_id"], again["reused"]) == ("steady/v1", True)
    assert (again_lite["dataset_id"], again_lite["reused"]) == (first_lite["dataset_id"], True)
    assert sorted(p.name for p in (tmp_path / "datasets" / "steady").iterdir() if p.name.startswith("v")) == ["v1"]

    run_series(tmp_path / "sessions", "steady", 8, seed=5, checkpoints_dir=tmp_path / "checkpoints")
    grown, grown_lite = once()
    assert (grown["dataset_id"], grown["reused"], grown["battles"]) == ("steady/v2", False, 8)
    assert grown_lite["source"] == "steady/v2" and grown_lite["reused"] is False


def test_trace_integrity_fails_on_a_tampered_trace(tmp_path):
    instance = dg.DagsterInstance.ephemeral()
    res = resources(tmp_path)
    from extrarlhf.runtime.series import run_series
    from extrarlhf_assets.definitions import defs

    run_series(tmp_path / "sessions", "tampered", 3, seed=2, checkpoints_dir=tmp_path / "checkpoints")
    store = SessionStore(tmp_path / "sessions")
    battle = next(store.battles("tampered"))
    folder = store.battle_dir("tampered", battle.battle_id)
    write_trace(folder, "actions.jsonl", read_trace(folder, "actions.jsonl") + b"\n")
    instance.add_dynamic_partitions("session_groups", ["tampered"])
    job = defs.resolve_job_def("campaign_loop")
    result = job.execute_in_process(instance=instance, partition_key="tampered", resources=res,
                                    run_config={"ops": {"battle_sessions": {"config": {"n_battles": 0}}}},
                                    raise_on_error=False)
    assert checks_of(result)["trace_integrity"] is False
    assert not result.success  # a damaged trace is an error (ERROR severity), not a "not yet"
    assert materialized(result) == {"battle_sessions"}  # blocking: no dataset from a tampered group


def test_recording_a_missing_group_fails_clearly(tmp_path):
    instance = dg.DagsterInstance.ephemeral()
    result = run_loop(instance, "nowhere", resources(tmp_path), {"ops": {"battle_sessions": {"config": {"n_battles": 0}}}})
    assert not result.success
    failure = [e for e in result.all_events if e.is_step_failure][0]
    assert "not on disk" in failure.step_failure_data.error.message


def _svg_of(md: str) -> str:
    """What the browser draws from a chart: markdown's backslash escapes undone, then the URI's."""
    from urllib.parse import unquote

    uri = md[md.index("](<") + 3:md.rindex(">)")]
    assert uri.startswith("data:image/svg+xml,")
    return unquote(uri.split(",", 1)[1].replace("\\<", "<").replace("\\>", ">"))


def test_charts_fit_the_inline_limit_and_stay_valid_svg():
    """Every chart is shorter than the UI's inline limit at any size (long histories drawn on a
    sample, a long ladder on its latest rungs, the title says so) and is well-formed SVG, text
    with '&' or '<' included."""
    import xml.dom.minidom

    from extrarlhf_assets.metadata import INLINE_MD_LIMIT, bar_chart_md, interval_chart_md, line_chart_md

    charts = [bar_chart_md("W & L <all>", [("P1 wins", 120, "#16a34a"), ("draws", 3, "#a3a3a3"),
                                            ("P1 losses", 77, "#dc2626"), ("degraded", 0, "#f59e0b")])]
    for n in (0, 1, 5, 200):
        charts.append(line_chart_md("Loss per epoch", {"train_loss": [1 / (i + 1) for i in range(n)],
                                                      "val_loss": [None if i % 3 else 1.1 / (i + 1) for i in range(n)]}))
    for n in (1, 4, 40):
        charts.append(interval_chart_md("Cumulative Elo per promotion (95% CI)", [str(i + 1) for i in range(n)],
                                        {"cumulative": [(25.0 * i, 25.0 * i - 60, 25.0 * i + 60) for i in range(n)]}))
    for md in charts:
        assert len(md) < INLINE_MD_LIMIT, md
        svg = xml.dom.minidom.parseString(_svg_of(md)).documentElement
        assert svg.tagName == "svg" and svg.getAttribute("xmlns") == "http://www.w3.org/2000/svg"
    assert "W &amp; L &lt;all&gt;" in _svg_of(charts[0])
    long_ladder = _svg_of(charts[-1])
    shown = re.search(r"last (\d+) of 40", long_ladder)
    assert shown and int(shown.group(1)) >= 10, long_ladder[:200]
