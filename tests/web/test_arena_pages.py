"""The arena's pages through Starlette's TestClient (the real app, the real core, temp dirs): a
whole battle recorded as a human trace with arena think times, no hidden information in any
page, one session never sees another's matches, every refusal is a clear page (404, 405, 413,
403 CSRF/token, bad spec, illegal move, stale page, finished battle, too many battles), the
bind rule, escaped output, and Metronome readiness counting arena labels only on opt-in."""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import engine

from extrarlhf.core.errors import InvalidArgument
from extrarlhf.core.readiness import ReadinessPolicy
from extrarlhf.core.work_caps import MAX_ROLLOUTS_PER_CALL
from extrarlhf.datasets.contours import dataset_readiness
from extrarlhf.datasets.materialize import materialize_v5_dataset
from mcp_server.limits import Limits
from extrarlhf.checkpoints.registry import CheckpointRegistry
from tests import onnx_factory
from tests.test_schemas import errors as schema_errors
from tests.web.arena_helpers import (CSRF, DECISION, client, csrf, mcp_trace, move, play_out, same_arena, start,
                                     trace_files)
from web.arena import default_group
from web.config import check_bind

REPO = Path(__file__).resolve().parents[2]


def _opponent_moves(page: str) -> list[str]:
    section = re.search(r'<section class="panel moves".*?</section>', page, re.S)
    return [html.unescape(m) for m in re.findall(r"<li>(.*?)</li>", section.group(0), re.S)] if section else []


def _is_page(r, status: int, *words: str) -> None:
    assert r.status_code == status, (r.status_code, r.text[:1500])
    assert r.headers["content-type"].startswith("text/html")
    assert "<h1" in r.text and "Traceback" not in r.text and 'File "' not in r.text
    for word in words:
        assert word in r.text, (word, r.text[:1500])


def test_a_whole_battle_is_recorded_like_mcp_play_with_arena_think_times(tmp_path: Path):
    c = client(tmp_path)
    path = start(c, "baseline:greedy", name="Alice Example")
    shown: list[str] = []  # the opponent's moves as the pages list them
    end, moves = play_out(c, path, each=lambda html: shown.extend(_opponent_moves(html)))
    shown += _opponent_moves(end)
    _is_page(c.get(path), 200, "Watch the replay", "human-vs-bot")
    assert re.search(r"<h1>(You won!|You lost|Draw)</h1>", end)
    group = default_group("baseline:greedy")
    assert group == "arena-baseline-greedy"
    trace = trace_files(tmp_path / "sessions", group)
    (meta,) = trace["meta"]
    assert schema_errors("meta", meta) == [] and all(schema_errors("action", a) == [] for a in trace["actions"])
    assert meta["battle_tag"] == "human-vs-bot" and meta["p1_actor_type"] == "human"
    assert meta["actors"]["p1"]["type"] == "human" and meta["result"]["status"] == "finished"
    assert re.fullmatch(r"p-[0-9a-f]{32}", meta["codename"]) and meta["actors"]["p1"]["codename"] == meta["codename"]
    mine = [a for a in trace["actions"] if a["player"] == 1]
    # the opponent's moves read from player 1's side (issue 49): its target on player 1's side is "your"
    theirs = [a for a in trace["actions"] if a["player"] == 2]
    assert len(shown) == len(theirs) > 0
    side = {"enemy_hero": "your hero", "own_hero": "their hero", "enemy_creature": "your ", "own_creature": "their "}
    targeted = 0
    for action, line in zip(theirs, shown):
        assert "enemy" not in line, line
        target = engine.decode_action(action["action_id"]).get("target", {"kind": "none"})["kind"]
        if target in side:
            targeted += 1
            assert line.rpartition(" on " if " on " in line else " -> ")[2].startswith(side[target]), (target, line)
        if line.startswith("Attack with "):
            assert line.startswith("Attack with their "), line
    assert targeted > 0
    replayed = [re.search(r"<strong>(You|Opponent)</strong> \([a-z]+\): (.*?)</p>", c.get(f"{path}/replay?step={k}").text)
                for k in range(len(trace["actions"]))]
    assert [m.group(1) for m in replayed] == ["You" if a["player"] == 1 else "Opponent" for a in trace["actions"]]
    assert [html.unescape(m.group(2)) for m in replayed if m.group(1) == "Opponent"] == shown  # the replay says the same
    assert len(mine) == moves and [a["rationale"] for a in mine] == [f"move {i}" for i in range(moves)]
    think = meta["audit"]["think_times"]
    assert think["provenance"] == "arena" and think["observed"] is True and think["production"] is False
    assert [d["decision_index"] for d in think["decisions"]] == [a["decision_index"] for a in mine]
    assert all(isinstance(d["ms"], int) and 0 <= d["ms"] < 60_000 for d in think["decisions"])
    for file in (tmp_path / "sessions").rglob("*"):  # the name typed is stored nowhere, only its pseudonym
        if file.is_file():
            assert b"Alice" not in file.read_bytes(), file
    # an MCP-played human battle has the same record shapes; only arena battles carry think times
    mcp = mcp_trace(tmp_path / "mcp-sessions")
    assert set(mcp["meta"][0]) == set(meta) and set(mcp["actions"][0]) == set(trace["actions"][0])
    assert set(mcp["turns"][0]) == set(trace["turns"][0]) and mcp["meta"][0]["actors"]["p1"]["type"] == "human"
    assert "think_times" not in mcp["meta"][0]["audit"] and set(meta["audit"]) - set(mcp["meta"][0]["audit"]) == \
        {"think_times"}


def test_player_one_never_sees_the_opponents_hand_or_any_deck(tmp_path: Path):
    c = client(tmp_path)
    path = start(c, "baseline:random")
    match_id = path.rsplit("/", 1)[1]
    registry = c.app.state.arena.registry
    checked = 0

    def check(html: str) -> None:
        nonlocal checked
        with registry.use(match_id) as m:
            full = m.state.omniscient_view()  # the state's own view: no peek is recorded
            visible = json.dumps(m.state.player_view(1))
        moves = html.split("The opponent's moves since yours")[-1] if "since yours" in html else ""
        hidden = {card["name"] for card in full["players"][1]["hand"]} | \
                 {card["name"] for p in full["players"] for card in p["deck"]}
        hidden = {name for name in hidden if name not in visible and name not in moves}
        leaked = sorted(name for name in hidden if name in html)
        assert not leaked, leaked
        assert f"{full['players'][1]['hand_size']} cards in the opponent's hand" in html
        checked += 1

    play_out(c, path, each=check)
    assert checked >= 3
    (meta,) = trace_files(tmp_path / "sessions", default_group("baseline:random"))["meta"]
    assert meta["omniscient_peeks"] == []  # the battle stays training-eligible


def test_every_refusal_is_a_clear_page_and_a_finished_battle_cannot_be_driven(tmp_path: Path):
    c = client(tmp_path, max_live_per_session=1)
    token = csrf(c)
    _is_page(c.get("/no/such/page"), 404, "Page not found")
    _is_page(c.put("/"), 405, "Method not allowed")
    _is_page(c.get("/start"), 405)
    _is_page(c.post("/start", data={"opponent": "baseline:greedy"}), 403, "CSRF")
    _is_page(c.post("/start", data={"csrf": token + "x", "opponent": "baseline:greedy"}), 403, "CSRF")
    _is_page(c.post("/start", data={"csrf": token, "opponent": "x" * 17_000}), 413, "Request too large")

    def chunks():  # a streamed body announces no length: it is bounded all the same
        for _ in range(20):
            yield b"a" * 1024
    _is_page(c.post("/start", content=chunks(), headers={"content-type": "application/x-www-form-urlencoded"}),
             413)
    _is_page(c.post("/start", data={"csrf": token, "opponent": "baseline:nope"}), 400, "Unknown opponent",
             "unknown opponent spec", "baseline:greedy")
    _is_page(c.post("/start", data={"csrf": token, "custom_spec": "search:baseline:greedy?sims=0"}), 400)
    _is_page(c.post("/start", data={"csrf": token, "opponent": "baseline:greedy", "group": "../up"}), 400,
             "group name")
    _is_page(c.get("/match/m_00000000_000000000000000000000000"), 404, "Unknown match")
    _is_page(c.get("/match/garbage"), 404, "Unknown match")
    path = start(c)
    _is_page(c.get(path + "/replay"), 409, "once the battle is over")
    _is_page(c.post("/start", data={"csrf": token, "opponent": "baseline:greedy"}), 429, "Too many battles")
    html = c.get(path).text
    _is_page(move(c, path, html, "162"), 400, "Illegal move")
    stale = c.post(path + "/move", data={"csrf": token, "decision": "9999", "action_id": "0"})
    _is_page(stale, 409, "out of date")
    _is_page(c.post(path + "/move", data={"csrf": token, "decision": "x", "action_id": "0"}), 400, "whole number")
    end, _ = play_out(c, path)
    _is_page(move(c, path, html, "0"), 409, "This battle is over", "cannot be played any more")
    _is_page(c.post(path + "/abandon", data={"csrf": token}), 409, "This battle is over")
    _is_page(c.get(path + "/replay?step=bogus"), 200, "step 1 of")
    last = c.get(path + "/replay?step=100000")
    _is_page(last, 200, "The final state")
    # after the end, one live battle may be started again; an abandoned one is recorded as such
    second = start(c)
    r = c.post(second + "/abandon", data={"csrf": token}, follow_redirects=True)
    _is_page(r, 200, "Battle abandoned")
    catalog = (tmp_path / "sessions" / "arena-baseline-greedy" / "catalog.jsonl").read_text().splitlines()
    assert [json.loads(line)["status"] for line in catalog][-2:] == ["started", "abandoned"]


def test_sessions_do_not_cross_talk(tmp_path: Path):
    alice = client(tmp_path)
    bob = same_arena(alice)
    path = start(alice, "baseline:random")
    _is_page(bob.get(path), 404, "Unknown match")
    html = alice.get(path).text
    r = bob.post(path + "/move", data={"csrf": csrf(bob), "decision": DECISION.search(html).group(1),
                                       "action_id": "0"})
    _is_page(r, 404, "Unknown match")
    _is_page(bob.post(path + "/move", data={"csrf": CSRF.search(html).group(1), "action_id": "0"}), 403)
    assert path.split("/")[-1] not in bob.get("/").text and path.split("/")[-1] in alice.get("/").text
    assert alice.cookies.get("arena_session") != bob.cookies.get("arena_session")


def test_the_access_token_admits_a_browser_once_and_the_bind_rule(tmp_path: Path):
    token = "Wq3vJ8kZr2XbN5mTy7LcP4dHs9GfA6eK1uRo0iV_-Qz"  # 43 characters of token_urlsafe(32)
    c = client(tmp_path, token=token)
    _is_page(c.get("/"), 403, "Access token needed")
    _is_page(c.get("/?token=wrong"), 403)
    _is_page(c.get("/static/arena.css"), 403)
    r = c.get(f"/?token={token}", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/" and token not in r.headers["location"]
    _is_page(c.get("/"), 200, "Play a battle")
    assert token not in c.get("/").text
    _is_page(same_arena(c).get("/"), 403)
    with pytest.raises(InvalidArgument, match="at least 16"):
        client(tmp_path, token="short")
    for host in ("127.0.0.1", "::1", "localhost", "127.0.0.2"):
        check_bind(host, None)
    for host in ("0.0.0.0", "192.168.1.4", "::", "arena.example"):
        with pytest.raises(InvalidArgument, match="needs|token"):
            check_bind(host, None)
        check_bind(host, token)
    done = subprocess.run([sys.executable, "-m", "extrarlhf", "arena", "--host", "0.0.0.0", "--sessions-dir",
                           str(tmp_path / "s")], capture_output=True, text=True, timeout=60, cwd=REPO,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert done.returncode == 2 and done.stderr.startswith("error [invalid_argument]: --host 0.0.0.0 exposes")
    assert "Traceback" not in done.stderr and not (tmp_path / "s").exists()


def test_output_is_escaped(tmp_path: Path):
    c = client(tmp_path)
    r = c.post("/start", data={"csrf": csrf(c), "custom_spec": "<script>alert(1)</script>"})
    _is_page(r, 400, "&lt;script&gt;")
    assert "<script>" not in r.text
    r = c.get("/<img src=x onerror=alert(1)>")
    _is_page(r, 404)
    assert "<img" not in r.text


def test_model_and_search_opponents_are_offered_and_tagged_like_mcp_under_its_cap(tmp_path: Path):
    assert Limits().max_rollouts_per_call == MAX_ROLLOUTS_PER_CALL  # the arena's cap is MCP's default
    CheckpointRegistry(tmp_path / "checkpoints").register(
        "tiny-v5", onnx_factory.save(onnx_factory.v5_model(), tmp_path / "tiny.onnx"))
    c = client(tmp_path)
    lobby = c.get("/").text
    for spec in ("baseline:greedy", "baseline:random", "tiny-v5", "search:baseline:greedy?sims=16"):
        assert f'<option value="{spec}"' in lobby
    assert "@promoted" not in lobby.split('id="opponent"')[1].split("</select>")[0]  # nothing promoted yet
    _is_page(c.get(start(c, "tiny-v5")), 200, "human-vs-rl", "tiny-v5")
    path = start(c, custom_spec="search:baseline:greedy?sims=2")
    _is_page(c.get(path), 200, "human-vs-rl", "search:baseline:greedy?sims=2")
    manifest = json.loads((tmp_path / "sessions" / "arena-tiny-v5" / "manifest.json").read_text())
    assert manifest["configuration"]["battle_tag"] == "human-vs-rl"
    assert manifest["configuration"]["opponent"]["kind"] == "v5" and manifest["configuration"]["opponent"]["weights_hash"]


def test_an_unexpected_error_is_a_page_without_the_traceback(tmp_path: Path, monkeypatch):
    c = client(tmp_path)

    def broken() -> list[str]:
        raise RuntimeError("disk on fire at /secret/path")
    monkeypatch.setattr(c.app.state.arena, "opponents", broken)
    r = c.get("/")
    _is_page(r, 500, "Something went wrong")
    assert "disk on fire" not in r.text and "/secret/path" not in r.text


def test_metronome_counts_arena_think_times_only_when_the_policy_opts_in(tmp_path: Path):
    c = client(tmp_path)
    play_out(c, start(c, "baseline:random"))
    group = default_group("baseline:random")
    (meta,) = trace_files(tmp_path / "sessions", group)["meta"]
    labels = len(meta["audit"]["think_times"]["decisions"])
    assert labels > 0
    off = dataset_readiness(group=group, sessions_dir=tmp_path / "sessions", policy={"min_metronome_labels": 1})
    assert off["evidence"]["arena_metronome_labels"] == labels and off["metronome_ready"] is False
    assert any("not production data" in b and f"{labels} observed arena think times are not counted" in b
               for b in off["metronome_blockers"])
    on = dataset_readiness(group=group, sessions_dir=tmp_path / "sessions",
                           policy={"min_metronome_labels": labels, "metronome_arena_labels": True})
    assert on["metronome_ready"] is True and on["policy"]["metronome_arena_labels"] is True
    short = dataset_readiness(group=group, sessions_dir=tmp_path / "sessions",
                              policy={"min_metronome_labels": labels + 1, "metronome_arena_labels": True})
    assert short["metronome_blockers"] == [f"{labels} observed human decision-time labels (production and arena); "
                                           f"need {labels + 1}"]
    # a dataset of the group keeps the count: its readiness says the same as the group's
    materialize_v5_dataset([group], "arena-ds", sessions_dir=tmp_path / "sessions", datasets_dir=tmp_path / "datasets")
    ds_on = dataset_readiness(dataset="arena-ds", datasets_dir=tmp_path / "datasets",
                              policy={"min_metronome_labels": labels, "metronome_arena_labels": True})
    assert ds_on["evidence"]["arena_metronome_labels"] == labels and ds_on["metronome_ready"] is True
    ds_off = dataset_readiness(dataset="arena-ds", datasets_dir=tmp_path / "datasets", policy={"min_metronome_labels": 1})
    assert ds_off["metronome_ready"] is False
    # an MCP-played human battle has no observed think times: opting in counts nothing
    mcp_trace(tmp_path / "sessions", group="mcp-human")
    mcp = dataset_readiness(group="mcp-human", sessions_dir=tmp_path / "sessions",
                            policy={"min_metronome_labels": 1, "metronome_arena_labels": True})
    assert mcp["evidence"]["arena_metronome_labels"] == 0 and mcp["metronome_ready"] is False
    assert ReadinessPolicy().metronome_arena_labels is False
    assert ReadinessPolicy.coerce({"metronome_arena_labels": 1}).metronome_arena_labels is True
    for bad in (2, "yes", None, 1.0):
        with pytest.raises(InvalidArgument, match="true or false"):
            ReadinessPolicy(metronome_arena_labels=bad)
    with pytest.raises(InvalidArgument, match="integer >= 0"):
        ReadinessPolicy(min_metronome_labels=True)
