"""Registered ONNX checkpoints playing through matches and series: the model (not a fallback)
plays and is recorded with its weights hash; fallbacks degrade the battle, visibly."""

import json
from pathlib import Path

import pytest

import engine
from adapters import onnx_contracts, onnx_models
from extrarlhf.checkpoints.registry import CheckpointRegistry
from extrarlhf.core.errors import RLHFError
from extrarlhf.runtime.match import start_match
from extrarlhf.runtime.replay import replay_battle
from extrarlhf.runtime.series import run_series
from extrarlhf.runtime.sessions import SessionStore
from tests import onnx_factory as f
from tests.trace_helpers import read_trace


@pytest.fixture
def registry(tmp_path):
    reg = CheckpointRegistry(tmp_path / "checkpoints")
    reg.register("scripted", f.save(f.v5_model(), tmp_path / "scripted.onnx"), "v5")
    reg.register("broken", f.save(f.v5_nan(), tmp_path / "broken.onnx"), "v5")
    return reg


def _actions(store, group):
    for ref in store.battles(group):
        yield ref, list(ref.decisions())


def test_series_with_a_checkpoint_records_the_model_and_its_outputs(tmp_path, registry):
    result = run_series(tmp_path / "s", "g", 4, p1_model="scripted", opponent="baseline:random", seed=3,
                        checkpoints_dir=registry.root)
    summary = result["summary"]
    assert summary["by_status"]["finished"] == 4 and summary["degraded"] == 0
    expected_hash = registry.get("scripted").weights_hash
    assert summary["weights_hashes"] == [expected_hash]
    store = SessionStore(tmp_path / "s")
    assert store.read_manifest("g")["configuration"]["battle_tag"] == "rl-vs-bot"
    for ref, decisions in _actions(store, "g"):
        meta = ref.meta()
        assert meta["actors"]["p1"] == {"type": "rl", "spec": "scripted", "kind": "v5",
                                        "weights_hash": expected_hash, "codename": None}
        assert meta["degraded"] is False and meta["policy_warnings"] == []
        for d in decisions:
            if d["player"] != 1:
                assert d["policy"] is None  # the random baseline has no outputs
                continue
            state = engine.State.from_dict(d["state_before"])
            assert d["action_id"] == f.predict_linear(state), "the scripted model, not a fallback, chose"
            probs = d["policy"]["probabilities"]
            assert len(probs) == len(d["legal_actions"]) and abs(sum(probs) - 1) < 1e-4
        assert replay_battle(store, "g", ref.battle_id)["reproduces"]


def test_series_traces_do_not_depend_on_workers_with_a_model(tmp_path, registry):
    for workers in (1, 2):
        run_series(tmp_path / f"w{workers}", "g", 20, p1_model="scripted", opponent="baseline:greedy",
                   max_workers=workers, checkpoints_dir=registry.root)
    a, b = SessionStore(tmp_path / "w1"), SessionStore(tmp_path / "w2")
    for ref in a.battles("g"):
        other = b.battle("g", ref.battle_id)
        for name in ("actions.jsonl", "turns.jsonl"):
            assert read_trace(ref.path, name) == read_trace(other.path, name)


def test_a_failing_model_degrades_the_battle_with_a_counted_warning(tmp_path, registry):
    run_series(tmp_path / "s", "g", 2, p1_model="broken", opponent="baseline:greedy",
               checkpoints_dir=registry.root)
    store = SessionStore(tmp_path / "s")
    summary = store.compute_summary("g")
    assert summary["degraded"] == 2 and summary["eligible_battles"] == 0
    assert not summary["readiness"]["v5_policy_training_ready"]
    for ref, decisions in _actions(store, "g"):
        meta = ref.meta()
        assert meta["degraded"] is True
        [warning] = meta["policy_warnings"]
        p1_decisions = sum(1 for d in decisions if d["player"] == 1)
        assert warning["kind"] == "non_finite_output" and warning["player"] == 1
        assert warning["fallback"] == "baseline:greedy" and warning["count"] == p1_decisions


def test_a_tampered_checkpoint_plays_degraded_and_records_the_hash_that_played(tmp_path, registry):
    stored = registry.get("scripted").path
    stored.write_bytes(Path(f.save(f.v5_model({"is_end_turn": 1.0}), tmp_path / "other.onnx")).read_bytes())
    m = start_match(SessionStore(tmp_path / "s"), "g", "llm", opponent="scripted", seed=1,
                    checkpoints_dir=str(registry.root))
    while not m.done:
        m.submit(m.legal_actions()[-1]["action_id"])
    result = m.finish()
    assert result["degraded"] is True
    assert result["policy_warnings"][0]["kind"] == "hash_mismatch"
    meta = json.loads(Path(result["paths"]["meta.jsonl"]).read_text())
    assert meta["actors"]["p2"]["weights_hash"] == onnx_contracts.weights_hash(stored)
    assert meta["actors"]["p2"]["weights_hash"] != registry.get("scripted").weights_hash
    assert meta["battle_tag"] == "llm-vs-rl"


def test_unknown_model_specs_list_checkpoints_too(tmp_path, registry):
    with pytest.raises(RLHFError) as info:
        run_series(tmp_path / "s", "g", 1, p1_model="nope", checkpoints_dir=registry.root)
    assert info.value.code == "unknown_spec"
    assert "baseline:greedy" in str(info.value) and "scripted" in str(info.value)
    assert not (tmp_path / "s" / "g").exists()
