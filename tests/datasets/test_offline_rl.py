"""Offline-RL episodes of a V5 dataset: per battle and seat, checked against an engine replay of
the same battle, then written as a Minari dataset and loaded back with minari itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import engine
from extrarlhf.datasets import materialize_v5_dataset
from extrarlhf.datasets.offline_rl import export_minari, offline_rl_episodes
from extrarlhf.envs.observations import MASK_DTYPE, action_mask
from tests.datasets_helpers import GREEDY, RANDOM, expect_error, shared_sessions


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    datasets = tmp_path_factory.mktemp("offline") / "datasets"
    materialize_v5_dataset([GREEDY], "src", sessions_dir=shared_sessions(), datasets_dir=datasets)
    # player 1 baseline:greedy against player 2 baseline:random: two actors to tell apart
    materialize_v5_dataset([RANDOM], "mixed", sessions_dir=shared_sessions(), datasets_dir=datasets)
    return datasets


def test_episodes_follow_the_seat_and_end_on_the_final_state(source: Path) -> None:
    episodes = list(offline_rl_episodes("src", datasets_dir=source))
    battles = pq.read_table(source / "src" / "v1" / "battles.parquet",
                            columns=["battle_id", "winner", "decisions"]).to_pylist()
    assert len(episodes) == 2 * len(battles) and [e["seat"] for e in episodes[:2]] == [1, 2]
    decisions = pq.read_table(source / "src" / "v1" / "decisions.parquet",
                              columns=["battle_id", "decision_index", "player", "action_id"]).to_pylist()
    turns = pq.read_table(source / "src" / "v1" / "turns.parquet", columns=["battle_id", "turn", "state_start_json"])
    first_turn = {r["battle_id"]: r["state_start_json"] for r in turns.to_pylist() if r["turn"] == 1}
    by_battle = {b["battle_id"]: b for b in battles}
    for episode in episodes:
        seat, bid = episode["seat"], episode["battle_id"]
        T = len(episode["actions"])
        assert episode["observations"].shape == (T + 1, engine.OBS_DIM) and episode["observations"].dtype == np.float32
        assert episode["rewards"].shape == episode["terminations"].shape == episode["truncations"].shape == (T,)
        assert episode["terminations"].tolist() == [False] * (T - 1) + [True] and not episode["truncations"].any()
        winner = by_battle[bid]["winner"]
        assert episode["rewards"][-1] == (0.0 if winner == 0 else 1.0 if winner == seat else -1.0)
        assert not episode["rewards"][:-1].any()
        # replay the battle from its first state: the seat's observations before its moves, then the end
        state = engine.State.from_dict(json.loads(first_turn[bid]))
        seen, masks = [], []
        for d in sorted((d for d in decisions if d["battle_id"] == bid), key=lambda d: d["decision_index"]):
            if d["player"] == seat:
                seen.append(state.observation(seat))
                masks.append(action_mask(state, seat))
            state.apply(d["action_id"])
        assert state.is_terminal
        seen.append(state.observation(seat))
        masks.append(action_mask(state, seat))  # all zeros: the battle is over
        assert np.array_equal(np.stack(seen), episode["observations"])
        # the env's info["action_mask"] at each observation, and the legal ids ascending then -1
        infos = episode["infos"]
        assert infos["action_mask"].dtype == MASK_DTYPE and np.array_equal(np.stack(masks), infos["action_mask"])
        assert infos["legal_ids"].shape == (T + 1, engine.ACTION_SPACE_SIZE)
        for row, mask in zip(infos["legal_ids"], masks):
            legal = np.flatnonzero(mask)
            assert row[:legal.size].tolist() == legal.tolist() and (row[legal.size:] == -1).all()
        assert episode["actor"] == {"spec": "baseline:greedy", "kind": "baseline", "weights_hash": None, "seat": seat}
        assert episode["opponent"]["seat"] == 3 - seat
        assert episode["actions"].tolist() == [d["action_id"] for d in sorted(
            (d for d in decisions if d["battle_id"] == bid and d["player"] == seat), key=lambda d: d["decision_index"])]
    assert sum(len(e["actions"]) for e in episodes) == len(decisions)


def test_minari_loads_the_exported_dataset(source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    minari = pytest.importorskip("minari", reason="the minari extra")
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    result = export_minari("src", "extraarena/greedy-v0", datasets_dir=source)
    episodes = list(offline_rl_episodes("src", datasets_dir=source))
    assert result["episodes"] == len(episodes) and result["source"] == "src/v1"
    assert Path(result["path"]).is_relative_to(tmp_path / "minari")
    loaded = minari.load_dataset("extraarena/greedy-v0")
    assert loaded.total_episodes == len(episodes) and loaded.total_steps == result["steps"]
    for mine, theirs in zip(episodes, loaded.iterate_episodes()):
        assert np.array_equal(mine["observations"], theirs.observations)
        assert np.array_equal(mine["actions"], theirs.actions)
        assert np.array_equal(mine["rewards"], theirs.rewards)
        assert np.array_equal(mine["terminations"], theirs.terminations)
    env = loaded.recover_environment()
    assert env.spec.id == "ExtraArena-v1"
    # Minari's Arrow files keep the observation a fixed-size vector too
    stored = ds.dataset(f"{result['path']}/0", format="arrow", ignore_prefixes=["_", ".", "metadata.json"])
    assert stored.schema.field("observations").type == pa.list_(pa.float32(), engine.OBS_DIM)
    expect_error("invalid_argument", export_minari, "src", "no version", datasets_dir=source)


# Run in a fresh interpreter that never imports the project: what a Minari user has.
_LOAD = """
import json, sys
import minari
out = {}
for dataset_id in sys.argv[1:]:
    d = minari.load_dataset(dataset_id)
    episodes = list(d.iterate_episodes())
    out[dataset_id] = {
        "kwargs": d.env_spec.kwargs, "env_id": d.env_spec.id,
        "conditions": d.storage.metadata["recording_conditions"],
        "metadata": list(d.storage.get_episode_metadata(range(d.total_episodes))),
        "actions": [e.actions.tolist() for e in episodes],
        "masks": [[e.infos["action_mask"].dtype.str, e.infos["action_mask"].tolist()] for e in episodes],
        "legal_ids": [e.infos["legal_ids"].tolist() for e in episodes],
    }
assert not any(m.split(".")[0] in ("extrarlhf", "engine") for m in sys.modules), "project imported"
print(json.dumps(out))
"""


def test_minari_dataset_carries_masks_actors_and_the_recording_conditions(
        source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("minari", reason="the minari extra")
    root = tmp_path / "minari"
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(root))
    both = export_minari("mixed", "extraarena/mixed-v0", datasets_dir=source)
    only = export_minari("mixed", "extraarena/random-only-v0", datasets_dir=source, acting_spec="baseline:random")
    assert both["env_kwargs"] == {"seat": "random", "opponent": ["baseline:greedy", "baseline:random"]}
    assert only["env_kwargs"] == {"seat": 2, "opponent": "baseline:greedy"}
    run = subprocess.run([sys.executable, "-c", _LOAD, "extraarena/mixed-v0", "extraarena/random-only-v0"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False,
                         env={**os.environ, "MINARI_DATASETS_PATH": str(root), "PYTHONPATH": ""})
    assert run.returncode == 0, run.stderr
    loaded = json.loads(run.stdout)
    for dataset_id, acting in (("extraarena/mixed-v0", None), ("extraarena/random-only-v0", "baseline:random")):
        mine = list(offline_rl_episodes("mixed", datasets_dir=source, acting_spec=acting))
        theirs = loaded[dataset_id]
        assert theirs["env_id"] == "ExtraArena-v1" and len(theirs["metadata"]) == len(mine) > 0
        for episode, meta, actions, (dtype, mask), ids in zip(mine, theirs["metadata"], theirs["actions"],
                                                                theirs["masks"], theirs["legal_ids"]):
            assert actions == episode["actions"].tolist()
            assert dtype == np.dtype(MASK_DTYPE).str and np.array_equal(mask, episode["infos"]["action_mask"])
            assert np.array_equal(ids, episode["infos"]["legal_ids"])
            assert all(mask[t][a] == 1 for t, a in enumerate(actions))  # every recorded action is legal
            greedy = {"spec": "baseline:greedy", "kind": "baseline", "weights_hash": None, "seat": 1}
            random = {"spec": "baseline:random", "kind": "baseline", "weights_hash": None, "seat": 2}
            assert (meta["battle_id"], meta["seat"]) == (episode["battle_id"], episode["seat"])
            assert (meta["actor"], meta["opponent"]) == ((greedy, random) if meta["seat"] == 1 else (random, greedy))
    battles = pq.read_table(source / "mixed" / "v1" / "battles.parquet", columns=["battle_id"]).num_rows
    assert [m["seat"] for m in loaded["extraarena/random-only-v0"]["metadata"]] == [2] * battles
    assert loaded["extraarena/random-only-v0"]["conditions"] == {
        "episodes": [{"seat": 2, "opponent_spec": "baseline:greedy", "opponent_kind": "baseline", "count": battles}],
        "unreproducible_opponents": []}
    assert len(loaded["extraarena/mixed-v0"]["conditions"]["episodes"]) == 2
    # an actor no decision has: a clear error naming the specs there, and no dataset written
    err = expect_error("invalid_argument", export_minari, "mixed", "extraarena/teacher-v0", datasets_dir=source,
                       acting_spec="search:greedy:64")
    assert "baseline:greedy" in str(err) and "baseline:random" in str(err)
    assert not (root / "extraarena" / "teacher-v0").exists()
    expect_error("invalid_argument", export_minari, "mixed", "x/y-v0", datasets_dir=source)  # Minari rejects it
