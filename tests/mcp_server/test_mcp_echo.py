"""Errors over the real stdio server never echo a huge value nor a secret (issue 24).

A 200,000-character value sent to any string parameter of any tool gave a reply of up to
600 KB (the value quoted three times); ``not_found`` repeated ``sk-live-...``, bearer tokens
and ``api_key=...``; an AWS key id was taken as a codename; a fullwidth ``postgresql：//`` was
not recognized. Now every reply is small and says the length, and every secret form is
refused (``forbidden_argument``) and never repeated, not even partly, nor in stderr.
"""

from __future__ import annotations

import json

import pytest
from mcp import Client

from tests.mcp_helpers import Checked
from tests.mcp_server.schema_walk import arguments_with, leaves
from tests.mcp_server.test_mcp_guards_secrets import _server
from tests.core.test_echo import SECRETS, _windows

BIG = "n" * 200_000
# Tools whose error echoed the value (each was 200-600 KB): they must say its length now.
ECHOED = {"start_battle.opponent", "inspect_model.name", "register_checkpoint.path", "promote_checkpoint.name",
          "inspect_dataset.dataset", "get_state.match_id", "claim_codename.codename", "run_series.group",
          "train_policy.name", "benchmark_models.candidate", "register_custom_model.factory"}
# These two first run a series on the filler group (seconds of work) before they read the value.
SLOW = {"run_pipeline.imitate", "run_pipeline.incumbent"}


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.anyio
async def test_a_huge_value_in_any_string_parameter_gets_a_small_reply_that_says_its_length(tmp_path):
    errlog = tmp_path / "stderr.log"
    async with Client(_server(tmp_path, errlog, "INFO")) as client:
        c = Checked(client)
        tools = (await client.list_tools()).tools
        sent = 0
        for tool in tools:
            for leaf in leaves(tool):
                if leaf.type != "string" or "enum" in leaf.schema or leaf.name in SLOW:
                    continue
                result = await client.call_tool(tool.name, arguments_with(leaf, BIG, tool))
                text = result.content[0].text
                envelope = json.loads(text)
                assert len(text) < 4000, (leaf.name, len(text))
                if not envelope["ok"]:
                    assert envelope["error"]["code"] != "internal_error", (leaf.name, envelope["error"])
                if leaf.name in ECHOED:
                    assert "(200,000 chars)" in envelope["error"]["message"], (leaf.name, envelope["error"])
                sent += 1
        assert sent >= 60
        # the wire shape holds for such errors too (outputSchema-valid envelopes)
        await c.err("inspect_model", {"name": BIG}, "not_found")
    assert errlog.stat().st_size < 200_000  # no log line repeats the value either


@pytest.mark.anyio
async def test_every_secret_form_is_refused_by_the_tools_and_never_repeated(tmp_path):
    errlog = tmp_path / "stderr.log"
    replies = []
    async with Client(_server(tmp_path, errlog, "INFO")) as client:
        c = Checked(client)
        for secret, _ in SECRETS:
            for tool, arguments in (("inspect_model", {"name": secret}),
                                    ("claim_codename", {"codename": secret, "group": "g"}),
                                    ("start_battle", {"p1_actor_type": "llm", "codename": secret}),
                                    ("start_battle", {"p1_actor_type": "llm", "opponent": secret}),
                                    ("inspect_dataset", {"dataset": secret}),
                                    ("submit_action", {"match_id": "m", "action_id": 1, "rationale": secret})):
                error = await c.err(tool, arguments, "forbidden_argument")
                replies.append(json.dumps(error, ensure_ascii=False))
        # an argument *named* like a secret in fullwidth letters is refused like the ASCII name
        error = await c.err("list_sessions", {"\uff44\uff42\uff3f\uff50\uff41\uff53\uff53\uff57\uff4f\uff52\uff44": "x"},
                            "forbidden_argument")
        assert error["details"]["arguments"] == ["<argument 1>"]
        assert (await c.ok("list_codenames"))["leases"] == []  # no credential became a codename
    text = "\n".join(replies) + errlog.read_text(encoding="utf-8", errors="replace")
    for _, material in SECRETS:
        assert not [w for w in _windows(material) if w in text], material
    assert not (tmp_path / "sessions").exists() or not any((tmp_path / "sessions").rglob("*.jsonl"))
