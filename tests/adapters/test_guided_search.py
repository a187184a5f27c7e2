"""The network-guided search actor ``search:<checkpoint>?sims=N&guide=<leaf>`` (adapters/guided.py,
DESIGN 14.1): spec parsing and its errors, determinism, the information-set rule, provenance in
traces, the fallback when the network cannot run, and a cheap strength smoke test."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from mcp import Client

import engine
from adapters import AdapterError, GreedyPolicy, ModelPolicy
from adapters.guided import CONSIDERED, GuidedSearchPolicy
from adapters.search import information_set, parse_search, parse_search_spec
from extrarlhf.checkpoints.registry import CheckpointRegistry
from extrarlhf.core.errors import InvalidArgument
from extrarlhf.policies.benchmarking import benchmark_models
from extrarlhf.runtime.actors import resolve_actor
from extrarlhf.runtime.match import start_match
from extrarlhf.runtime.series import run_series
from extrarlhf.runtime.sessions import SessionStore
from tests import onnx_factory
from mcp_server import build_server
from tests.adapters.test_search import _mid_battle, _records, _same_view_other_hidden_cards
from tests.mcp_helpers import Checked, read_jsonl
from tests.test_schemas import errors as schema_errors
from tests.trace_helpers import read_records


@pytest.fixture
def guide(tmp_path: Path) -> tuple[str, str]:
    """A registered v5 checkpoint (the scripted one: cost-and-attack logits, hero-health value)
    and an action_onnx one: (checkpoints dir, v5 name)."""
    root = tmp_path / "checkpoints"
    registry = CheckpointRegistry(root)
    registry.register("scripted", onnx_factory.save(onnx_factory.v5_model(), tmp_path / "s.onnx"), "v5")
    registry.register("v4net", onnx_factory.save(onnx_factory.action_model(), tmp_path / "a.onnx"), "action_onnx")
    return str(root), "scripted"


def _policy(path: str | Path, sims: int = 16, seed: int = 5, guide: str = "value", **kw) -> GuidedSearchPolicy:
    return GuidedSearchPolicy(ModelPolicy(path, "v5"), sims, seed, guide=guide, **kw)


@pytest.fixture
def model_path(tmp_path: Path) -> Path:
    return Path(onnx_factory.save(onnx_factory.mlp_v5(16, seed=3), tmp_path / "m.onnx"))


# ---------------------------------------------------------------------------- specs
def test_guided_spec_parsing_and_canonical_form(guide):
    checkpoints_dir, name = guide
    parsed = parse_search(f"search:{name}?sims=16&guide=mix&turns=2")
    assert (parsed.rollout, parsed.sims, parsed.play, parsed.guide, parsed.turns) == (name, 16, None, "mix", 2)
    assert parse_search_spec(f"search:{name}?guide=value") == (name, 32, None)
    assert parse_search(f"search:{name}?guide=value").turns == 3  # the default, as the teacher's rollouts
    assert parse_search(f"search:{name}?sims=8").guide is None  # without guide: the checkpoint rolls out
    actor = resolve_actor(f"search:{name}?guide=value&sims=8", "opponent", checkpoints_dir)
    assert actor.spec == f"search:{name}?sims=8&guide=value&turns=3" and actor.kind == "search"
    weights = CheckpointRegistry(checkpoints_dir).get(name).weights_hash
    assert actor.as_dict()["search"] == {"sims": 8, "rollout": {"spec": name, "kind": "v5", "weights_hash": weights},
                                         "guide": {"leaf": "value", "turns": 3, "considered": CONSIDERED}}
    policy = actor.make_policy(3)
    assert isinstance(policy, GuidedSearchPolicy) and policy.spec == actor.spec and policy.weights_hash == weights


@pytest.mark.parametrize("spec, message", [
    ("search:{name}?guide=values", "guide must be one of value, mix, rollout (how the network scores the leaves), "
                                   "got 'values'"),
    ("search:{name}?guide=", "guide must be one of value, mix, rollout"),
    ("search:{name}?guide=value&turns=0", "turns must be an integer in 1..8, got '0'"),
    ("search:{name}?guide=value&turns=9", "turns must be an integer in 1..8, got '9'"),
    ("search:{name}?turns=2", "turns is an option of the network-guided search; add guide=value"),
    ("search:{name}?guide=mix&guide=value", "option 'guide' is given twice"),
    ("search:baseline:greedy?guide=value", "guide=value needs a checkpoint (a v5 network) to guide the search, "
                                           "not 'baseline:greedy'"),
    ("search:{name}?sims=0&guide=value", "sims must be an integer in 1..4096, got '0'"),
    ("search:{name}?guide=value&depth=2", "unknown option 'depth'; options: sims, play, guide, turns"),
])
def test_bad_guided_specs_say_what_is_wrong(guide, spec, message):
    checkpoints_dir, name = guide
    spec = spec.format(name=name)
    with pytest.raises(AdapterError) as direct:
        parse_search(spec)
    assert message in str(direct.value) and "&guide=value'" in str(direct.value)  # and an example of a good one
    with pytest.raises(InvalidArgument) as resolved:
        resolve_actor(spec, "opponent", checkpoints_dir)
    assert str(resolved.value).startswith("opponent: ") and message in str(resolved.value)


def test_a_guide_that_is_not_a_v5_network_is_refused(guide, model_path):
    checkpoints_dir, _ = guide
    with pytest.raises(InvalidArgument) as exc:
        resolve_actor("search:v4net?guide=value", "p1_model", checkpoints_dir)
    assert "needs a v5 checkpoint (policy logits and a value)" in str(exc.value) and "'action_onnx'" in str(exc.value)
    with pytest.raises(AdapterError, match="needs a v5 checkpoint"):
        GuidedSearchPolicy(GreedyPolicy())
    for bad, message in [({"sims": 0}, "sims must be"), ({"guide": "best"}, "guide must be one of"),
                         ({"turns": 0}, "turns must be an integer in 1..8")]:
        with pytest.raises(AdapterError, match=message):
            GuidedSearchPolicy(ModelPolicy(model_path, "v5"), **bad)


# ---------------------------------------------------------------------------- determinism and information sets
@pytest.mark.parametrize("leaf", ["value", "mix", "rollout"])
def test_deterministic_for_a_seed(model_path, leaf):
    state = _mid_battle(7)
    a = _policy(model_path, guide=leaf).decide(state)
    b = _policy(model_path, guide=leaf).decide(state.clone())
    assert a == b and a.policy_record() == b.policy_record() and a.warning is None
    record, legal = a.policy_record(), state.legal_actions()
    assert len(record["action_values"]) == len(record["visits"]) == len(record["probabilities"]) == len(legal)
    assert abs(sum(record["probabilities"]) - 1.0) < 1e-4
    assert sum(record["visits"]) >= 16 // 2 and record["value"] == record["action_values"][legal.index(a.action_id)]
    assert all(v is None or -1.0 <= v <= 1.0 for v in record["action_values"])
    assert sum(n > 0 for n in record["visits"]) <= CONSIDERED
    assert state == _mid_battle(7)  # the search never changes the state it decides in
    other_seed = [_policy(model_path, guide=leaf, seed=s).decide(state).policy_record() for s in range(6)]
    assert len({json.dumps(r, sort_keys=True) for r in other_seed}) > 1  # the seed draws the worlds and the noise


def test_searches_side_by_side_share_network_runs_and_decide_as_alone(model_path, monkeypatch):
    import adapters.guided as guided
    from adapters import decide_many

    states = [_mid_battle(seed) for seed in (3, 8, 21, 40, 7)]
    policies = [_policy(model_path, guide=leaf, seed=k) for k, leaf in enumerate(["mix", "value", "rollout", "mix",
                                                                                   "value"])]
    alone = [p.decide(s) for p, s in zip(policies, states)]
    runs = []
    real = guided._run_network
    monkeypatch.setattr(guided, "_run_network", lambda policy, batch, **kw: runs.append(len(batch)) or
                        real(policy, batch, **kw))
    together = decide_many([(GreedyPolicy(), states[0]), *zip(policies, states)])
    assert [d.policy_record() for d in together[1:]] == [d.policy_record() for d in alone]
    assert [d.action_id for d in together[1:]] == [d.action_id for d in alone]
    assert together[0].action_id == GreedyPolicy().act(states[0])
    assert len(runs) <= 5 and max(runs) > 10  # a root run and a run per halving round, for all five at once


def test_leaves_are_scored_by_the_value_graph_alone_once_it_matches_the_whole_network(model_path):
    import adapters.guided as guided

    policy = ModelPolicy(model_path, "v5")
    guided._VALUE_GRAPHS.pop(policy.model.file_sha256, None)
    states = [_mid_battle(seed) for seed in (3, 8, 21)]
    whole = guided._run_network(policy, states)
    assert guided._run_network(policy, states, value_only=True)[0] is None  # the first run checks the graph...
    session, unchecked = guided._VALUE_GRAPHS[policy.model.file_sha256]
    assert not unchecked  # ... against the whole network: the same bits
    alone = guided._run_network(policy, states, value_only=True)
    assert alone[0] is None and np.array_equal(alone[1], whole[1]) and len(whole[0]) == 3
    assert guided._extract_value(ModelPolicy(onnx_factory.save(onnx_factory.v5_model(), model_path.parent / "s.onnx"),
                                             "v5").model) is not None


def test_the_cores_greedy_rollout_plays_what_greedy_plays_from_python():
    from engine.native_state import NativeState

    state = _mid_battle(5, decisions=10)
    if not isinstance(state, NativeState) or not hasattr(state._core, "greedy_until"):
        pytest.skip("a native core with State.greedy_until (native/src/binding.cc) is not installed")
    for horizon in (state.turn + 1, state.turn + 3, state.turn + 200):
        by_core, by_python = state.clone(), state.clone()
        steps = by_core._core.greedy_until(horizon)
        played = 0
        while not by_python.is_terminal and by_python.turn < horizon:
            by_python.apply(GreedyPolicy().act(by_python))
            played += 1
        assert steps == played > 0 and by_core.state_hash() == by_python.state_hash()
        assert by_core.players == by_python.players and by_core.legal_actions() == by_python.legal_actions()
    assert by_core.is_terminal  # 200 turns on: the battle ended


def test_two_states_the_player_cannot_tell_apart_give_the_same_decision(model_path):
    compared = 0
    for seed in (3, 8, 21, 40):
        state = _mid_battle(seed)
        other = _same_view_other_hidden_cards(state)
        player = state.to_move
        assert other.players[2 - player].hand != state.players[2 - player].hand
        assert information_set(other, player) == information_set(state, player)
        for leaf in ("value", "mix"):
            a = _policy(model_path, sims=12, guide=leaf).decide(state)
            b = _policy(model_path, sims=12, guide=leaf).decide(other)
            assert (a.action_id, a.policy_record()) == (b.action_id, b.policy_record())
            compared += sum(v is not None for v in a.policy_record()["action_values"])
    assert compared > 12  # the values (the network's, on the worlds) agree, not only the choices


def test_a_series_with_the_guided_search_is_deterministic_and_records_its_provenance(tmp_path, guide):
    checkpoints_dir, name = guide
    spec = f"search:{name}?sims=6&guide=mix"
    weights = CheckpointRegistry(checkpoints_dir).get(name).weights_hash
    out = []
    for group in ("a", "b"):
        res = run_series(tmp_path / "sessions", group, 2, p1_model=spec, opponent="baseline:greedy", seed=3,
                         checkpoints_dir=checkpoints_dir)
        assert res["ran"] == 2 and res["summary"]["by_status"]["finished"] == 2
        store = SessionStore(tmp_path / "sessions")
        battles = []
        for entry in store.read_catalog(group):
            folder = store.battle_dir(group, entry["battle_id"]) / "v5"
            meta, actions = read_jsonl(folder / "meta.jsonl")[0], read_records(folder, "actions.jsonl")
            assert meta["actors"]["p1"]["search"] == {
                "sims": 6, "rollout": {"spec": name, "kind": "v5", "weights_hash": weights},
                "guide": {"leaf": "mix", "turns": 3, "considered": CONSIDERED}}
            assert meta["actors"]["p1"]["spec"] == f"search:{name}?sims=6&guide=mix&turns=3"
            assert schema_errors("meta", meta) == []
            assert [e for r in actions for e in schema_errors("action", r)] == []
            battles.append([(r["action_id"], r["policy"]) for r in actions])
        out.append(battles)
    assert out[0] == out[1] and len(out[0]) == 2


# ---------------------------------------------------------------------------- MCP
@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_mcp_plays_and_describes_a_guided_search_and_refuses_a_bad_one(tmp_path, guide, anyio_backend):
    checkpoints_dir, name = guide
    server = build_server(tmp_path / "sessions", tmp_path / "datasets", checkpoints_dir)
    async with Client(server) as client:
        c = Checked(client)
        done = await c.ok("start_battle", {"p1_actor_type": "rl", "p1_model": "baseline:greedy", "group": "m",
                                           "opponent": f"search:{name}?sims=2&guide=value", "seed": 4})
        assert done["done"]
        finished = await c.ok("finish_battle", {"match_id": done["match_id"]})
        meta = read_jsonl(finished["paths"]["meta.jsonl"])[0]
        assert meta["actors"]["p2"]["search"]["guide"] == {"leaf": "value", "turns": 3, "considered": CONSIDERED}
        described = await c.ok("inspect_model", {"name": f"search:{name}?guide=mix&sims=4"})
        assert described["spec"] == f"search:{name}?sims=4&guide=mix&turns=3"
        assert f"guided by {name}" in described["description"] and described["rollout"]["kind"] == "v5"
        error = await c.err("start_battle", {"p1_actor_type": "llm", "group": "m2",
                                             "opponent": f"search:{name}?guide=deep"}, "invalid_argument")
        assert "guide must be one of value, mix, rollout" in error["message"]
    assert not (tmp_path / "sessions" / "m2").exists()


# ---------------------------------------------------------------------------- the network cannot run
def test_a_network_that_cannot_run_degrades_to_the_greedy_rollout_teacher(tmp_path, guide):
    checkpoints_dir, name = guide
    state = _mid_battle(11)
    broken = _policy(onnx_factory.save(onnx_factory.v5_nan_value(), tmp_path / "nan.onnx"), sims=8, guide="value")
    decision = broken.decide(state)
    assert decision.warning is not None and decision.warning["kind"] == "non_finite_output"
    assert decision.warning["fallback"] == "search:baseline:greedy?sims=8"
    assert "the guiding network" in decision.warning["message"]
    assert decision.action_id == broken.fallback.decide(state).action_id
    path = CheckpointRegistry(checkpoints_dir).get(name).path
    Path(path).write_bytes(onnx_factory.mlp_v5(16, seed=4).SerializeToString())  # changed after registration
    match = start_match(SessionStore(tmp_path / "sessions"), "g", "rl", opponent=f"search:{name}?sims=4&guide=value",
                        p1_model="baseline:greedy", seed=1, checkpoints_dir=checkpoints_dir)
    match.run()
    result = match.finish()
    assert result["status"] == "finished" and result["degraded"]
    warning = result["policy_warnings"][0]
    assert warning["player"] == 2 and "the guiding network" in warning["message"]
    assert schema_errors("meta", _records(result["paths"])[0]) == []


def test_a_network_that_times_out_is_disabled_as_a_model_policy_would_be(tmp_path):
    import time

    path = onnx_factory.save(onnx_factory.spinning("v5"), tmp_path / "spin.onnx")
    policy = GuidedSearchPolicy(ModelPolicy(path, "v5", timeout_s=0.05, max_timeouts=2), 8, 1, guide="mix")
    states = [_mid_battle(seed) for seed in (3, 8, 21)]
    first, second = policy.decide(states[0]), policy.decide(states[1])
    assert first.warning["kind"] == second.warning["kind"] == "timeout"
    assert "1 timeout(s) in a row" in first.warning["message"] and "now disabled" in second.warning["message"]
    started = time.perf_counter()
    third = policy.decide(states[2])  # disabled: the greedy-rollout teacher decides without running the network
    assert third.warning["kind"] == "timeout" and "disabled for the rest of this battle" in third.warning["message"]
    assert time.perf_counter() - started < 1.0 and third.action_id == policy.fallback.decide(states[2]).action_id


# ---------------------------------------------------------------------------- strength
def test_the_search_lifts_a_weak_network_past_greedy_on_fixed_paired_seeds(guide):
    """A cheap smoke test (8 pairs, fixed seeds, so deterministic): the scripted v5 network
    alone (cost-and-attack logits) loses nearly every battle to greedy; the search it guides
    (its prior, and its hero-health value mixed with the greedy evaluation) wins more than it
    loses."""
    checkpoints_dir, name = guide
    scores = {}
    for spec in (name, f"search:{name}?sims=16&guide=mix"):
        report = benchmark_models(spec, "baseline:greedy", n_pairs=8, seed=2, baseline_pairs=0, stop_early=False,
                                  checkpoints_dir=checkpoints_dir, write=False)
        assert report["valid"], report["invalid_reasons"]
        scores[spec] = report["match"]
    alone, searched = scores[name], scores[f"search:{name}?sims=16&guide=mix"]
    assert searched["wins"] > searched["losses"] and searched["wins"] >= alone["wins"] + 6, (alone, searched)
