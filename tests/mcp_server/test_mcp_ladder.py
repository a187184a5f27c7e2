"""policy_ladder over the real stdio server: two real promotions, measured with progress
notifications, then served from the cache (the same figures as the core's ladder.json), paged;
an empty registry answers an empty ladder; damaged records and bad arguments are refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from extrarlhf.policies.benchmarking import benchmark_models
from extrarlhf.policies.ladder import read_ladder
from extrarlhf.policies.promotion import PromotionPolicy, current_incumbent, promote_checkpoint
from tests.mcp_helpers import Checked, stdio_params
from tests.training_helpers import train_small

LOOSE = PromotionPolicy(min_elo0=-400.0)  # a core-only policy: a real chain of promotions, quickly


@pytest.fixture
def anyio_backend():
    return "asyncio"


def _promote_two(ck: Path) -> None:
    for name, seed in (("first", 0), ("second", 1)):
        train_small(ck, name, seed=seed)
        report = benchmark_models(name, current_incumbent(ck), n_pairs=100, seed=seed, elo0=-400.0, elo1=-300.0,
                                  baseline_pairs=0, checkpoints_dir=ck, policy=LOOSE)
        assert report["passed"], report["verdict"]
        promote_checkpoint(name, checkpoints_dir=ck, policy=LOOSE)


def _params(tmp_path: Path, ck: Path):
    return stdio_params(tmp_path / "sessions", "--datasets-dir", str(tmp_path / "datasets"), "--checkpoints-dir",
                        str(ck))


@pytest.mark.anyio
async def test_policy_ladder_over_stdio(tmp_path: Path) -> None:
    ck = tmp_path / "checkpoints"
    _promote_two(ck)
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    async with Client(_params(tmp_path, ck)) as client:
        c = Checked(client)
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert listed["policy_ladder"].annotations.idempotent_hint
        assert not listed["policy_ladder"].annotations.read_only_hint  # it plays and writes ladder.json
        first = await c.ok("policy_ladder", {"pairs": 10}, progress_callback=on_progress)
        assert [r["name"] for r in first["rungs"]] == ["first", "second"]
        assert [r["status"] for r in first["rungs"]] == ["superseded", "current"]
        assert first["rungs"][1]["predecessor"] == {"spec": "first", "rung": 1,
                                                    "weights_hash": first["rungs"][0]["weights_hash"]}
        assert first["measured"] == 4 and first["total"] == 2 and first["next_cursor"] is None
        assert progress and progress[-1][:2] == (4 * 2 * 10, 4 * 2 * 10)
        assert "baseline battles" in progress[-1][2]
        assert [p[0] for p in progress] == sorted({p[0] for p in progress})  # strictly increasing

        on_disk = read_ladder(ck)
        assert on_disk["rungs"] == first["rungs"] and len(on_disk["measurements"]) == 4

        page = await c.ok("policy_ladder", {"pairs": 10, "limit": 1})
        assert page["cached"] == 4 and page["battles_played"] == 0
        assert [r["name"] for r in page["rungs"]] == ["first"] and page["next_cursor"]
        rest = await c.ok("policy_ladder", {"pairs": 10, "limit": 1, "cursor": page["next_cursor"]})
        assert [r["name"] for r in rest["rungs"]] == ["second"] and rest["next_cursor"] is None
        assert rest["rungs"][0]["vs_baselines"]["baseline:greedy"]["elo"] == \
            first["rungs"][1]["vs_baselines"]["baseline:greedy"]["elo"]
        # a cursor is bound to its call: another seed is another ladder
        await c.err("policy_ladder", {"pairs": 10, "seed": 3, "cursor": page["next_cursor"]}, "invalid_argument")
        await c.err("policy_ladder", {"pairs": 0}, "invalid_argument")
        await c.err("policy_ladder", {"pairs": 10, "rounds": 2}, "invalid_argument")

        (ck / "promoted_history.jsonl").write_text("{broken\n")
        error = await c.err("policy_ladder", {"pairs": 10}, "corrupt_record")
        assert "promoted_history.jsonl line 1" in error["message"] and "extrarlhf check" in error["message"]


@pytest.mark.anyio
async def test_an_empty_registry_is_an_empty_ladder(tmp_path: Path) -> None:
    async with Client(_params(tmp_path, tmp_path / "none")) as client:
        result = await Checked(client).ok("policy_ladder", {"measure": False})
    assert result["empty"] and result["rungs"] == [] and result["total"] == 0
    assert "nothing has been promoted yet" in result["reason"]
