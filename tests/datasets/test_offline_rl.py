"""Offline-RL episodes of a V5 dataset: per battle and seat, checked against an engine replay of
the same battle, then written as a Minari dataset and loaded back with minari itself."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import engine
from extrarlhf.datasets import materialize_v5_dataset
from extrarlhf.datasets.offline_rl import export_minari, offline_rl_episodes
from tests.datasets_helpers import GREEDY, expect_error, shared_sessions


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    datasets = tmp_path_factory.mktemp("offline") / "datasets"
    materialize_v5_dataset([GREEDY], "src", sessions_dir=shared_sessions(), datasets_dir=datasets)
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
        seen = []
        for d in sorted((d for d in decisions if d["battle_id"] == bid), key=lambda d: d["decision_index"]):
            if d["player"] == seat:
                seen.append(state.observation(seat))
            state.apply(d["action_id"])
        assert state.is_terminal
        seen.append(state.observation(seat))
        assert np.array_equal(np.stack(seen), episode["observations"])
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
