"""``battle_actions.seq`` is an ordering key, not an index (issue 24 section 3): a backend that
numbers from 0, from 1 or in steps of 10 exports the same V5 rows, and a missing action is
caught by the replay itself. Real PostgreSQL databases filled by the fixture backend; the
reason decisions are also checked on engine-played records without a database."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

import engine
from adapters.baselines import GreedyPolicy
from extrarlhf.production.export import export_production_v5_dataset
from extrarlhf.production.fixture import build_fixture
from extrarlhf.production.pseudonyms import battle_key
from extrarlhf.production.replay import BattleRecord, replay_record

from .test_production_export import SALT, _run, _sql, env_for

SMALL = {"battles": 24, "players": 8, "days": 1, "seed": 31, "workers": 1}
# what may differ between numberings: the excluded details quote the backend's seq values
SAME_BYTES = ("decisions", "turns", "battles", "metronome", "production_battles")


@pytest.fixture(scope="module")
def numbered(pg_server, tmp_path_factory):
    """The same small fixture numbered 0, 1, 2.. / 1, 2, 3.. / 10, 20, 30.., each exported."""
    out = {}
    for base, step in ((0, 1), (1, 1), (10, 10)):
        dsn = pg_server.create_database(f"seq_{base}_{step}")
        summary = build_fixture(dsn, seq_base=base, seq_step=step, **SMALL)
        root = tmp_path_factory.mktemp(f"seq-{base}-{step}")
        result = export_production_v5_dataset(summary["window"]["end_at"], name="prod", datasets_dir=root,
                                              environ=env_for(dsn), workers=1)
        out[(base, step)] = (dsn, summary, Path(result["path"]), result)
    return out


def _seqs(dsn: str) -> list[int]:
    import asyncpg

    async def fetch() -> list[int]:
        conn = await asyncpg.connect(dsn)
        try:
            return [r["seq"] for r in await conn.fetch("SELECT seq FROM battle_actions WHERE battle_id = "
                                                       "(SELECT min(battle_id) FROM battle_actions) ORDER BY seq")]
        finally:
            await conn.close()

    return _run(fetch())


def test_any_base_and_spacing_exports_the_same_rows(numbered):
    dsn0, summary, path0, result0 = numbered[(0, 1)]
    excluded0 = pq.read_table(path0 / "excluded.parquet").select(["battle_id", "reason"]).to_pylist()
    assert result0["row_counts"]["battles"] >= 15
    # only the fixture's deliberate defects and unfinished battles are out
    assert len(excluded0) == summary["counts"]["broken"] + summary["counts"]["unfinished"]
    for (base, step), (dsn, _summary, path, result) in numbered.items():
        seqs = _seqs(dsn)
        assert seqs[:3] == [base, base + step, base + 2 * step]
        assert result["row_counts"] == result0["row_counts"], (base, step)
        assert result["exclusions"]["by_reason"] == result0["exclusions"]["by_reason"], (base, step)
        for name in SAME_BYTES:
            assert (path / f"{name}.parquet").read_bytes() == (path0 / f"{name}.parquet").read_bytes(), (base, step, name)
        excluded = pq.read_table(path / "excluded.parquet").select(["battle_id", "reason"]).to_pylist()
        assert excluded == excluded0, (base, step)


def _normal_battle(summary: dict, path: Path) -> str:
    """The raw id of an included battle (a finished, unbroken one)."""
    included = set(pq.read_table(path / "battles.parquet").column("battle_id").to_pylist())
    for index in range(summary["params"]["battles"]):
        raw = f"b-{summary['params']['seed']}-{index:07d}"
        if battle_key(SALT.encode(), raw) in included:
            return raw
    raise AssertionError("no included battle")


def test_a_deleted_action_is_caught_by_the_replay(numbered, tmp_path):
    """One action row deleted from the middle of a complete battle (1-based numbering): the
    battle is excluded as missing_actions, the detail names the hole and where the replay
    failed; every other battle is kept as before."""
    dsn, summary, path, result = numbered[(1, 1)]
    raw = _normal_battle(summary, path)
    where = f"battle_id = '{raw}' AND seq = 4"
    _run(_sql(dsn, f"CREATE TABLE deleted_action AS SELECT * FROM battle_actions WHERE {where}",
              f"DELETE FROM battle_actions WHERE {where}"))
    try:
        again = export_production_v5_dataset(summary["window"]["end_at"], name="gap", datasets_dir=tmp_path,
                                             environ=env_for(dsn), workers=1)
    finally:  # the module's database is left as it was built
        _run(_sql(dsn, "INSERT INTO battle_actions SELECT * FROM deleted_action", "DROP TABLE deleted_action"))
    rows = pq.read_table(Path(again["path"]) / "excluded.parquet").to_pylist()
    row = next(r for r in rows if r["battle_id"] == battle_key(SALT.encode(), raw))
    assert row["reason"] == "missing_actions", row
    assert "seq 3 to seq 5" in row["detail"] and "missing" in row["detail"], row["detail"]
    assert again["row_counts"]["battles"] == result["row_counts"]["battles"] - 1
    assert again["exclusions"]["by_reason"]["missing_actions"] == result["exclusions"]["by_reason"]["missing_actions"] + 1


# ---------------------------------------------------------------------------- the reasons, without a database

def _played(seed: int = 5) -> tuple[engine.State, list[tuple[int, int, int]]]:
    """An engine-played battle: its final state and its (turn, player, action) moves."""
    rng = engine.SplitMix64(seed)
    state = engine.new_battle(seed, list(engine.random_deck(rng)), list(engine.random_deck(rng)), 1)
    policy, moves = GreedyPolicy(), []
    while not state.is_terminal:
        action = policy.act(state)
        moves.append((state.turn, state.to_move, action))
        state.apply(action)
    return state, moves


def _record(final: engine.State, moves: list[tuple[int, int, int]], seqs: list[int]) -> BattleRecord:
    return BattleRecord(
        index=0, key="b-test", ruleset=engine.RULESET, seed=final.seed, decks=(list(final.decks[0]), list(final.decks[1])),
        deck_ids=(engine.deck_id(final.decks[0]), engine.deck_id(final.decks[1])), starting_player=final.starting_player,
        kinds=("human", "bot"), players=("p-x", None), finished=True, winner=final.winner, turns=final.turn,
        actions=[(seq, turn, player, action, 1000 if player == 1 else None)
                 for seq, (turn, player, action) in zip(seqs, moves, strict=True)])


def test_irregular_numbering_of_a_complete_battle_is_kept():
    final, moves = _played()
    seqs = [3 + 7 * i + (i % 3) for i in range(len(moves))]  # strictly increasing, uneven steps
    rows, excluded = replay_record(_record(final, moves, seqs))
    assert excluded is None and rows is not None
    base_rows, _ = replay_record(_record(final, moves, list(range(len(moves)))))
    assert rows["dec"]["action_id"] == base_rows["dec"]["action_id"]


def test_a_missing_end_of_turn_shows_in_the_recorded_turn():
    """Renumbered without a hole (the numbering cannot tell): the next action's recorded turn
    is ahead of the replay, so actions are missing."""
    final, moves = _played()
    k = next(i for i, m in enumerate(moves) if m[2] == engine.END_TURN and i > 2)
    kept = moves[:k] + moves[k + 1:]
    rows, excluded = replay_record(_record(final, kept, list(range(1, len(kept) + 1))))
    assert rows is None and excluded[0] == "missing_actions", excluded
    assert f"turn {moves[k][0] + 1}" in excluded[1] and f"turn {moves[k][0]}" in excluded[1], excluded


def test_an_illegal_action_in_an_unbroken_numbering_stays_illegal_action():
    final, moves = _played()
    k = next(i for i, m in enumerate(moves) if m[2] == engine.END_TURN and i > 2) + 1
    state = engine.new_battle(final.seed, list(final.decks[0]), list(final.decks[1]), final.starting_player)
    for _t, _p, a in moves[:k]:
        state.apply(a)
    bad = next(a for a in range(engine.ACTION_SPACE_SIZE) if a not in state.legal_actions())
    broken = moves[:k] + [(moves[k][0], moves[k][1], bad)] + moves[k + 1:]
    rows, excluded = replay_record(_record(final, broken, [10 * (i + 1) for i in range(len(broken))]))
    assert rows is None and excluded[0] == "illegal_action" and f"seq {10 * (k + 1)}" in excluded[1], excluded


def test_a_hole_before_the_failure_makes_it_missing_actions():
    final, moves = _played()
    k = next(i for i, m in enumerate(moves) if m[2] != engine.END_TURN and i > 2)
    kept = moves[:k] + moves[k + 1:]
    seqs = [10 * i for i in range(len(moves)) if i != k]
    rows, excluded = replay_record(_record(final, kept, seqs))
    assert rows is None and excluded[0] == "missing_actions", excluded
    assert f"seq {10 * (k - 1)} to seq {10 * (k + 1)}" in excluded[1], excluded


@pytest.mark.parametrize("base, step", [(0, 1), (1, 1), (10, 10)])
def test_a_hole_is_a_missing_action_even_when_the_rest_still_replays(base, step):
    """Issue 49: seq 10..70, 90.. (80 deleted) was exported with 68 of 69 actions because the replay
    of the rest still worked. To the export that case is a gap in an evenly spaced numbering whose
    actions replay to the recorded end, which is what this battle is (every move kept, one number
    skipped): in any numbering base and step it is excluded as missing_actions, naming the gap."""
    final, moves = _played()
    k = len(moves) // 2
    seqs = [base + step * i for i in range(k)] + [base + step * (i + 1) for i in range(k, len(moves))]
    rows, excluded = replay_record(_record(final, moves, seqs))
    assert rows is None and excluded[0] == "missing_actions", excluded
    assert f"seq {base + step * (k - 1)} to seq {base + step * (k + 1)}" in excluded[1], excluded
    assert "still replay to the recorded end" in excluded[1], excluded


def test_the_fixture_refuses_a_numbering_it_cannot_write(tmp_path):
    """Checked before any connection (the DSN below leads nowhere)."""
    from extrarlhf.core.errors import RLHFError

    for bad, message in (({"seq_step": 0}, "seq_step must be an integer >= 1"),
                         ({"seq_base": -1}, "seq_base must be an integer >= 0"),
                         ({"seq_base": 2**31}, "seq_base must be at most 2\\*\\*30")):
        with pytest.raises(RLHFError, match=message):
            build_fixture("postgresql://nobody@127.0.0.1:1/none", **{**SMALL, **bad})
