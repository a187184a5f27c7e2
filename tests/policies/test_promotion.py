"""promote_checkpoint: each refusal on its own (with its check named), the promotion policy
(a lax elo0 is measured but never promoted), the atomic pointer, the history and rollback,
the protection of promoted and restorable checkpoints; run_pipeline end to end on a tiny
campaign. Crash consistency is in test_promotion_crash.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from extrarlhf.checkpoints.registry import CheckpointRegistry, ProtectedCheckpoint
from extrarlhf.core.errors import InvalidArgument, RLHFError
from extrarlhf.policies.benchmarking import benchmark_models
from extrarlhf.policies.pipeline import STAGES, promotion_meaning, run_pipeline
from extrarlhf.policies.promotion import (
    PromotionPolicy,
    PromotionRefused,
    current_incumbent,
    promote_checkpoint,
    promotion_history,
    promotion_status,
    read_promoted,
    rollback_promotion,
)
from tests import onnx_factory
from tests.training_helpers import train_small


def _refused(fn, *args, **kwargs) -> list[str]:
    """The failed checks of a refused promotion/rollback."""
    with pytest.raises(PromotionRefused) as info:
        fn(*args, **kwargs)
    error = info.value
    assert error.code == "promotion_refused"
    checks = [r["check"] for r in error.details["reasons"]]
    for reason in error.details["reasons"]:
        assert reason["message"] and f"[{reason['check']}]" in str(error)
    return checks


def _pass_vs_random(ck: Path, name: str, seed: int = 1) -> dict:
    report = benchmark_models(name, "baseline:random", n_pairs=150, baseline_pairs=0, seed=seed, checkpoints_dir=ck)
    assert report["passed"], report["verdict"]
    return report


def test_each_refusal_names_its_check(tmp_path: Path) -> None:
    ck = tmp_path / "ck"
    train_small(ck, "good", seed=0)
    # nothing promoted: the first-promotion rule's incumbent
    assert current_incumbent(ck) == "baseline:random" and read_promoted(ck) is None

    assert _refused(promote_checkpoint, "ghost", checkpoints_dir=ck) == ["registered"]
    assert _refused(promote_checkpoint, "good", checkpoints_dir=ck) == ["benchmarked"]

    # latest benchmark undecided (one pair) -> not passed, and one pair is below the policy's minimum
    benchmark_models("good", "baseline:random", n_pairs=1, baseline_pairs=0, checkpoints_dir=ck)
    assert _refused(promote_checkpoint, "good", checkpoints_dir=ck) == ["benchmark_passed", "promotion_policy"]

    # a passed benchmark against a model that only ends its turns: the current incumbent is baseline:random
    CheckpointRegistry(ck).register("passive", onnx_factory.save(onnx_factory.v5_model({"is_end_turn": 5.0}),
                                                                 tmp_path / "passive.onnx"), "v5")
    report = benchmark_models("good", "passive", n_pairs=150, baseline_pairs=0, checkpoints_dir=ck)
    assert report["passed"], report["verdict"]
    assert _refused(promote_checkpoint, "good", checkpoints_dir=ck) == ["current_incumbent"]
    _pass_vs_random(ck, "good")

    # a degraded model: invalid (and so not passed)
    CheckpointRegistry(ck).register("broken", onnx_factory.save(onnx_factory.v5_nan(), tmp_path / "nan.onnx"), "v5")
    benchmark_models("broken", "baseline:random", n_pairs=2, baseline_pairs=0, checkpoints_dir=ck)
    assert _refused(promote_checkpoint, "broken", checkpoints_dir=ck) == ["benchmark_valid", "benchmark_passed",
                                                                           "promotion_policy"]

    # the weights were replaced after the benchmark: the played hash is not the registered one
    train_small(ck, "swapped", seed=2)
    _pass_vs_random(ck, "swapped")
    replacement = tmp_path / "other"
    train_small(replacement, "x", seed=3)
    CheckpointRegistry(ck).register("swapped", CheckpointRegistry(replacement).get("x").path, "v5", overwrite=True)
    assert _refused(promote_checkpoint, "swapped", checkpoints_dir=ck, require_current_incumbent=False) == \
        ["weights_hash"]

    # the stored model file changed on disk after registration
    train_small(ck, "tampered", seed=4)
    _pass_vs_random(ck, "tampered")
    path = CheckpointRegistry(ck).get("tampered").path
    original = path.read_bytes()
    path.write_bytes(original + b"\0")
    assert _refused(promote_checkpoint, "tampered", checkpoints_dir=ck, require_current_incumbent=False) == \
        ["file_intact"]
    path.write_bytes(original)

    # a damaged report file of the candidate might be its latest: refused, never guessed around
    damaged = ck / "benchmarks" / "tampered-vs-baseline_random-99.json"
    damaged.write_text("{not json")
    assert _refused(promote_checkpoint, "tampered", checkpoints_dir=ck, require_current_incumbent=False) == \
        ["benchmark_reports_readable"]
    damaged.unlink()

    # nothing was promoted by any refusal
    assert read_promoted(ck) is None and promotion_history(ck) == []
    result = promote_checkpoint("good", checkpoints_dir=ck, require_current_incumbent=False)
    assert result["promoted"]["name"] == "good" and result["previous"] is None
    assert _refused(promote_checkpoint, "good", checkpoints_dir=ck, require_current_incumbent=False) == \
        ["not_already_promoted"]
    # "tampered" was benchmarked against random, not against the promoted "good"
    assert _refused(promote_checkpoint, "tampered", checkpoints_dir=ck) == ["current_incumbent"]


def test_pointer_history_and_rollback(tmp_path: Path) -> None:
    ck = tmp_path / "ck"
    for name, seed in (("first", 0), ("second", 1)):
        train_small(ck, name, seed=seed)
        _pass_vs_random(ck, name)
    assert _refused(rollback_promotion, checkpoints_dir=ck) == ["promoted"]
    a = promote_checkpoint("first", checkpoints_dir=ck, require_current_incumbent=False)["promoted"]
    assert _refused(rollback_promotion, checkpoints_dir=ck) == ["previous_promotion"]
    b = promote_checkpoint("second", checkpoints_dir=ck, require_current_incumbent=False)
    assert b["previous"]["name"] == "first" and b["promoted"]["previous"] == {"name": "first",
                                                                              "weights_hash": a["weights_hash"]}
    pointer = json.loads((ck / "promoted.json").read_text())
    registered = CheckpointRegistry(ck).get("second")
    assert pointer["name"] == "second" and pointer["weights_hash"] == registered.weights_hash
    assert pointer["sha256"] == registered.sha256 and pointer["benchmark"]["decision"] == "H1"
    assert pointer["benchmark"]["report"].endswith("second-vs-baseline_random-1.json")
    assert current_incumbent(ck) == "second"
    assert not [p for p in ck.iterdir() if p.name.endswith(".tmp")]

    rolled = rollback_promotion(checkpoints_dir=ck)
    assert rolled["promoted"]["name"] == "first" and rolled["rolled_back"]["name"] == "second"
    assert read_promoted(ck)["name"] == "first" and current_incumbent(ck) == "first"
    assert [(e["event"], e["name"]) for e in promotion_history(ck)] == [
        ("promote", "first"), ("promote", "second"), ("rollback", "first")]
    lines = (ck / "promoted_history.jsonl").read_text().splitlines()
    assert len(lines) == 3 and all(json.loads(line)["pointer"]["name"] for line in lines)
    status = promotion_status(ck)
    assert status["history_consistent"] and status["promoted_intact"] and status["can_roll_back_to"] is None
    assert _refused(rollback_promotion, checkpoints_dir=ck) == ["previous_promotion"]

    # promote "second" again, then make "first" unusable (its file changed on disk): the rollback
    # is refused with why (re-registering "first" is refused outright: a rollback could restore it)
    promote_checkpoint("second", checkpoints_dir=ck, require_current_incumbent=False)
    assert promotion_status(ck)["can_roll_back_to"] == "first"
    first_file = CheckpointRegistry(ck).get("first").path
    original = first_file.read_bytes()
    first_file.write_bytes(original + b"\0")
    assert _refused(rollback_promotion, checkpoints_dir=ck) == ["previous_usable"]
    assert read_promoted(ck)["name"] == "second"
    first_file.write_bytes(original)
    assert rollback_promotion(checkpoints_dir=ck)["promoted"]["name"] == "first"

    # the promoted checkpoint is never overwritten by training (the registry's check)
    promote_checkpoint("second", checkpoints_dir=ck, require_current_incumbent=False)
    with pytest.raises(RLHFError) as info:
        train_small(ck, "second", seed=9, overwrite=True)
    assert info.value.code == "checkpoint_protected" and "promoted.json" in str(info.value)
    assert CheckpointRegistry(ck).get("second").weights_hash == b["promoted"]["weights_hash"]


def test_pipeline_end_to_end_on_a_tiny_campaign(tmp_path: Path) -> None:
    dirs = {"sessions_dir": tmp_path / "sessions", "datasets_dir": tmp_path / "datasets",
            "checkpoints_dir": tmp_path / "ck"}
    small = {"min_v5_battles": 10, "min_v5_decisions": 300}
    seen: list[str] = []

    def progress(stage: str, done: int, total: int) -> None:
        assert 0 <= done and (total == 0 or done <= total)
        if not seen or seen[-1] != stage:
            seen.append(stage)

    # not enough data for the default thresholds: stops at readiness, nothing trained
    stopped = run_pipeline("tiny", "tiny-bc", n_battles=6, seed=1, readiness_policy=None, **dirs)
    assert stopped["stopped_at"] == "readiness" and not stopped["completed"] and not stopped["promoted"]
    assert "need 20" in stopped["reason"] and "train" not in stopped["stages"]
    assert CheckpointRegistry(dirs["checkpoints_dir"]).specs() == []

    result = run_pipeline("tiny", "tiny-bc", n_battles=30, seed=1, epochs=3, incumbent="baseline:random",
                          require_current_incumbent=False, n_pairs=150, baseline_pairs=2, readiness_policy=small,
                          train_options={"lr": 3e-3}, progress=progress, **dirs)
    assert seen == list(STAGES)
    stages = result["stages"]
    assert result["completed"] and result["promoted"] and result["stopped_at"] is None
    assert stages["collect"]["ran"] == 24 and stages["collect"]["skipped"] == 6  # the group resumed
    assert stages["materialize"]["dataset_id"] == "tiny/v2" and stages["materialize"]["row_counts"]["battles"] == 30
    assert stages["readiness"]["v5_policy_training_ready"]
    assert stages["train"]["dataset_id"] == "tiny/v2"
    assert stages["benchmark"]["passed"] and stages["benchmark"]["incumbent"] == "baseline:random"
    assert stages["promote"]["promoted"] and read_promoted(dirs["checkpoints_dir"])["name"] == "tiny-bc"
    means = stages["promote"]["means"]  # a first promotion says the bar was random, and how it fares vs baselines
    assert means.startswith("tiny-bc beat the incumbent baseline:random (score ")
    assert "this is the first promotion, so the bar was the random baseline" in means
    assert " against baseline:greedy (2 pairs)" in means
    # the candidate's rows, then the incumbent's reference row named as the incumbent's (issue 49)
    own = means.split("; it scores ", 1)[1].split(";", 1)[0]
    assert own.count(" against ") == 2 and "against baseline:random" in own and "against baseline:greedy" in own
    assert "; for reference, the incumbent baseline:random scores " in means
    assert means.split("; for reference, the incumbent baseline:random scores ", 1)[1].endswith(
        " against baseline:greedy (2 pairs)")
    # what the L0 skill tells agents to read is in the result (issue 49): every `stages.…` path it names
    assert stages["collect"]["summary"]["policy_warnings"] == 0 and len(stages["collect"]["summary"]["weights_hashes"]) == 0
    assert stages["benchmark"]["candidate"]["weights_hash_matches"] is True
    assert stages["benchmark"]["candidate"]["played_weights_hash"] == stages["train"]["weights_hash"]
    skill = (Path(__file__).resolve().parents[2] / "skills" / "extra-rlhf-l0-pipeline" / "SKILL.md").read_text()
    paths = set(re.findall(r"`stages\.([a-z_.0-9]+)`", skill))
    assert {"promote.means", "benchmark.candidate.weights_hash_matches", "benchmark.report_path"} <= paths
    assert Path(stages["benchmark"]["report_path"]).is_file()
    json.dumps(result)

    # a taken checkpoint name is refused before anything is collected
    with pytest.raises(RLHFError) as info:
        run_pipeline("other-group", "tiny-bc", n_battles=5, **dirs)
    assert info.value.code == "already_exists" and not (dirs["sessions_dir"] / "other-group").exists()

    # next round: the promoted checkpoint is the incumbent; a short undecided match is not promoted
    again = run_pipeline("tiny", "tiny-bc2", n_battles=30, seed=1, epochs=2, n_pairs=3, baseline_pairs=0,
                         readiness_policy=small, **dirs)
    assert again["completed"] and not again["promoted"]
    assert again["stages"]["benchmark"]["incumbent"] == "tiny-bc"
    assert again["stages"]["collect"]["ran"] == 0  # the group already holds 30 battles
    assert [r["check"] for r in again["stages"]["promote"]["reasons"]] == ["benchmark_passed", "promotion_policy"]
    assert not again["stages"]["benchmark"]["promotion_eligible"]
    assert [b["check"] for b in again["stages"]["benchmark"]["promotion_blockers"]] == \
        ["benchmark_passed", "promotion_policy"]
    assert read_promoted(dirs["checkpoints_dir"])["name"] == "tiny-bc"
    for path in paths:  # in the promoted result, or (the refusal's reasons) in the refused one
        assert _at(stages, path) or _at(again["stages"], path), f"the L0 skill names stages.{path}, not in a result"


def _at(tree: dict, path: str) -> bool:
    for key in path.split("."):
        if not isinstance(tree, dict) or key not in tree:
            return False
        tree = tree[key]
    return True


def test_promotion_meaning_names_the_incumbents_reference_rows_as_the_incumbents() -> None:
    """benchmark_models plays the candidate and the incumbent against each baseline: the
    incumbent's row (here below 0.5 against greedy) is never quoted as the candidate's score."""
    def row(model: str, opponent: str, score: float) -> dict:
        return {"model": model, "opponent": opponent, "pairs": 20, "wins": 0, "draws": 0, "losses": 0,
                "win_rate": None, "score": score}

    bench = {"match": {"score": 0.71, "pairs": 120},
             "baselines": [row("bc-v1", "baseline:random", 0.97), row("bc-v1", "baseline:greedy", 0.5),
                           row("baseline:random", "baseline:greedy", 0.0)]}
    means = promotion_meaning("bc-v1", "baseline:random", bench)
    assert means == ("bc-v1 beat the incumbent baseline:random (score 0.71 over 120 pairs); this is the first "
                     "promotion, so the bar was the random baseline; it scores 0.97 against baseline:random "
                     "(20 pairs), 0.50 against baseline:greedy (20 pairs); for reference, the incumbent "
                     "baseline:random scores 0.00 against baseline:greedy (20 pairs)")
    assert "does not beat" not in means  # the incumbent's 0.00 is not the candidate's
    later = promotion_meaning("bc-v2", "bc-v1", {"match": {"score": 0.6, "pairs": 200}, "baselines": [
        row("bc-v2", "baseline:random", 0.9), row("bc-v2", "baseline:greedy", 0.4),
        row("bc-v1", "baseline:random", 0.97), row("bc-v1", "baseline:greedy", 0.5)]})
    assert later.endswith("0.40 against baseline:greedy (20 pairs): it does not beat baseline:greedy; for "
                          "reference, the incumbent bc-v1 scores 0.97 against baseline:random (20 pairs), 0.50 "
                          "against baseline:greedy (20 pairs)")


# ---------------------------------------------------------------------------- the promotion policy
def test_promotion_policy_is_validated_and_only_an_object() -> None:
    policy = PromotionPolicy()
    assert policy.as_dict() == {"min_elo0": 0.0, "max_alpha": 0.05, "max_beta": 0.05, "min_pairs": 50}
    for bad in ({"min_elo0": float("nan")}, {"min_elo0": "0"}, {"max_alpha": 0.0}, {"max_alpha": 0.5},
                {"max_beta": True}, {"min_pairs": 0}, {"min_pairs": 2.5}, {"min_pairs": 10 ** 6}):
        with pytest.raises(InvalidArgument) as info:
            PromotionPolicy(**bad)
        assert info.value.code == "invalid_argument" and next(iter(bad)) in str(info.value)
    assert PromotionPolicy.coerce(None) == policy and PromotionPolicy.coerce(PromotionPolicy(min_pairs=9)).min_pairs == 9
    with pytest.raises(InvalidArgument, match="PromotionPolicy object"):
        PromotionPolicy.coerce({"min_elo0": -400})  # a client's JSON never becomes a policy
    with pytest.raises(InvalidArgument, match="PromotionPolicy object"):
        promote_checkpoint("x", checkpoints_dir="/nonexistent", policy={"min_pairs": 1})


def test_a_lax_elo0_is_measured_but_never_promoted(tmp_path: Path) -> None:
    """The issue's case: elo0=-400, a weak candidate against baseline:greedy. The SPRT accepts H1
    (elo >= -300 against elo <= -400) for a candidate that lost about 4 battles in 5."""
    ck = tmp_path / "ck"
    train_small(ck, "weak", seed=0, epochs=1)  # one epoch: much weaker than greedy
    report = benchmark_models("weak", "baseline:greedy", n_pairs=100, elo0=-400.0, elo1=-300.0, baseline_pairs=0,
                              seed=1, checkpoints_dir=ck)
    m = report["match"]
    assert report["valid"] and m["sprt"]["decision"] == "H1"  # the measurement itself is what it is
    assert m["score"] < 0.3 and m["losses"] > 3 * m["wins"] and m["elo"] < -150  # a clear loss
    assert not report["passed"] and not report["promotion_eligible"]
    assert "PASSED" not in report["verdict"] and "PASSED" not in report["markdown"]
    assert report["verdict"].startswith("NOT ELIGIBLE FOR PROMOTION") and "elo0=-400" in report["verdict"]
    assert f"scored {m['score']:.3f}" in report["verdict"]
    assert [b["check"] for b in report["promotion_blockers"]] == ["promotion_policy"]
    assert "min_elo0=0" in report["promotion_blockers"][0]["message"]
    assert report["promotion_policy"] == PromotionPolicy().as_dict()
    assert "**not eligible**" in report["markdown"]
    # promote_checkpoint refuses it with a named check, whatever the report says of itself
    # (played against greedy, not the first-promotion rule's incumbent: that check is waived here)
    checks = _refused(promote_checkpoint, "weak", checkpoints_dir=ck, require_current_incumbent=False)
    assert checks == ["promotion_policy"]
    stored = json.loads(Path(report["report_path"]).read_text())
    stored["passed"] = stored["promotion_eligible"] = True  # a doctored report is judged from its settings
    Path(report["report_path"]).write_text(json.dumps(stored))
    assert _refused(promote_checkpoint, "weak", checkpoints_dir=ck, require_current_incumbent=False) == \
        ["promotion_policy"]
    assert read_promoted(ck) is None
    # only a core caller's policy object changes the rule
    loose = PromotionPolicy(min_elo0=-400.0)
    assert promote_checkpoint("weak", checkpoints_dir=ck, policy=loose, require_current_incumbent=False
                              )["promoted"]["policy"]["min_elo0"] == -400.0


def test_alpha_beta_and_pairs_below_the_policy_are_not_eligible(tmp_path: Path) -> None:
    ck = tmp_path / "ck"
    train_small(ck, "good", seed=0)
    # alpha and beta above 0.05: H1 is accepted, but that does not count
    lax = benchmark_models("good", "baseline:random", n_pairs=150, alpha=0.2, beta=0.2, baseline_pairs=0, seed=1,
                           checkpoints_dir=ck)
    assert lax["match"]["sprt"]["decision"] == "H1" and not lax["passed"]
    messages = [b["message"] for b in lax["promotion_blockers"]]
    assert [b["check"] for b in lax["promotion_blockers"]] == ["promotion_policy"] * 2
    assert "alpha=0.2" in messages[0] and "beta=0.2" in messages[1]
    assert _refused(promote_checkpoint, "good", checkpoints_dir=ck, require_current_incumbent=False) == \
        ["promotion_policy", "promotion_policy"]
    # too few pairs: a decided H1 after 20 pairs is not enough
    short = benchmark_models("good", "baseline:random", n_pairs=20, elo1=200.0, baseline_pairs=0, seed=1,
                             checkpoints_dir=ck)
    assert short["match"]["sprt"]["decision"] == "H1" and short["match"]["pairs"] == 20 and not short["passed"]
    assert "min_pairs=50" in short["promotion_blockers"][0]["message"] and "PASSED" not in short["verdict"]
    assert _refused(promote_checkpoint, "good", checkpoints_dir=ck, require_current_incumbent=False) == \
        ["promotion_policy"]
    # the same settings with enough pairs: eligible, and promoted
    enough = benchmark_models("good", "baseline:random", n_pairs=150, elo1=200.0, baseline_pairs=0, seed=1,
                              checkpoints_dir=ck)
    assert enough["passed"] and enough["promotion_eligible"] and enough["promotion_blockers"] == []
    assert enough["match"]["pairs"] >= 50 and enough["verdict"].startswith("PASSED")
    promoted = promote_checkpoint("good", checkpoints_dir=ck, require_current_incumbent=False)["promoted"]
    assert promoted["benchmark"]["sprt"] == {"elo0": 0.0, "elo1": 200.0, "alpha": 0.05, "beta": 0.05}


# ---------------------------------------------------------------------------- protection
def test_promoted_and_restorable_checkpoints_are_never_overwritten(tmp_path: Path) -> None:
    ck = tmp_path / "ck"
    for name, seed in (("first", 0), ("second", 1), ("third", 2)):
        train_small(ck, name, seed=seed)
        _pass_vs_random(ck, name)
    other = tmp_path / "other"
    train_small(other, "x", seed=7)
    replacement = CheckpointRegistry(other).get("x").path
    registry = CheckpointRegistry(ck)
    # nothing promoted: an overwrite is allowed (and then re-benchmarked, as before)
    registry.register("third", replacement, "v5", overwrite=True)
    promote_checkpoint("first", checkpoints_dir=ck, require_current_incumbent=False)
    promote_checkpoint("second", checkpoints_dir=ck, require_current_incumbent=False)
    before = {n: registry.get(n) for n in ("first", "second")}

    with pytest.raises(ProtectedCheckpoint) as info:
        registry.register("second", replacement, "v5", overwrite=True)
    assert info.value.code == "checkpoint_protected"
    assert "is the promoted checkpoint" in str(info.value) and str((ck / "promoted.json").absolute()) in str(info.value)
    with pytest.raises(ProtectedCheckpoint) as info:
        registry.register("first", replacement, "v5", overwrite=True)
    assert "rollback_promotion" in str(info.value) and "promoted_history.jsonl" in str(info.value)
    with pytest.raises(ProtectedCheckpoint):
        registry.check_replaceable("first")
    registry.check_replaceable("third")  # never promoted: replaceable
    with pytest.raises(RLHFError) as info:  # training goes through the same check, before any work
        train_small(ck, "first", seed=9, overwrite=True)
    assert info.value.code == "checkpoint_protected"
    # nothing was touched: files, entries, pointer
    assert {n: registry.get(n) for n in ("first", "second")} == before
    status = promotion_status(ck)
    assert status["promoted_intact"] and status["consistent"] and status["can_roll_back_to"] == "first"
    assert all(registry.inspect(n)["file_intact"] for n in ("first", "second"))

    # after a rollback "second" can no longer be restored, so it may be replaced; "first" may not
    rollback_promotion(checkpoints_dir=ck)
    registry.register("second", replacement, "v5", overwrite=True)
    assert registry.get("second").weights_hash != before["second"].weights_hash
    with pytest.raises(ProtectedCheckpoint, match="is the promoted checkpoint"):
        registry.register("first", replacement, "v5", overwrite=True)
