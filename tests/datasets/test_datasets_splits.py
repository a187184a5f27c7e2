"""Grouped, deterministic, stable splits: V5 by battle, Nemesis by battle (default) or opponent deck; Standard is
refused until ready and never takes human-bot or model-model rows."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections import defaultdict
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from extrarlhf.datasets import (materialize_v5_dataset, split_nemesis_training_dataset, split_v5_training_dataset,
                                validate_dataset)
from extrarlhf.datasets.assign import DEFAULT_SPLIT_KEY, bucket, check_fractions, split_of
from extrarlhf.datasets.splits import _standard_rows, nemesis_rows
from extrarlhf.runtime.series import run_series
from tests.datasets_helpers import GREEDY, HUMAN, RANDOM, expect_error, rewrite_table, set_cell, sha256, \
    shared_sessions

SPLITS = ("train", "val", "test")


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    datasets = tmp_path_factory.mktemp("splits") / "datasets"
    materialize_v5_dataset([GREEDY, HUMAN], "src", sessions_dir=shared_sessions(), datasets_dir=datasets)
    return datasets


def rows_by_split(folder: Path, columns: list[str]) -> dict[str, list[dict]]:
    return {s: pq.read_table(folder / f"{s}.parquet", columns=columns).to_pylist() for s in SPLITS}


def test_bucket_is_a_keyed_hash_and_the_split_follows_the_fractions() -> None:
    digest = hmac.new(DEFAULT_SPLIT_KEY.encode(), b"v5_policy\0b000001-abc", hashlib.sha256).digest()
    assert bucket(DEFAULT_SPLIT_KEY, "v5_policy", "b000001-abc") == int.from_bytes(digest[:8], "big") / 2 ** 64
    assert bucket("other-key", "v5_policy", "b000001-abc") != bucket(DEFAULT_SPLIT_KEY, "v5_policy", "b000001-abc")
    assert bucket(DEFAULT_SPLIT_KEY, "nemesis_lite", "x") != bucket(DEFAULT_SPLIT_KEY, "v5_policy", "x")
    f = (0.8, 0.1, 0.1)
    assert [split_of(x, f) for x in (0.0, 0.79, 0.8, 0.89, 0.9, 0.999)] == ["train", "train", "val", "val", "test",
                                                                           "test"]
    positions = [bucket(DEFAULT_SPLIT_KEY, "c", f"g{i}") for i in range(4000)]
    assert all(0 <= p < 1 for p in positions)
    share = sum(split_of(p, f) == "train" for p in positions) / len(positions)
    assert 0.77 < share < 0.83
    for bad in ((0.5, 0.5), (0.5, 0.4, 0.2), (0, 0.5, 0.5), (1.2, -0.1, -0.1), {"train": 1.0}):
        expect_error("invalid_argument", check_fractions, bad)
    assert check_fractions({"train": 0.7, "val": 0.2, "test": 0.1}) == (0.7, 0.2, 0.1)


def test_v5_split_groups_by_battle(source: Path) -> None:
    result = split_v5_training_dataset("src", datasets_dir=source, fractions=(0.5, 0.25, 0.25))
    assert result["dataset_id"] == "src-v5split/v1" and result["kind"] == "v5_policy_split"
    assert result["split"]["fractions"] == {"train": 0.5, "val": 0.25, "test": 0.25}
    folder = Path(result["path"])
    assert validate_dataset("src-v5split", datasets_dir=source)["valid"] is True
    splits = rows_by_split(folder, ["battle_id", "decision_index"])
    battles = {s: {r["battle_id"] for r in rows} for s, rows in splits.items()}
    assert not battles["train"] & battles["val"] and not battles["train"] & battles["test"]
    assert not battles["val"] & battles["test"]
    source_rows = pq.read_table(source / "src" / "v1" / "decisions.parquet", columns=["battle_id", "decision_index"])
    everything = sorted((r["battle_id"], r["decision_index"]) for rows in splits.values() for r in rows)
    assert everything == sorted((r["battle_id"], r["decision_index"]) for r in source_rows.to_pylist())
    assignments = {r["group_key"]: r for r in pq.read_table(folder / "assignments.parquet").to_pylist()}
    for split, ids in battles.items():
        for battle_id in ids:
            assert assignments[battle_id]["split"] == split
            assert assignments[battle_id]["bucket"] == bucket(DEFAULT_SPLIT_KEY, "v5_policy", battle_id)
            assert split_of(assignments[battle_id]["bucket"], (0.5, 0.25, 0.25)) == split
    assert result["split"]["groups"] == {s: len(battles[s]) for s in SPLITS}
    assert all(result["split"]["groups"][s] > 0 for s in SPLITS)
    assert pq.read_schema(folder / "train.parquet") == pq.read_schema(source / "src" / "v1" / "decisions.parquet")


def test_splits_are_deterministic(source: Path) -> None:
    a = split_v5_training_dataset("src/v1", name="det", datasets_dir=source)
    b = split_v5_training_dataset("src/v1", name="det", datasets_dir=source)
    assert (a["version"], b["version"]) == (1, 2)
    for name in ("train.parquet", "val.parquet", "test.parquet", "assignments.parquet"):
        assert sha256(Path(a["path"]) / name) == sha256(Path(b["path"]) / name)
    other = split_v5_training_dataset("src/v1", name="det-key", split_key="another key", datasets_dir=source)
    assert sha256(Path(other["path"]) / "assignments.parquet") != sha256(Path(a["path"]) / "assignments.parquet")


def test_assignments_are_stable_when_data_grows(tmp_path: Path) -> None:
    sessions, datasets = tmp_path / "sessions", tmp_path / "datasets"
    run_series(sessions, "grow", 20, p1_model="baseline:greedy", opponent="baseline:greedy", seed=9)
    lenient = {"min_v5_battles": 1, "min_v5_decisions": 1, "min_nemesis_lite_battles": 1, "min_nemesis_lite_decks": 1}
    materialize_v5_dataset(["grow"], "g", sessions_dir=sessions, datasets_dir=datasets)
    v5_before = split_v5_training_dataset("g", name="g-v5", datasets_dir=datasets, policy=lenient)
    nem_before = split_nemesis_training_dataset("g", "lite", name="g-nem", datasets_dir=datasets, policy=lenient)
    run_series(sessions, "grow", 45, p1_model="baseline:greedy", opponent="baseline:greedy", seed=9)  # resumes
    second = materialize_v5_dataset(["grow"], "g", sessions_dir=sessions, datasets_dir=datasets)
    assert second["dataset_id"] == "g/v2" and second["row_counts"]["battles"] == 45
    v5_after = split_v5_training_dataset("g", name="g-v5", datasets_dir=datasets, policy=lenient)
    nem_after = split_nemesis_training_dataset("g", "lite", name="g-nem", datasets_dir=datasets, policy=lenient)

    def row_splits(result: dict, key: tuple[str, ...]) -> dict[tuple, str]:
        out = {}
        for split, rows in rows_by_split(Path(result["path"]), list(key)).items():
            for r in rows:
                out[tuple(r[k] for k in key)] = split
        return out

    for before, after, key in ((v5_before, v5_after, ("battle_id", "decision_index")),
                               (nem_before, nem_after, ("battle_id", "decision_index", "opponent_deck_id"))):
        old, new = row_splits(before, key), row_splits(after, key)
        assert len(new) > len(old) > 0
        assert {k: new[k] for k in old} == old  # every old row kept its split
        groups_old = {r["group_key"]: r["split"]
                      for r in pq.read_table(Path(before["path"]) / "assignments.parquet").to_pylist()}
        groups_new = {r["group_key"]: r["split"]
                      for r in pq.read_table(Path(after["path"]) / "assignments.parquet").to_pylist()}
        assert {k: groups_new[k] for k in groups_old} == groups_old


def test_nemesis_rows_predict_the_opponents_next_action(source: Path) -> None:
    decisions = pq.read_table(source / "src" / "v1" / "decisions.parquet")
    rows = nemesis_rows(decisions)
    by_battle: dict[str, list[dict]] = defaultdict(list)
    for r in decisions.select(["battle_id", "decision_index", "player", "action_id", "turn", "observation",
                               "opponent_deck_id"]).to_pylist():
        by_battle[r["battle_id"]].append(r)
    expected = []
    for battle_id, ds in by_battle.items():
        for i, d in enumerate(ds):
            nxt = next((e for e in ds[i + 1:] if e["player"] != d["player"]), None)
            if nxt is not None:
                expected.append((battle_id, d["decision_index"], d["player"], 3 - d["player"], nxt["action_id"],
                                 nxt["decision_index"], nxt["turn"], d["opponent_deck_id"]))
    got = [(r["battle_id"], r["decision_index"], r["viewer"], r["opponent"], r["target_action_id"],
            r["target_decision_index"], r["target_turn"], r["opponent_deck_id"]) for r in rows.to_pylist()]
    assert got == expected and len(got) > 1000
    # the input is the viewer's own observation at its decision (its public view)
    first = rows.slice(0, 1).to_pylist()[0]
    own = by_battle[first["battle_id"]][first["decision_index"]]
    assert first["observation"] == own["observation"]


def _straddling(splits: dict[str, list[dict]]) -> int:
    seen: dict[str, set] = defaultdict(set)
    for split, rows in splits.items():
        for r in rows:
            seen[r["battle_id"]].add(split)
    return sum(len(v) > 1 for v in seen.values())


def test_nemesis_lite_split_groups_by_battle_by_default(source: Path) -> None:
    """Both seats of a battle land in one split: no trajectory is shared between splits."""
    result = split_nemesis_training_dataset("src", "lite", datasets_dir=source, fractions=(0.5, 0.25, 0.25))
    assert result["kind"] == "nemesis_lite_split" and result["dataset_id"] == "src-nemesis-lite/v1"
    assert result["split"]["group_key"] == "battle" and result["split"]["battles_straddling_splits"] == 0
    assert validate_dataset(result["dataset_id"], datasets_dir=source)["valid"] is True
    folder = Path(result["path"])
    splits = rows_by_split(folder, ["battle_id", "viewer", "battle_tag"])
    battles = {s: {r["battle_id"] for r in rows} for s, rows in splits.items()}
    assert not battles["train"] & battles["val"] and not battles["train"] & battles["test"]
    assert not battles["val"] & battles["test"] and all(battles[s] for s in SPLITS)
    seats = defaultdict(set)
    for rows in splits.values():
        for r in rows:
            seats[r["battle_id"]].add(r["viewer"])
    assert {frozenset(v) for v in seats.values()} == {frozenset({1, 2})}, "both seats' rows of every battle"
    assignments = {r["group_key"]: r["split"] for r in pq.read_table(folder / "assignments.parquet").to_pylist()}
    assert all(assignments[b] == s for s, ids in battles.items() for b in ids)
    assert all(split_of(bucket(DEFAULT_SPLIT_KEY, "nemesis_lite", b), (0.5, 0.25, 0.25)) == s
               for b, s in assignments.items())
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["split"]["group_by"] == "battle" and manifest["split"]["group_key_column"] == "battle_id"
    tags = {r["battle_tag"] for rows in splits.values() for r in rows}
    assert tags == {"rl-vs-bot", "human-vs-bot"}  # Lite takes any eligible battle, human-bot included


def test_nemesis_lite_split_by_opponent_deck_counts_the_battles_it_splits(source: Path) -> None:
    result = split_nemesis_training_dataset("src", "lite", name="by-deck", group_by="opponent_deck",
                                            datasets_dir=source)
    assert result["split"]["group_key"] == "opponent deck"
    assert validate_dataset("by-deck", datasets_dir=source)["valid"] is True
    splits = rows_by_split(Path(result["path"]), ["opponent_deck_id", "battle_id"])
    decks = {s: {r["opponent_deck_id"] for r in rows} for s, rows in splits.items()}
    assert not decks["train"] & decks["val"] and not decks["train"] & decks["test"] and not decks["val"] & decks["test"]
    straddling = _straddling(splits)
    assert straddling > 0, "with two decks per battle, deck grouping splits some battles in two"
    assert result["split"]["battles_straddling_splits"] == straddling
    expect_error("invalid_argument", split_nemesis_training_dataset, "src", "lite", name="bad",
                 group_by="deck", datasets_dir=source)
    assert not (source / "bad").exists()


def test_standard_is_refused_and_never_takes_non_human_pairs(source: Path) -> None:
    err = expect_error("not_ready", split_nemesis_training_dataset, "src", "standard", datasets_dir=source)
    assert any("human-vs-human production rows" in b for b in err.blockers)
    assert "nemesis_standard is not ready" in str(err)
    zero = {"min_nemesis_standard_battles": 0, "min_nemesis_standard_decks": 0}
    err = expect_error("not_ready", split_nemesis_training_dataset, "src", "standard", datasets_dir=source,
                       policy=zero)  # no threshold opens Standard to session data
    assert any("0 human-vs-human battles" in b for b in err.blockers)
    assert not (source / "src-nemesis-standard").exists()
    # the Standard row filter drops human-bot and model-model rows, and keeps human-human ones
    decisions = pq.read_table(source / "src" / "v1" / "decisions.parquet")
    lite = nemesis_rows(decisions)
    assert {r["viewer_type"] + "/" + r["opponent_type"] for r in lite.select(["viewer_type", "opponent_type"])
            .to_pylist()} >= {"human/bot", "bot/human", "rl/bot", "bot/rl"}
    assert _standard_rows(decisions).num_rows == 0
    human_pair = decisions.set_column(decisions.schema.get_field_index("actor_type"),
                                      decisions.schema.field("actor_type"),
                                      pa.array(["human"] * decisions.num_rows, pa.string()))
    human_pair = human_pair.set_column(human_pair.schema.get_field_index("opponent_type"),
                                       human_pair.schema.field("opponent_type"),
                                       pa.array(["human"] * decisions.num_rows, pa.string()))
    assert _standard_rows(human_pair).num_rows == lite.num_rows


def test_refusals(source: Path, tmp_path: Path) -> None:
    small = tmp_path / "datasets"
    materialize_v5_dataset([RANDOM], "small", sessions_dir=shared_sessions(), datasets_dir=small)
    err = expect_error("not_ready", split_v5_training_dataset, "small", datasets_dir=small)
    assert "8 eligible (finished, non-degraded) battles; need 20" in err.blockers
    expect_error("not_ready", split_nemesis_training_dataset, "small", "lite", datasets_dir=small)
    ok = split_v5_training_dataset("small", datasets_dir=small, policy={"min_v5_battles": 5, "min_v5_decisions": 10})
    assert ok["row_counts"]["train"] + ok["row_counts"]["val"] + ok["row_counts"]["test"] > 0
    expect_error("invalid_argument", split_v5_training_dataset, ok["dataset_id"], datasets_dir=small)  # not v5_decisions
    expect_error("invalid_argument", split_v5_training_dataset, "small", name="small", datasets_dir=small)
    expect_error("invalid_argument", split_nemesis_training_dataset, "small", "pro", datasets_dir=small)
    expect_error("invalid_argument", split_v5_training_dataset, "small", fractions=(0.9, 0.2, 0.1), datasets_dir=small)
    expect_error("dataset_exists", split_v5_training_dataset, "small", datasets_dir=small, version=1,
                 policy={"min_v5_battles": 5, "min_v5_decisions": 10})
    rewrite_table(small / "small" / "v1", "battles", lambda t: set_cell(t, "degraded", 0, True))
    err = expect_error("validation_failed", split_v5_training_dataset, "small", name="again", datasets_dir=small,
                       policy={"min_v5_battles": 5, "min_v5_decisions": 10})
    assert "degraded_battle_in_training_table" in str(err)
