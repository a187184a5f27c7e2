"""The L0 MCP tools in process (``Client(server)``): train_policy, benchmark_models,
promote_checkpoint (+ rollback_promotion, promotion_status) and run_pipeline, with progress
notifications, envelopes validated against the declared schema, and refusals with codes."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from extrarlhf.checkpoints.registry import CheckpointRegistry
from mcp_server import ENVELOPE_SCHEMA, build_server
from mcp_server.tools_training import register
from tests.mcp_helpers import Checked
from tests.training_helpers import SMALL, copy_datasets

L0_TOOLS = {"train_policy", "benchmark_models", "promote_checkpoint", "rollback_promotion", "promotion_status",
            "run_pipeline"}
SMALL_POLICY = {"min_v5_battles": 10, "min_v5_decisions": 300}


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def server(tmp_path: Path):
    copy_datasets(tmp_path / "datasets")
    server = build_server(tmp_path / "sessions", tmp_path / "datasets", tmp_path / "checkpoints")
    if "train_policy" not in server.accepted:  # until build_server registers the L0 tools itself
        register(server)
    return server


@pytest.mark.anyio
async def test_l0_tools_are_listed_documented_and_typed(server) -> None:
    async with Client(server) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
    assert L0_TOOLS <= set(listed)
    for name in L0_TOOLS:
        tool = listed[name]
        assert tool.output_schema is None and len(tool.description) > 40, name
        for prop, schema in tool.input_schema.get("properties", {}).items():
            assert schema.get("description"), f"{name}.{prop} has no description"
        assert "ctx" not in tool.input_schema.get("properties", {})
    assert set(listed["train_policy"].input_schema["required"]) == {"dataset", "name"}
    assert set(listed["benchmark_models"].input_schema["required"]) == {"candidate"}
    assert set(listed["run_pipeline"].input_schema["required"]) == {"group", "name"}
    assert listed["promotion_status"].annotations.read_only_hint
    assert listed["rollback_promotion"].annotations.destructive_hint


@pytest.mark.anyio
async def test_train_benchmark_promote_over_mcp(server, tmp_path: Path) -> None:
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    async with Client(server) as client:
        c = Checked(client)
        trained = await c.ok("train_policy", {"dataset": "gg", "name": "mcp-bc", "seed": 0, "epochs": 3,
                                              "hidden": SMALL["hidden"], "hidden2": SMALL["hidden2"],
                                              "lr": SMALL["lr"]}, progress_callback=on_progress)
        assert [p[0] for p in progress] == [1, 2, 3] and all(p[1] == 3 for p in progress)
        registered = CheckpointRegistry(tmp_path / "checkpoints").get("mcp-bc")
        assert trained["weights_hash"] == registered.weights_hash and len(trained["history"]) == 3
        assert Path(trained["card_path"]).is_file()

        # refusals: not ready (blockers in details), taken name, unknown and forbidden arguments
        error = await c.err("train_policy", {"dataset": "gg", "name": "early",
                                             "readiness_policy": {"min_v5_battles": 999}}, "not_ready")
        assert error["details"]["blockers"] and "999" in error["message"]
        await c.err("train_policy", {"dataset": "gg", "name": "mcp-bc"}, "already_exists")
        await c.err("train_policy", {"dataset": "../gg", "name": "x"}, "path_outside_datasets_dir")
        await c.err("train_policy", {"dataset": "gg", "name": "x", "learning_rate": 1}, "invalid_argument")
        await c.err("train_policy", {"dataset": "gg", "name": "x", "api_token": "t"}, "forbidden_argument")
        await c.err("train_policy", {"dataset": "gg", "name": "x", "epochs": 0}, "invalid_argument")
        bad = await c.err("train_policy", {"dataset": "gg", "name": "x", "target": "values"}, "invalid_argument")
        assert "target: must be 'choice' or 'search_values'" in bad["message"]
        await c.err("train_policy", {"dataset": "gg", "name": "x", "target": "search_values", "temperature": 0},
                    "invalid_argument")
        assert not (tmp_path / "checkpoints" / "x.card.json").exists()
        # the teacher's-values target: on data without search decisions it is the choice target, and the card says so
        soft = await c.ok("train_policy", {"dataset": "gg", "name": "mcp-soft", "seed": 0, "epochs": 3,
                                           "hidden": SMALL["hidden"], "hidden2": SMALL["hidden2"], "lr": SMALL["lr"],
                                           "target": "search_values", "temperature": 0.1})
        assert soft["hyperparameters"]["target"] == "search_values" and soft["hyperparameters"]["temperature"] == 0.1
        assert soft["weights_hash"] == trained["weights_hash"]

        # no promotion without a benchmark; the refusal lists its checks
        refusal = await c.err("promote_checkpoint", {"name": "mcp-bc"}, "promotion_refused")
        assert [r["check"] for r in refusal["details"]["reasons"]] == ["benchmarked"]

        progress.clear()
        report = await c.ok("benchmark_models", {"candidate": "mcp-bc", "incumbent": "baseline:random",
                                                 "n_pairs": 150, "baseline_pairs": 0, "seed": 1},
                            progress_callback=on_progress)
        assert report["passed"] and report["match"]["sprt"]["decision"] == "H1"
        assert "| mcp-bc vs baseline:random |" in report["markdown"] and Path(report["report_path"]).is_file()
        assert progress and all(b > a for (a, _, _), (b, _, _) in zip(progress, progress[1:]))
        assert progress[-1][0] == progress[-1][1] == report["battles_played"]  # done: nothing left planned
        await c.err("benchmark_models", {"candidate": "mcp-bc", "incumbent": "baseline:random", "elo0": 5,
                                         "elo1": 0}, "invalid_argument")
        await c.err("benchmark_models", {"candidate": "nobody"}, "unknown_spec")

        # nothing promoted: baseline:random is the incumbent (the first-promotion rule)
        promoted = await c.ok("promote_checkpoint", {"name": "mcp-bc"})
        assert promoted["promoted"]["name"] == "mcp-bc" and promoted["previous"] is None
        assert promoted["promoted"]["benchmark"]["incumbent"] == "baseline:random"
        refusal = await c.err("promote_checkpoint", {"name": "mcp-bc", "require_current_incumbent": False},
                              "promotion_refused")
        assert [r["check"] for r in refusal["details"]["reasons"]] == ["not_already_promoted"]
        status = await c.ok("promotion_status")
        assert status["incumbent"] == "mcp-bc" and status["promoted_intact"] and len(status["history"]) == 1
        rollback = await c.err("rollback_promotion", {}, "promotion_refused")
        assert rollback["details"]["reasons"][0]["check"] == "previous_promotion"


@pytest.mark.anyio
async def test_run_pipeline_over_mcp(server, tmp_path: Path) -> None:
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    async with Client(server) as client:
        c = Checked(client)
        result = await c.ok("run_pipeline", {"group": "camp", "name": "camp-bc", "n_battles": 20, "seed": 3,
                                             "epochs": 2, "n_pairs": 4, "baseline_pairs": 1,
                                             "readiness_policy": SMALL_POLICY}, progress_callback=on_progress)
        assert result["completed"] and not result["promoted"]
        assert result["stages"]["benchmark"]["incumbent"] == "baseline:random"  # the first-promotion rule
        assert result["stages"]["collect"]["ran"] == 20
        assert result["stages"]["promote"]["reasons"]  # 4 pairs cannot pass the SPRT: refused with reasons
        values = [p[0] for p in progress]
        assert values == sorted(values) and len(set(values)) == len(values) and all(p[1] == 6 for p in progress)
        stages_seen = [p[2].split(":")[0] for p in progress]
        assert stages_seen[0] == "collect" and "train" in stages_seen and "benchmark" in stages_seen
        stopped = await c.ok("run_pipeline", {"group": "camp2", "name": "camp2-bc", "n_battles": 3})
        assert stopped["stopped_at"] == "readiness" and "need 20" in stopped["reason"]
        await c.err("run_pipeline", {"group": "../x", "name": "y", "n_battles": 3}, "invalid_argument")


@pytest.mark.anyio
async def test_training_or_benchmarking_beyond_the_work_caps_is_refused_over_mcp(server, tmp_path: Path) -> None:
    async with Client(server) as client:
        c = Checked(client)
        refused = await c.err("train_policy", {"dataset": "gg", "name": "huge", "epochs": 1000, "hidden": 4096,
                                               "hidden2": 4096, "readiness_policy": SMALL_POLICY},
                              code="work_cap_exceeded")
        assert "MAX_TRAINING_COST" in refused["message"] and refused["details"]["cap"] == "MAX_TRAINING_COST"
        refused = await c.err("benchmark_models", {"candidate": "search:baseline:greedy?sims=4096",
                                                   "incumbent": "baseline:greedy", "n_pairs": 10_000},
                              code="work_cap_exceeded")
        assert refused["details"]["cap"] == "MAX_SEARCH_SIMS_BATTLES"
    assert not (tmp_path / "checkpoints").exists() or not list((tmp_path / "checkpoints").glob("**/*.onnx"))
