"""Numbers and types at the edges (issue 14, item 9): every tool schema refuses what the core
refuses, with the core's own bounds.

Found: ``inspect_session`` with huge paging values gave internal_error, the schema allowed
``elo0=-1000`` which the core refuses, and Elo arguments accepted strings and booleans.

* For every numeric leaf of every published input schema (top-level arguments, array items,
  keys of object arguments), a boolean, a numeric string, null, an array, an object and every
  out-of-range value is refused by argument validation as ``invalid_argument`` naming that
  argument (never accepted, never ``internal_error``); the bounds themselves are accepted and
  arrive unchanged (an echo server: the real server with its tool bodies replaced).
* Each schema bound equals the core's: the core function that checks the value is called at
  the bound and just beyond it (:data:`PROBES` must cover every numeric leaf, so a new numeric
  argument without its core check fails here).
* Over the real stdio server: the exact cases of the issue.
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from engine.actions import check_action_id
from extrarlhf.core.readiness import ReadinessPolicy
from extrarlhf.datasets.assign import check_fractions
from extrarlhf.policies import benchmarking
from extrarlhf.policies import ladder as core_ladder
from extrarlhf.production.export import check_max_rows
from extrarlhf.runtime import codenames
from extrarlhf.runtime import series as core_series
from extrarlhf.runtime.match import check_seed
from mcp_server import build_server
from mcp_server.paging import paginate
from tests.mcp_helpers import Checked, stdio_params
from tests.mcp_server.echo_server import install_echo
from tests.mcp_server.schema_walk import Leaf, arguments_with, leaves

Probe = Callable[[Any], bool]  # True when the core accepts the value for that argument


@pytest.fixture
def anyio_backend():
    return "asyncio"


def _accepts(call: Callable[[], Any], refusal: str) -> bool:
    """Whether ``call()`` gets past the check of one argument: it may fail later for another
    reason (an unknown model, a missing dataset), but not with ``refusal`` (a regex)."""
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - classified by its message
        return not re.search(refusal, str(exc))
    return True


def _probes(tmp: Path) -> Callable[[Leaf], list[Probe]]:
    def bench(param: str) -> Probe:
        # the same model twice is refused after every numeric check: nothing is played
        return lambda v: _accepts(lambda: benchmarking.benchmark_models(
            "baseline:greedy", "baseline:greedy", write=False, checkpoints_dir=tmp / "c", **{param: v}),
            rf"^{param} must be (a number|an integer)")

    def series(param: str) -> Probe:
        # an unknown model is refused after the numeric checks: nothing is played or written
        return lambda v: _accepts(lambda: core_series.run_series(
            tmp / "s", "probe", **{"n_battles": 1, param: v}, p1_model="no-such-model",
            checkpoints_dir=tmp / "c"), rf"^{param} must be (a number|an integer)")

    def train(param: str) -> Probe:
        from extrarlhf.training import train_policy  # a missing dataset is refused after the checks
        return lambda v: _accepts(lambda: train_policy("no-such-dataset", "probe", **{param: v},
                                                       datasets_dir=tmp / "d", checkpoints_dir=tmp / "c"),
                                  rf"^{param} must be (a number|an integer)")

    def ladder(param: str) -> Probe:
        # an empty registry, measure and write off: nothing is played or written
        return lambda v: _accepts(lambda: core_ladder.policy_ladder(tmp / "c", measure=False, write=False,
                                                                    **{param: v}), rf"^{param} must be")

    def lease(v: Any) -> bool:
        ok = _accepts(lambda: codenames.claim(tmp / "leases", "Probe", "g", stale_after_s=v), "^stale_after_s")
        codenames.release(tmp / "leases", "Probe")
        return ok

    def fraction(v: Any) -> bool:
        return _accepts(lambda: check_fractions([v, 0.0, 0.0]), "finite numbers >= 0")

    def judged(param: str) -> Probe:
        from extrarlhf.preferences import list_preferences  # a missing pool is refused after the checks
        return lambda v: _accepts(lambda: list_preferences("no-such-pool", **{param: v},
                                                           preferences_dir=tmp / "p"), rf"^{param} must be")

    fixed: dict[str, list[Probe]] = {
        "list_preferences.limit": [judged("limit")],
        "list_preferences.offset": [judged("offset")],
        "submit_action.action_id": [lambda v: _accepts(lambda: check_action_id(v), "action id")],
        "start_battle.seed": [lambda v: _accepts(lambda: check_seed(v), "^seed must be")],
        "claim_codename.stale_after_s": [lease],
        "export_production_v5_dataset.max_rows": [lambda v: _accepts(lambda: check_max_rows(v), "max_rows")],
        "export_returnclock_dataset.max_rows": [lambda v: _accepts(lambda: check_max_rows(v), "max_rows")],
        "run_pipeline.n_battles": [series("n_battles")],
        "run_pipeline.epochs": [train("epochs")],
        "run_pipeline.temperature": [train("temperature")],
        "run_pipeline.n_pairs": [bench("n_pairs")],
        "run_pipeline.baseline_pairs": [bench("baseline_pairs")],
        "run_pipeline.max_workers": [series("max_workers"), bench("max_workers")],
        "run_pipeline.seed": [series("seed"), train("seed"), bench("seed")],
    }

    def probes(leaf: Leaf) -> list[Probe]:
        if leaf.name in fixed:
            return fixed[leaf.name]
        if leaf.argument == "limit":  # paged tools: the paging module is their check
            return [lambda v: _accepts(lambda: paginate([], tool="t", limit=v, cursor=None), "limit must be")]
        if leaf.argument in ("policy", "readiness_policy"):
            return [lambda v, key=leaf.key: _accepts(lambda: ReadinessPolicy(**{key: v}), "readiness policy")]
        if leaf.argument == "fractions":
            return [fraction]
        if leaf.tool == "benchmark_models":
            return [bench(leaf.argument)]
        if leaf.tool == "run_series":
            return [series(leaf.argument)]
        if leaf.tool == "train_policy":
            return [train(leaf.argument)]
        if leaf.tool == "policy_ladder":
            return [ladder(leaf.argument)]
        raise AssertionError(f"{leaf.name}: no core probe; add the core function that checks it to PROBES")

    return probes


def _numeric_leaves(tools: list[Any]) -> list[Leaf]:
    return [leaf for tool in tools for leaf in leaves(tool) if leaf.type in ("integer", "number")]


def _beyond(leaf: Leaf, value: float, direction: int) -> float:
    if leaf.type == "integer":
        return value + direction
    return math.nextafter(value, direction * math.inf)


def _out_of_range(leaf: Leaf) -> list[Any]:
    s = leaf.schema
    out: list[Any] = []
    if "minimum" in s:
        out.append(_beyond(leaf, s["minimum"], -1))
    if "exclusiveMinimum" in s:
        out += [s["exclusiveMinimum"], _beyond(leaf, s["exclusiveMinimum"], -1)]
    if "maximum" in s:
        out += [_beyond(leaf, s["maximum"], +1), 2 ** 70]
    if "exclusiveMaximum" in s:
        out += [s["exclusiveMaximum"], _beyond(leaf, s["exclusiveMaximum"], +1)]
    return out


def _in_range(leaf: Leaf) -> list[Any]:
    s = leaf.schema
    out: list[Any] = []
    if "minimum" in s:
        out.append(s["minimum"])
    if "exclusiveMinimum" in s:
        out.append(_beyond(leaf, s["exclusiveMinimum"], +1))
    if "maximum" in s:
        out.append(s["maximum"])
    if "exclusiveMaximum" in s:
        out.append(_beyond(leaf, s["exclusiveMaximum"], -1))
    if "maximum" not in s and "exclusiveMaximum" not in s:
        out.append(2 ** 70 if leaf.type == "integer" else 1e300)  # the core has no upper bound either
    return out


@pytest.mark.anyio
async def test_every_numeric_argument_refuses_wrong_types_and_out_of_range_values_by_schema(tmp_path):
    server = install_echo(build_server(tmp_path / "s", tmp_path / "d", tmp_path / "c"))
    async with Client(server) as client:
        c = Checked(client)
        tools = (await client.list_tools()).tools
        by_name = {tool.name: tool for tool in tools}
        numeric = _numeric_leaves(tools)
        assert len(numeric) >= 40
        assert {"benchmark_models.elo0", "benchmark_models.elo1", "inspect_session.limit",
                "dataset_readiness.policy.min_v5_battles", "split_v5_training_dataset.fractions[0]"} <= \
            {leaf.name for leaf in numeric}
        for leaf in numeric:
            s = leaf.schema
            assert "minimum" in s or "exclusiveMinimum" in s, f"{leaf.name} has no lower bound"
            # (no inf or NaN: JSON cannot carry them -- the client sends null, the checker refuses the tokens)
            wrong_types: list[Any] = [True, False, "5", "0", "1.5", "1e3", [1], {"value": 1}]
            if leaf.key is not None or not leaf.nullable:
                wrong_types.append(None)
            if leaf.type == "integer":
                wrong_types += [1.5, 2.0]
            tool = by_name[leaf.tool]
            for value in wrong_types + _out_of_range(leaf):
                error = await c.err(leaf.tool, arguments_with(leaf, value, tool))
                assert error["code"] == "invalid_argument", (leaf.name, value, error)
                assert any(field.startswith(leaf.argument) for field in error["details"]["fields"]), \
                    (leaf.name, value, error)
            for value in _in_range(leaf):
                sent = arguments_with(leaf, value, tool)
                received = (await c.ok(leaf.tool, sent))["received"][leaf.argument]["value"]
                got = received if leaf.key is None else received[leaf.key]
                assert got == value and not isinstance(got, bool), (leaf.name, value, received)
                assert isinstance(got, int if leaf.type == "integer" else float), (leaf.name, value, got)


@pytest.mark.anyio
async def test_every_schema_bound_is_the_cores_bound(tmp_path):
    server = build_server(tmp_path / "s", tmp_path / "d", tmp_path / "c")
    async with Client(server) as client:
        tools = (await client.list_tools()).tools
    probes_for = _probes(tmp_path)
    checked = 0
    for leaf in _numeric_leaves(tools):
        probes = probes_for(leaf)
        for value in _in_range(leaf):
            assert all(probe(value) for probe in probes), f"{leaf.name}: the core refuses {value!r}, the schema not"
        for value in _out_of_range(leaf):
            assert any(not probe(value) for probe in probes), f"{leaf.name}: the core accepts {value!r}, the " \
                                                              f"schema refuses it"
        checked += 1
    assert checked >= 40
    assert not (tmp_path / "s").exists() or not any((tmp_path / "s").iterdir())  # the probes played nothing


@pytest.mark.anyio
async def test_the_issue_cases_over_stdio(tmp_path):
    async with Client(stdio_params(tmp_path / "sessions")) as client:
        c = Checked(client)
        for elo0 in (-1000, 1000, "5", True, "-1000"):
            error = await c.err("benchmark_models", {"candidate": "baseline:random", "elo0": elo0},
                                "invalid_argument")
            assert error["details"]["fields"] == ["elo0"], error
        for args in ({"alpha": 0.5}, {"beta": "0.05"}, {"elo1": False}, {"n_pairs": "10"}):
            await c.err("benchmark_models", {"candidate": "baseline:random", **args}, "invalid_argument")
        error = await c.err("benchmark_models", {"candidate": "baseline:random", "elo0": 20, "elo1": 10},
                            "invalid_argument")  # a cross-argument rule is the core's, and it says so
        assert "elo0 must be below elo1" in error["message"]

        start = await c.ok("start_battle", {"p1_actor_type": "human", "group": "edges", "seed": 1})
        await c.ok("abandon_battle", {"match_id": start["match_id"]})
        for limit in (2 ** 70, -2 ** 70, 0, 501, True, "40", 40.0):
            error = await c.err("inspect_session", {"group": "edges", "limit": limit}, "invalid_argument")
            assert error["details"]["fields"] == ["limit"]
        for key in ([2 ** 70, "b"], [-2 ** 64, "b"], [10 ** 30, "b"], ["b", 1], [True, "b"], [1.5, "b"], [1],
                    [2 ** 63 - 1, "b" * 500]):
            raw = json.dumps({"t": "inspect_session", "s": "0" * 16, "k": key}).encode()
            cursor = "c1" + base64.urlsafe_b64encode(raw).decode().rstrip("=")
            error = await c.err("inspect_session", {"group": "edges", "cursor": cursor}, "invalid_argument")
            assert "cursor" in error["message"]
        await c.err("inspect_session", {"group": "edges", "cursor": "c1" + "A" * 3000}, "invalid_argument")
        for action_id in (163, -1, 2 ** 70, "1", True):
            await c.err("submit_action", {"match_id": "m_00000000_" + "0" * 24, "action_id": action_id},
                        "invalid_argument")
        # values the core accepts without an upper bound: accepted, and answered (no 64-bit limit)
        huge = await c.ok("dataset_readiness", {"group": "edges", "policy": {"min_v5_battles": 2 ** 70}})
        assert json.dumps(huge).count(str(2 ** 70)) >= 1
        lease = (await c.ok("claim_codename", {"codename": "Long", "group": "edges", "stale_after_s": 1e300}))
        assert lease["lease"]["stale_after_s"] == 1e300
        await c.ok("release_codename", {"codename": "Long"})
