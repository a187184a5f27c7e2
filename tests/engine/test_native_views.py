"""The action lines and action JSON in the core (native/src/describe.cc) against engine/views.py:
the same text and the same JSON bytes (keys in the same order) for every action id 0..162 on
every state of random and greedy battles, the reference's checks and words for anything that
is not a plain id, and a state whose cards have no registered texts left to the reference.

Skipped only when engine_native is not built; under `make test` (RLHF_REQUIRE_NATIVE=1) a
missing build is a failure."""

from __future__ import annotations

import numpy as np
import orjson
import pytest

import engine
from adapters.baselines import GreedyPolicy
from engine import ACTION_SPACE_SIZE, SplitMix64, reference, views
from engine.native_state import NativeState
from tests.native_helpers import require_native

engine_native = require_native()
ALL_IDS = list(range(ACTION_SPACE_SIZE))


def _same_views(py: engine.State, nat: engine_native.State) -> None:
    assert engine_native.describe_actions(nat, ALL_IDS) == views.describe_actions(py, ALL_IDS), py.state_hash()
    for a in ALL_IDS:
        got = engine_native.action_json(nat, a, None)
        assert orjson.dumps(got) == orjson.dumps(views.action_json(py, a)), (py.state_hash(), a)
    legal = py.legal_actions()
    if legal:
        lines = views.describe_actions(py, legal)
        assert engine_native.action_json(nat, legal[-1], lines[-1])["description"] == lines[-1]


def test_every_action_of_every_state_reads_the_same_in_the_core() -> None:
    states = 0
    for seed in range(60):
        py, nat, rng = reference.new_battle(seed), engine_native.new_battle(seed), SplitMix64(seed)
        while True:
            _same_views(py, nat)
            states += 1
            if py.is_terminal:
                break
            legal = py.legal_actions()
            action = legal[rng.below(len(legal))]
            py.apply(action)
            nat.apply(action)
    greedy = GreedyPolicy()
    for seed in range(6):  # long greedy battles: full boards, keywords, damaged creatures
        py, nat = reference.new_battle(1000 + seed), engine_native.new_battle(1000 + seed)
        while not py.is_terminal:
            _same_views(py, nat)
            states += 1
            action = greedy.act(py)
            py.apply(action)
            nat.apply(action)
    assert states > 3000


def test_the_engine_api_reads_its_lines_from_the_core_with_the_references_checks() -> None:
    state = engine.new_battle(7)
    assert isinstance(state, NativeState)
    for _ in range(12):
        state.apply(state.legal_actions()[-1])
    py = reference.from_dict(state.to_dict())
    assert state.describe_actions(ALL_IDS) == views.describe_actions(py, ALL_IDS)
    assert state.describe_action(5) == views.describe_action(py, 5)
    assert orjson.dumps(state.action_json(130, "given")) == orjson.dumps(views.action_json(py, 130, "given"))
    # not a plain int 0..162: the core leaves it to the reference, which converts or refuses alike
    assert engine_native.describe_actions(state._core, [np.int64(3)]) is None
    assert state.describe_actions([np.int64(3)]) == views.describe_actions(py, [3])
    assert engine_native.action_json(state._core, np.int64(3), None) is None
    assert state.action_json(np.int64(3)) == views.action_json(py, 3)
    for bad in (-1, ACTION_SPACE_SIZE, 2**70, 1.5, True, "3", None):
        with pytest.raises(engine.IllegalActionError) as core_error:
            state.describe_action(bad)
        with pytest.raises(engine.IllegalActionError) as reference_error:
            views.describe_action(py, bad)
        assert str(core_error.value) == str(reference_error.value)
        with pytest.raises(engine.IllegalActionError):
            state.action_json(bad)
    assert state.describe_actions((0, 1, 2)) == views.describe_actions(py, (0, 1, 2))  # a tuple: the reference


def test_a_state_whose_cards_have_no_registered_texts_is_left_to_the_reference() -> None:
    state = engine.new_battle(3)
    hooks = engine_native.hooks()
    try:
        engine_native._core._set_describe_cards([])
        assert engine_native.describe_actions(state._core, [0, 1]) is None
        assert engine_native.action_json(state._core, 1, None) is None
        py = reference.from_dict(state.to_dict())
        assert state.describe_actions(ALL_IDS) == views.describe_actions(py, ALL_IDS)
    finally:
        engine_native._core._set_describe_cards(list(hooks.describe_card_rows))
    assert engine_native.describe_actions(state._core, [0]) == ["End turn"]
