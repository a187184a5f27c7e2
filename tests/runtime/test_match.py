"""Lifecycle of one battle (extrarlhf.runtime.match): start -> submit/advance/run -> finish/abandon.

Real engine, real baselines, real files under tmp_path; nothing is mocked.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

import engine
from extrarlhf.core.errors import RLHFError
from extrarlhf.core.readiness import ReadinessPolicy
from extrarlhf.runtime.match import Match, start_match
from extrarlhf.runtime.replay import replay_battle
from extrarlhf.runtime.sessions import TRACE_FILES, SessionStore

TRACE_ROOT_KEYS_TIMING = ("time", "second", "latency", "_at", "_ms", "duration", "clock")


# --------------------------------------------------------------------------- helpers
def files_on_disk(root: Path) -> dict[str, bytes]:
    """Every regular file under root (lock files excluded: they are empty flock handles)."""
    if not root.exists():
        return {}
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.name.endswith(".lock")}


def dirs_on_disk(root: Path) -> set[str]:
    if not root.exists():
        return set()
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_dir()}


def catalog_lines(store: SessionStore, group: str) -> list[str]:
    path = store.group_dir(group) / "catalog.jsonl"
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def choose(match: Match) -> int:
    """A deterministic player-1 choice: the highest legal id (plays/attacks before END_TURN)."""
    return match.legal_actions()[-1]["action_id"]


def play_to_end(match: Match, rationale: bool = True) -> list[tuple[int, str | None]]:
    """Submit player-1 moves until the battle is over; checks the auto-play contract on the way."""
    submitted = []
    k = 0
    while not match.done:
        assert match.state.to_move == 1 and match.awaiting_p1
        action = choose(match)
        text = f"because #{k}: I pick {action}" if rationale else None
        before = len(match.recorder.decisions)
        match.submit(action, rationale=text)
        new = match.recorder.decisions[before:]
        # the first new decision is player 1's (the submitted one), the rest are the opponent's
        assert new[0].before.to_move == 1 and new[0].action_id == action and new[0].rationale == text
        assert all(d.before.to_move == 2 for d in new[1:])
        # after a submit: player 1 to move again, or the battle is over
        assert match.done or match.state.to_move == 1
        submitted.append((action, text))
        k += 1
    return submitted


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def expect_error(code: str, fn, *args, **kwargs) -> RLHFError:
    with pytest.raises(RLHFError) as info:
        fn(*args, **kwargs)
    assert info.value.code == code, f"code {info.value.code!r} != {code!r}: {info.value}"
    assert str(info.value).strip(), "error message is empty"
    return info.value


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    return SessionStore(tmp_path / "sessions")


def timing_keys(obj: Any, path: str = "") -> list[str]:
    """Paths of keys that look like clock/timing data anywhere in obj."""
    found = []
    if isinstance(obj, dict):
        for key, value in obj.items():
            p = f"{path}.{key}"
            if any(t in key.lower() for t in TRACE_ROOT_KEYS_TIMING):
                found.append(p)
            found.extend(timing_keys(value, p))
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            found.extend(timing_keys(value, f"{path}[{i}]"))
    return found


# --------------------------------------------------------------------------- llm / human lifecycle
@pytest.mark.parametrize("p1_type", ["llm", "human"])
def test_submit_battle_to_the_end_writes_a_full_trace(store: SessionStore, p1_type: str) -> None:
    m = start_match(store, "g", p1_type, opponent="baseline:greedy", seed=11, codename="Alpha")
    # the opponent auto-played up to player 1's first decision
    assert m.status == "active" and not m.done and m.state.to_move == 1 and m.awaiting_p1
    starting_p2 = m.recorder.decisions
    assert all(d.before.to_move == 2 for d in starting_p2)
    if m.state.starting_player == 2:
        assert starting_p2, "player 2 starts: it must have moved before player 1's first decision"
    else:
        assert not starting_p2

    submitted = play_to_end(m)
    assert m.done and m.state.to_move is None
    assert m.paths is None  # nothing published before finish
    assert not (store.group_dir("g") / "battles" / m.battle_id).exists()

    result = m.finish()
    assert result["status"] == "finished" and m.status == "finished"
    assert result["battle_tag"] == f"{p1_type}-vs-bot"
    assert result["winner"] == m.state.winner in (0, 1, 2)
    v5 = store.battle_dir("g", m.battle_id) / "v5"
    assert sorted(p.name for p in v5.iterdir()) == sorted(TRACE_FILES)
    assert result["paths"] == {name: str(v5 / name) for name in TRACE_FILES}

    actions = read_jsonl(v5 / "actions.jsonl")
    meta = read_jsonl(v5 / "meta.jsonl")
    assert len(meta) == 1
    meta = meta[0]
    assert meta["battle_tag"] == f"{p1_type}-vs-bot"
    assert meta["result"]["status"] == "finished" and meta["result"]["decisions"] == len(actions)
    assert [d["decision_index"] for d in actions] == list(range(len(actions)))

    p1_actor = {"type": p1_type, "spec": None, "kind": p1_type, "weights_hash": None, "codename": "Alpha"}
    p2_actor = {"type": "bot", "spec": "baseline:greedy", "kind": "baseline", "weights_hash": None, "codename": None}
    assert meta["actors"] == {"p1": p1_actor, "p2": p2_actor}
    p1_decisions = [d for d in actions if d["player"] == 1]
    p2_decisions = [d for d in actions if d["player"] == 2]
    assert p1_decisions and p2_decisions
    for d in p1_decisions:
        assert d["actor"] == p1_actor
    for d in p2_decisions:
        assert d["actor"] == p2_actor
        assert d["rationale"] is None, "the bot's decisions must not carry a rationale"
    # rationales: exactly the submitted ones, in order, on player-1 decisions only
    assert [(d["action_id"], d["rationale"]) for d in p1_decisions] == submitted
    for d in actions:
        assert d["action_id"] in [a["action_id"] for a in d["legal_actions"]]

    # catalog: a started line then a finished line with the files' sha256
    entries = store.read_catalog("g")
    assert len(entries) == 1 and entries[0]["status"] == "finished"
    assert entries[0]["battle_tag"] == f"{p1_type}-vs-bot" and entries[0]["codename"] == "Alpha"
    assert [json.loads(line)["status"] for line in catalog_lines(store, "g")] == ["started", "finished"]
    for name in TRACE_FILES:
        assert entries[0]["files"][name] == hashlib.sha256((v5 / name).read_bytes()).hexdigest()

    manifest = store.read_manifest("g")
    assert manifest["configuration"]["battle_tag"] == f"{p1_type}-vs-bot"
    assert manifest["configuration"]["p1_actor_type"] == p1_type

    # BattleRef readers
    ref = store.battle("g", m.battle_id)
    assert ref.meta()["battle_id"] == m.battle_id
    assert [d["action_id"] for d in ref.decisions()] == [d["action_id"] for d in actions]
    turns = list(ref.turns())
    assert turns and turns[-1]["state_end_hash"] == meta["result"]["final_state_hash"]
    assert replay_battle(store, "g", m.battle_id)["reproduces"] is True


def test_rl_battle_runs_via_match_run(store: SessionStore) -> None:
    m = start_match(store, "r", "rl", opponent="baseline:random", p1_model="baseline:greedy", seed=3)
    assert m.recorder.decisions == []  # rl battles do not auto-play at start: run() plays them
    assert not m.awaiting_p1
    expect_error("invalid_argument", m.submit, 0)
    assert m.recorder.decisions == []
    m.run()
    assert m.done
    result = m.finish()
    assert result["battle_tag"] == "rl-vs-bot"
    meta = store.battle("r", m.battle_id).meta()
    assert meta["battle_tag"] == "rl-vs-bot"
    p1 = {"type": "rl", "spec": "baseline:greedy", "kind": "baseline", "weights_hash": None, "codename": None}
    p2 = {"type": "bot", "spec": "baseline:random", "kind": "baseline", "weights_hash": None, "codename": None}
    assert meta["actors"] == {"p1": p1, "p2": p2}
    decisions = list(store.battle("r", m.battle_id).decisions())
    assert {d["player"] for d in decisions} == {1, 2}
    for d in decisions:
        assert d["actor"] == (p1 if d["player"] == 1 else p2)
        assert d["rationale"] is None
    manifest = store.read_manifest("r")
    assert manifest["configuration"]["p1_model"]["spec"] == "baseline:greedy"
    assert replay_battle(store, "r", m.battle_id)["reproduces"] is True


def test_run_is_refused_for_submit_battles(store: SessionStore) -> None:
    m = start_match(store, "g", "llm", seed=1)
    n = len(m.recorder.decisions)
    err = expect_error("invalid_argument", m.run)
    assert "submit" in str(err)
    assert len(m.recorder.decisions) == n and m.state.to_move == 1


def test_seed_none_derives_distinct_seeds_and_indexes(store: SessionStore) -> None:
    a = start_match(store, "g", "human")
    b = start_match(store, "g", "human")
    assert (a.index, b.index) == (0, 1)
    assert a.seed != b.seed and 0 <= a.seed <= 2**63 - 1 and 0 <= b.seed <= 2**63 - 1
    assert a.battle_id != b.battle_id
    entries = store.read_catalog("g")
    assert [e["status"] for e in entries] == ["unfinished", "unfinished"]
    assert [e["seed"] for e in entries] == [a.seed, b.seed]


def test_extreme_valid_seeds_are_accepted(store: SessionStore) -> None:
    for seed in (0, 2**63 - 1):
        m = start_match(store, "g", "llm", seed=seed)
        assert m.seed == seed and m.state.to_move == 1


# --------------------------------------------------------------------------- abandon and summary
def test_abandon_writes_a_marked_trace_never_training_ready(store: SessionStore) -> None:
    m = start_match(store, "g", "llm", seed=21)
    m.submit(choose(m), rationale="first")
    m.submit(choose(m), rationale="second")
    n = len(m.recorder.decisions)
    result = m.abandon("user closed the tab")
    assert result["status"] == "abandoned" and m.status == "abandoned"
    assert result["reason"] == "user closed the tab"
    v5 = store.battle_dir("g", m.battle_id) / "v5"
    assert sorted(p.name for p in v5.iterdir()) == sorted(TRACE_FILES)
    meta = read_jsonl(v5 / "meta.jsonl")[0]
    assert meta["result"]["status"] == "abandoned"
    assert meta["result"]["reason"] == "user closed the tab"
    assert meta["result"]["winner"] is None and meta["result"]["decisions"] == n
    assert len(read_jsonl(v5 / "actions.jsonl")) == n

    entries = store.read_catalog("g")
    assert [e["status"] for e in entries] == ["abandoned"]
    assert [b.status for b in store.battles("g")] == ["abandoned"]

    # summary.json was refreshed by abandon and counts it, but never as eligible
    summary = json.loads((store.group_dir("g") / "summary.json").read_text())
    assert summary["by_status"]["abandoned"] == 1 and summary["by_status"]["finished"] == 0
    assert summary["eligible_battles"] == 0 and summary["eligible_decisions"] == 0
    assert summary["results"] == {"p1_wins": 0, "draws": 0, "p2_wins": 0}
    lenient = ReadinessPolicy(min_v5_battles=1, min_v5_decisions=1, min_nemesis_lite_battles=1,
                              min_nemesis_lite_decks=1)
    readiness = store.compute_summary("g", lenient)["readiness"]
    assert readiness["v5_policy_training_ready"] is False and readiness["training_ready"] is False
    assert readiness["nemesis_lite_ready"] is False
    # the recorded prefix still replays
    assert replay_battle(store, "g", m.battle_id)["reproduces"] is True

    # a finished battle in the same group, with the same lenient policy, does count
    m2 = start_match(store, "g", "llm", seed=22)
    play_to_end(m2, rationale=False)
    m2.finish()
    s2 = store.compute_summary("g", lenient)
    assert s2["eligible_battles"] == 1 and s2["by_status"]["abandoned"] == 1
    assert s2["readiness"]["v5_policy_training_ready"] is True


def test_summary_json_is_refreshed_after_each_finish(store: SessionStore) -> None:
    summary_path = store.group_dir("g") / "summary.json"
    a = start_match(store, "g", "llm", seed=1)
    play_to_end(a, rationale=False)
    a.finish()
    s1 = json.loads(summary_path.read_text())
    assert s1["battles"] == 1 and s1["by_status"]["finished"] == 1
    assert s1["decisions"] == len(a.recorder.decisions)
    b = start_match(store, "g", "llm", seed=2)
    play_to_end(b, rationale=False)
    b.finish()
    s2 = json.loads(summary_path.read_text())
    assert s2["battles"] == 2 and s2["by_status"]["finished"] == 2
    assert s2["decisions"] == len(a.recorder.decisions) + len(b.recorder.decisions)
    assert sum(s2["results"].values()) == 2
    assert s2["battle_tags"] == {"llm-vs-bot": 2}
    assert store.read_summary("g")["by_status"] == s2["by_status"]


def test_headless_timings_only_under_meta_audit(store: SessionStore) -> None:
    m = start_match(store, "g", "llm", seed=8)
    play_to_end(m)
    m.finish()
    v5 = store.battle_dir("g", m.battle_id) / "v5"
    meta = read_jsonl(v5 / "meta.jsonl")[0]
    audit = meta["audit"]
    assert audit["not_a_label"] is True
    for key in ("wall_seconds", "cpu_seconds", "decision_latency_ms", "started_at", "finished_at"):
        assert key in audit
    assert len(audit["decision_latency_ms"]["1"]) + len(audit["decision_latency_ms"]["2"]) == len(m.recorder.decisions)
    outside = {k: v for k, v in meta.items() if k != "audit"}
    assert timing_keys(outside) == []
    for name in ("actions.jsonl", "turns.jsonl"):
        for record in read_jsonl(v5 / name):
            assert timing_keys(record) == [], name


def test_battle_with_only_a_started_line_is_unfinished(store: SessionStore) -> None:
    m = start_match(store, "g", "llm", seed=4)
    entries = store.read_catalog("g")
    assert [e["status"] for e in entries] == ["unfinished"]
    assert store.compute_summary("g")["by_status"]["unfinished"] == 1
    assert list(store.battles("g")) == []
    expect_error("not_found", store.battle, "g", m.battle_id)


# --------------------------------------------------------------------------- state errors
def test_not_your_turn(store: SessionStore) -> None:
    m = start_match(store, "g", "llm", seed=5)
    assert m.state.to_move == 1
    # put the live state into player 2's move (as if player 2's move had not been played yet)
    m.state.apply(engine.END_TURN)
    assert m.state.to_move == 2 and not m.done
    lines, files = catalog_lines(store, "g"), files_on_disk(store.root)
    n = len(m.recorder.decisions)
    err = expect_error("not_your_turn", m.submit, m.state.legal_actions()[0])
    assert "player 2" in str(err)
    assert len(m.recorder.decisions) == n and m.state.to_move == 2
    assert not m.awaiting_p1
    assert catalog_lines(store, "g") == lines and files_on_disk(store.root) == files


def test_illegal_action_ids_are_refused_and_change_nothing(store: SessionStore) -> None:
    m = start_match(store, "g", "llm", seed=6)
    legal = m.state.legal_actions()
    illegal = next(a for a in range(engine.ACTION_SPACE_SIZE) if a not in legal)
    state_hash = m.state.state_hash()
    n = len(m.recorder.decisions)
    lines, files = catalog_lines(store, "g"), files_on_disk(store.root)

    err = expect_error("illegal_action", m.submit, illegal)
    assert "not legal" in str(err) and "Legal actions now" in str(err)
    for bad in (-1, engine.ACTION_SPACE_SIZE, 10**30, 1.5, True, False, "0", None, [0]):
        err = expect_error("illegal_action", m.submit, bad)
        assert "action" in str(err)
    assert m.state.state_hash() == state_hash and len(m.recorder.decisions) == n and m.state.to_move == 1
    assert catalog_lines(store, "g") == lines and files_on_disk(store.root) == files
    # the match is still playable
    m.submit(legal[-1])
    assert len(m.recorder.decisions) > n


def test_float_action_id_equal_to_a_legal_id_is_refused(store: SessionStore) -> None:
    m = start_match(store, "g", "llm", seed=6)
    assert engine.END_TURN in m.state.legal_actions()
    n = len(m.recorder.decisions)
    expect_error("illegal_action", m.submit, float(engine.END_TURN))
    assert len(m.recorder.decisions) == n


def test_invalid_rationale_refused(store: SessionStore) -> None:
    m = start_match(store, "g", "llm", seed=6)
    n = len(m.recorder.decisions)
    expect_error("invalid_argument", m.submit, 0, rationale="x" * 4001)
    expect_error("invalid_argument", m.submit, 0, rationale=42)
    assert len(m.recorder.decisions) == n and m.state.to_move == 1


def test_moves_on_finished_and_abandoned_matches(store: SessionStore) -> None:
    m = start_match(store, "g", "llm", seed=9)
    play_to_end(m, rationale=False)
    # over but not yet finished
    err = expect_error("match_finished", m.submit, 0)
    assert "finish" in str(err)
    m.finish()
    lines, files = catalog_lines(store, "g"), files_on_disk(store.root)
    for call in (lambda: m.submit(0), m.advance, m.finish, m.abandon):
        expect_error("match_finished", call)
    assert catalog_lines(store, "g") == lines and files_on_disk(store.root) == files

    a = start_match(store, "g", "llm", seed=10)
    a.abandon()
    lines, files = catalog_lines(store, "g"), files_on_disk(store.root)
    err = expect_error("match_finished", a.submit, choose_any(a))
    assert "abandoned" in str(err)
    for call in (a.advance, a.finish, a.abandon):
        expect_error("match_finished", call)
    assert catalog_lines(store, "g") == lines and files_on_disk(store.root) == files


def choose_any(match: Match) -> int:
    return match.state.legal_actions()[0] if match.state.legal_actions() else 0


def test_finish_before_the_end_is_refused(store: SessionStore) -> None:
    m = start_match(store, "g", "llm", seed=12)
    lines, files = catalog_lines(store, "g"), files_on_disk(store.root)
    err = expect_error("invalid_argument", m.finish)
    assert "not over" in str(err) and "abandon" in str(err)
    assert m.status == "active"
    assert catalog_lines(store, "g") == lines and files_on_disk(store.root) == files
    assert not (store.group_dir("g") / "battles" / m.battle_id).exists()
    assert not (store.group_dir("g") / "summary.json").exists()


# --------------------------------------------------------------------------- start errors: nothing on disk
@pytest.mark.parametrize("kwargs, code, needles", [
    ({"opponent": "baseline:nope"}, "unknown_spec", ["baseline:nope", "baseline:random", "baseline:greedy"]),
    ({"opponent": ""}, "invalid_argument", ["opponent"]),
    ({"p1_model": "baseline:greedy"}, "invalid_argument", ["p1_model", "rl"]),
    ({"p1_actor_type": "rl"}, "invalid_argument", ["p1_model"]),
    ({"p1_actor_type": "rl", "p1_model": "ckpt:missing"}, "unknown_spec", ["ckpt:missing", "baseline:greedy"]),
    ({"p1_actor_type": "bot"}, "invalid_argument", ["p1_actor_type"]),
    ({"seed": -1}, "invalid_argument", ["seed"]),
    ({"seed": 2**63}, "invalid_argument", ["seed"]),
    ({"seed": 1.0}, "invalid_argument", ["seed"]),
    ({"seed": True}, "invalid_argument", ["seed"]),
    ({"seed": "7"}, "invalid_argument", ["seed"]),
])
def test_refused_start_writes_nothing(tmp_path: Path, kwargs: dict, code: str, needles: list[str]) -> None:
    store = SessionStore(tmp_path / "sessions")
    args = {"p1_actor_type": "llm", **kwargs}
    p1_type = args.pop("p1_actor_type")
    err = expect_error(code, start_match, store, "fresh", p1_type, **args)
    for needle in needles:
        assert needle in str(err)
    assert files_on_disk(tmp_path) == {} and dirs_on_disk(store.root) == set()
    assert store.list_groups() == []


@pytest.mark.parametrize("group", ["", "a/b", "..", "a..b", "../escape", "x\x00y", "g" * 65, ".hidden",
                                   "-dash", "sp ace", 5, None])
def test_bad_group_names_refused(tmp_path: Path, group: Any) -> None:
    store = SessionStore(tmp_path / "sessions")
    err = expect_error("invalid_argument", start_match, store, group, "llm")
    assert "group" in str(err)
    assert files_on_disk(tmp_path) == {} and dirs_on_disk(tmp_path) == set()


def test_longest_allowed_group_name_works(store: SessionStore) -> None:
    name = "g" * 64
    m = start_match(store, name, "llm", seed=1)
    assert store.list_groups() == [name] and m.group == name


def test_group_name_with_trailing_newline_refused(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "sessions")
    expect_error("invalid_argument", start_match, store, "g\n", "llm")
    assert dirs_on_disk(tmp_path) == set()


def test_group_reused_with_another_configuration_is_refused(store: SessionStore) -> None:
    m = start_match(store, "g", "llm", opponent="baseline:greedy", seed=1)
    before_files, before_dirs = files_on_disk(store.root), dirs_on_disk(store.root)
    manifest = store.read_manifest("g")
    for p1_type, kwargs in [("human", {}), ("llm", {"opponent": "baseline:random"}),
                            ("rl", {"p1_model": "baseline:greedy"})]:
        err = expect_error("group_conflict", start_match, store, "g", p1_type, seed=2, **kwargs)
        assert "g" in str(err) and "another group" in str(err)
    assert files_on_disk(store.root) == before_files and dirs_on_disk(store.root) == before_dirs
    assert store.read_manifest("g") == manifest
    assert [e["battle_id"] for e in store.read_catalog("g")] == [m.battle_id]
    # the same configuration is welcome
    again = start_match(store, "g", "llm", opponent="baseline:greedy", seed=2)
    assert again.index == 1


# --------------------------------------------------------------------------- determinism and replay
def _play_llm(root: Path, seed: int, actions: list[int] | None = None) -> tuple[SessionStore, Match, list[int]]:
    store = SessionStore(root)
    m = start_match(store, "same", "llm", seed=seed)
    played = []
    i = 0
    while not m.done:
        a = actions[i] if actions is not None else choose(m)
        m.submit(a, rationale=f"r{i}")
        played.append(a)
        i += 1
    m.finish()
    return store, m, played


def test_same_seed_and_actions_give_identical_trace_bytes(tmp_path: Path) -> None:
    s1, m1, played = _play_llm(tmp_path / "one", 31)
    s2, m2, _ = _play_llm(tmp_path / "two", 31, played)
    assert m1.battle_id == m2.battle_id
    d1 = s1.battle_dir("same", m1.battle_id) / "v5"
    d2 = s2.battle_dir("same", m2.battle_id) / "v5"
    for name in ("actions.jsonl", "turns.jsonl"):
        assert (d1 / name).read_bytes() == (d2 / name).read_bytes(), name
    m1_meta, m2_meta = read_jsonl(d1 / "meta.jsonl")[0], read_jsonl(d2 / "meta.jsonl")[0]
    m1_meta.pop("audit"), m2_meta.pop("audit")
    assert m1_meta == m2_meta


def _rewrite_decision(path: Path, index: int, change) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[index])
    assert record["decision_index"] == index
    change(record)
    lines[index] = json.dumps(record, separators=(",", ":"))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture
def finished_battle(store: SessionStore) -> tuple[SessionStore, Match, Path]:
    m = start_match(store, "g", "llm", seed=41)
    play_to_end(m)
    m.finish()
    return store, m, store.battle_dir("g", m.battle_id) / "v5" / "actions.jsonl"


def test_replay_reproduces(finished_battle) -> None:
    store, m, _ = finished_battle
    report = replay_battle(store, "g", m.battle_id)
    assert report["reproduces"] is True and report["first_divergence"] is None
    assert report["decisions_checked"] == report["decisions_recorded"] == len(m.recorder.decisions)
    assert report["status"] == "finished"


def _pick_decision(actions_path: Path, min_legal: int = 2) -> tuple[int, dict]:
    records = read_jsonl(actions_path)
    mid = len(records) // 2
    for k in list(range(mid, len(records))) + list(range(mid)):
        if len(records[k]["legal_actions"]) >= min_legal:
            return k, records[k]
    raise AssertionError("no decision with a choice")


def test_replay_finds_a_tampered_legal_action_id(finished_battle) -> None:
    store, m, path = finished_battle
    k, record = _pick_decision(path)
    other = next(a["action_id"] for a in record["legal_actions"] if a["action_id"] != record["action_id"])
    _rewrite_decision(path, k, lambda r: r.__setitem__("action_id", other))
    report = replay_battle(store, "g", m.battle_id)
    assert report["reproduces"] is False
    assert report["first_divergence"]["decision_index"] == k
    assert report["first_divergence"]["field"] == "state_hash_after"
    assert report["decisions_checked"] == k


def test_replay_finds_a_tampered_illegal_action_id(finished_battle) -> None:
    store, m, path = finished_battle
    k, record = _pick_decision(path, 1)
    legal = {a["action_id"] for a in record["legal_actions"]}
    bad = next(a for a in range(engine.ACTION_SPACE_SIZE) if a not in legal)
    _rewrite_decision(path, k, lambda r: r.__setitem__("action_id", bad))
    report = replay_battle(store, "g", m.battle_id)
    assert report["reproduces"] is False
    d = report["first_divergence"]
    assert d["decision_index"] == k and d["field"] == "action_id" and d["expected"] == bad
    assert "illegal" in d["actual"]


@pytest.mark.parametrize("field", ["state_hash_before", "state_hash_after"])
def test_replay_finds_a_tampered_state_hash(finished_battle, field: str) -> None:
    store, m, path = finished_battle
    k, _ = _pick_decision(path, 1)
    _rewrite_decision(path, k, lambda r: r.__setitem__(field, "0" * 64))
    report = replay_battle(store, "g", m.battle_id)
    assert report["reproduces"] is False
    d = report["first_divergence"]
    assert d["decision_index"] == k and d["field"] == field and d["expected"] == "0" * 64
    assert report["decisions_checked"] == k


def test_an_omniscient_peek_is_recorded_and_makes_the_battle_ineligible(store: SessionStore) -> None:
    clean = start_match(store, "peek", "llm", opponent="baseline:random", seed=4)
    peeked = start_match(store, "peek", "llm", opponent="baseline:random", seed=5)
    first = peeked.decision_count
    view = peeked.omniscient_view()
    assert view["view"] == "omniscient" and all("deck" in side for side in view["players"])
    peeked.omniscient_view()  # twice before the same decision: recorded once
    peeked.submit(peeked.legal_actions()[0]["action_id"])
    peeked.omniscient_view()
    for m in (clean, peeked):
        while not m.done:
            m.submit(m.legal_actions()[-1]["action_id"])
    clean.finish()
    result = peeked.finish()
    meta = json.loads(Path(result["paths"]["meta.jsonl"]).read_text())
    assert len(meta["omniscient_peeks"]) == 2
    assert meta["omniscient_peeks"][0] == first and meta["omniscient_peeks"][1] > first  # after the first submit
    summary = store.compute_summary("peek")
    assert summary["omniscient_peek_battles"] == 1
    assert summary["eligible_battles"] == 1  # only the clean one
    catalog = {e["battle_id"]: e for e in store.read_catalog("peek")}
    assert catalog[peeked.battle_id]["omniscient_peeks"] == 2 and catalog[clean.battle_id]["omniscient_peeks"] == 0
