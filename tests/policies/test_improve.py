"""The improvement loop (DESIGN section 14): soft targets from the search teacher's action
values, ``imitate="search"``, the running SPRT, and :func:`improve_policy` end to end on real
battles, checkpoints, benchmarks and promotions."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa
import pytest

from extrarlhf.core.errors import InvalidArgument, RLHFError
from extrarlhf.policies.improve import improve_policy, round_groups
from extrarlhf.policies.promotion import (
    DEFAULT_INCUMBENT,
    current_incumbent,
    read_promoted,
)
from extrarlhf.runtime.sessions import SessionStore
from extrarlhf.training.data import search_targets, target_fallback
from extrarlhf.training.stream import DatasetStream
from extrarlhf.training.train import check_dataset
from tests.mcp_helpers import read_jsonl
from tests.training_helpers import datasets_dir, train_small

TEACHER = "search:baseline:greedy?sims=2"


def _json(values):
    return orjson.dumps({"probabilities": None, "value": 0.0, "action_values": values}).decode()


def test_search_targets_share_ties_rank_the_rest_and_keep_one_hot_elsewhere() -> None:
    # decision 0: searched values with a tie at the top and an unsearched action;
    # decision 1: a greedy decision (no action values); decision 2: a forced move
    column = pa.chunked_array([[_json([0.2, None, 0.5, 0.5]), '{"rationale": "greedy"}', _json([None])]])
    offsets = np.array([0, 4, 7, 8])
    labels = np.array([2, 1, 0])
    t, valued = search_targets(column, offsets, labels, temperature=0.1)
    assert list(valued) == [True, False, False]  # decision 2's one searched action teaches nothing
    assert t.dtype == np.float32 and t.shape == (8,)
    top = 1.0 / (2.0 + np.exp(-3.0))
    assert t[2] == pytest.approx(top) and t[3] == pytest.approx(top)  # the tie is shared, not a tie-break
    assert t[0] == pytest.approx(np.exp(-3.0) * top) and t[1] == 0.0  # ranked below; never searched -> 0
    assert t[0:4].sum() == pytest.approx(1.0)
    assert list(t[4:7]) == [0.0, 1.0, 0.0] and t[7] == 1.0  # one-hot where there are no values
    # a colder temperature moves the mass onto the best actions
    cold, _ = search_targets(column, offsets, labels, temperature=0.01)
    assert cold[0] < t[0] and cold[2] == pytest.approx(0.5, abs=1e-6)


def test_search_values_target_on_data_without_search_is_the_choice_target(tmp_path: Path) -> None:
    """No action values anywhere: every soft target is the one-hot choice, so the weights are
    bit-identical to imitating the choice (the Dagster default relies on it)."""
    a = train_small(tmp_path / "a", "a", seed=5)
    b = train_small(tmp_path / "b", "b", seed=5, target="search_values", temperature=0.05)
    assert a["weights_hash"] == b["weights_hash"]
    assert b["hyperparameters"]["target"] == "search_values"
    # ... and the result says so, never silently (issue 24): what was asked, what was used, why
    assert a["target_fallback"] is None
    fallback = b["target_fallback"]
    assert fallback["asked"] == "search_values" and fallback["used"] == "choice"
    assert fallback["decisions_with_values"] == 0 and fallback["decisions"] == b["data"]["train"]["imitated_with_choice"]
    assert "no imitated decision of the train split carries a search's action values" in fallback["why"]
    card = json.loads(Path(b["card_path"]).read_text(encoding="utf-8"))
    assert card["training"]["data"]["target_fallback"] == fallback


def test_bad_target_is_refused_with_the_choices(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match=r"target must be one of choice, search_values, got 'values'"):
        train_small(tmp_path, "x", target="values")
    with pytest.raises(InvalidArgument, match=r"temperature must be a number in \(0.0, 10.0\], got 0"):
        train_small(tmp_path, "x", target="search_values", temperature=0)
    assert not (tmp_path / "x.card.json").exists()


def _loop(root: Path, **kw):
    sprt: list[dict] = []
    rounds: list[dict] = []
    result = improve_policy("exit", sessions_dir=root / "sessions", datasets_dir=root / "datasets",
                            checkpoints_dir=root / "checkpoints", sims=2, max_workers=1, epochs=3,
                            baseline_pairs=0, sprt_progress=sprt.append, round_done=rounds.append, **kw)
    return result, rounds, sprt


def test_improve_policy_rounds_promote_and_continue(tmp_path: Path) -> None:
    result, rounds, sprt = _loop(tmp_path, max_rounds=2, first_battles=20, battles_per_round=20, n_pairs=150)
    assert result["teacher"] == TEACHER and [r["round"] for r in rounds] == [1, 2] == \
        [r["round"] for r in result["rounds"]]
    first, second = result["rounds"]
    # round 1: nothing promoted, so the first-promotion rule's baseline:random is the incumbent
    assert first["incumbent"] == DEFAULT_INCUMBENT == "baseline:random"
    assert first["promoted"] and first["benchmark"]["passed"] and first["student"] == "exit-r01"
    # round 2 is benchmarked against round 1's promoted student, trained on both rounds' battles
    assert second["incumbent"] == "exit-r01" and second["groups_trained_on"] == 2
    # DAgger: round 1's battles are the teacher's; round 2's are the incumbent's, labelled by the teacher
    assert first["collector"] == TEACHER and second["collector"] == TEACHER + "&play=exit-r01"
    store = SessionStore(tmp_path / "sessions")
    entry = next(e for e in store.read_catalog("exit-r02") if e["status"] == "finished")
    p1 = read_jsonl(store.battle_dir("exit-r02", entry["battle_id"]) / "v5" / "meta.jsonl")[0]["actors"]["p1"]
    assert p1["spec"] == second["collector"] and p1["search"]["play"]["spec"] == "exit-r01"
    assert "verdict" in second["benchmark"]
    assert (second["promoted"] and read_promoted(tmp_path / "checkpoints")["name"] == "exit-r02") or \
        (not second["promoted"] and second["not_promoted"] and current_incumbent(tmp_path / "checkpoints") == "exit-r01")
    assert result["stop_reason"] == "max_rounds (2) reached"
    # the running SPRT: pairs grow within each benchmark and end at the report's pairs
    pairs = [s["pairs"] for s in sprt]
    ends = [i for i in range(len(pairs)) if i + 1 == len(pairs) or pairs[i + 1] < pairs[i]]
    assert [pairs[i] for i in ends] == [first["benchmark"]["pairs"], second["benchmark"]["pairs"]]
    assert all(s["lower"] < 0 < s["upper"] and s["wins"] + s["draws"] + s["losses"] == 2 * s["pairs"] for s in sprt)

    # the dataset holds every round's battles; the students learned the teacher's decisions only
    info = check_dataset("exit", tmp_path / "datasets")
    assert info["manifest"]["row_counts"]["battles"] == 40
    with DatasetStream(info, "search", 0.05) as stream:
        train = stream.scan()["train"]
    assert train.imitated_decisions < train.decisions and train.valued_with_choice
    card = json.loads((tmp_path / "checkpoints" / "exit-r02.card.json").read_text())
    assert card["training"]["imitate"] == "search"
    assert card["training"]["hyperparameters"]["target"] == "search_values"
    assert card["training"]["data"]["target_fallback"] is None  # the teacher's values were learnt
    assert target_fallback(train, "search_values") is None

    # a second call continues the numbering and trains on every earlier group; the time budget
    # stops it after the round it could estimate
    again, _, _ = _loop(tmp_path, max_rounds=5, minutes=0.001, battles_per_round=20, n_pairs=20)
    assert [r["round"] for r in again["rounds"]] == [3]
    assert again["rounds"][0]["groups_trained_on"] == 3
    assert again["stop_reason"].startswith("time budget: 0.001 min")
    assert round_groups(tmp_path / "sessions", "exit") == ["exit-r01", "exit-r02", "exit-r03"]


def test_with_guide_the_teacher_after_round_1_is_the_search_guided_by_the_incumbent(tmp_path: Path) -> None:
    result, rounds, _ = _loop(tmp_path, max_rounds=2, first_battles=20, battles_per_round=20, n_pairs=150,
                              guide="mix")
    first, second = result["rounds"]
    assert first["collector"] == TEACHER and first["promoted"]  # nothing to guide yet: greedy rollouts
    assert second["collector"] == "search:exit-r01?sims=2&guide=mix&turns=3&play=exit-r01"
    store = SessionStore(tmp_path / "sessions")
    entry = next(e for e in store.read_catalog("exit-r02") if e["status"] == "finished")
    p1 = read_jsonl(store.battle_dir("exit-r02", entry["battle_id"]) / "v5" / "meta.jsonl")[0]["actors"]["p1"]
    assert p1["search"]["guide"]["leaf"] == "mix" and p1["search"]["rollout"]["spec"] == "exit-r01"
    assert p1["search"]["play"]["spec"] == "exit-r01" and "verdict" in second["benchmark"]
    with pytest.raises(InvalidArgument, match=r"guide must be one of value, mix, rollout"):
        _loop(tmp_path, guide="deep")


def test_improve_policy_refuses_bad_arguments_before_playing(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match=r"minutes must be a positive number, got 0"):
        _loop(tmp_path, minutes=0)
    with pytest.raises(InvalidArgument, match=r"battles_per_round must be a positive integer, got -1"):
        _loop(tmp_path, battles_per_round=-1)
    with pytest.raises(InvalidArgument, match=r"dagger must be true or false, got 'yes'"):
        _loop(tmp_path, dagger="yes")
    with pytest.raises(InvalidArgument, match=r"teacher: search spec .* nests a search as its rollout policy"):
        _loop(tmp_path, rollout="search:baseline:greedy")
    with pytest.raises(RLHFError, match=r"unknown teacher's rollout policy spec 'no-such-checkpoint'; available: "):
        _loop(tmp_path, rollout="no-such-checkpoint")
    assert not (tmp_path / "sessions").exists() and not (tmp_path / "checkpoints").exists()


def test_imitate_search_selects_every_search_actor() -> None:
    info = check_dataset("mixed", datasets_dir())
    with DatasetStream(info, "search") as stream:
        train = stream.scan()["train"]
    assert train.imitated_decisions == 0 < train.decisions  # the shared data has no search decision


def test_round_seconds_counts_collection_per_new_battle_and_the_rest_per_battle_held() -> None:
    from extrarlhf.policies.improve import round_seconds

    # 0.4 s per new battle collected, 0.02 s per battle held for materializing, training, benchmarking
    assert round_seconds((0.4, 0.02), 1000, 200) == pytest.approx(0.4 * 200 + 0.02 * 1200)
    # the fixed cost of retraining on what is held does not shrink with a smaller round
    assert round_seconds((0.4, 0.02), 8000, 0) == pytest.approx(160.0)


def test_an_imitation_round_is_cut_to_what_fits_with_the_margin() -> None:
    from extrarlhf.policies.improve import ROUND_MARGIN, battles_that_fit, round_seconds

    cost = (0.0188, 0.0117)  # the order of a 60-minute loop's round 4 (25,000 new battles, 40,000 held)
    # the overrun this prevents: a round predicted to just fit the 23 minutes left (30,468 battles
    # without a margin) was still training 26 minutes later
    assert round_seconds(cost, 40_000, 30_468) == pytest.approx(1396, abs=2)
    fits = battles_that_fit(cost, 40_000, 62_500, 1396)
    assert 15_000 < fits < 30_468
    assert ROUND_MARGIN * round_seconds(cost, 40_000, fits) <= 1396 < ROUND_MARGIN * round_seconds(cost, 40_000, fits + 1)
    assert battles_that_fit(cost, 40_000, 1_000, 1396) == 1_000  # a round that fits is played whole
    assert battles_that_fit(cost, 40_000, 1_000, 400) < 0  # retraining on what is held alone would not fit


def test_a_fine_tune_rounds_benchmark_plays_only_the_pairs_that_fit_in_its_time() -> None:
    from extrarlhf.policies.improve import benchmark_pair_seconds, contest_pairs

    # the overrun this prevents: a last round's SPRT between two nearly equal networks ran 3,713
    # pairs where the loop had kept 26 s; at 10 ms a pair (and a 1.25 margin) 26 s hold 2,080
    assert contest_pairs(26.0, 0.01, 10_000) == 2080
    assert contest_pairs(600.0, 0.01, 10_000) == 10_000  # never above the cap asked for
    assert contest_pairs(-5.0, 0.01, 10_000) == 0        # no time left: no pairs (the round is not started)
    assert contest_pairs(26.0, None, 10_000) == 10_000   # nothing timed yet
    timed = {"stages": {"benchmark": {"match": {"pairs": 500}}}, "seconds": {"benchmark": 6.0}}
    assert benchmark_pair_seconds(timed) == pytest.approx(0.012)
    assert benchmark_pair_seconds({"stages": {}, "seconds": {}}) is None


def test_improve_policy_finetune_rounds_follow_the_imitation_rounds(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from extrarlhf.policies import improve
    from tests.native_helpers import require_native

    require_native()
    # the whole budget is the fine-tune rounds': round 1 (always played) is the only imitation round
    monkeypatch.setattr(improve, "FINETUNE_CONTEST_SECONDS", 5.0)  # a tiny loop's benchmark reserve
    monkeypatch.setattr(improve, "MIN_FINETUNE_MINUTES", 0.01)
    monkeypatch.setattr(improve, "FINETUNE_EXPORT_SECONDS", 1.0)
    monkeypatch.setattr(improve, "MIN_ROUND_PAIRS", 1)
    tiny = {"num_envs": 8, "horizon": 8, "minibatch": 32, "eval_every": 1, "eval_battles": 16, "max_updates": 1,
            "threads": 1}
    result, rounds, _ = _loop(tmp_path, max_rounds=3, minutes=1.0, finetune_minutes=1.0, finetune_round_minutes=0.1,
                              finetune_options=tiny, first_battles=20, n_pairs=150)
    assert [r["kind"] for r in result["rounds"]] == ["imitation", "finetune", "finetune"], result["stop_reason"]
    assert [r["kind"] for r in result["rounds"]] == [r["kind"] for r in rounds]
    first, tune1, tune2 = result["rounds"]
    assert first["promoted"] and first["student"] == "exit-r01"
    # the first fine-tune starts from the incumbent, the next from it whether or not it was promoted;
    # each is benchmarked against the incumbent of its round
    assert tune1["base"] == tune1["incumbent"] == "exit-r01" and tune1["student"] == "exit-r02"
    assert tune2["base"] == "exit-r02" and tune2["incumbent"] == ("exit-r02" if tune1["promoted"] else "exit-r01")
    assert tune2["benchmark"]["incumbent"] == tune2["incumbent"]
    card2 = json.loads((tmp_path / "checkpoints" / "exit-r03.card.json").read_text())
    assert card2["training"]["base"]["name"] == "exit-r02"
    assert tune1["finetune"]["updates"] == 1 and "verdict" in tune1["benchmark"]
    # each round's SPRT is capped to the pairs that fit in what its fine-tune left of the budget
    for tune in (tune1, tune2):
        assert 1 <= tune["max_pairs"] <= 150 and tune["benchmark"]["pairs"] <= tune["max_pairs"]
    card = json.loads((tmp_path / "checkpoints" / "exit-r02.card.json").read_text())
    assert card["training"]["method"] == "ppo_finetune" and card["training"]["base"]["name"] == "exit-r01"
    assert result["stop_reason"] == "max_rounds reached (imitation and fine-tune rounds)"
    # round 2 would not fit whole in the imitation budget (none is left): not cut, the fine-tunes get the time
    assert result["imitation_stopped"].endswith("the next imitation round (300 battles) would not fit whole, "
                                                "so the rest goes to the fine-tune rounds"), result["imitation_stopped"]
    # a second call numbers its rounds after the fine-tune rounds too (they have a checkpoint, no group)
    assert improve.last_round("exit", round_groups(tmp_path / "sessions", "exit"), tmp_path / "checkpoints") == 3
