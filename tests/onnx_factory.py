"""Small real ONNX models for the adapter tests, built with onnx.helper.

* every kind: :func:`legacy_model`, :func:`action_model` (v4), :func:`v5_model`;
* scripted models whose choice is predictable: v4/v5 score = ``action_features @ w`` with
  ``w`` naming features (:func:`feature_vector`), legacy logits = a fixed bias per action id;
  :func:`predict_linear` / :func:`predict_legacy` compute the expected choice;
* :func:`mlp_v5`: a realistic v5 MLP (two hidden layers of ``width``);
* broken ones: wrong output shape, NaN / +inf / all -inf outputs, a missing output, an extra
  input, a graph that fails inside onnxruntime;
* hostile ones: :func:`spinning` (any kind) whose graph runs a ``Loop`` of real work for tens
  of seconds per decision (:data:`SPIN_TRIPS` iterations) while its outputs are the scripted
  model's, and :func:`spinning_when` which spins only in states with many legal actions.

Random weights come from a local ``numpy.random.default_rng(seed)``, never global state.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import engine
from engine import ACTION_FEATURE_DIM, ACTION_FEATURE_NAMES, ACTION_SPACE_SIZE, OBS_DIM, OBS_FEATURE_NAMES

OPSET = 17
IR_VERSION = 9


def _vi(name: str, shape: list, elem: int = TensorProto.FLOAT) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def _init(name: str, value) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value), name)


OBS = ["N", OBS_DIM]
FEATS = ["N", "A", ACTION_FEATURE_DIM]
MASK = ["N", "A"]


def _action_inputs(mask_elem: int = TensorProto.FLOAT) -> list[onnx.ValueInfoProto]:
    return [_vi("obs", OBS), _vi("action_features", FEATS), _vi("action_mask", MASK, mask_elem)]


def make(nodes: list, inits: list, inputs: list, outputs: list, name: str = "test", check: bool = True
         ) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="extrarlhf-tests")
    model.ir_version = IR_VERSION
    if check:
        onnx.checker.check_model(model)
    return model


def save(model: onnx.ModelProto, path: str | os.PathLike[str]) -> str:
    onnx.save(model, os.fspath(path))
    return os.fspath(path)


def feature_vector(weights: Mapping[str, float], names: tuple | list = ACTION_FEATURE_NAMES) -> np.ndarray:
    vec = np.zeros(len(names), dtype=np.float32)
    for name, w in weights.items():
        vec[list(names).index(name)] = w
    return vec


# Scripted preference: the most expensive card play, else an attack, else the first legal action.
SCRIPT = {"card_cost": 1.0, "is_attack": 0.5}
VALUE_SCRIPT = {"own_hero_health": 1.0, "enemy_hero_health": -1.0}


def _masked_scores(out: str, w: np.ndarray, extra_add: np.ndarray | None = None) -> tuple[list, list]:
    """out = action_features @ w (+ extra) + (action_mask - 1) * 1e9."""
    nodes = [helper.make_node("MatMul", ["action_features", "w"], ["raw"]),
             helper.make_node("Sub", ["action_mask", "one"], ["mask_m1"]),
             helper.make_node("Mul", ["mask_m1", "big"], ["penalty"])]
    inits = [_init("w", w.astype(np.float32)), _init("one", np.float32(1.0)), _init("big", np.float32(1e9))]
    if extra_add is not None:
        nodes.append(helper.make_node("Add", ["raw", "extra"], ["raw2"]))
        inits.append(_init("extra", np.asarray(extra_add, dtype=np.float32)))
        nodes.append(helper.make_node("Add", ["raw2", "penalty"], [out]))
    else:
        nodes.append(helper.make_node("Add", ["raw", "penalty"], [out]))
    return nodes, inits


def action_model(weights: Mapping[str, float] = SCRIPT, extra_add: float | None = None) -> onnx.ModelProto:
    """Kind action_onnx (v4): scores = action_features @ w."""
    nodes, inits = _masked_scores("scores", feature_vector(weights), extra_add)
    return make(nodes, inits, _action_inputs(), [_vi("scores", MASK)], "scripted_v4")


def v5_model(weights: Mapping[str, float] = SCRIPT, value: Mapping[str, float] = VALUE_SCRIPT,
             extra_add: float | None = None, value_bias: float = 0.0, logits_shape: list | None = None,
             value_shape: list | None = None) -> onnx.ModelProto:
    """Kind v5: logits = action_features @ w, value = obs @ v + value_bias."""
    nodes, inits = _masked_scores("logits", feature_vector(weights), extra_add)
    v = feature_vector(value, OBS_FEATURE_NAMES).reshape(OBS_DIM, 1)
    nodes += [helper.make_node("MatMul", ["obs", "v"], ["value_raw"]),
              helper.make_node("Add", ["value_raw", "value_bias"], ["value"])]
    inits += [_init("v", v), _init("value_bias", np.float32(value_bias))]
    return make(nodes, inits, _action_inputs(), [_vi("logits", logits_shape or MASK),
                                                 _vi("value", value_shape or ["N", 1])], "scripted_v5")


def legacy_bias() -> np.ndarray:
    """A fixed preference over action ids that is not monotonic in the id (a permutation), so
    picking by position instead of by id would show; its overall best id is rarely legal."""
    return ((np.arange(ACTION_SPACE_SIZE) * 37) % ACTION_SPACE_SIZE).astype(np.float32) / ACTION_SPACE_SIZE


def legacy_model(bias: np.ndarray | None = None, seed: int | None = None) -> onnx.ModelProto:
    """Kind legacy_onnx: logits = obs @ W + bias (default :func:`legacy_bias`); ``seed`` draws W."""
    if bias is None:
        bias = legacy_bias()
    weights = (np.zeros((OBS_DIM, ACTION_SPACE_SIZE), dtype=np.float32) if seed is None else
               np.random.default_rng(seed).normal(0, 0.1, (OBS_DIM, ACTION_SPACE_SIZE)).astype(np.float32))
    nodes = [helper.make_node("MatMul", ["obs", "W"], ["h"]), helper.make_node("Add", ["h", "b"], ["logits"])]
    inits = [_init("W", weights), _init("b", np.asarray(bias, dtype=np.float32))]
    return make(nodes, inits, [_vi("obs", OBS)], [_vi("logits", ["N", ACTION_SPACE_SIZE])], "legacy")


def predict_linear(state: engine.State, weights: Mapping[str, float] = SCRIPT) -> int:
    """The action a scripted v4/v5 model picks: argmax of features @ w, first on ties."""
    legal = state.legal_actions()
    scores = state.action_features(legal).astype(np.float64) @ feature_vector(weights).astype(np.float64)
    return legal[int(np.argmax(scores))]


def predict_legacy(state: engine.State, bias: np.ndarray | None = None) -> int:
    if bias is None:
        bias = legacy_bias()
    legal = state.legal_actions()
    return legal[int(np.argmax(np.asarray(bias)[legal]))]


# ------------------------------------------------------------------------------ realistic MLP
def mlp_v5(width: int = 256, seed: int = 0, reorder: bool = False) -> onnx.ModelProto:
    """v5 MLP: h1 = relu(obs W1o + af W1a + b1), h2 = relu(h1 W2 + b2), logits = h2 w3 + mask
    penalty; value = relu(obs Wv + bv) wv2. ``reorder`` emits the same weights with the
    initializers and independent nodes in another order (for the weights_hash tests)."""
    rng = np.random.default_rng(seed)

    def w(*shape: int) -> np.ndarray:
        return (rng.normal(0.0, 1.0 / np.sqrt(shape[0]), shape)).astype(np.float32)

    inits = [_init("W1o", w(OBS_DIM, width)), _init("W1a", w(ACTION_FEATURE_DIM, width)),
             _init("b1", np.zeros(width, np.float32)), _init("W2", w(width, width)),
             _init("b2", np.full(width, 0.01, np.float32)), _init("w3", w(width)),
             _init("Wv", w(OBS_DIM, width)), _init("bv", np.zeros(width, np.float32)), _init("wv2", w(width, 1)),
             _init("shape_n1h", np.array([-1, 1, width], np.int64)), _init("one", np.float32(1.0)),
             _init("big", np.float32(1e9))]
    policy = [helper.make_node("MatMul", ["obs", "W1o"], ["ho"]),
              helper.make_node("Reshape", ["ho", "shape_n1h"], ["ho3"]),
              helper.make_node("MatMul", ["action_features", "W1a"], ["ha"]),
              helper.make_node("Add", ["ha", "ho3"], ["h1a"]),
              helper.make_node("Add", ["h1a", "b1"], ["h1b"]),
              helper.make_node("Relu", ["h1b"], ["h1"]),
              helper.make_node("MatMul", ["h1", "W2"], ["h2a"]),
              helper.make_node("Add", ["h2a", "b2"], ["h2b"]),
              helper.make_node("Relu", ["h2b"], ["h2"]),
              helper.make_node("MatMul", ["h2", "w3"], ["raw"]),
              helper.make_node("Sub", ["action_mask", "one"], ["mask_m1"]),
              helper.make_node("Mul", ["mask_m1", "big"], ["penalty"]),
              helper.make_node("Add", ["raw", "penalty"], ["logits"])]
    value = [helper.make_node("MatMul", ["obs", "Wv"], ["hv"]),
             helper.make_node("Add", ["hv", "bv"], ["hvb"]),
             helper.make_node("Relu", ["hvb"], ["hvr"]),
             helper.make_node("MatMul", ["hvr", "wv2"], ["value"])]
    nodes = policy + value
    if reorder:
        inits = inits[::-1]
        nodes = value + policy
    return make(nodes, inits, _action_inputs(), [_vi("logits", MASK), _vi("value", ["N", 1])], "mlp_v5")


# ------------------------------------------------------------------------------ broken models
def v5_nan() -> onnx.ModelProto:
    """logits all NaN (a NaN weight: NaN * 0 is NaN)."""
    return v5_model(weights={**SCRIPT, "is_end_turn": float("nan")})


def v5_posinf() -> onnx.ModelProto:
    return v5_model(extra_add=float("inf"))


def v5_nan_value() -> onnx.ModelProto:
    return v5_model(value_bias=float("nan"))


def v5_all_neginf() -> onnx.ModelProto:
    """Every legal action scores -inf: no legal choice."""
    return v5_model(extra_add=float("-inf"))


def v5_wrong_logits_shape() -> onnx.ModelProto:
    """Declares logits [N, A] but returns [N, A + 1] (an extra column)."""
    base = v5_model()
    graph = base.graph
    for node in graph.node:
        if list(node.output) == ["logits"]:
            node.output[0] = "logits_ok"
    graph.node.append(helper.make_node("Slice", ["logits_ok", "s_start", "s_end", "s_axes"], ["first_col"]))
    graph.node.append(helper.make_node("Concat", ["logits_ok", "first_col"], ["logits"], axis=1))
    graph.initializer.extend([_init("s_start", np.array([0], np.int64)), _init("s_end", np.array([1], np.int64)),
                              _init("s_axes", np.array([1], np.int64))])
    onnx.checker.check_model(base)
    return base


def v5_wrong_value_shape() -> onnx.ModelProto:
    """Returns value [N, 2] although it declares (and the contract says) [N, 1]."""
    base = v5_model()
    for node in base.graph.node:
        if list(node.output) == ["value"]:
            node.output[0] = "value1"
    base.graph.node.append(helper.make_node("Concat", ["value1", "value1"], ["value"], axis=1))
    onnx.checker.check_model(base)
    return base


def v5_missing_value() -> onnx.ModelProto:
    """Has logits but no value output."""
    base = v5_model()
    keep = [o for o in base.graph.output if o.name != "value"]
    del base.graph.output[:]
    base.graph.output.extend(keep)
    return base


def v5_extra_input() -> onnx.ModelProto:
    """An extra input ``temperature`` the adapter cannot feed."""
    nodes, inits = _masked_scores("logits_raw", feature_vector(SCRIPT))
    nodes += [helper.make_node("Div", ["logits_raw", "temperature"], ["logits"]),
              helper.make_node("MatMul", ["obs", "v"], ["value"])]
    inits.append(_init("v", np.zeros((OBS_DIM, 1), np.float32)))
    return make(nodes, inits, _action_inputs() + [_vi("temperature", [1])],
                [_vi("logits", MASK), _vi("value", ["N", 1])], "extra_input")


def v5_runtime_error() -> onnx.ModelProto:
    """Valid ONNX that fails inside onnxruntime: obs is reshaped to [-1, OBS_DIM + 1]."""
    base = v5_model()
    base.graph.node.extend([helper.make_node("Reshape", ["obs", "bad_shape"], ["obs_r"]),
                            helper.make_node("ReduceSum", ["obs_r"], ["obs_sum"], keepdims=0)])
    base.graph.initializer.append(_init("bad_shape", np.array([-1, OBS_DIM + 1], np.int64)))
    for node in base.graph.node:
        if list(node.output) == ["value"]:
            node.output[0] = "value_pre"
    base.graph.node.append(helper.make_node("Add", ["value_pre", "obs_sum"], ["value"]))
    onnx.checker.check_model(base)
    return base


def legacy_only_illegal_finite() -> onnx.ModelProto:
    """Legacy logits finite only for action 162 (illegal in most states), -inf elsewhere."""
    bias = np.full(ACTION_SPACE_SIZE, -np.inf, np.float32)
    bias[ACTION_SPACE_SIZE - 1] = 5.0
    return legacy_model(bias=bias)


def v5_log_cost() -> onnx.ModelProto:
    """logits = log(card_cost): finite only for plays of cards that cost something, so states
    without such a play give every legal action -inf (illegal_choice) and the others play."""
    base = v5_model(weights={"card_cost": 1.0})
    for node in base.graph.node:
        if list(node.output) == ["raw"]:
            node.output[0] = "cost"
    base.graph.node.insert(1, helper.make_node("Log", ["cost"], ["raw"]))
    onnx.checker.check_model(base)
    return base


def v5_bool_mask() -> onnx.ModelProto:
    """The scripted v5 with a bool action_mask (cast to float inside)."""
    nodes, inits = _masked_scores("logits", feature_vector(SCRIPT))
    for node in nodes:
        if node.op_type == "Sub":
            node.input[0] = "mask_f"
    nodes.insert(0, helper.make_node("Cast", ["action_mask"], ["mask_f"], to=TensorProto.FLOAT))
    nodes += [helper.make_node("MatMul", ["obs", "v"], ["value"])]
    inits.append(_init("v", feature_vector(VALUE_SCRIPT, OBS_FEATURE_NAMES).reshape(OBS_DIM, 1)))
    return make(nodes, inits, _action_inputs(TensorProto.BOOL), [_vi("logits", MASK), _vi("value", ["N", 1])],
                "bool_mask")


# ------------------------------------------------------------------------------ custom kind
class EndTurnPolicy:
    """A custom adapter with only ``act``: always ends the turn (always legal)."""

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def act(self, state: engine.State) -> int:
        return engine.END_TURN


def end_turn_factory(seed: int = 0) -> EndTurnPolicy:
    return EndTurnPolicy(seed)


NOT_CALLABLE = 42


# ------------------------------------------------------------------------------ hostile models
SPIN_WIDTH = 64
# Iterations of x = tanh(x @ W) on a 64 x 64 matrix: about 4 us each on one core, so the
# default spins for ~40 s per session.run (measured once: see tests/test_model_limits.py).
SPIN_TRIPS = 10_000_000


def _loop_body(width: int) -> onnx.GraphProto:
    return helper.make_graph(
        [helper.make_node("MatMul", ["x_in", "spin_w"], ["x_mm"]), helper.make_node("Tanh", ["x_mm"], ["x_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "spin_body",
        [_vi("iter", [], TensorProto.INT64), _vi("cond_in", [], TensorProto.BOOL), _vi("x_in", [width, width])],
        [_vi("cond_out", [], TensorProto.BOOL), _vi("x_out", [width, width])])


def add_spin(model: onnx.ModelProto, output: str, trips: int = SPIN_TRIPS, width: int = SPIN_WIDTH,
             min_actions: int | None = None) -> onnx.ModelProto:
    """``model`` with ``output`` += 0 * sum(Loop(trips){x = tanh(x @ W)}), x starting from a
    matrix shifted by sum(obs) so nothing can be folded at load time. The outputs are the
    original model's; only the time changes. ``min_actions``: the loop runs only when the batch
    has at least that many candidate actions (A of ``action_features``), else 0 times."""
    rng = np.random.default_rng(7)
    graph = model.graph
    for node in graph.node:
        if list(node.output) == [output]:
            node.output[0] = f"{output}_unspun"
    nodes = [helper.make_node("ReduceSum", ["obs"], ["spin_obs_sum"], keepdims=0),
             helper.make_node("Add", ["spin_x0_base", "spin_obs_sum"], ["spin_x0"])]
    inits = [_init("spin_w", rng.normal(0.0, 1.0 / np.sqrt(width), (width, width)).astype(np.float32)),
             _init("spin_x0_base", rng.normal(0.0, 1.0, (width, width)).astype(np.float32)),
             _init("spin_cond", np.array(True)), _init("spin_zero", np.float32(0.0))]
    if min_actions is None:
        inits.append(_init("spin_trips", np.array(trips, np.int64)))
    else:  # trips * (A >= min_actions)
        nodes += [helper.make_node("Shape", ["action_features"], ["spin_shape"]),
                  helper.make_node("Gather", ["spin_shape", "spin_axis1"], ["spin_a"], axis=0),
                  helper.make_node("GreaterOrEqual", ["spin_a", "spin_min_a"], ["spin_many"]),
                  helper.make_node("Cast", ["spin_many"], ["spin_on"], to=TensorProto.INT64),
                  helper.make_node("Mul", ["spin_on", "spin_max_trips"], ["spin_trips"])]
        inits += [_init("spin_axis1", np.array(1, np.int64)), _init("spin_min_a", np.array(min_actions, np.int64)),
                  _init("spin_max_trips", np.array(trips, np.int64))]
    nodes += [helper.make_node("Loop", ["spin_trips", "spin_cond", "spin_x0"], ["spin_xf"], body=_loop_body(width)),
              helper.make_node("ReduceSum", ["spin_xf"], ["spin_sum"], keepdims=0),
              helper.make_node("Mul", ["spin_sum", "spin_zero"], ["spin_nothing"]),
              helper.make_node("Add", [f"{output}_unspun", "spin_nothing"], [output])]
    graph.node.extend(nodes)
    graph.initializer.extend(inits)
    onnx.checker.check_model(model)
    return model


SPIN_OUTPUT = {"legacy_onnx": "logits", "action_onnx": "scores", "v5": "logits"}


def spinning(kind: str = "v5", trips: int = SPIN_TRIPS, width: int = SPIN_WIDTH) -> onnx.ModelProto:
    """The scripted model of ``kind`` (legacy_onnx, action_onnx or v5) with a spinning graph."""
    base = {"legacy_onnx": legacy_model, "action_onnx": action_model, "v5": v5_model}[kind]()
    return add_spin(base, SPIN_OUTPUT[kind], trips, width)


def spinning_when(min_actions: int, kind: str = "v5", trips: int = SPIN_TRIPS) -> onnx.ModelProto:
    """Scripted v5/action_onnx that spins only when a batch has ``min_actions`` candidates or more."""
    base = {"action_onnx": action_model, "v5": v5_model}[kind]()
    return add_spin(base, SPIN_OUTPUT[kind], trips, min_actions=min_actions)
