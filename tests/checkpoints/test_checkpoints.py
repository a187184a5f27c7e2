"""The on-disk checkpoint registry: register/list/inspect/get, refusals, a corrupt index, a
tampered file that degrades (hash_mismatch) instead of failing, and the registration limits
(size cap checked before reading, streaming hash, no temp copy left behind)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import onnx
import pytest

import engine
from adapters import GreedyPolicy, RandomPolicy, weights_hash
from extrarlhf.checkpoints.registry import (
    CHECKPOINTS_SCHEMA_VERSION,
    DEFAULT_MAX_MODEL_BYTES,
    CheckpointExists,
    CheckpointRegistry,
    CorruptIndex,
    KindMismatchError,
    ModelTooLarge,
    _sha256_file,
)
from extrarlhf.core.errors import InvalidArgument, NotFound, RLHFError, UnsupportedSchema
from tests import onnx_factory as f
from tests.adapters.test_adapters import sample_states


@pytest.fixture()
def src(tmp_path):
    """Source models outside the registry."""
    d = tmp_path / "src"
    d.mkdir()
    return {"v5": f.save(f.v5_model(), d / "v5.onnx"), "v4": f.save(f.action_model(), d / "v4.onnx"),
            "legacy": f.save(f.legacy_model(), d / "legacy.onnx"), "mlp": f.save(f.mlp_v5(32, seed=2), d / "mlp.onnx"),
            "missing_value": f.save(f.v5_missing_value(), d / "missing_value.onnx")}


@pytest.fixture()
def registry(tmp_path):
    return CheckpointRegistry(tmp_path / "checkpoints")


def test_register_list_inspect_get(registry, src):
    assert registry.list() == [] and registry.specs() == []
    cp = registry.register("scripted-v5", src["v5"], kind="v5")
    assert cp.kind == "v5" and cp.spec == "scripted-v5"
    assert cp.path.parent == registry.root.absolute() and cp.path.read_bytes() == open(src["v5"], "rb").read()
    assert cp.weights_hash == weights_hash(src["v5"]) and cp.size_bytes == cp.path.stat().st_size
    registry.register("auto-v4", src["v4"])  # kind detected
    registry.register("old", src["legacy"], kind="legacy_onnx")
    assert registry.specs() == ["auto-v4", "old", "scripted-v5"]
    listed = {e["name"]: e for e in registry.list()}
    assert listed["auto-v4"]["kind"] == "action_onnx" and listed["old"]["kind"] == "legacy_onnx"
    entry = listed["scripted-v5"]
    for field in ("kind", "signature", "weights_hash", "size_bytes", "sha256", "registered_at", "path"):
        assert field in entry
    assert [o["name"] for o in entry["signature"]["outputs"]] == ["logits", "value"]
    info = registry.inspect("scripted-v5")
    assert info["file_present"] and info["file_intact"] and info["weights_hash"] == cp.weights_hash
    assert registry.get("scripted-v5") == cp
    index = json.loads((registry.root / "index.json").read_text())
    assert index["schema_version"] == CHECKPOINTS_SCHEMA_VERSION == 1
    assert set(index["checkpoints"]) == {"auto-v4", "old", "scripted-v5"}


def test_alias_kind_is_stored_canonically(registry, src):
    assert registry.register("v4-model", src["v4"], kind="v4").kind == "action_onnx"


def test_explicit_kind_mismatch_is_refused_with_expected_vs_found(registry, src):
    with pytest.raises(KindMismatchError) as err:
        registry.register("wrong", src["v5"], kind="legacy_onnx")
    message = str(err.value)
    assert err.value.code == "kind_mismatch" and isinstance(err.value, RLHFError)
    assert f"expected obs float[N, {engine.OBS_DIM}] -> logits float[N, 163]" in message
    assert "found obs float" in message and "logits float[N, A], value float[N, 1]" in message
    with pytest.raises(KindMismatchError, match="missing output 'scores'"):
        registry.register("wrong", src["v5"], kind="v4")
    assert registry.specs() == []  # nothing written
    assert not (registry.root / "index.json").exists()


def test_undetectable_model_is_refused(registry, src):
    with pytest.raises(KindMismatchError, match="cannot detect the model kind.*missing output 'value'"):
        registry.register("half", src["missing_value"])
    with pytest.raises(KindMismatchError, match="missing output 'value'"):
        registry.register("half", src["missing_value"], kind="v5")


def test_bad_requests_are_refused(registry, src, tmp_path):
    for name in ("../escape", "a/b", "", ".hidden", "x" * 65):
        with pytest.raises(InvalidArgument):
            registry.register(name, src["v5"])
    with pytest.raises(NotFound):
        registry.register("nofile", tmp_path / "nowhere.onnx")
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\x00\xffnot onnx" * 20)
    with pytest.raises(InvalidArgument, match="not a readable ONNX model"):
        registry.register("garbage", garbage)
    with pytest.raises(InvalidArgument, match="unknown model kind 'baseline'"):
        registry.register("base", src["v5"], kind="baseline")
    assert registry.specs() == []


def test_existing_name_is_refused_unless_overwrite(registry, src):
    first = registry.register("model", src["v5"])
    with pytest.raises(CheckpointExists) as err:
        registry.register("model", src["mlp"])
    assert err.value.code == "already_exists" and "overwrite=True" in str(err.value)
    assert registry.get("model").weights_hash == first.weights_hash
    second = registry.register("model", src["mlp"], overwrite=True)
    assert second.weights_hash == weights_hash(src["mlp"]) != first.weights_hash
    assert registry.get("model") == second
    assert not first.path.exists() and second.path.exists()  # the replaced copy is gone
    assert sorted(p.name for p in registry.root.glob("*.onnx")) == [second.path.name]


def test_resaved_model_keeps_its_weights_hash(registry, src, tmp_path):
    resaved = onnx.load(src["mlp"])
    resaved.producer_name = "re-export"
    f.save(resaved, tmp_path / "resaved.onnx")
    a = registry.register("a", src["mlp"])
    b = registry.register("b", tmp_path / "resaved.onnx")
    assert a.weights_hash == b.weights_hash and a.sha256 != b.sha256


def test_unknown_name_lists_what_exists(registry, src):
    with pytest.raises(NotFound, match="no checkpoints registered"):
        registry.get("anything")
    registry.register("alpha", src["v5"])
    registry.register("beta", src["v4"])
    with pytest.raises(NotFound) as err:
        registry.policy("gamma", seed=1)
    assert err.value.code == "not_found" and "alpha, beta" in str(err.value)


@pytest.mark.parametrize("content, error", [
    ("{not json", CorruptIndex),
    ("[]", CorruptIndex),
    (json.dumps({"schema_version": 2, "checkpoints": {}}), UnsupportedSchema),
    (json.dumps({"schema_version": 1, "checkpoints": []}), CorruptIndex),
    (json.dumps({"schema_version": 1, "checkpoints": {"x": {"name": "x"}}}), CorruptIndex),
])
def test_corrupt_index_is_refused(registry, src, content, error):
    registry.root.mkdir(parents=True)
    (registry.root / "index.json").write_text(content)
    for call in (registry.list, registry.specs, lambda: registry.get("x"),
                 lambda: registry.register("new", src["v5"])):
        with pytest.raises(error):
            call()
    assert (registry.root / "index.json").read_text() == content  # never overwritten


def test_index_entry_pointing_outside_is_refused(registry, src):
    registry.register("model", src["v5"])
    index_path = registry.root / "index.json"
    doc = json.loads(index_path.read_text())
    doc["checkpoints"]["model"]["file"] = "../../etc/passwd"
    index_path.write_text(json.dumps(doc))
    with pytest.raises(CorruptIndex, match="not at its own model file"):
        registry.get("model")


def test_registered_checkpoint_plays_as_predicted(registry, src):
    cp = registry.register("scripted", src["v5"], kind="v5")
    policy = registry.policy("scripted", seed=3)
    assert policy.spec == "scripted" and policy.kind == "v5"
    assert policy.weights_hash == cp.weights_hash and not policy.degraded
    state, opponent, checked = engine.new_battle(3), RandomPolicy(4), 0
    while not state.is_terminal:
        if state.to_move == 1:
            d = policy.decide(state)
            assert d.warning is None and d.action_id == f.predict_linear(state)
            checked += 1
            state.apply(d.action_id)
        else:
            state.apply(opponent.act(state))
    assert checked > 10


def test_tampered_file_degrades_with_hash_mismatch(registry, src):
    cp = registry.register("model", src["v5"], kind="v5")
    assert not registry.policy("model", seed=1).degraded  # loaded (and cached) before the tampering
    # same kind and signature, other weights: only the weights hash can tell
    tampered = f.v5_model(weights={"is_end_turn": 1.0})
    data = tampered.SerializeToString()
    assert len(data) == cp.size_bytes  # same size, rewritten in place: only the content differs
    with open(cp.path, "r+b") as fh:
        fh.write(data)
    info = registry.inspect("model")
    assert info["file_present"] and not info["file_intact"]
    policy = registry.policy("model", seed=1)
    assert policy.degraded and policy.weights_hash == weights_hash(tampered) != cp.weights_hash
    greedy = GreedyPolicy()
    for state in sample_states(8, seed=4):
        d = policy.decide(state)
        assert d.warning["kind"] == "hash_mismatch" and d.warning["fallback"] == "baseline:greedy"
        assert cp.weights_hash in d.warning["message"]
        assert d.action_id == greedy.act(state)


def test_deleted_file_degrades_with_missing_file(registry, src):
    cp = registry.register("model", src["v4"])
    cp.path.unlink()
    assert registry.inspect("model")["file_present"] is False
    policy = registry.policy("model", seed=1)
    state = sample_states(1, seed=6)[0]
    d = policy.decide(state)
    assert d.warning["kind"] == "missing_file" and d.action_id == GreedyPolicy().act(state)


def test_concurrent_registrations_keep_every_entry(registry, src):
    errors: list[BaseException] = []

    def register(i: int) -> None:
        try:
            registry.register(f"m{i}", src["v5" if i % 2 else "v4"])
        except BaseException as exc:  # noqa: BLE001 - surfaced by the assert below
            errors.append(exc)

    threads = [threading.Thread(target=register, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert registry.specs() == [f"m{i}" for i in range(8)]


# ---------------------------------------------------------------------------- registration limits
def _leftovers(registry):
    return sorted(p.name for p in registry.root.iterdir() if p.name.startswith(".register-")) \
        if registry.root.exists() else []


def test_a_model_above_the_cap_is_refused_before_it_is_read(registry, tmp_path):
    import resource
    import time

    huge = tmp_path / "huge.onnx"
    with open(huge, "wb") as fh:  # sparse: 1 GiB long, no block written
        os.truncate(fh.fileno(), 1024 ** 3)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    t0 = time.perf_counter()
    with pytest.raises(ModelTooLarge) as err:
        registry.register("huge", huge)
    assert time.perf_counter() - t0 < 1.0  # reading or hashing 1 GiB would not be this fast
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before < 64 * 1024
    message = str(err.value)
    assert err.value.code == "model_too_large" and isinstance(err.value, RLHFError)
    assert "1.0 GiB (1073741824 bytes)" in message and "256.0 MiB (268435456 bytes)" in message
    assert "RLHF_MAX_MODEL_BYTES=<bytes>" in message and "max_model_bytes" in message and "the default" in message
    assert registry.specs() == [] and _leftovers(registry) == []
    assert registry.max_model_bytes == DEFAULT_MAX_MODEL_BYTES == 256 * 1024 * 1024


def test_the_cap_is_configurable_by_argument_and_environment(tmp_path, src, monkeypatch):
    size = os.path.getsize(src["mlp"])
    root = tmp_path / "capped"
    with pytest.raises(ModelTooLarge, match=f"{size} bytes"):
        CheckpointRegistry(root, max_model_bytes=size - 1).register("m", src["mlp"])
    assert CheckpointRegistry(root, max_model_bytes=size).register("m", src["mlp"]).size_bytes == size

    monkeypatch.setenv("RLHF_MAX_MODEL_BYTES", str(size - 1))
    env_registry = CheckpointRegistry(root)
    assert env_registry.max_model_bytes == size - 1
    with pytest.raises(ModelTooLarge) as err:
        env_registry.register("again", src["mlp"])
    assert f"({size - 1} bytes) (set by RLHF_MAX_MODEL_BYTES)" in str(err.value)
    assert CheckpointRegistry(root, max_model_bytes=size).register("again", src["mlp"]).name == "again"  # arg wins
    for bad in ("abc", "0", "-5", "1.5"):
        monkeypatch.setenv("RLHF_MAX_MODEL_BYTES", bad)
        with pytest.raises(InvalidArgument, match="RLHF_MAX_MODEL_BYTES"):
            CheckpointRegistry(root).register("bad", src["mlp"])
    monkeypatch.delenv("RLHF_MAX_MODEL_BYTES")
    for bad in (0, -1, True, 2.5, "100"):
        with pytest.raises(InvalidArgument, match="max_model_bytes"):
            CheckpointRegistry(root, max_model_bytes=bad)
    assert CheckpointRegistry(root).specs() == ["again", "m"] and _leftovers(CheckpointRegistry(root)) == []


def test_a_file_that_grows_past_the_cap_while_copied_is_refused(registry, tmp_path):
    grown = tmp_path / "grown.onnx"
    grown.write_bytes(b"\0" * (3 * 1024 * 1024))
    registry.root.mkdir(parents=True)
    with pytest.raises(ModelTooLarge, match="grew past the registration cap"):
        registry._copy_in(grown, 1024, 2 * 1024 * 1024)  # measured at 1 KiB, 3 MiB when copied
    assert _leftovers(registry) == []


def test_the_registered_hash_is_the_files_sha256_and_checks_run_on_the_copy(registry, src, tmp_path):
    import hashlib

    cp = registry.register("model", src["mlp"])
    data = Path(src["mlp"]).read_bytes()
    assert cp.sha256 == hashlib.sha256(data).hexdigest() and cp.size_bytes == len(data)
    assert cp.path.read_bytes() == data and registry.inspect("model")["file_intact"]
    # a multi-chunk file hashes the same through the streaming helper
    big = tmp_path / "big.bin"
    payload = os.urandom(3 * 1024 * 1024 + 17)
    big.write_bytes(payload)
    assert _sha256_file(big) == hashlib.sha256(payload).hexdigest()
    # a failed registration (not ONNX) leaves no temp copy behind
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\x00\xffnot onnx" * 1000)
    with pytest.raises(InvalidArgument, match="not a readable ONNX model"):
        registry.register("garbage", garbage)
    assert _leftovers(registry) == [] and registry.specs() == ["model"]
    with pytest.raises(NotFound, match="not a regular file"):
        registry.register("dir", tmp_path)
