"""The production replay (replay.py) on both engine backends (issue 48: it steps states on the
native core when it is built): the same rows and trace digests for engine-played records, and
an export of a fixture world writes the same bytes on both. A real PostgreSQL filled by the
fixture backend for the export."""

from __future__ import annotations

from pathlib import Path

import pytest

import engine
from adapters.baselines import GreedyPolicy, RandomPolicy
from extrarlhf.datasets.row_batches import battle_batches
from extrarlhf.production.export import export_production_v5_dataset
from extrarlhf.production.fixture import build_fixture
from extrarlhf.production.replay import BattleRecord, replay_record

from ..native_helpers import native_or_none
from .test_production_export import env_for

BACKENDS = ["python"] + (["native"] if native_or_none() is not None else [])
KINDS = (("human", "bot"), ("model", "human"), ("human", "human"), ("bot", "model"))


def _record(seed: int, kinds: tuple[str, str]) -> BattleRecord:
    """An engine-played battle (greedy or random players) as a production record."""
    rng = engine.SplitMix64(seed)
    decks = list(engine.random_deck(rng)), list(engine.random_deck(rng))
    state = engine.new_battle(seed, decks[0], decks[1], 1 + seed % 2)
    policies = (GreedyPolicy(), RandomPolicy(seed)) if seed % 2 else (RandomPolicy(seed), RandomPolicy(seed + 1))
    actions = []
    while not state.is_terminal:
        player = state.to_move
        action = policies[player - 1].act(state)
        actions.append((len(actions), state.turn, player, action, 900 + len(actions)))
        state.apply(action)
    return BattleRecord(index=seed, key=f"b-{seed}", ruleset=engine.RULESET, seed=seed, decks=decks,
                        deck_ids=(engine.deck_id(decks[0]), engine.deck_id(decks[1])),
                        starting_player=1 + seed % 2, kinds=kinds, players=("p-a", "p-b"), finished=True,
                        winner=state.winner, turns=state.turn, actions=actions)


def _comparable(rows: dict) -> dict:
    # the rows as the tables take them: the core's columns come as Arrow buffers, the Python
    # reader's as lists, and the float32 pieces' boundaries are free
    return {name: batch.to_pydict() for name, batch in battle_batches([rows]).items()}


def test_the_replay_is_the_same_on_both_backends(monkeypatch):
    if len(BACKENDS) < 2:
        pytest.skip("engine_native is not built")
    records = [_record(seed, kinds) for seed, kinds in zip((5, 6), KINDS)]
    out = {}
    for backend in BACKENDS:
        monkeypatch.setenv("EXTRAARENA_ENGINE", backend)
        out[backend] = [_comparable(replay_record(r)[0]) for r in records]
    assert out["python"] == out["native"]


def test_an_export_writes_the_same_bytes_on_both_backends(pg_server, tmp_path, monkeypatch):
    if len(BACKENDS) < 2:
        pytest.skip("engine_native is not built")
    dsn = pg_server.create_database("replay_backends")
    summary = build_fixture(dsn, battles=24, players=8, days=1, seed=43, workers=1)
    files = {}
    for backend in BACKENDS:
        monkeypatch.setenv("EXTRAARENA_ENGINE", backend)  # workers=1: the export replays in this process
        result = export_production_v5_dataset(summary["window"]["end_at"], name=backend, datasets_dir=tmp_path,
                                              environ=env_for(dsn), workers=1)
        assert result["published"] and result["row_counts"]["decisions"] > 200
        files[backend] = {p.name: p.read_bytes() for p in sorted(Path(result["path"]).glob("*.parquet"))}
    assert set(files["python"]) >= {"decisions.parquet", "turns.parquet", "battles.parquet", "metronome.parquet"}
    assert files["python"] == files["native"]
