"""Operator conventions of the local asset graph: owners, tags, code versions, retry policies,
automation conditions that wait for blocking checks, descriptions that render literally."""

import re

import dagster as dg

from extrarlhf_assets.definitions import defs

LOCAL = {"battle_sessions", "v5_dataset", "nemesis_lite_split", "v5_policy_checkpoint", "policy_benchmark",
         "promoted_policy", "policy_ladder"}


def _graph():
    return defs.resolve_asset_graph()


def _node(name: str):
    return _graph().get(dg.AssetKey(name))


def _outside_code_spans(text: str) -> str:
    return re.sub(r"`[^`]*`", "", text)


def test_descriptions_render_literally():
    """Markdown (the UI's renderer) drops ``<group>`` as an unknown HTML tag: every placeholder
    in an asset's or check's description sits in a code span."""
    graph = _graph()
    texts = {name: _node(name).description for name in LOCAL}
    for key in graph.asset_check_keys:
        if key.asset_key.to_user_string() in LOCAL:
            texts[f"{key.asset_key.to_user_string()}:{key.name}"] = graph.get_check_spec(key).description or ""
    assert all(texts.values())
    offending = {k: t for k, t in texts.items() if re.search(r"<[^>]*>", _outside_code_spans(t))}
    assert offending == {}
    assert "`datasets/<group>/vN`" in texts["v5_dataset"]


def test_owners_tags_and_code_versions():
    for name in LOCAL:
        node = _node(name)
        assert node.owners == ["team:extrarlhf"], name
        assert node.tags.get("plane") == "local" and node.tags.get("domain") == node.group_name, name
        assert node.code_version, name
    assert "-obs" in _node("v5_dataset").code_version  # the engine's observation layout is part of it


def test_retry_policies_only_where_a_retry_is_safe():
    """Collection resumes and publication is atomic: they retry transient trouble. Training,
    benchmark and promotion are decisions that a retry would repeat: they do not."""
    ops = {}
    for assets_def in defs.assets:
        if isinstance(assets_def, dg.AssetsDefinition):
            for key in assets_def.keys:
                ops[key.to_user_string()] = assets_def.op.retry_policy
    for name in ("battle_sessions", "v5_dataset", "nemesis_lite_split"):
        assert ops[name] is not None and ops[name].max_retries >= 1, name
    for name in ("v5_policy_checkpoint", "policy_benchmark", "promoted_policy"):
        assert ops[name] is None, name


def test_automation_waits_for_blocking_checks():
    def labels(condition) -> set[str]:
        out = {condition.get_label() or type(condition).__name__}
        for child in getattr(condition, "children", []) or []:
            out |= labels(child)
        return out

    for name in ("v5_dataset", "nemesis_lite_split"):
        condition = _node(name).automation_condition
        assert {"eager", "all_deps_blocking_checks_passed"} <= labels(condition), name
    for name in ("battle_sessions", "v5_policy_checkpoint", "policy_benchmark", "promoted_policy"):
        assert _node(name).automation_condition is None, name
    sensor = defs.resolve_sensor_def("automation_sensor")
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING


def test_gates_and_their_severity():
    """The gates are blocking checks (automation waits for them); promoted_policy is one pointer."""
    graph = _graph()
    blocking = {c.name for c in graph.asset_check_keys if graph.get_check_spec(c).blocking}
    assert {"trace_integrity", "v5_policy_training_ready", "v5_dataset_valid", "benchmark_passed"} <= blocking
    assert not {"no_degraded_play", "nemesis_lite_ready"} & blocking
    assert _node("promoted_policy").partitions_def is None
    assert _node("policy_benchmark").partitions_def is not None


def test_every_partitioned_check_says_how_the_checks_tab_aggregates_partitions():
    """Dagster 1.13's Checks tab shows a partitioned check failed while any partition's latest
    evaluation failed or did not run, even when its latest execution passed (issue 52: an operator
    read ``no_raw_identifiers`` as failing): each such check's description, shown in that tab, says
    so, the production checks included."""
    from extrarlhf_assets.defs.production import with_production
    from extrarlhf_assets.partitions import PER_PARTITION_NOTE

    graph = with_production(defs).resolve_asset_graph()
    partitioned = {key: graph.get_check_spec(key) for key in graph.asset_check_keys
                   if graph.get_check_spec(key).partitions_def is not None}
    assert {"no_raw_identifiers", "replay_verified", "trace_integrity"} <= {k.name for k in partitioned}
    silent = [f"{k.asset_key.to_user_string()}:{k.name}" for k, spec in partitioned.items()
              if not (spec.description or "").endswith(PER_PARTITION_NOTE)]
    assert silent == []
