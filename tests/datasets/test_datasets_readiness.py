"""dataset_readiness: every contour of DESIGN section 9 with its blockers, for session groups
and datasets; headless data never makes Metronome, TimeStamp or Nemesis Standard ready; the
thresholds are a policy object callers override."""

from __future__ import annotations

from pathlib import Path

from extrarlhf.core.readiness import SESSION_POLICY_FIELDS, ReadinessPolicy, contour_readiness, session_readiness
from extrarlhf.datasets import dataset_readiness, materialize_v5_dataset
from extrarlhf.runtime.sessions import SessionStore
from tests.datasets_helpers import (
    GREEDY,
    HUMAN,
    RANDOM,
    copy_sessions,
    expect_error,
    rewrite_table,
    set_cell,
    shared_sessions,
)

CONTOURS = ("v5_policy", "nemesis_lite", "nemesis_standard", "metronome", "timestamp")


def _assert_headless_never_ready(r: dict) -> None:
    assert r["metronome_ready"] is False and r["timestamp_ready"] is False
    assert r["training_ready_standard"] is False
    assert any("not production data" in b and "audit data, never labels" in b for b in r["metronome_blockers"])
    assert any("not production data" in b and "durations" in b for b in r["timestamp_blockers"])
    assert any("human-vs-human production rows" in b for b in r["standard_readiness_blockers"])
    assert r["contours"]["metronome"] == {"ready": False, "blockers": r["metronome_blockers"]}
    assert r["contours"]["timestamp"] == {"ready": False, "blockers": r["timestamp_blockers"]}
    assert r["contours"]["nemesis_standard"] == {"ready": False, "blockers": r["standard_readiness_blockers"]}


def test_a_ready_headless_group() -> None:
    r = dataset_readiness(group=GREEDY, sessions_dir=shared_sessions())
    assert r["source"]["kind"] == "session_group" and r["source"]["group"] == GREEDY
    assert set(r["contours"]) == set(CONTOURS)
    assert r["v5_policy_training_ready"] is True and r["v5_policy_blockers"] == []
    assert r["training_ready"] is True and r["training_ready_scope"] == "v5_policy_only"
    assert r["nemesis_lite_ready"] is True and r["nemesis_lite_blockers"] == []
    summary = SessionStore(shared_sessions()).compute_summary(GREEDY)
    assert r["evidence"]["eligible_battles"] == summary["eligible_battles"] == 24
    assert r["evidence"]["eligible_decisions"] == summary["eligible_decisions"]
    assert r["evidence"]["distinct_decks"] == summary["distinct_decks"]
    _assert_headless_never_ready(r)


def test_a_small_group_names_its_blockers_and_a_policy_lifts_them() -> None:
    r = dataset_readiness(group=RANDOM, sessions_dir=shared_sessions())
    assert r["v5_policy_training_ready"] is False and r["training_ready"] is False
    assert "8 eligible (finished, non-degraded) battles; need 20" in r["v5_policy_blockers"]
    assert r["nemesis_lite_ready"] is False and "8 eligible battles; need 20" in r["nemesis_lite_blockers"]
    lenient = {"min_v5_battles": 5, "min_v5_decisions": 100, "min_nemesis_lite_battles": 5}
    r = dataset_readiness(group=RANDOM, sessions_dir=shared_sessions(), policy=lenient)
    assert r["v5_policy_training_ready"] is True and r["nemesis_lite_ready"] is True
    assert r["policy"]["min_v5_battles"] == 5 and r["policy"]["min_nemesis_lite_decks"] == 4
    # no threshold makes headless data ready for the production contours
    zero = {f: 0 for f in ReadinessPolicy().as_dict()}
    r = dataset_readiness(group=RANDOM, sessions_dir=shared_sessions(), policy=zero)
    assert r["v5_policy_training_ready"] is True
    _assert_headless_never_ready(r)


def test_a_human_group_counts_only_clean_finished_battles() -> None:
    r = dataset_readiness(group=HUMAN, sessions_dir=shared_sessions())
    # 6 battles: 2 clean finished; abandoned, degraded, peeked and unfinished do not count
    assert r["evidence"]["eligible_battles"] == 2
    assert r["evidence"]["human_vs_human_battles"] == 0
    _assert_headless_never_ready(r)
    assert any("0 human-vs-human battles" in b and "never enter Standard" in b
               for b in r["standard_readiness_blockers"])


def test_verification_finds_a_tampered_trace(tmp_path: Path) -> None:
    sessions = copy_sessions(tmp_path / "sessions")
    victim = list(SessionStore(sessions).battles(GREEDY))[5]
    (victim.path / "v5" / "turns.jsonl").write_text("tampered\n")
    r = dataset_readiness(group=GREEDY, sessions_dir=sessions, policy={"min_v5_battles": 1})
    assert r["evidence"]["unverified_battles"] == 1 and r["evidence"]["eligible_battles"] == 23
    blocker = f"integrity: battle {victim.battle_id}: turns.jsonl does not match its catalog digest"
    for name in CONTOURS:
        assert blocker in r["contours"][name]["blockers"], name
    assert r["v5_policy_training_ready"] is False
    unverified = dataset_readiness(group=GREEDY, sessions_dir=sessions, verify=False)
    assert unverified["v5_policy_training_ready"] is True and unverified["evidence"]["verified"] is False


def test_dataset_readiness_follows_validation(tmp_path: Path) -> None:
    datasets = tmp_path / "datasets"
    materialize_v5_dataset([GREEDY], "d", sessions_dir=shared_sessions(), datasets_dir=datasets)
    r = dataset_readiness(dataset="d", datasets_dir=datasets)
    assert r["source"] == {"kind": "dataset", "dataset_id": "d/v1", "dataset_kind": "v5_decisions",
                           "path": str((datasets / "d" / "v1").resolve()), "valid": True, "groups": [GREEDY]}
    assert r["v5_policy_training_ready"] is True and r["nemesis_lite_ready"] is True
    _assert_headless_never_ready(r)
    strict = dataset_readiness(dataset="d", datasets_dir=datasets, policy={"min_v5_battles": 1000})
    assert strict["v5_policy_blockers"] == ["24 eligible (finished, non-degraded) battles; need 1000"]
    rewrite_table(datasets / "d" / "v1", "battles", lambda t: set_cell(t, "degraded", 0, True))
    broken = dataset_readiness(dataset="d", datasets_dir=datasets)
    assert broken["source"]["valid"] is False
    assert broken["v5_policy_training_ready"] is False and broken["nemesis_lite_ready"] is False
    assert any(b.startswith("integrity: validation [degraded_battle_in_training_table]")
               for b in broken["v5_policy_blockers"])


def test_arguments() -> None:
    expect_error("invalid_argument", dataset_readiness)
    expect_error("invalid_argument", dataset_readiness, group=GREEDY, dataset="d")
    expect_error("invalid_argument", dataset_readiness, group=GREEDY, sessions_dir=shared_sessions(),
                 policy={"min_v5_battles": "5"})
    expect_error("not_found", dataset_readiness, group="nope", sessions_dir=shared_sessions())


def test_policy_object_and_session_summary_shape() -> None:
    policy = ReadinessPolicy.coerce({"min_v5_battles": 3})
    assert policy == ReadinessPolicy(min_v5_battles=3) and ReadinessPolicy.coerce(policy) is policy
    expect_error("invalid_argument", ReadinessPolicy, min_timestamp_labels=-1)
    expect_error("invalid_argument", ReadinessPolicy.coerce, {"min_v5_battles": True})
    counts = {"eligible_battles": 30, "eligible_decisions": 2000, "distinct_decks": 8}
    summary = session_readiness(counts)
    assert tuple(summary["policy"]) == SESSION_POLICY_FIELDS  # summary.json keeps its pinned shape
    full = contour_readiness({**counts, "source_kind": "session_group"})
    for key in ("v5_policy_training_ready", "training_ready", "nemesis_lite_ready", "training_ready_standard",
                "metronome_ready", "timestamp_ready"):
        assert summary[key] == full[key], key
    # production evidence with labels can make the production contours ready (the door exists)
    prod = contour_readiness({"source_kind": "production", "eligible_battles": 500, "eligible_decisions": 50000,
                              "distinct_decks": 60, "human_vs_human_battles": 300, "human_vs_human_decks": 40,
                              "metronome_labels": 5000, "timestamp_labels": 900})
    assert prod["training_ready_standard"] and prod["metronome_ready"] and prod["timestamp_ready"]
    assert contour_readiness({**counts, "source_kind": "production", "integrity_failures": ["x"]})[
        "v5_policy_blockers"] == ["integrity: x"]
