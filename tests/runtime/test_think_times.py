"""Observed think times (the browser arena's, provenance ``arena``) in the core: only a human
player 1's decisions are timed, only when asked; a battle started without it (MCP play, series)
writes exactly the audit it always did."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from extrarlhf.core.errors import InvalidArgument
from extrarlhf.runtime.live import MatchRegistry
from extrarlhf.runtime.sessions import SessionStore


def _play(registry: MatchRegistry, group: str, **kw) -> dict:
    match_id, _ = registry.start("human", "baseline:greedy", group=group, seed=3, **kw)
    with registry.use(match_id) as m:
        while not m.done:
            m.submit(m.legal_actions()[-1]["action_id"])
        paths = m.finish()["paths"]
    return json.loads(Path(paths["meta.jsonl"]).read_text())


def test_arena_think_times_are_recorded_per_player_one_decision_and_only_when_asked(tmp_path: Path):
    registry = MatchRegistry(SessionStore(tmp_path / "sessions"), str(tmp_path / "checkpoints"))
    arena = _play(registry, "timed", think_provenance="arena")
    plain = _play(registry, "plain")
    think = arena["audit"]["think_times"]
    assert think["provenance"] == "arena" and think["player"] == 1 and think["production"] is False
    assert len(think["decisions"]) == len(arena["audit"]["decision_latency_ms"]["1"]) > 0
    assert all(abs(d["ms"] - x) <= 1 for d, x in zip(think["decisions"], arena["audit"]["decision_latency_ms"]["1"]))
    assert "think_times" not in plain["audit"] and set(plain["audit"]) == set(arena["audit"]) - {"think_times"}
    # the same seed and moves: everything outside audit is the same battle
    assert {k: v for k, v in arena.items() if k not in ("audit", "group", "battle_id")} == \
        {k: v for k, v in plain.items() if k not in ("audit", "group", "battle_id")}


@pytest.mark.parametrize("p1, provenance, message", [
    ("llm", "arena", "human player 1 only"),
    ("human", "production", "think_provenance must be one of arena"),
])
def test_think_times_are_refused_for_anything_but_an_arena_human(tmp_path: Path, p1: str, provenance: str,
                                                                  message: str):
    registry = MatchRegistry(SessionStore(tmp_path / "sessions"))
    with pytest.raises(InvalidArgument, match=message):
        registry.start(p1, "baseline:greedy", group="g", think_provenance=provenance)
    assert not (tmp_path / "sessions" / "g").exists()
