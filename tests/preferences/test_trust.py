"""Judgments you can trust (issue 54, DESIGN 17.2): gold tasks the engine proves and no judge can
tell apart, overlap tasks served early to several judges, the judge-quality report (gold
accuracy with its interval, agreement, Krippendorff's alpha, flags), a dataset that leaves out
flagged judges and caps any judge's share, misbehaving synthetic judges, the leaderboard of
specs beside the engine's order, and bad input refused with nothing written. Small pools, few
battles: the figures of the issue's targets come from benchmarks/preference_trust.py."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from extrarlhf.cli import main
from extrarlhf.core.errors import NotReady, RLHFError
from extrarlhf.datasets import materialize_v5_dataset
from extrarlhf.preferences import (create_preference_pool, judge_synthetically, list_preferences,
                                   materialize_preference_dataset, next_task, submit_preference)
from extrarlhf.preferences.gold import GOLD_FILE, read_gold, wins_at_once
from extrarlhf.preferences.leaderboard import fit_bradley_terry, preference_leaderboard
from extrarlhf.preferences.points import states_at
from extrarlhf.preferences.pool import read_pool
from extrarlhf.preferences.quality import krippendorff_alpha
from extrarlhf.preferences.selection import cap_counts, judge_quality
from extrarlhf.runtime.series import run_series

PAIR = "baseline:greedy vs baseline:random"


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    """30 search-vs-greedy battles as a V5 dataset; a pool of 120 tasks (20% gold, 30% overlap x 3)
    judged by two search judges, one random and one preferring baseline:random, 60 tasks each."""
    root = tmp_path_factory.mktemp("trust")
    run_series(root / "sessions", "g", 30, p1_model="search:baseline:greedy?sims=2", opponent="baseline:greedy", seed=4)
    materialize_v5_dataset("g", "g", sessions_dir=root / "sessions", datasets_dir=root / "datasets")
    made = create_preference_pool("t", "g", sources=["search_top2", PAIR], n_tasks=120, gold_share=0.2,
                                  overlap_share=0.3, overlap_judges=3, datasets_dir=root / "datasets",
                                  preferences_dir=root / "preferences")
    assert made["gold"] == 24 and made["overlap_tasks"] == 36 and made["shortfall"] == {}
    where = {"datasets_dir": root / "datasets", "preferences_dir": root / "preferences", "per_judge": 60}
    judge_synthetically("t", judges=2, kind="search", prefix="careful", sims=16, **where)
    judge_synthetically("t", judges=1, kind="random", prefix="clicker", **where)
    judge_synthetically("t", judges=1, kind="prefers:baseline:random", prefix="steerer", **where)
    return root


def _names(root: Path) -> dict[str, str]:
    """judge pseudonym -> the prefix of the synthetic judge it is."""
    from extrarlhf.preferences.judges import judge_pseudonym

    return {judge_pseudonym(root / "preferences", f"{p}-{i}"): p
            for p, n in (("careful", 2), ("clicker", 1), ("steerer", 1)) for i in range(n)}


def test_gold_answers_are_proved_by_the_engine_and_kept_apart(root: Path):
    folder = root / "preferences" / "t"
    doc, gold = read_pool(folder), read_gold(folder)
    tasks = [t for t in doc["tasks"] if t["task_id"] in gold]
    assert len(tasks) == 24 and {a["rule"] for a in gold.values()} == {"wins_at_once"}
    states = states_at(root / "datasets" / "g" / "v1", [(t["battle_id"], t["decision_index"], t["state_hash"])
                                                         for t in tasks])
    for t in tasks:
        state = states[(t["battle_id"], t["decision_index"])]
        better = gold[t["task_id"]]["better"]
        worse = "B" if better == "A" else "A"
        assert wins_at_once(state, t["candidates"][better]["action_id"], t["player"])
        assert not wins_at_once(state, t["candidates"][worse]["action_id"], t["player"])
        assert t["candidates"]["A"]["origin"] == t["candidates"]["B"]["origin"]  # origins say nothing of the answer
    assert {gold[t["task_id"]]["better"] for t in tasks} == {"A", "B"}  # the better move is A or B by a coin
    assert b"better" not in (folder / "pool.json").read_bytes()  # the answers live in gold.json only
    # the serving order: gold and overlap tasks early, mixed with ordinary ones
    first = doc["tasks"][:20]
    overlap = set(doc["overlap"]["tasks"])
    assert 4 <= sum(t["task_id"] in gold for t in first) <= 6 and 4 <= sum(t["task_id"] in overlap for t in first)


def test_a_gold_task_looks_like_any_other_to_a_judge(root: Path):
    prefs = root / "preferences"
    gold = read_gold(prefs / "t")
    views = []
    for _ in range(16):  # two of every eight tasks a judge is given are gold while its gold lasts
        got = next_task("t", "looker", "llm", preferences_dir=prefs)
        views.append((got["task"]["task_id"] in gold, got))
        submit_preference("t", got["task"]["task_id"], "looker", "llm", "skip", preferences_dir=prefs)
    assert sum(g for g, _ in views) == 4
    shapes = {(tuple(sorted(v)), tuple(sorted(v["task"]))) for _, v in views}
    assert len(shapes) == 1  # the same keys, gold or not
    for _, v in views:
        assert "gold" not in json.dumps(v).lower()
    listed = list_preferences("t", sources=False, limit=500, preferences_dir=prefs)
    assert "source" not in listed["totals"] and all("source" not in i for i in listed["items"])
    assert "gold" not in json.dumps(listed).lower()


def test_misbehaving_judges_are_flagged_and_alpha_rises_without_them(root: Path):
    report = judge_quality("t", preferences_dir=root / "preferences")
    names = _names(root)
    looker = next(j for j in report["judges"] if j["judge"] not in names)  # skipped all it was shown
    assert looker["judgments"] == 0 and looker["skips"] == 16 and not looker["flagged"]
    flagged = {names[j["judge"]] for j in report["judges"] if j["flagged"]}
    assert flagged == {"clicker", "steerer"}
    for j in (j for j in report["judges"] if j["judge"] in names):
        assert j["gold_answered"] >= 10 and len(j["gold_ci95"]) == 2 and j["median_think_ms"] is not None
        if names[j["judge"]] == "careful":
            assert j["gold_accuracy"] >= 0.9 and j["agrees_with"] >= 1
        else:
            assert j["reason"].startswith("gold:") and j["gold_ci95"][1] < 0.8
    alpha = report["krippendorff_alpha"]
    assert alpha["kept"] > alpha["all"] + 0.2
    assert report["rule"]["gold"].startswith("flagged when at least 10 gold tasks")
    assert krippendorff_alpha([["A", "A"], ["B", "B"], ["tie", "tie"]]) == 1.0
    assert krippendorff_alpha([["A", "B"], ["B", "A"]]) < 0


def test_the_dataset_leaves_out_flagged_judges_gold_and_caps_shares(root: Path):
    where = {"datasets_dir": root / "datasets", "preferences_dir": root / "preferences"}
    names = _names(root)
    made = materialize_preference_dataset("t", **where)
    out = made["left_out"]
    assert out["flagged"]["judges"] == 2 and out["flagged"]["judgments"] > 0 and out["gold"]["tasks"] == 24
    folder = root / "datasets" / "prefs-t" / "v1"
    table = pq.read_table(folder / "train.parquet")
    judges = {names[j] for j in table.column("judge").to_pylist()}
    assert judges == {"careful"}  # the random and steering judges are left out
    gold = read_gold(root / "preferences" / "t")
    assert not set(table.column("task_id").to_pylist()) & set(gold)  # gold tasks measure judges: not in the data
    rows = [r for s in ("train", "val", "test") for r in pq.read_table(folder / f"{s}.parquet",
                                                                       columns=["consensus", "consensus_ds",
                                                                                "consensus_judges"]).to_pylist()]
    assert any(r["consensus_judges"] == 2 and r["consensus"] in ("A", "B", "tie") for r in rows)
    assert all(r["consensus"] is None and r["consensus_ds"] is None for r in rows if r["consensus_judges"] == 1)
    assert all(r["consensus_ds"] in ("A", "B", "tie") for r in rows if r["consensus_judges"] >= 2)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["left_out"] == out and manifest["selection"]["drop_flagged"] is True
    card = (root / "datasets" / "prefs-t" / "README.md").read_text()
    assert "of 2 flagged judges" in card and "gold: " in card  # the card says what was left out and why
    kept = materialize_preference_dataset("t", name="prefs-t-all", policy={"drop_flagged": False}, **where)
    assert kept["left_out"]["flagged"]["judgments"] == 0 and kept["left_out"]["kept"]["judges"] == 4
    assert kept["left_out"]["capped"]["max_judge_share"] == 0.25
    assert cap_counts({"a": 10, "b": 10, "c": 10, "d": 90}, 0.25) == (10, 0.25)  # 10 of 40
    assert cap_counts({"a": 5}, 0.25) == (None, 1.0)  # one judge: the cap never empties a dataset


def test_the_leaderboard_ranks_specs_as_judges_do_beside_the_engine(root: Path):
    board = preference_leaderboard("t", resamples=200, games=2, preferences_dir=root / "preferences")
    assert board["order"] == ["baseline:greedy", "baseline:random"] and board["judgments"] > 0
    top, bottom = board["ratings"]
    assert top["ci95"][0] <= top["rating"] <= top["ci95"][1] and top["judgments"] == bottom["judgments"]
    assert board["engine"]["games_per_pair"] == 4 and board["engine"]["order"][0] in board["specs"]
    ratings = fit_bradley_terry(__import__("numpy").array([[0.0, 30.0], [10.0, 0.0]]))
    assert round(ratings[0] - ratings[1]) == round(400 * __import__("math").log10(30.1 / 10.1))  # odds 3:1
    with pytest.raises(RLHFError, match="no 'A vs B' source between two specs"):
        create_preference_pool("plain", "g", n_tasks=10, gold_share=0.0, datasets_dir=root / "datasets",
                               preferences_dir=root / "preferences")
        preference_leaderboard("plain", preferences_dir=root / "preferences")


def test_the_cli_reports_judges_and_the_leaderboard_as_json(root: Path, capsys):
    assert main(["preferences", "judges", "t", "--preferences-dir", str(root / "preferences"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["flagged"] == 2 and "krippendorff_alpha" in report
    assert main(["preferences", "leaderboard", "t", "--resamples", "50", "--preferences-dir",
                 str(root / "preferences")]) == 0
    assert "baseline:greedy" in capsys.readouterr().out


def test_bad_input_is_refused_clearly_and_writes_nothing(root: Path):
    where = {"datasets_dir": root / "datasets", "preferences_dir": root / "preferences"}
    cases = [({"gold_share": 0.6}, r"gold_share \(the share of gold tasks\) must be a number from 0 to 0.5"),
             ({"gold_share": -0.1}, "gold_share"), ({"overlap_share": 1.5}, "overlap_share"),
             ({"overlap_share": 0.2, "overlap_judges": 1}, "overlap_judges .* from 2 to 10"),
             ({"overlap_share": 0.2, "overlap_judges": 11}, "overlap_judges .* from 2 to 10"),
             ({"gold_share": 0.5, "overlap_share": 0.6}, "gold_share \\+ overlap_share must be at most 1")]
    for kwargs, message in cases:
        with pytest.raises(RLHFError, match=message):
            create_preference_pool("bad", "g", n_tasks=10, **kwargs, **where)
        assert not (root / "preferences" / "bad").exists()
    logs = [root / "preferences" / "t" / f for f in ("served.jsonl", "judgments.jsonl")]
    before = [p.read_bytes() for p in logs]
    with pytest.raises(RLHFError, match="unknown prefers: judge spec 'nobody'"):
        judge_synthetically("t", kind="prefers:nobody", prefix="x", **where)
    with pytest.raises(RLHFError, match="a synthetic judge kind is one of search, random, prefers:SPEC"):
        judge_synthetically("t", kind="lazy", prefix="x", **where)
    assert [p.read_bytes() for p in logs] == before  # nothing served, nothing judged
    # a pool judged only by judges at chance: materialize is not ready, the blocker names each reason
    create_preference_pool("chance", "g", sources=[PAIR], n_tasks=40, gold_share=0.5, **where)
    judge_synthetically("chance", judges=2, kind="random", prefix="coin", seed=1, **where)
    with pytest.raises(NotReady, match="every judge is flagged") as exc:
        materialize_preference_dataset("chance", **where)
    assert any("gold:" in b for b in exc.value.blockers)
    assert not (root / "datasets" / "prefs-chance").exists()
    assert (root / "preferences" / "t" / GOLD_FILE).exists()


def test_the_terminal_judge_shows_a_gold_task_like_any_other(root: Path, monkeypatch, capsys):
    answers = iter(["a"] * 8 + ["q"])
    monkeypatch.setattr("builtins.input", lambda prompt="": next(answers))
    assert main(["preferences", "judge", "t", "--judge", "terminal person", "--preferences-dir",
                 str(root / "preferences")]) == 0
    out = capsys.readouterr().out
    blocks = [b for b in out.split("\n\n") if b.startswith("  A: ")]
    assert len(blocks) == 9 and all(b.count("\n  B: ") == 1 for b in blocks)  # 8 answered, the 9th shown then q: board, A, B alike
    assert "gold" not in out.lower() and "origin" not in out.lower()
    report = judge_quality("t", preferences_dir=root / "preferences")
    person = [j for j in report["judges"] if j["kind"] == "human"]
    assert len(person) == 1 and person[0]["judgments"] == 8 and person[0]["gold_answered"] == 2


def test_a_judge_that_copies_what_it_lists_passes_only_while_it_can_list_others(root: Path, tmp_path: Path):
    """The attack the judge-facing listing closes (issue 54): every judge is served every task in
    time, so a judge that could list everyone's answers (as MCP ``list_preferences`` once did)
    copies what the judges the report vouches for answered on the task it holds: its gold
    accuracy and agreement vouch for it while it answers A wherever it has nothing to copy. Given
    its own answers only, the same judge has nothing to copy and the gold flags it."""
    from extrarlhf.preferences.judges import judge_pseudonym

    outcome = {}
    for listing in ("everyone", "own"):
        prefs = tmp_path / listing
        shutil.copytree(root / "preferences", prefs)
        vouched = {j["judge"] for j in judge_quality("t", preferences_dir=prefs)["judges"]
                   if not j["flagged"] and j["gold_answered"] >= 10}
        copied = 0
        for _ in range(96):  # every gold task comes by then (two in eight while they last)
            task = next_task("t", "copycat", "llm", preferences_dir=prefs)["task"]
            shown = (list_preferences("t", sources=False, limit=500, preferences_dir=prefs) if listing == "everyone"
                     else list_preferences("t", judge="copycat", limit=500, preferences_dir=prefs))
            answers = Counter(i["choice"] for i in shown["items"]
                              if i["task_id"] == task["task_id"] and i["judge"] in vouched and i["choice"] != "skip")
            copied += bool(answers)
            choice = answers.most_common(1)[0][0] if answers else "A"
            submit_preference("t", task["task_id"], "copycat", "llm", choice, preferences_dir=prefs)
        me = judge_pseudonym(prefs, "copycat")
        outcome[listing] = (copied, next(j for j in judge_quality("t", preferences_dir=prefs)["judges"]
                                         if j["judge"] == me))
    copied, row = outcome["everyone"]
    assert copied >= 12 and row["gold_answered"] >= 10 and not row["flagged"]
    copied, row = outcome["own"]
    assert copied == 0 and row["gold_answered"] >= 10 and row["flagged"] and row["reason"].startswith("gold:")


def test_agreement_is_judged_against_judges_the_gold_keeps():
    from extrarlhf.preferences.policy import PreferencePolicy
    from extrarlhf.preferences.quality import assess

    gold = {f"g{i}": {"better": "A", "rule": "wins_at_once"} for i in range(12)}
    rows = []
    for i in range(12):  # a careful judge and one that always says B: the gold flags the second only
        rows += [{"task_id": f"g{i}", "judge": "judge-careful", "judge_kind": "llm", "choice": "A", "think_ms": 5},
                 {"task_id": f"g{i}", "judge": "judge-alwaysb", "judge_kind": "llm", "choice": "B", "think_ms": 1}]
    report = assess(rows, gold, PreferencePolicy())
    by = {r["judge"]: r for r in report["judges"]}
    assert by["judge-alwaysb"]["flagged"] and by["judge-alwaysb"]["reason"].startswith("gold: 0 of 12")
    assert not by["judge-careful"]["flagged"] and by["judge-careful"]["agreement"] == 0.0
    rows += [{"task_id": f"o{i}", "judge": j, "judge_kind": "llm", "choice": c, "think_ms": 1}
             for i in range(12) for j, c in (("judge-careful", "A"), ("judge-other", "B"))]
    report = assess(rows, gold, PreferencePolicy())
    by = {r["judge"]: r for r in report["judges"]}  # judge-other answered no gold: agreement decides
    assert by["judge-other"]["reason"].startswith("agreement: agrees with none of the 1 judges")
    assert not by["judge-careful"]["flagged"]  # the gold vouches for it; judge-other is no measure of it


def test_what_a_flagged_judge_answered_is_offered_again(root: Path):
    prefs = root / "preferences"
    doc, gold = read_pool(prefs / "t"), read_gold(prefs / "t")
    flagged = {j["judge"] for j in judge_quality("t", preferences_dir=prefs)["judges"] if j["flagged"]}
    served = [json.loads(line) for line in (prefs / "t" / "served.jsonl").read_text().splitlines()]
    wanted = {t: 3 for t in doc["overlap"]["tasks"]}
    kept = {}
    for s in served:
        if s["judge"] not in flagged:
            kept[s["task_id"]] = kept.get(s["task_id"], 0) + 1
    only_flagged = {s["task_id"] for s in served if s["judge"] in flagged and s["task_id"] not in gold
                    and kept.get(s["task_id"], 0) == 0}
    assert only_flagged  # the random and steering judges answered tasks nobody else has
    given = []
    for _ in range(40):  # overlap tasks the flagged judges took a place of come first (serving order)
        task = next_task("t", "fresh eyes", "llm", preferences_dir=prefs)["task"]
        submit_preference("t", task["task_id"], "fresh eyes", "llm", "skip", preferences_dir=prefs)
        given.append(task["task_id"])
    ordinary = [t for t in given if t not in gold]
    assert ordinary and all(kept.get(t, 0) < wanted.get(t, 1) for t in ordinary)
    assert set(ordinary) & only_flagged  # offered again: their flagged showing did not count
