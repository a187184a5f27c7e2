"""``@promoted`` / ``promoted`` name the promoted checkpoint wherever a spec is taken (issue 27):
resolved to the concrete name, so traces and reports record that name and its weights hash;
nothing promoted is a clear error naming the registry it looked in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from extrarlhf.checkpoints import CheckpointRegistry
from extrarlhf.core.errors import UnknownSpec
from extrarlhf.policies.benchmarking import benchmark_models
from extrarlhf.policies.promotion import promote_checkpoint
from extrarlhf.runtime.actors import resolve_actor
from extrarlhf.runtime.series import run_series

from ..policies.test_promotion import _pass_vs_random
from ..training_helpers import train_small


def test_nothing_promoted_is_a_clear_error_naming_the_registry(tmp_path: Path):
    with pytest.raises(UnknownSpec) as caught:
        resolve_actor("@promoted", "opponent", tmp_path / "ck")
    assert "nothing is promoted" in str(caught.value) and str((tmp_path / "ck").absolute()) in str(caught.value)
    with pytest.raises(UnknownSpec, match=r"checkpoints looked up in /"):
        resolve_actor("nobody", "opponent", tmp_path / "ck")


def test_the_promoted_checkpoint_is_a_spec_everywhere(tmp_path: Path):
    ck = tmp_path / "ck"
    train_small(ck, "champ", seed=0)
    _pass_vs_random(ck, "champ")
    promote_checkpoint("champ", checkpoints_dir=ck)
    weights = CheckpointRegistry(ck).get("champ").weights_hash
    for spec in ("@promoted", "promoted"):
        actor = resolve_actor(spec, "opponent", ck)
        assert (actor.spec, actor.weights_hash) == ("champ", weights)
    searching = resolve_actor("search:@promoted?sims=2", "opponent", ck)
    assert searching.spec == "search:champ?sims=2" and searching.rollout.weights_hash == weights

    run_series(tmp_path / "s", "vs-promoted", 1, p1_model="baseline:greedy", opponent="@promoted",
               checkpoints_dir=ck)
    manifest = json.loads((tmp_path / "s" / "vs-promoted" / "manifest.json").read_text())
    assert manifest["configuration"]["opponent"]["spec"] == "champ"  # the concrete name, never the alias
    assert manifest["configuration"]["opponent"]["weights_hash"] == weights

    report = benchmark_models("baseline:greedy", "@promoted", n_pairs=2, baseline_pairs=0, checkpoints_dir=ck,
                              write=False)
    assert report["incumbent"]["spec"] == "champ" and report["incumbent"]["registered_weights_hash"] == weights

    train_small(ck, "promoted", seed=1)  # a checkpoint of that very name wins for "promoted"
    assert resolve_actor("promoted", "opponent", ck).spec == "promoted"
    assert resolve_actor("@promoted", "opponent", ck).spec == "champ"
