"""Nemesis Lite and Standard splits of a production day (DESIGN 12.3, issue 52 item 4), run by
Dagster in process against the session's real PostgreSQL fixture database (tests/conftest.py:
``production_db``, 400 battles over three days, about 60% human-vs-human).

One day is exported once; the splits are judged under two readiness policies on the same
export: the default one (Standard needs 200 human-vs-human battles: the day has fewer, so
Standard is skipped with its blockers and the run succeeds) and one whose Standard minimums the
day meets (Standard is built, human-vs-human rows only). Row counts are recomputed here from the
export's decisions table, independently of the core's Nemesis row builder."""

from collections import defaultdict
from pathlib import Path

import dagster as dg
import pyarrow.parquet as pq
import pytest

from extrarlhf.production import gate
from extrarlhf_assets.resources import DatasetsResource, ProductionResource

SALT = "dagster-nemesis-salt-Wq3Zk8pL1vB6nT9xR2cY5mJ7hG4dF0sA"
DAY = "2026-01-02"
LITE, STANDARD = "production_nemesis_lite_split", "production_nemesis_standard_split"
# minimums the fixture's day meets (it has well over 20 human-vs-human battles and 5 decks among them)
LENIENT = {"min_nemesis_standard_battles": 20, "min_nemesis_standard_decks": 5}


def _run(instance, root: Path, **production) -> dg.ExecuteInProcessResult:
    """The day's V5 export and its two Nemesis splits, with every check of those assets."""
    from extrarlhf_assets.defs.production import assets, checks

    job = dg.define_asset_job("nemesis_day", selection=dg.AssetSelection.assets(
        "production_v5_export", LITE, STANDARD))
    defs = dg.Definitions(assets=dg.load_assets_from_modules([assets]),
                          asset_checks=dg.load_asset_checks_from_modules([checks]), jobs=[job],
                          resources={"datasets": DatasetsResource(datasets_dir=str(root / "datasets")),
                                     "production": ProductionResource(**production)})
    return defs.resolve_job_def("nemesis_day").execute_in_process(instance=instance, partition_key=DAY,
                                                                  raise_on_error=False)


@pytest.fixture(scope="module")
def day(production_db, tmp_path_factory):
    """(instance, strict run, lenient runs, datasets root, the split folders after the strict run):
    the default policy, then LENIENT twice (the second on unchanged data)."""
    root = tmp_path_factory.mktemp("nemesis")
    mp = pytest.MonkeyPatch()
    for name, value in {gate.ENABLE_VAR: "1", gate.DSN_VAR: production_db.dsn, gate.SALT_VAR: SALT,
                        gate.KEY_ID_VAR: "rc-nemesis"}.items():
        mp.setenv(name, value)
    try:
        instance = dg.DagsterInstance.ephemeral()
        strict = _run(instance, root)
        after_strict = sorted(p.name for p in (root / "datasets").iterdir())
        lenient = (_run(instance, root, **LENIENT), _run(instance, root, **LENIENT))
    finally:
        mp.undo()
    return instance, strict, lenient, root / "datasets", after_strict


def _meta(result, asset: str) -> dict:
    found = [e.event_specific_data.materialization.metadata for e in result.get_asset_materialization_events()
             if e.asset_key.to_user_string() == asset]
    assert len(found) == 1, (asset, len(found))
    return {k: getattr(v, "value", v) for k, v in found[0].items()}


def _materialized(result) -> set[str]:
    return {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}


def _checks(result) -> dict[tuple[str, str], dg.AssetCheckEvaluation]:
    return {(e.asset_key.to_user_string(), e.check_name): e for e in result.get_asset_check_evaluations()}


def _expected_rows(decisions_path: Path) -> tuple[int, int, int]:
    """(Lite rows, Standard rows, human-vs-human battles) recomputed from the export's decisions:
    a decision gives a Nemesis row when a later decision of the other player follows it in the
    same battle, i.e. every decision before the battle's last run of one player's decisions."""
    table = pq.read_table(decisions_path, columns=["battle_id", "decision_index", "player", "actor_type",
                                                   "opponent_type"]).to_pylist()
    battles: dict[str, list[dict]] = defaultdict(list)
    for row in table:
        battles[row["battle_id"]].append(row)
    lite = standard = hvh = 0
    for rows in battles.values():
        rows.sort(key=lambda r: r["decision_index"])
        last = len(rows) - 1
        while last > 0 and rows[last - 1]["player"] == rows[-1]["player"]:
            last -= 1
        human = all(r["actor_type"] == "human" and r["opponent_type"] == "human" for r in rows)
        lite += last
        standard += last if human else 0
        hvh += human
    return lite, standard, hvh


def _split_rows(path: Path) -> dict[str, int]:
    return {s: pq.ParquetFile(path / f"{s}.parquet").metadata.num_rows for s in ("train", "val", "test")}


def test_a_day_without_enough_human_vs_human_battles_skips_standard(day):
    instance, strict, _, datasets, after_strict = day
    assert strict.success  # an outcome, not a failure
    assert _materialized(strict) == {"production_v5_export", LITE}
    check = _checks(strict)[(STANDARD, "nemesis_standard_ready")]
    assert not check.passed and check.severity == dg.AssetCheckSeverity.WARN and check.partition == DAY
    assert check.metadata["training_ready_standard"].value is False
    hvh = check.metadata["human_vs_human_battles"].value
    assert 20 <= hvh < 200, hvh  # the day: some, not the default policy's 200
    blockers = check.metadata["standard_readiness_blockers"].value
    assert f"{hvh} human-vs-human battles; need 200" in blockers
    # recorded on the asset as a skip (an observation), never a materialization or a red partition
    observed = [e.event_specific_data.asset_observation for e in strict.all_events
                if e.event_type_value == "ASSET_OBSERVATION"]
    skips = [o for o in observed if o.asset_key == dg.AssetKey(STANDARD)]
    assert len(skips) == 1 and skips[0].partition == DAY
    assert any(f"{hvh} human-vs-human battles; need 200" in r for r in skips[0].metadata["skipped_reasons"].value)
    from extrarlhf_assets.defs.production.assets import production_days

    status = instance.get_status_by_partition(dg.AssetKey(STANDARD), [DAY], production_days)[DAY]
    assert status != dg.AssetPartitionStatus.FAILED
    assert f"production-v5-{DAY}-nemesis-lite" in after_strict
    assert f"production-v5-{DAY}-nemesis-standard" not in after_strict  # nothing written
    # Lite needs no human-vs-human rows: built from the same export
    assert _checks(strict)[(LITE, "nemesis_lite_ready")].passed
    assert _checks(strict)[(LITE, "no_raw_identifiers")].passed


def test_a_production_day_materializes_lite_and_standard_with_the_right_rows(day):
    _, strict, (lenient, again), datasets, _ = day
    assert lenient.success and again.success
    assert _materialized(lenient) == _materialized(again) == {"production_v5_export", LITE, STANDARD}
    # the export records readiness under its policy: the lenient one is a new version of the day
    export = _meta(lenient, "production_v5_export")
    assert export["dataset_id"] == f"production-v5-{DAY}/v2"
    lite_rows, standard_rows, hvh = _expected_rows(Path(export["path"]) / "decisions.parquet")
    assert 0 < standard_rows < lite_rows

    lite = _meta(lenient, LITE)
    assert lite["source"] == export["dataset_id"] and lite["view"] == "lite"
    assert lite["dagster/row_count"] == lite_rows == sum(_split_rows(Path(lite["path"])).values())
    # same rows as the strict run's split of v1 (same battles), a new version since the source is new
    assert lite["dataset_id"] == f"production-v5-{DAY}-nemesis-lite/v2" and lite["reused"] is False
    assert _meta(strict, LITE)["dagster/row_count"] == lite_rows
    assert "Nemesis Lite rows per split" in lite["split_chart"]
    # unchanged data: every version is kept, none written again
    for asset in ("production_v5_export", LITE, STANDARD):
        kept = _meta(again, asset)
        assert kept["reused"] is True and kept["dataset_id"] == _meta(lenient, asset)["dataset_id"], asset

    standard = _meta(lenient, STANDARD)
    assert standard["dataset_id"] == f"production-v5-{DAY}-nemesis-standard/v1" and standard["reused"] is False
    assert standard["training_ready_standard"] is True and standard["human_vs_human_battles"] == hvh
    path = Path(standard["path"])
    counts = _split_rows(path)
    assert standard["dagster/row_count"] == standard_rows == sum(counts.values())
    assert standard["row_counts"]["train"] == counts["train"] > 0 and counts["test"] > 0
    assert "Nemesis Standard rows per split" in standard["split_chart"]
    assert {"viewer_type", "opponent_type", "target_action_id"} <= {c.name for c in standard["dagster/column_schema"].columns}
    for split in ("train", "val", "test"):
        kinds = pq.read_table(path / f"{split}.parquet", columns=["viewer_type", "opponent_type"])
        assert set(kinds.column("viewer_type").to_pylist()) <= {"human"}
        assert set(kinds.column("opponent_type").to_pylist()) <= {"human"}
    checks = _checks(lenient)
    assert checks[(STANDARD, "nemesis_standard_ready")].passed
    evaluation = checks[(STANDARD, "no_raw_identifiers")]
    assert evaluation.passed and evaluation.metadata["identifiers_scanned"].value > 10


def test_the_splits_are_absent_while_production_is_not_opted_in():
    from extrarlhf_assets.definitions import defs
    from extrarlhf_assets.defs.production import production_definitions

    closed = production_definitions({})
    assert closed["assets"] == [] and closed["asset_checks"] == []
    opened = production_definitions({gate.ENABLE_VAR: "1"})
    keys = {k.to_user_string() for a in opened["assets"] for k in a.keys}
    assert {LITE, STANDARD} <= keys
    checked = {(k.asset_key.to_user_string(), k.name) for c in opened["asset_checks"] for k in c.check_keys}
    assert {(LITE, "no_raw_identifiers"), (STANDARD, "no_raw_identifiers")} <= checked
    import os

    if not os.environ.get(gate.ENABLE_VAR):  # the test process's own code location: no production splits
        graph = defs.resolve_asset_graph()
        assert not {dg.AssetKey(LITE), dg.AssetKey(STANDARD)} & set(graph.get_all_asset_keys())


def test_the_splits_follow_the_production_conventions():
    """Day partitions, group production, in production_daily, downstream of the V5 export, no
    automation (as every production asset), WARN readiness checks that never block."""
    from extrarlhf_assets.definitions import defs
    from extrarlhf_assets.defs.production import with_production
    from extrarlhf_assets.defs.production.assets import production_days

    full = with_production(defs)
    graph = full.resolve_asset_graph()
    job = {k.to_user_string() for k in full.resolve_job_def("production_daily").asset_layer.executable_asset_keys}
    for name, check in ((LITE, "nemesis_lite_ready"), (STANDARD, "nemesis_standard_ready")):
        node = graph.get(dg.AssetKey(name))
        assert node.partitions_def == production_days and node.group_name == "production", name
        assert node.parent_keys == {dg.AssetKey("production_v5_export")}, name
        assert node.automation_condition is None and node.owners == ["team:extrarlhf"], name
        assert node.tags.get("plane") == "production" and node.code_version, name
        assert name in job
        spec = graph.get_check_spec(dg.AssetCheckKey(dg.AssetKey(name), check))
        assert not spec.blocking and spec.partitions_def == production_days, name
