"""Adapters: kind registry, ONNX contracts and detection, weights_hash, scripted models that
provably play, every degraded path, batching and seeded sampling. Real ONNX files run by
onnxruntime throughout (tests/onnx_factory.py builds them)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import engine
from adapters import (AdapterError, Decision, GreedyPolicy, KindMismatch, ModelPolicy, RandomPolicy, check_kind,
                      decide_many, default_registry, detect_kind, load_factory, signature, weights_hash)
from adapters.onnx_contracts import contract_signature
from adapters.onnx_models import build_inputs
from adapters.registry import DecidingPolicy, builtin_registry
from tests import onnx_factory as f


# ------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, str]:
    """Every factory model saved once as a real .onnx file."""
    root = tmp_path_factory.mktemp("models")
    builders = {
        "v5": f.v5_model, "v4": f.action_model, "legacy": f.legacy_model, "mlp": lambda: f.mlp_v5(64, seed=1),
        "nan": f.v5_nan, "posinf": f.v5_posinf, "nan_value": f.v5_nan_value, "neginf": f.v5_all_neginf,
        "wrong_logits": f.v5_wrong_logits_shape, "wrong_value": f.v5_wrong_value_shape,
        "missing_value": f.v5_missing_value, "extra_input": f.v5_extra_input, "runtime": f.v5_runtime_error,
        "legacy_illegal": f.legacy_only_illegal_finite, "log_cost": f.v5_log_cost, "bool_mask": f.v5_bool_mask,
    }
    paths = {name: f.save(build(), root / f"{name}.onnx") for name, build in builders.items()}
    garbage = root / "garbage.onnx"
    garbage.write_bytes(b"this is not a protobuf \x00\xff" * 10)
    paths["garbage"] = str(garbage)
    return paths


def sample_states(n: int, seed: int = 0, min_legal: int = 2) -> list[engine.State]:
    """Real mid-battle states (random play), each with at least ``min_legal`` legal actions."""
    states: list[engine.State] = []
    rng = engine.SplitMix64(seed)
    battle = seed
    while len(states) < n:
        state = engine.new_battle(battle)
        battle += 1
        while not state.is_terminal and len(states) < n:
            legal = state.legal_actions()
            if len(legal) >= min_legal and rng.below(3) == 0:
                states.append(state.clone())
            state.apply(legal[rng.below(len(legal))])
    return states


@pytest.fixture(scope="module")
def states() -> list[engine.State]:
    return sample_states(48, seed=11)


# ------------------------------------------------------------------------------ registry
def test_builtin_kinds_alias_and_create(models):
    registry = default_registry()
    assert {"baseline", "legacy_onnx", "action_onnx", "v5"} <= set(registry.kinds())
    assert registry.aliases["v4"] == "action_onnx"
    assert "v4" not in registry.kinds()
    v4 = registry.create("v4", path=models["v4"], seed=3)
    assert isinstance(v4, ModelPolicy) and v4.kind == "action_onnx" and not v4.degraded
    v5 = registry.create("v5", path=models["v5"], spec="my-model")
    assert v5.spec == "my-model" and v5.weights_hash == weights_hash(models["v5"])
    rnd = registry.create("baseline", name="random", seed=5)
    assert isinstance(rnd, RandomPolicy)
    state = engine.new_battle(1)
    assert rnd.decide(state) == Decision(RandomPolicy(5).act(state))


def test_registry_refusals():
    registry = builtin_registry()
    with pytest.raises(AdapterError) as err:
        registry.create("v6", path="x.onnx")
    assert err.value.code == "not_found" and "v5" in str(err.value) and "v4 -> action_onnx" in str(err.value)
    with pytest.raises(AdapterError) as err:
        registry.create("v5", path="x.onnx", temperature=2.0)
    assert err.value.code == "invalid_argument" and "temperature" in str(err.value)
    with pytest.raises(AdapterError) as err:
        registry.create("baseline", name="clever")
    assert err.value.code == "not_found" and "greedy" in str(err.value)
    with pytest.raises(AdapterError) as err:
        registry.register("v5", lambda: None)
    assert err.value.code == "already_exists"
    with pytest.raises(AdapterError):
        registry.register("v4", lambda: None)  # an alias is not a free kind name
    with pytest.raises(AdapterError):
        registry.register("Bad Kind", lambda: None)
    with pytest.raises(AdapterError):
        registry.register("fine", 42)  # type: ignore[arg-type]


def test_custom_kind_from_module_path():
    registry = builtin_registry()
    registry.register("end_turn", "tests.onnx_factory:end_turn_factory")
    assert "end_turn" in registry.kinds()
    policy = registry.create("end_turn", seed=9)
    assert isinstance(policy, DecidingPolicy)  # act-only policies get decide/decide_batch
    state = sample_states(1, seed=3, min_legal=3)[0]
    assert policy.decide(state) == Decision(engine.END_TURN)
    assert policy.decide_batch([state, state]) == [Decision(engine.END_TURN)] * 2
    registry.register("end_turn", f.EndTurnPolicy, replace=True)  # a class is a factory too
    assert registry.create("end_turn").act(state) == engine.END_TURN
    assert "end_turn" not in default_registry().kinds()  # a fresh registry does not leak into the default


@pytest.mark.parametrize("path, code, needle", [
    ("tests.onnx_factory", "invalid_argument", "package.module:factory"),
    ("tests/onnx_factory.py:make", "invalid_argument", "package.module:factory"),
    ("tests.no_such_module:factory", "not_found", "tests.no_such_module"),
    ("tests.onnx_factory:no_such_factory", "not_found", "end_turn_factory"),  # lists what exists
    ("tests.onnx_factory:NOT_CALLABLE", "invalid_argument", "not a callable"),
])
def test_load_factory_errors(path, code, needle):
    with pytest.raises(AdapterError) as err:
        load_factory(path)
    assert err.value.code == code
    assert needle in str(err.value)


def test_load_factory_resolves_dotted_attributes():
    assert load_factory("tests.onnx_factory:EndTurnPolicy.act") is f.EndTurnPolicy.act


# ------------------------------------------------------------------------------ kinds
@pytest.mark.parametrize("name, kind", [("legacy", "legacy_onnx"), ("v4", "action_onnx"), ("v5", "v5"),
                                        ("mlp", "v5"), ("bool_mask", "v5")])
def test_detect_kind(models, name, kind):
    sig = signature(models[name])
    assert detect_kind(sig) == kind
    check_kind(kind, sig)  # no error


def test_signature_reports_names_types_and_shapes(models):
    sig = signature(models["v5"])
    assert sig["inputs"] == [
        {"name": "obs", "type": "float", "shape": ["N", engine.OBS_DIM]},
        {"name": "action_features", "type": "float", "shape": ["N", "A", engine.ACTION_FEATURE_DIM]},
        {"name": "action_mask", "type": "float", "shape": ["N", "A"]}]
    assert sig["outputs"] == [{"name": "logits", "type": "float", "shape": ["N", "A"]},
                              {"name": "value", "type": "float", "shape": ["N", 1]}]
    # initializers are not inputs even when an old exporter lists them as graph inputs
    model = onnx.load(models["legacy"])
    model.graph.input.append(helper.make_tensor_value_info("W", onnx.TensorProto.FLOAT, [engine.OBS_DIM, 163]))
    assert [e["name"] for e in signature(model)["inputs"]] == ["obs"]


def test_explicit_kind_mismatch_shows_expected_and_found(models):
    sig = signature(models["v5"])
    with pytest.raises(KindMismatch) as err:
        check_kind("legacy_onnx", sig)
    message = str(err.value)
    assert err.value.code == "kind_mismatch"
    assert f"expected obs float[N, {engine.OBS_DIM}] -> logits float[N, 163]" in message
    assert f"found obs float[N, {engine.OBS_DIM}], action_features float[N, A, {engine.ACTION_FEATURE_DIM}]" in message
    assert "unexpected input 'action_features'" in message
    assert err.value.expected == contract_signature("legacy_onnx") and err.value.found == sig
    with pytest.raises(KindMismatch, match="missing output 'scores'"):
        check_kind("v4", sig)


@pytest.mark.parametrize("name, problem", [("missing_value", "missing output 'value'"),
                                           ("extra_input", "unexpected input 'temperature'")])
def test_detect_kind_refuses_broken_signatures(models, name, problem):
    with pytest.raises(KindMismatch) as err:
        detect_kind(signature(models[name]))
    assert "fits none of legacy_onnx" in str(err.value) and problem in str(err.value)


def test_fixed_batch_or_wrong_feature_width_is_refused():
    model = f.v5_model()
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 1  # obs [1, OBS_DIM]
    with pytest.raises(KindMismatch, match="axis 0 .N. must be dynamic, found fixed 1"):
        check_kind("v5", signature(model))
    model = f.v5_model()
    model.graph.input[1].type.tensor_type.shape.dim[2].dim_value = engine.ACTION_FEATURE_DIM + 1
    with pytest.raises(KindMismatch, match=f"axis 2 is {engine.ACTION_FEATURE_DIM + 1}, expected"):
        check_kind("v5", signature(model))


# ------------------------------------------------------------------------------ weights_hash
def test_weights_hash_is_stable_across_resaves(tmp_path):
    model = f.mlp_v5(32, seed=4)
    original = f.save(model, tmp_path / "a.onnx")
    h = weights_hash(original)
    assert len(h) == 64 and h == weights_hash(model)
    resaved = onnx.load(original)
    resaved.producer_name = "someone-else"
    resaved.doc_string = "re-exported"
    f.save(resaved, tmp_path / "b.onnx")
    assert weights_hash(tmp_path / "b.onnx") == h
    assert (tmp_path / "a.onnx").read_bytes() != (tmp_path / "b.onnx").read_bytes()
    reordered = f.mlp_v5(32, seed=4, reorder=True)  # same initializers, other initializer and node order
    assert [n.op_type for n in reordered.graph.node] != [n.op_type for n in model.graph.node]
    assert weights_hash(reordered) == h
    # the same values stored as typed floats instead of raw_data
    typed = onnx.load(original)
    for i, init in enumerate(typed.graph.initializer):
        if init.name == "w3":
            arr = numpy_helper.to_array(init)
            typed.graph.initializer[i].CopyFrom(helper.make_tensor("w3", onnx.TensorProto.FLOAT, arr.shape,
                                                                   arr.ravel().tolist(), raw=False))
    assert not [i for i in typed.graph.initializer if i.name == "w3"][0].raw_data
    assert weights_hash(typed) == h


def test_weights_hash_differs_for_different_weights():
    h = weights_hash(f.mlp_v5(32, seed=4))
    assert weights_hash(f.mlp_v5(32, seed=5)) != h
    nudged = f.mlp_v5(32, seed=4)
    for i, init in enumerate(nudged.graph.initializer):
        if init.name == "b2":
            arr = numpy_helper.to_array(init).copy()
            arr[7] = np.nextafter(arr[7], np.float32(1))  # one ulp in one weight
            nudged.graph.initializer[i].CopyFrom(numpy_helper.from_array(arr, "b2"))
    assert weights_hash(nudged) != h
    renamed = f.mlp_v5(32, seed=4)
    renamed.graph.initializer[0].name = "W1o_renamed"
    assert weights_hash(renamed) != h


# ------------------------------------------------------------------------------ scripted play
def _play(policy_p1, policy_p2, seed: int, check) -> int:
    """Play a battle; ``check(state, decision)`` runs on every player-1 decision. Returns count."""
    state = engine.new_battle(seed)
    checked = 0
    while not state.is_terminal:
        if state.to_move == 1:
            decision = policy_p1.decide(state)
            check(state, decision)
            checked += 1
            state.apply(decision.action_id)
        else:
            state.apply(policy_p2.act(state))
    return checked


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_scripted_v5_provably_plays_a_whole_battle(models, seed):
    policy = ModelPolicy(models["v5"], "v5", expected_weights_hash=weights_hash(models["v5"]), seed=seed)
    assert policy.weights_hash == weights_hash(models["v5"]) and not policy.degraded
    kinds_played: list[str] = []

    def check(state: engine.State, d: Decision) -> None:
        legal = state.legal_actions()
        assert d.warning is None
        assert d.action_id == f.predict_linear(state)
        assert len(d.probabilities) == len(legal) and math.isclose(sum(d.probabilities), 1.0, rel_tol=1e-9)
        assert d.probabilities[legal.index(d.action_id)] == max(d.probabilities)
        obs = state.observation(1)
        assert d.value == pytest.approx(float(obs[0]) - float(obs[1]), abs=1e-6)
        assert d.policy_record() == {"probabilities": [round(p, 6) for p in d.probabilities],
                                     "value": None if d.value is None else round(d.value, 6)}
        kinds_played.append(engine.decode_action(d.action_id)["kind"])

    assert _play(policy, RandomPolicy(seed + 100), seed, check) > 10
    # the script really steers play: it plays cards and attacks, not just end turns
    assert {"play", "attack", "end_turn"} <= set(kinds_played)


def test_scripted_v4_and_legacy_play_as_predicted(models):
    v4 = ModelPolicy(models["v4"], "v4")
    legacy = ModelPolicy(models["legacy"], "legacy_onnx")
    restricted = []

    def check_v4(state, d):
        assert d.warning is None and d.value is None and d.action_id == f.predict_linear(state)

    overall_best = int(np.argmax(f.legacy_bias()))

    def check_legacy(state, d):
        assert d.warning is None and d.action_id == f.predict_legacy(state)
        restricted.append(overall_best not in state.legal_actions())  # the unrestricted argmax was illegal

    assert _play(v4, RandomPolicy(7), 7, check_v4) > 10
    assert _play(legacy, RandomPolicy(8), 8, check_legacy) > 10
    assert any(restricted)


def test_bool_mask_model_plays(models, states):
    policy = ModelPolicy(models["bool_mask"], "v5")
    for state, d in zip(states, policy.decide_batch(states)):
        assert d.warning is None and d.action_id == f.predict_linear(state)


# ------------------------------------------------------------------------------ degraded paths
DEGRADED = [
    ("nan", "v5", "non_finite_output"),
    ("posinf", "v5", "non_finite_output"),
    ("nan_value", "v5", "non_finite_output"),
    ("neginf", "v5", "illegal_choice"),
    ("legacy_illegal", "legacy_onnx", "illegal_choice"),
    ("wrong_logits", "v5", "bad_output_shape"),
    ("wrong_value", "v5", "bad_output_shape"),
    ("runtime", "v5", "runtime_error"),
    ("garbage", "v5", "runtime_error"),
    ("missing_value", "v5", "kind_mismatch"),
    ("extra_input", "v5", "kind_mismatch"),
    ("v5", "legacy_onnx", "kind_mismatch"),
]


@pytest.mark.parametrize("name, kind, warning_kind", DEGRADED)
def test_each_degraded_path_falls_back_with_its_warning(models, states, name, kind, warning_kind):
    policy = ModelPolicy(models[name], kind, seed=1)
    greedy = GreedyPolicy()
    for decide_fn in (lambda s: [policy.decide(x) for x in s], policy.decide_batch):
        decisions = decide_fn(states[:6])
        for state, d in zip(states[:6], decisions):
            assert d.action_id == greedy.act(state)
            assert d.warning is not None and d.warning["kind"] == warning_kind, d.warning
            assert d.warning["fallback"] == "baseline:greedy" and d.warning["message"]
            assert d.probabilities is None and d.value is None and d.degraded and d.policy_record() is None


def test_missing_file_and_hash_mismatch_fall_back(models, states, tmp_path):
    greedy = GreedyPolicy()
    missing = ModelPolicy(tmp_path / "nowhere.onnx", "v5")
    assert missing.degraded and missing.weights_hash is None
    wrong = ModelPolicy(models["v5"], "v5", expected_weights_hash="0" * 64)
    assert wrong.degraded and wrong.weights_hash == weights_hash(models["v5"])
    for policy, kind in ((missing, "missing_file"), (wrong, "hash_mismatch")):
        for state in states[:4]:
            d = policy.decide(state)
            assert d.action_id == greedy.act(state) and d.warning["kind"] == kind
            assert policy.act(state) == d.action_id
    assert "0" * 64 in wrong.decide(states[0]).warning["message"]


def test_random_fallback_is_seeded_and_named(states, tmp_path):
    def run(seed):
        policy = ModelPolicy(tmp_path / "nowhere.onnx", "v5", seed=seed, fallback="random")
        return [policy.decide(s) for s in states]

    first = run(4)
    assert first == run(4)
    assert [d.action_id for d in first] != [d.action_id for d in run(5)]
    assert all(d.warning["fallback"] == "baseline:random" for d in first)
    assert all(d.action_id in s.legal_actions() for d, s in zip(first, states))


def test_non_finite_rows_fall_back_alone(models, states):
    """log(card_cost): rows with a paid card play decide by model, the rest fall back."""
    policy = ModelPolicy(models["log_cost"], "v5")
    decisions = policy.decide_batch(states)
    greedy = GreedyPolicy()
    played = fell_back = 0
    for state, d in zip(states, decisions):
        costs = state.action_features(state.legal_actions())[:, engine.ACTION_FEATURE_NAMES.index("card_cost")]
        if (costs > 0).any():
            assert d.warning is None and d.action_id == f.predict_linear(state, {"card_cost": 1.0})
            played += 1
        else:
            assert d.warning["kind"] == "illegal_choice" and d.action_id == greedy.act(state)
            fell_back += 1
    assert played and fell_back


def test_legacy_argmax_is_restricted_to_legal_ids(models):
    bias = np.zeros(163, np.float32)
    bias[162] = 100.0  # the best logit overall is the last attack id
    bias[0] = 1.0  # the best legal one is END_TURN whenever 162 is illegal
    model = f.legacy_model(bias=bias)
    state = next(s for s in sample_states(30, seed=5) if 162 not in s.legal_actions())
    path = f.save(model, Path(models["legacy"]).with_name("legacy_162.onnx"))
    d = ModelPolicy(path, "legacy_onnx").decide(state)
    assert d.warning is None and d.action_id == engine.END_TURN


def test_bad_arguments_are_refused(models):
    with pytest.raises(AdapterError):
        ModelPolicy(models["v5"], "baseline")
    with pytest.raises(AdapterError):
        ModelPolicy(models["v5"], "v5", fallback="clever")
    with pytest.raises(ValueError, match="finished battle"):
        state = engine.new_battle(1)
        while not state.is_terminal:
            state.apply(state.legal_actions()[0])
        ModelPolicy(models["v5"], "v5").decide(state)


# ------------------------------------------------------------------------------ batching
class CountingSession:
    """Delegates to the real onnxruntime session and counts run() calls."""

    def __init__(self, session) -> None:
        self.session, self.runs, self.batch_sizes = session, 0, []

    def run(self, names, feeds, options=None):
        self.runs += 1
        self.batch_sizes.append(len(feeds["obs"]))
        return self.session.run(names, feeds, options)


def test_batch_decisions_equal_single_decisions_with_one_run(models, states):
    policy = ModelPolicy(models["mlp"], "v5")
    counter = CountingSession(policy.model.session)
    policy.model = dataclasses.replace(policy.model, session=counter)
    assert len({len(s.legal_actions()) for s in states}) > 3  # A really varies: padding is exercised
    batch = policy.decide_batch(states)
    assert counter.runs == 1 and counter.batch_sizes == [len(states)]
    singles = [policy.decide(s) for s in states]
    assert counter.runs == 1 + len(states)
    for b, s in zip(batch, singles):
        assert b.action_id == s.action_id and b.warning is None and s.warning is None
        assert b.probabilities == pytest.approx(s.probabilities, rel=1e-5, abs=1e-7)
        assert b.value == pytest.approx(s.value, rel=1e-5, abs=1e-6)


def test_decide_many_batches_across_policies_sharing_a_model(models, states):
    """Two battles' policies (own seeds, sampling) on one file: one run, and each policy's
    choices equal what it would choose alone, whatever else is in the batch."""
    def pair():
        return (ModelPolicy(models["mlp"], "v5", seed=1, sample=True),
                ModelPolicy(models["mlp"], "v5", seed=2, sample=True), RandomPolicy(3))

    a, b, r = pair()
    assert a.model is b.model  # loaded once per process
    counter = CountingSession(a.model.session)
    shared = dataclasses.replace(a.model, session=counter)
    a.model = b.model = shared
    items = [(a, states[0]), (r, states[1]), (b, states[2]), (a, states[3]), (b, states[4])]
    together = decide_many(items)
    assert counter.runs == 1 and counter.batch_sizes == [4]
    a2, b2, r2 = pair()
    assert [together[i] for i in (0, 3)] == a2.decide_batch([states[0], states[3]])
    assert [together[i] for i in (2, 4)] == b2.decide_batch([states[2], states[4]])
    assert together[1] == r2.decide(states[1])


def test_build_inputs_pads_and_masks(states):
    feeds, legal = build_inputs("v5", states[:5])
    width = max(len(ids) for ids in legal)
    assert feeds["obs"].shape == (5, engine.OBS_DIM)
    assert feeds["action_features"].shape == (5, width, engine.ACTION_FEATURE_DIM)
    for i, (state, ids) in enumerate(zip(states[:5], legal)):
        assert feeds["action_mask"][i].tolist() == [1.0] * len(ids) + [0.0] * (width - len(ids))
        np.testing.assert_array_equal(feeds["action_features"][i, :len(ids)], state.action_features(ids))
        assert not feeds["action_features"][i, len(ids):].any()
        np.testing.assert_array_equal(feeds["obs"][i], state.observation(state.to_move))


# ------------------------------------------------------------------------------ sampling
def test_sampling_is_deterministic_for_a_seed(models, states):
    def run(seed):
        return [d.action_id for d in ModelPolicy(models["mlp"], "v5", seed=seed, sample=True).decide_batch(states)]

    first = run(21)
    assert first == run(21)
    assert first != run(22)
    argmax = [d.action_id for d in ModelPolicy(models["mlp"], "v5").decide_batch(states)]
    assert first != argmax  # it really samples
    assert all(a in s.legal_actions() for a, s in zip(first, states))


def test_sampling_never_picks_a_zero_probability_action(models, states):
    policy = ModelPolicy(models["log_cost"], "v5", seed=3, sample=True)
    cost = engine.ACTION_FEATURE_NAMES.index("card_cost")
    for state in states:
        d = policy.decide(state)
        if d.warning is None:
            legal = state.legal_actions()
            assert state.action_features([d.action_id])[0, cost] > 0  # log(0) = -inf has probability 0
            assert d.probabilities[legal.index(d.action_id)] > 0


# ------------------------------------------------------------------------------ baselines
def test_baselines_decide_matches_act():
    states = sample_states(20, seed=2)
    acts = [RandomPolicy(9).act(s) for s in states[:1]]  # a fresh generator each time: first draw only
    assert RandomPolicy(9).decide(states[0]) == Decision(acts[0])
    same_seed = RandomPolicy(9)
    assert RandomPolicy(9).decide_batch(states) == [Decision(same_seed.act(s)) for s in states]
    greedy = GreedyPolicy().decide_batch(states)
    assert greedy == [Decision(GreedyPolicy().act(s)) for s in states]
    assert all(d.warning is None and d.probabilities is None and not d.degraded for d in greedy)
