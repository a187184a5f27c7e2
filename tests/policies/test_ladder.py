"""The policy ladder on real promotions: three small trained checkpoints promoted in a chain
(each benchmarked against the one before, the first against the first-promotion rule's
incumbent), the last one
rolled back. The rungs, predecessors and Elo figures are checked against the recorded
benchmark reports; the baseline Elos against an independent benchmark_models call; the cache
against a second call that plays nothing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from extrarlhf.cli import main as cli_main
from extrarlhf.core.errors import Cancelled, CorruptRecord, InvalidArgument
from extrarlhf.policies.benchmarking import benchmark_models
from extrarlhf.policies.ladder import LADDER_FILE, policy_ladder, read_ladder
from extrarlhf.policies.promotion import (
    PromotionPolicy,
    PromotionRefused,
    current_incumbent,
    promote_checkpoint,
    rollback_promotion,
)
from tests.training_helpers import train_small

PAIRS = 20
# elo0 = -400 lets a policy about as strong as its predecessor pass (a core-only policy, as
# test_promotion.py's lax-elo0 test uses): what matters here is a real chain of promotions
LOOSE = PromotionPolicy(min_elo0=-400.0)


@pytest.fixture(scope="module")
def chain(tmp_path_factory) -> dict:
    ck = tmp_path_factory.mktemp("ladder") / "ck"
    reports = {}
    incumbent = first = current_incumbent(ck)  # the first-promotion rule's incumbent: the anchor
    for name, seed in (("a", 0), ("b", 1), ("c", 2)):
        train_small(ck, name, seed=seed)
        report = benchmark_models(name, incumbent, n_pairs=100, seed=seed, elo0=-400.0, elo1=-300.0,
                                  baseline_pairs=2, checkpoints_dir=ck, policy=LOOSE)
        assert report["passed"], report["verdict"]
        promote_checkpoint(name, checkpoints_dir=ck, policy=LOOSE)
        reports[name] = report
        incumbent = name
    rollback_promotion(checkpoints_dir=ck)  # c is undone: b is promoted again
    return {"ck": ck, "reports": reports, "anchor": first}


def _copy(chain: dict, dest: Path) -> Path:
    shutil.copytree(chain["ck"], dest)
    (dest / LADDER_FILE).unlink(missing_ok=True)
    return dest


def test_rungs_follow_the_promotions_with_their_recorded_benchmarks(chain, tmp_path):
    ck = _copy(chain, tmp_path / "ck")
    ticks: list[tuple[int, int]] = []
    ladder = policy_ladder(ck, pairs=PAIRS, progress=lambda d, t: ticks.append((d, t)))
    assert not ladder["empty"] and ladder["reason"] is None
    assert ladder["anchor"] == chain["anchor"] and ladder["current"] == "b"
    rungs = ladder["rungs"]
    assert [r["name"] for r in rungs] == ["a", "b", "c"]
    assert [r["status"] for r in rungs] == ["superseded", "current", "rolled_back"]
    assert rungs[2]["restored"] == "b" and rungs[2]["rolled_back_at"]
    assert [r["predecessor"]["spec"] for r in rungs] == [chain["anchor"], "a", "b"]
    assert [r["predecessor"]["rung"] for r in rungs] == [None, 1, 2]
    assert rungs[1]["predecessor"]["weights_hash"] == rungs[0]["weights_hash"]
    for rung in rungs:
        report = chain["reports"][rung["name"]]
        rec, m = rung["vs_predecessor"], report["match"]
        assert rung["weights_hash"] == report["candidate"]["registered_weights_hash"]
        assert (rec["elo"], rec["elo_ci95"], rec["pairs"]) == (m["elo"], m["elo_ci95"], m["pairs"])
        assert (rec["wins"], rec["draws"], rec["losses"]) == (m["wins"], m["draws"], m["losses"])
        assert rec["decision"] == "H1" and rec["verdict"] == report["verdict"]
        assert rec["llr"] == m["sprt"]["llr"] and rec["report_problem"] is None
        assert rec["elo_ci95"][0] < rec["elo"] < rec["elo_ci95"][1]
    # cumulative: Elo differences and interval endpoints add along the chain
    e = [chain["reports"][n]["match"] for n in ("a", "b", "c")]
    assert rungs[0]["cumulative"]["elo"] == pytest.approx(e[0]["elo"])
    assert rungs[2]["cumulative"]["elo"] == pytest.approx(e[0]["elo"] + e[1]["elo"] + e[2]["elo"])
    assert rungs[2]["cumulative"]["elo_ci95"] == pytest.approx(
        [sum(x["elo_ci95"][0] for x in e), sum(x["elo_ci95"][1] for x in e)])
    assert rungs[2]["cumulative"]["links"] == [1, 2, 3]
    # baselines: exactly what an independent fixed-length benchmark of the same deals gives
    for rung in rungs:
        for opponent in ("baseline:random", "baseline:greedy"):
            got = rung["vs_baselines"][opponent]
            ref = benchmark_models(rung["name"], opponent, n_pairs=PAIRS, seed=0, stop_early=False,
                                   baseline_pairs=0, write=False, checkpoints_dir=ck)["match"]
            assert got["source"] == "measured" and got["pairs"] == PAIRS
            assert (got["elo"], got["elo_ci95"], got["wins"], got["losses"]) == \
                (ref["elo"], ref["elo_ci95"], ref["wins"], ref["losses"])
    assert rungs[0]["vs_baselines"]["baseline:random"]["score"] > 0.6  # a trained policy beats random
    assert ladder["measured"] == 6 and ladder["battles_played"] == 6 * 2 * PAIRS
    assert ticks and ticks[-1] == (6 * 2 * PAIRS, 6 * 2 * PAIRS)
    assert [d for d, _ in ticks] == sorted(d for d, _ in ticks)
    on_disk = read_ladder(ck)
    assert on_disk["rungs"] == rungs and len(on_disk["measurements"]) == 6
    assert all(m["engine_version"] and m["ruleset"] and m["seed"] == 0 for m in on_disk["measurements"].values())


def test_a_second_call_replays_nothing_and_is_deterministic(chain, tmp_path):
    ck = _copy(chain, tmp_path / "ck")
    first = policy_ladder(ck, pairs=PAIRS)
    ticks: list[int] = []
    second = policy_ladder(ck, pairs=PAIRS, progress=lambda d, t: ticks.append(d))
    assert ticks == [] and second["measured"] == 0 and second["battles_played"] == 0 and second["cached"] == 6
    for a, b in zip(first["rungs"], second["rungs"]):
        for opponent in a["vs_baselines"]:
            assert b["vs_baselines"][opponent]["source"] == "cache"
            assert {k: v for k, v in a["vs_baselines"][opponent].items() if k != "source"} == \
                {k: v for k, v in b["vs_baselines"][opponent].items() if k != "source"}
    # a measurement cached under the per-battle interval (keys without the statistic, before the
    # pentanomial one) is measured again, not shown with the old interval
    path = ck / "ladder.json"
    doc = json.loads(path.read_text())
    doc["measurements"] = {k.removesuffix("|pentanomial"): v for k, v in doc["measurements"].items()}
    path.write_text(json.dumps(doc))
    remeasured = policy_ladder(ck, pairs=PAIRS)
    assert remeasured["measured"] == 6 and remeasured["cached"] == 0
    assert sum(k.endswith("|pentanomial") for k in read_ladder(ck)["measurements"]) == 6  # the old ones kept, unused
    # another seed is another measurement, the first one's cache entries are kept
    third = policy_ladder(ck, pairs=PAIRS, seed=7)
    assert third["measured"] == 6 and len(read_ladder(ck)["measurements"]) == 18
    # a fresh directory, same seed: the same figures (deterministic, whatever the worker count)
    again = policy_ladder(_copy(chain, tmp_path / "ck2"), pairs=PAIRS, max_workers=2)
    assert [r["vs_baselines"] for r in again["rungs"]] == [
        {o: {**v, "source": "measured"} for o, v in r["vs_baselines"].items()} for r in second["rungs"]]


def test_without_measuring_the_report_rows_stand_in(chain, tmp_path):
    ck = _copy(chain, tmp_path / "ck")
    ladder = policy_ladder(ck, pairs=PAIRS, measure=False)
    assert ladder["battles_played"] == 0 and ladder["measured"] == 0
    a = ladder["rungs"][0]["vs_baselines"]["baseline:random"]
    row = next(r for r in chain["reports"]["a"]["baselines"]
               if r["model"] == "a" and r["opponent"] == "baseline:random")
    assert a["source"] == "benchmark_report" and (a["elo"], a["pairs"]) == (row["elo"], 2)
    assert a["reason"] == "not measured (measure=False); the promotion report's 2 pair(s) instead"


def test_an_overwritten_rolled_back_checkpoint_is_not_measured(chain, tmp_path):
    ck = _copy(chain, tmp_path / "ck")
    train_small(ck, "c", seed=9, overwrite=True)  # no longer protected once rolled back
    rung = policy_ladder(ck, pairs=PAIRS)["rungs"][2]
    for figure in rung["vs_baselines"].values():  # the promoted weights' own report rows, said so
        assert figure["source"] == "benchmark_report" and figure["pairs"] == 2
        assert "not measured: 'c' is now registered with other weights" in figure["reason"]
    assert rung["vs_predecessor"]["elo"] is not None  # the recorded benchmark still stands


def test_empty_history_is_a_normal_outcome(tmp_path):
    missing = tmp_path / "none"
    ladder = policy_ladder(missing)
    assert ladder["empty"] and ladder["rungs"] == [] and ladder["path"] is None
    assert "nothing has been promoted yet" in ladder["reason"]
    assert f"the incumbent is {current_incumbent(missing)}" in ladder["reason"]
    assert not missing.exists()  # a reader never creates the registry
    ck = tmp_path / "ck"
    ck.mkdir()
    assert policy_ladder(ck)["path"] == str(ck / LADDER_FILE) and read_ladder(ck)["rungs"] == []


def test_damaged_records_refuse_and_change_nothing(chain, tmp_path):
    ck = _copy(chain, tmp_path / "ck")
    policy_ladder(ck, pairs=PAIRS, measure=False)
    before = (ck / LADDER_FILE).read_bytes()
    with open(ck / "promoted_history.jsonl", "a") as fh:
        fh.write('{"event": "promote"}\n')
    with pytest.raises(CorruptRecord) as info:
        policy_ladder(ck, pairs=PAIRS)
    text = str(info.value)
    assert info.value.code == "corrupt_record" and "promoted_history.jsonl line 5" in text
    assert "extrarlhf check" in text and info.value.details["line"] == 5
    assert (ck / LADDER_FILE).read_bytes() == before

    # well-formed records that disagree (the pointer names a, the history ends with b promoted)
    torn = _copy(chain, tmp_path / "torn")
    first_pointer = json.loads((torn / "promoted_history.jsonl").read_text().splitlines()[0])["pointer"]
    (torn / "promoted.json").write_text(json.dumps(first_pointer))
    with pytest.raises(PromotionRefused, match=r"policy ladder refused: \[history_consistent\] promoted.json names 'a'"):
        policy_ladder(torn, pairs=PAIRS)
    assert not (torn / LADDER_FILE).exists()

    ok = _copy(chain, tmp_path / "ok")
    (ok / LADDER_FILE).write_text("{not json")
    with pytest.raises(CorruptRecord, match=r"ladder.json: not valid JSON .*move ladder.json aside"):
        policy_ladder(ok, pairs=PAIRS)
    assert (ok / LADDER_FILE).read_text() == "{not json"


def test_bad_arguments_are_refused(tmp_path):
    for kwargs, words in (({"pairs": 0}, "pairs must be an integer in 1..100000, got 0"),
                          ({"seed": -1}, "seed must be an integer"),
                          ({"max_workers": 0}, "max_workers must be an integer in 1..64"),
                          ({"measure": "yes"}, "measure must be true or false")):
        with pytest.raises(InvalidArgument, match=words):
            policy_ladder(tmp_path, **kwargs)


def test_cancel_keeps_the_finished_measurements(chain, tmp_path):
    ck = _copy(chain, tmp_path / "ck")
    calls = {"n": 0}

    def cancel() -> bool:  # 20 pairs = two chunks per measurement: stop inside the second one
        calls["n"] += 1
        return calls["n"] > 3

    with pytest.raises(Cancelled):
        policy_ladder(ck, pairs=PAIRS, cancel=cancel)
    assert len(read_ladder(ck)["measurements"]) == 1
    assert policy_ladder(ck, pairs=PAIRS)["measured"] == 5


def test_cli_prints_the_table(chain, tmp_path, capsys):
    ck = _copy(chain, tmp_path / "ck")
    assert cli_main(["ladder", "--checkpoints-dir", str(ck), "--pairs", str(PAIRS)]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["rung", "name", "status"]
    assert lines[1].split()[:3] == ["1", "a", "superseded"] and f"vs {chain['anchor']}" in lines[1]
    assert lines[3].split()[:3] == ["3", "c", "rolled_back"]
    assert "measured 6, cached 0" in out and "ladder: baselines [" in err
    assert cli_main(["ladder", "--checkpoints-dir", str(ck), "--pairs", str(PAIRS), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["cached"] == 6 and [r["name"] for r in doc["rungs"]] == ["a", "b", "c"]
    assert cli_main(["ladder", "--checkpoints-dir", str(ck), "--pairs", "0"]) == 2
    assert "error [invalid_argument]: pairs must be an integer" in capsys.readouterr().err
