"""The MCP server in process (``Client(server)``, no JSON-RPC framing): every tool, every error
code, the envelope (validated against the declared outputSchema for successes and errors),
unknown and forbidden arguments, and concurrent calls on one match."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import jsonschema
import pytest
from mcp import Client

from extrarlhf.runtime import codenames
from mcp_server import ENVELOPE_SCHEMA, build_server
from tests import onnx_factory
from tests.mcp_helpers import Checked, play_to_the_end, read_jsonl

TOOLS = {"ping", "start_battle", "get_state", "legal_actions", "submit_action", "advance_bot", "finish_battle",
         "abandon_battle", "list_matches", "run_series", "series_status", "claim_codename", "release_codename",
         "list_codenames", "list_sessions", "inspect_session", "replay_battle", "list_models", "register_checkpoint",
         "register_custom_model", "inspect_model",
         "list_datasets", "inspect_dataset", "validate_dataset", "materialize_v5_dataset", "dataset_readiness",
         "split_v5_training_dataset", "split_nemesis_training_dataset", "promote_dataset",
         "train_policy", "benchmark_models", "promote_checkpoint", "rollback_promotion", "promotion_status",
         "policy_ladder", "run_pipeline", "production_status", "export_production_v5_dataset", "export_timestamp_dataset",
         "check_data", "export_returnclock_dataset", "split_returnclock_training_dataset",
         "preference_task", "submit_preference", "list_preferences", "preference_judges", "prune_traces"}


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def dirs(tmp_path: Path) -> dict[str, Path]:
    return {"sessions": tmp_path / "sessions", "datasets": tmp_path / "datasets",
            "checkpoints": tmp_path / "checkpoints"}


@pytest.fixture
def server(dirs):
    return build_server(dirs["sessions"], dirs["datasets"], dirs["checkpoints"])


async def _start(c: Checked, **kw) -> dict:
    return await c.ok("start_battle", {"p1_actor_type": "llm", "opponent": "baseline:random", "group": "g", **kw})


# ---------------------------------------------------------------------------- catalogue
@pytest.mark.anyio
async def test_every_tool_is_listed_documented_and_declares_the_envelope(server):
    async with Client(server) as client:
        listed = (await client.list_tools()).tools
    assert {t.name for t in listed} == TOOLS
    for tool in listed:
        assert tool.output_schema is None, tool.name  # the one envelope is described in the instructions
        assert len(tool.description) > 40, tool.name
        assert tool.title and tool.annotations is not None
        for name, prop in tool.input_schema.get("properties", {}).items():
            assert prop.get("description"), f"{tool.name}.{name} has no description"
    by_name = {t.name: t for t in listed}
    assert set(by_name["start_battle"].input_schema["properties"]) == {
        "p1_actor_type", "opponent", "p1_model", "group", "seed", "codename", "view"}
    assert by_name["start_battle"].input_schema["properties"]["p1_actor_type"]["enum"] == ["human", "llm", "rl"]
    assert set(by_name["run_series"].input_schema["required"]) == {"group", "n_battles", "p1_model", "opponent"}
    assert "ctx" not in by_name["run_series"].input_schema["properties"]
    assert by_name["get_state"].annotations.read_only_hint and not by_name["submit_action"].annotations.read_only_hint
    validator = jsonschema.Draft202012Validator(ENVELOPE_SCHEMA)
    assert validator.is_valid({"ok": True, "result": {}, "error": None})
    assert validator.is_valid({"ok": False, "result": None, "error": {"code": "x", "message": "y", "details": None}})
    for inconsistent in ({"ok": True, "result": None, "error": None}, {"ok": False, "result": {}, "error": None},
                         {"ok": True, "result": {}, "error": {"code": "x", "message": "y"}}, {"ok": True}):
        assert not validator.is_valid(inconsistent), inconsistent


# ---------------------------------------------------------------------------- L2 lifecycle
@pytest.mark.anyio
async def test_llm_battle_from_start_to_finish(server):
    async with Client(server) as client:
        c = Checked(client)
        start = await _start(c, seed=11, codename="Alpha", view="player")
        assert start["battle_tag"] == "llm-vs-bot" and start["group"] == "g" and start["codename"] == "Alpha"
        assert start["state"]["you"]["player"] == 1
        assert start["your_turn"] and not start["done"] and start["winner"] is None
        assert "you are player 1" in start["board"] and start["legal_actions"]
        assert all(set(a) == {"action_id", "description"} for a in start["legal_actions"])
        assert "hand" not in start["state"]["opponent"]  # the opponent's hand is hidden
        assert (await c.ok("list_matches"))["matches"][0]["match_id"] == start["match_id"]

        final, rationales = await play_to_the_end(c, start["match_id"])
        assert final["done"] and final["winner"] in (0, 1, 2) and final["legal_actions"] == []
        assert "finish_battle" in final["next"]
        again = await c.ok("legal_actions", {"match_id": start["match_id"]})
        assert again["done"] and again["actions"] == [] and again["winner"] == final["winner"]

        done = await c.ok("finish_battle", {"match_id": start["match_id"]})
        assert done["status"] == "finished" and done["done"] and done["winner"] == final["winner"]
        assert done["result"]["winner"] == final["winner"] and done["result"]["decisions"] >= len(rationales)
        assert done["degraded"] is False and done["policy_warnings"] == []
        assert set(done["paths"]) == {"meta.jsonl", "turns.jsonl", "actions.jsonl"}
        p1 = [r for r in read_jsonl(done["paths"]["actions.jsonl"]) if r["player"] == 1]
        assert [r["rationale"] for r in p1] == rationales

        await c.err("get_state", {"match_id": start["match_id"]}, "match_finished")
        await c.err("submit_action", {"match_id": start["match_id"], "action_id": 0}, "match_finished")
        assert (await c.ok("list_matches"))["count"] == 0
        replay = await c.ok("replay_battle", {"group": "g", "battle_id": done["battle_id"]})
        assert replay["reproduces"] and replay["decisions_checked"] == done["result"]["decisions"]
        assert c.validated["error"] >= 2


@pytest.mark.anyio
async def test_player_and_omniscient_views(server):
    async with Client(server) as client:
        c = Checked(client)
        start = await _start(c, seed=5)
        player = await c.ok("get_state", {"match_id": start["match_id"]})
        assert player["view"] == "player" and not player["omniscient"] and "warning" not in player
        assert player["board"] == start["board"] and player["legal_actions"] == start["legal_actions"]
        full = await c.ok("get_state", {"match_id": start["match_id"], "view": "omniscient"})
        assert full["view"] == "omniscient" and full["omniscient"] is True and "OMNISCIENT" in full["warning"]
        assert full["opponent_board"] != full["board"] and full["state"] != player["state"]
        await c.err("get_state", {"match_id": start["match_id"], "view": "god"}, "invalid_argument")


@pytest.mark.anyio
async def test_rl_battle_plays_itself_and_abandon_writes_a_marked_trace(server):
    async with Client(server) as client:
        c = Checked(client)
        rl = await c.ok("start_battle", {"p1_actor_type": "rl", "p1_model": "baseline:greedy",
                                         "opponent": "baseline:random", "group": "rl", "seed": 2})
        assert rl["done"] and rl["battle_tag"] == "rl-vs-bot" and rl["legal_actions"] == []
        err = await c.err("submit_action", {"match_id": rl["match_id"], "action_id": 0}, "invalid_argument")
        assert "rl battle" in err["message"]
        assert (await c.ok("finish_battle", {"match_id": rl["match_id"]}))["status"] == "finished"

        live = await _start(c, seed=8)
        await c.err("finish_battle", {"match_id": live["match_id"]}, "invalid_argument")  # not over yet
        gone = await c.ok("abandon_battle", {"match_id": live["match_id"], "reason": "testing abandon"})
        assert gone["status"] == "abandoned" and gone["result"]["reason"] == "testing abandon"
        meta = read_jsonl(gone["paths"]["meta.jsonl"])[0]
        assert meta["result"]["status"] == "abandoned"
        await c.err("abandon_battle", {"match_id": live["match_id"]}, "match_finished")
        session = await c.ok("inspect_session", {"group": "g"})
        assert [e["status"] for e in session["catalog"]] == ["abandoned"]


class _FailOnce:
    """A real policy that fails on its first move (fault injection), then plays normally."""

    def __init__(self, policy):
        self.policy, self.failed = policy, False

    def act(self, state):
        if not self.failed:
            self.failed = True
            raise RuntimeError("injected opponent failure")
        return self.policy.act(state)


@pytest.mark.anyio
async def test_match_error_codes(server, dirs):
    other = build_server(dirs["sessions"], dirs["datasets"], dirs["checkpoints"])  # a second "process"
    async with Client(server) as client, Client(other) as other_client:
        c, o = Checked(client), Checked(other_client)
        start = await _start(c, seed=21)
        match_id = start["match_id"]
        foreign = await _start(o, seed=22, group="g2")

        err = await c.err("get_state", {"match_id": foreign["match_id"]}, "foreign_match")
        assert "never crosses processes" in err["message"]
        await c.err("legal_actions", {"match_id": "match-1"}, "unknown_match")
        unknown = match_id[:11] + "0" * 24
        await c.err("submit_action", {"match_id": unknown, "action_id": 0}, "unknown_match")

        legal = {a["action_id"] for a in start["legal_actions"]}
        illegal = next(a for a in range(1, 163) if a not in legal)
        err = await c.err("submit_action", {"match_id": match_id, "action_id": illegal}, "illegal_action")
        assert "legal" in err["message"]

        # not_your_turn: the opponent fails mid-turn (internal_error, never a bare SDK message),
        # player 2 is then to move until advance_bot lets it play on.
        with server.matches.use(match_id) as m:
            m.policies[2] = _FailOnce(m.policies[2])
        err = await c.err("submit_action", {"match_id": match_id, "action_id": 0, "rationale": "end"},
                          "internal_error")
        assert "RuntimeError" in err["message"] and "injected" not in err["message"]
        state = await c.ok("get_state", {"match_id": match_id})
        assert state["to_move"] == 2 and not state["your_turn"] and "advance_bot" in state["next"]
        err = await c.err("submit_action", {"match_id": match_id, "action_id": 0}, "not_your_turn")
        assert "advance_bot" in err["message"]
        advanced = await c.ok("advance_bot", {"match_id": match_id})
        assert advanced["your_turn"] and advanced["opponent_moves"] and advanced["legal_actions"]
        assert all(isinstance(mv, str) for mv in advanced["opponent_moves"])  # their descriptions
        done = await c.ok("abandon_battle", {"match_id": match_id})
        assert (await c.ok("replay_battle", {"group": "g", "battle_id": done["battle_id"]}))["reproduces"]
        await c.err("get_state", {"match_id": match_id}, "match_finished")


@pytest.mark.anyio
async def test_argument_validation_errors_are_envelopes(server):
    async with Client(server) as client:
        c = Checked(client)
        start = await _start(c, seed=3)
        mid = start["match_id"]
        for bad in ("zero", 1.5, True, None, [0]):
            err = await c.err("submit_action", {"match_id": mid, "action_id": bad}, "invalid_argument")
            assert "action_id" in err["message"] and err["details"]["fields"] == ["action_id"]
        err = await c.err("submit_action", {"match_id": mid}, "invalid_argument")
        assert "action_id" in err["message"] and "Field required" in err["message"]
        await c.err("get_state", {"match_id": 42}, "invalid_argument")
        await c.err("start_battle", {"p1_actor_type": "robot"}, "invalid_argument")
        await c.err("start_battle", {"p1_actor_type": "llm", "seed": -1}, "invalid_argument")
        await c.err("run_series", {"group": "s", "n_battles": 0, "p1_model": "baseline:greedy",
                                   "opponent": "baseline:greedy"}, "invalid_argument")
        await c.err("inspect_session", {"group": "g", "limit": "ten"}, "invalid_argument")

        err = await c.err("legal_actions", {"match_id": mid, "verbose": True, "colour": "red"}, "invalid_argument")
        # unknown names are never repeated (a name can carry a secret): counted, located, accepted listed
        assert "2 unknown arguments (names not repeated" in err["message"] and "accepted: match_id" in err["message"]
        assert "colour" not in str(err) and "verbose" not in str(err)
        assert err["details"] == {"unknown_count": 2, "unknown": ["<argument 2>", "<argument 3>"],
                                  "accepted": ["match_id"]}
        err = await c.err("list_sessions", {"group": "g"}, "invalid_argument")
        assert err["details"]["accepted"] == ["limit", "cursor"]

        err = await c.err("no_such_tool", {}, "unknown_tool")
        assert "start_battle" in err["message"]
        # the match is untouched by all of the above
        assert (await c.ok("get_state", {"match_id": mid}))["legal_actions"] == start["legal_actions"]


FORBIDDEN_CASES = [
    ("list_sessions", {"salt": "pepper-and-salt-value"}),
    ("list_sessions", {"dsn": "host=db user=me"}),
    ("start_battle", {"p1_actor_type": "llm", "password": "hunter2-secret"}),
    ("start_battle", {"p1_actor_type": "llm", "user_id": "user-12345"}),
    ("run_series", {"group": "s", "n_battles": 1, "p1_model": "baseline:greedy", "opponent": "baseline:greedy",
                    "include_players": True}),
    ("list_codenames", {"playerId": "player-999"}),
    ("series_status", {"group": "s", "api_token": "tok-abcdef"}),
    ("inspect_model", {"name": "x", "RETURNCLOCK_DATASET_SALT": "0123456789abcdef0123456789abcdef"}),
    ("start_battle", {"p1_actor_type": "llm", "group": "postgresql://admin:pw@prod-db:5432/arena"}),
    ("submit_action", {"match_id": "m_x", "action_id": 0,
                       "rationale": "connect with host=prod-db dbname=arena sslmode=require"}),
    ("claim_codename", {"codename": "Zed", "group": "RLHF_PRODUCTION_DSN=postgres://u@h/db"}),
    ("abandon_battle", {"match_id": "m_x", "reason": "password = hunter2"}),
]


@pytest.mark.anyio
@pytest.mark.parametrize("tool,arguments", FORBIDDEN_CASES)
async def test_secret_carrying_arguments_are_refused_without_echo(server, tool, arguments):
    async with Client(server) as client:
        c = Checked(client)
        err = await c.err(tool, arguments, "forbidden_argument")
        secrets = [v for v in arguments.values() if isinstance(v, str) and any(
            s in v for s in ("pepper", "host=", "hunter2", "user-1", "player-9", "tok-", "0123", "admin", "prod"))]
        for secret in secrets:
            assert secret not in err["message"] and secret not in str(err["details"])
        assert err["details"]["arguments"]
    assert server.store.list_groups() == []  # nothing ran


@pytest.mark.anyio
async def test_core_business_errors_keep_their_codes(server):
    async with Client(server) as client:
        c = Checked(client)
        err = await c.err("start_battle", {"p1_actor_type": "llm", "opponent": "baseline:nope"}, "unknown_spec")
        assert "baseline:greedy" in err["message"]
        await c.err("start_battle", {"p1_actor_type": "llm", "group": "../etc"}, "invalid_argument")
        await c.err("start_battle", {"p1_actor_type": "llm", "p1_model": "baseline:greedy"}, "invalid_argument")
        await c.err("start_battle", {"p1_actor_type": "rl"}, "invalid_argument")  # rl needs p1_model
        await _start(c, seed=1)
        await c.err("start_battle", {"p1_actor_type": "rl", "p1_model": "baseline:greedy", "group": "g"},
                    "group_conflict")
        await c.err("start_battle", {"p1_actor_type": "llm", "codename": "9lives"}, "invalid_argument")
        await c.err("inspect_session", {"group": "nope"}, "not_found")
        await c.err("series_status", {"group": "nope"}, "not_found")
        await c.err("replay_battle", {"group": "g", "battle_id": "b000000-0000000000"}, "not_found")


# ---------------------------------------------------------------------------- L1 and sessions
@pytest.mark.anyio
async def test_run_series_progress_codename_status_sessions_and_replay(server, dirs):
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done, total, message):
        progress.append((done, total, message))

    async with Client(server) as client:
        c = Checked(client)
        lease = (await c.ok("claim_codename", {"codename": "Bravo", "group": "camp"}))["lease"]
        assert lease["owner_pid"] == os.getpid() and lease["group"] == "camp"
        assert [entry["codename"] for entry in (await c.ok("list_codenames"))["leases"]] == ["Bravo"]
        result = await c.ok("run_series", {"group": "camp", "n_battles": 5, "p1_model": "baseline:greedy",
                                           "opponent": "baseline:random", "seed": 7, "codename": "Bravo"},
                            progress_callback=on_progress)
        assert result["ran"] == 5 and result["skipped"] == 0 and result["codename_released"]
        summary = result["summary"]
        assert summary["by_status"]["finished"] == 5 and sum(summary["results"].values()) == 5
        assert [p[0] for p in progress] == [1, 2, 3, 4, 5] and all(p[1] == 5 for p in progress)
        assert (await c.ok("list_codenames"))["leases"] == []  # released at the end of the series

        again = await c.ok("run_series", {"group": "camp", "n_battles": 6, "p1_model": "baseline:greedy",
                                          "opponent": "baseline:random", "seed": 7})
        assert again["ran"] == 1 and again["skipped"] == 5
        await c.err("run_series", {"group": "camp", "n_battles": 6, "p1_model": "baseline:random",
                                   "opponent": "baseline:random", "seed": 7}, "group_conflict")

        status = await c.ok("series_status", {"group": "camp"})
        assert status["mode"] == "series" and status["target_battles"] == 6 and status["complete"]
        assert status["summary"]["by_status"]["finished"] == 6 and status["leases"] == []

        sessions = await c.ok("list_sessions")
        (group,) = sessions["groups"]
        assert group["group"] == "camp" and group["battle_tag"] == "rl-vs-bot" and group["battles"] == 6
        assert group["p1_model"] == "baseline:greedy" and group["opponent"] == "baseline:random"

        first = await c.ok("inspect_session", {"group": "camp", "limit": 2})
        assert [e["index"] for e in first["catalog"]] == [0, 1] and first["next_cursor"]
        page = await c.ok("inspect_session", {"group": "camp", "limit": 3, "cursor": first["next_cursor"]})
        assert page["catalog_total"] == page["total"] == 6 and [e["index"] for e in page["catalog"]] == [2, 3, 4]
        assert page["manifest"]["configuration"]["battle_tag"] == "rl-vs-bot"
        for entry in page["catalog"]:
            replay = await c.ok("replay_battle", {"group": "camp", "battle_id": entry["battle_id"]})
            assert replay["reproduces"] and replay["first_divergence"] is None


@pytest.mark.anyio
async def test_codename_tools(server, dirs):
    async with Client(server) as client:
        c = Checked(client)
        first = (await c.ok("claim_codename", {"codename": "Echo", "group": "g", "stale_after_s": 60}))["lease"]
        again = (await c.ok("claim_codename", {"codename": "Echo", "group": "g", "stale_after_s": 60}))["lease"]
        assert again["claimed_at"] == first["claimed_at"] and again["heartbeat_at"] >= first["heartbeat_at"]
        await c.err("claim_codename", {"codename": "Echo", "group": "other"}, "codename_taken")
        await c.err("claim_codename", {"codename": "1bad", "group": "g"}, "invalid_argument")
        # a codename held by another live process
        codenames.claim(dirs["sessions"], "Foxtrot", "g", owner_pid=os.getppid())
        err = await c.err("claim_codename", {"codename": "Foxtrot", "group": "g"}, "codename_taken")
        assert "already claimed" in err["message"]
        await c.err("release_codename", {"codename": "Foxtrot"}, "not_owner")
        listed = await c.ok("list_codenames")
        assert [entry["codename"] for entry in listed["leases"]] == ["Echo", "Foxtrot"]
        assert (await c.ok("release_codename", {"codename": "Echo"}))["released"] is True
        assert (await c.ok("release_codename", {"codename": "Echo"}))["released"] is False


# ---------------------------------------------------------------------------- models
@pytest.mark.anyio
async def test_model_tools(server, dirs, tmp_path):
    incoming = dirs["checkpoints"] / "incoming"
    incoming.mkdir(parents=True)
    v5 = onnx_factory.save(onnx_factory.v5_model(), incoming / "v5.onnx")
    outside = onnx_factory.save(onnx_factory.v5_model(), tmp_path / "outside.onnx")
    async with Client(server) as client:
        c = Checked(client)
        models = await c.ok("list_models")
        assert models["baselines"] == ["baseline:random", "baseline:greedy"] and models["checkpoints"] == []
        assert {"baseline", "legacy_onnx", "action_onnx", "v5"} <= set(models["adapter_kinds"])
        assert models["kind_aliases"] == {"v4": "action_onnx"}

        entry = await c.ok("register_checkpoint", {"name": "scripted-v5", "path": str(v5)})
        assert entry["kind"] == "v5" and len(entry["weights_hash"]) == 64 and Path(entry["path"]).is_file()
        await c.err("register_checkpoint", {"name": "scripted-v5", "path": str(v5)}, "already_exists")
        err = await c.err("register_checkpoint", {"name": "wrong", "path": str(v5), "kind": "legacy_onnx"},
                          "kind_mismatch")
        assert "expected" in err["message"]
        await c.err("register_checkpoint", {"name": "far", "path": str(outside)}, "path_not_allowed")
        await c.err("register_checkpoint", {"name": "up", "path": str(incoming / ".." / "incoming" / "v5.onnx")},
                    "path_not_allowed")
        await c.err("register_checkpoint", {"name": "gone", "path": str(incoming / "missing.onnx")}, "not_found")
        await c.err("register_checkpoint", {"name": "k", "path": str(v5), "kind": "v6"}, "invalid_argument")

        listed = await c.ok("list_models")
        assert [cp["name"] for cp in listed["checkpoints"]] == ["scripted-v5"]
        assert listed["specs"] == ["baseline:random", "baseline:greedy", "scripted-v5"]
        info = await c.ok("inspect_model", {"name": "scripted-v5"})
        assert info["file_present"] and info["file_intact"] and info["weights_hash"] == entry["weights_hash"]
        assert (await c.ok("inspect_model", {"name": "baseline:greedy"}))["kind"] == "baseline"
        err = await c.err("inspect_model", {"name": "nobody"}, "not_found")
        assert "scripted-v5" in err["message"] and "search:<one of these>?sims=N" in err["message"]
        # the search actor: listed as a form, inspected with its rollout policy's own details
        assert listed["search"]["example"] == "search:baseline:greedy?sims=32" and listed["search"]["max_sims"] == 4096
        search = await c.ok("inspect_model", {"name": "search:scripted-v5"})
        assert search["spec"] == "search:scripted-v5?sims=32" and search["kind"] == "search" and search["sims"] == 32
        assert search["weights_hash"] == entry["weights_hash"] == search["rollout"]["weights_hash"]
        assert search["rollout"]["kind"] == "v5" and search["rollout"]["file_intact"]
        labeller = await c.ok("inspect_model", {"name": "search:baseline:greedy?sims=8&play=scripted-v5"})
        assert labeller["spec"] == "search:baseline:greedy?sims=8&play=scripted-v5" and labeller["sims"] == 8
        assert labeller["play"]["weights_hash"] == entry["weights_hash"] and labeller["play"]["file_intact"]
        assert "scripted-v5's moves are played" in labeller["description"]
        err = await c.err("inspect_model", {"name": "search:baseline:greedy?sims=0"}, "invalid_argument")
        assert "sims must be an integer in 1..4096, got '0'" in err["message"]
        await c.err("inspect_model", {"name": "search:nobody"}, "unknown_spec")

        # the checkpoint plays: a series with it as player 1 records its weights hash
        series = await c.ok("run_series", {"group": "cp", "n_battles": 2, "p1_model": "scripted-v5",
                                           "opponent": "baseline:random"})
        assert series["summary"]["by_status"]["finished"] == 2 and series["summary"]["degraded"] == 0
        assert series["summary"]["weights_hashes"] == [entry["weights_hash"]]
        assert (await c.ok("series_status", {"group": "cp"}))["summary"]["battle_tags"] == {"rl-vs-bot": 2}
        live = await c.ok("start_battle", {"p1_actor_type": "llm", "opponent": "scripted-v5", "group": "vs-cp"})
        assert live["battle_tag"] == "llm-vs-rl" and live["opponent"] == "scripted-v5"

        custom = await c.ok("register_custom_model", {"kind": "mcp_test_end_turn",
                                                      "factory": "tests.onnx_factory:end_turn_factory",
                                                      "replace": True})
        assert "mcp_test_end_turn" in custom["adapter_kinds"] and custom["persisted"] is False
        assert "mcp_test_end_turn" in (await c.ok("list_models"))["adapter_kinds"]
        await c.err("register_custom_model", {"kind": "nomod", "factory": "no_such_module_xyz:make"}, "not_found")
        await c.err("register_custom_model", {"kind": "Bad Kind", "factory": "tests.onnx_factory:end_turn_factory"},
                    "invalid_argument")


# ---------------------------------------------------------------------------- concurrency
@pytest.mark.anyio
async def test_concurrent_calls_on_one_match_leave_a_consistent_replayable_trace(server):
    async with Client(server) as client:
        c = Checked(client)
        start = await _start(c, seed=31)
        mid = start["match_id"]
        submits: list[tuple[str, dict]] = []
        refusals: list[dict] = []
        states: list[dict] = []

        async def submit(i: int) -> None:
            rationale = f"concurrent end turn {i}"
            envelope = await c.envelope("submit_action", {"match_id": mid, "action_id": 0, "rationale": rationale})
            if envelope["ok"]:
                submits.append((rationale, envelope["result"]))
            else:
                refusals.append(envelope["error"])

        async def look() -> None:
            states.append(await c.ok("get_state", {"match_id": mid}))
            await c.ok("legal_actions", {"match_id": mid})

        async with anyio.create_task_group() as tg:
            for i in range(8):
                tg.start_soon(submit, i)
                tg.start_soon(look)

        assert all(r["code"] == "match_finished" for r in refusals), refusals  # only if the bot won meanwhile
        assert len(submits) + len(refusals) == 8 and submits
        submits.sort(key=lambda item: item[1]["turn"])
        assert len({result["turn"] for _, result in submits}) == len(submits)  # each saw its own state
        for s in states:
            assert s["done"] or (s["your_turn"] and s["legal_actions"] and s["to_move"] == 1)
        last = submits[-1][1]
        final = await c.ok("finish_battle" if last["done"] else "abandon_battle", {"match_id": mid})
        p1 = [r for r in read_jsonl(final["paths"]["actions.jsonl"]) if r["player"] == 1]
        assert [r["rationale"] for r in p1] == [rationale for rationale, _ in submits]  # serialized, in order
        assert all(r["action_id"] == 0 for r in p1)
        replay = await c.ok("replay_battle", {"group": "g", "battle_id": final["battle_id"]})
        assert replay["reproduces"] and replay["decisions_checked"] == final["result"]["decisions"]
