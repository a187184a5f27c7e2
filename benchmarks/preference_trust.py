"""Judgments you can trust (issue 54): prints one JSON object.

    .venv/bin/python -m benchmarks.preference_trust [--battles 300] [--tasks 600] [--seeds 10]
        [--reward-seeds 3] [--reward-tasks 2000] [--reward-model BASE[,lr=X][,epochs=N] ...]
        [--engine-games 20] [--speed-judgments 100000] [--only reward] [--out DIR]

One V5 dataset of ``--battles`` battles (``--p1`` against ``--opponent``, default
``baseline:greedy`` both: even battles, so most positions are not already won and the search
values of two moves differ). For each of ``--seeds`` seeds, a pool of ``--tasks`` tasks from the three
``A vs B`` sources between ``search:baseline:greedy?sims=64``, ``baseline:greedy`` and
``baseline:random`` (gold 10%, overlap 20% x 3), judged by the issue's panel: 4 ``search``
judges (noise 0.05), 2 ``random``, 1 ``prefers:baseline:random``, answering in turn, 20 tasks at a
time, until every task has its showings by judges not flagged (pool.py offers again what a
flagged judge answered). The judges' key is fixed (``RLHF_JUDGE_KEY``), so a run is repeatable. Per seed: which
judges are flagged, Krippendorff's alpha over all judges and over those kept, and the consensus
on the tasks (not gold) two judges or more answered, majority against Dawid-Skene
(consensus.py, the judges' gold answers anchoring it), each scored against the noise-free
truth (the higher search value), over the kept judgments and over all of them.

- **reward**: for ``--reward-seeds`` pools of ``--reward-tasks`` tasks (seeds 100...), judged by
  the same panel, for each ``--reward-model`` (default ``scratch``: a fresh network, 20 epochs,
  lr 1e-3; ``champion`` or another v5 checkpoint: started from its action scorer, the shipped
  champion registered in the benchmark's checkpoints; repeat the option to compare several on
  the same pools) a reward model (seed 0) on the kept judgments (the default selection), one on
  all of them (flagged judges kept, no share cap) and, for the ceiling, one on the same tasks
  judged once each by the truth itself (a search judge without noise), each scored on the same
  held-out set (and, for a started model, the starting network's own logits, ``base_alone``):
  every non-gold task of the test split's battles whose candidates' noise-free search values
  differ, truth = the higher value (the search judges' own values, without noise), with Wilson
  95% intervals, the tasks one model gets right and the other not (paired), and how often each
  dataset's decisive labels agree with the truth;
- **leaderboard**: on the first seed, the ratings from the kept judgments (the search judges),
  whether neighbours' intervals are apart, and the engine's order of the same specs
  (``--engine-games`` battle pairs per spec pair); then a pool of the same seed judged by the 4
  search judges (20 tasks a turn each) and the preferring one answering 60 a turn, so its share
  of the judgments is above the cap: its leaderboard with the default selection (the flagged
  judge left out) and with the flagged judge kept at the share cap (which binds), and whether
  either order flips; and, for comparison, the first pool with all its flagged judges (random
  ones too) kept at the cap;
- **speed**: ``judge_quality`` and ``preference_leaderboard`` (1,000 resamples) on a pool log of
  ``--speed-judgments`` judgments (the first seed's tasks, judges drawn to answer at random).

``--only reward`` builds the dataset and runs the reward pools only (5 minutes for three pools
and five models each on this 2-core machine).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import orjson

SEARCH = "search:baseline:greedy?sims=64"
SPECS = (SEARCH, "baseline:greedy", "baseline:random")
SOURCES = [f"{SEARCH} vs baseline:greedy", "baseline:greedy vs baseline:random", f"{SEARCH} vs baseline:random"]
REWARD_FRACTIONS = (0.6, 0.1, 0.3)  # a larger test split than the default, for a tighter interval
PANEL = (("search", "search", 4), ("random", "random", 2), ("prefers:baseline:random", "steer", 1))
SCRATCH = "scratch"  # --reward-model's name for a fresh network (no base)
DEFAULT_REWARD_MODEL = SCRATCH


def _log(*parts: Any) -> None:
    print(*parts, file=sys.stderr, flush=True)


def _wanting(pool_folder: Path) -> int:
    """Tasks (not gold) still short of their showings by judges not flagged now."""
    from extrarlhf.preferences.gold import GOLD
    from extrarlhf.preferences.pool import JUDGMENTS, SERVED, _lines, flagged_now, read_pool, showings_wanted

    doc = read_pool(pool_folder)
    flagged = flagged_now(pool_folder, _lines(pool_folder / JUDGMENTS))
    shown: dict[str, int] = {}
    for s in _lines(pool_folder / SERVED):
        if s["judge"] not in flagged:
            shown[s["task_id"]] = shown.get(s["task_id"], 0) + 1
    wanted = showings_wanted(doc)
    return sum(shown.get(t["task_id"], 0) < wanted(t) for t in doc["tasks"] if t["source"] != GOLD)


def _judge_panel(pool: str, seed: int, where: dict[str, Path], values: dict, panel: tuple = ()) -> int:
    """The panel answers in turn, 20 tasks each (or a panel row's fourth item), until every task
    has its showings by judges not flagged (a flagged judge's answers are offered again) or the
    kept judges cannot give more."""
    from extrarlhf.preferences import judge_synthetically

    rounds = 0
    while _wanting(where["preferences_dir"] / pool) and rounds < 500:
        answered = 0
        for kind, prefix, n, *per in panel or PANEL:
            answered += judge_synthetically(pool, judges=n, kind=kind, prefix=prefix, noise=0.05, seed=seed,
                                            per_judge=per[0] if per else 20, values=values, **where)["judgments"]
        rounds += 1
        if not answered:
            break
    return rounds


def _names(prefs: Path) -> dict[str, str]:
    from extrarlhf.preferences.judges import judge_pseudonym

    return {judge_pseudonym(prefs, f"{prefix}-{i}"): prefix for _, prefix, n in PANEL for i in range(n)}


def _mean(xs: list[float]) -> float:
    return round(sum(xs) / len(xs), 4) if xs else float("nan")


def _truth(pool_folder: Path, tasks: list[dict], values: dict, seed: int, where: dict[str, Path]) -> tuple[dict, dict]:
    """The noise-free truth of ``tasks`` (task id -> A or B, None where the values are equal: the
    search judges' own values without noise, judges.py) and their replayed states."""
    import engine
    from extrarlhf.preferences.judges import candidate_values
    from extrarlhf.preferences.points import states_at
    from extrarlhf.preferences.pool import read_pool

    source = where["datasets_dir"] / read_pool(pool_folder)["dataset_id"]
    states = states_at(source, sorted({(t["battle_id"], t["decision_index"], t["state_hash"]) for t in tasks}))
    for t in tasks:  # the values a search judge computes (judges.py), for tasks no search judge answered too
        if t["task_id"] not in values:
            values[t["task_id"]] = tuple(candidate_values(
                states[(t["battle_id"], t["decision_index"])],
                [t["candidates"]["A"]["action_id"], t["candidates"]["B"]["action_id"]], 128,
                engine.derive_seed(seed, f"values:{t['state_hash']}")))
    truth = {t["task_id"]: (None if values[t["task_id"]][0] == values[t["task_id"]][1]
                            else "A" if values[t["task_id"]][0] > values[t["task_id"]][1] else "B") for t in tasks}
    return truth, states


def _truth_accuracy(model: str, pool_folder: Path, values: dict, seed: int, where: dict[str, Path],
                    split: str = "test") -> dict:
    """The reward model's (or a v5 policy's logits') agreement with the noise-free search values
    on the split's battles' tasks (``right``: the task ids it gets right, for a paired comparison)."""
    from adapters.onnx_models import new_session
    from extrarlhf.datasets.assign import DEFAULT_SPLIT_KEY, bucket, split_of
    from extrarlhf.checkpoints import CheckpointRegistry
    from extrarlhf.preferences.gold import read_gold
    from extrarlhf.preferences.policy import wilson
    from extrarlhf.preferences.pool import read_pool

    doc, gold = read_pool(pool_folder), read_gold(pool_folder)
    tasks = [t for t in doc["tasks"] if t["task_id"] not in gold
             and split_of(bucket(DEFAULT_SPLIT_KEY, "preferences", t["battle_id"]), REWARD_FRACTIONS) == split]
    truth, states = _truth(pool_folder, tasks, values, seed, where)
    tasks = [t for t in tasks if truth[t["task_id"]] is not None]
    checkpoint = CheckpointRegistry(where["checkpoints_dir"]).get(model)
    output = "scores" if checkpoint.kind == "action_onnx" else "logits"  # a reward model, or a v5 policy's scorer
    session = new_session(checkpoint.path.read_bytes())
    right = set()
    for t in tasks:
        state = states[(t["battle_id"], t["decision_index"])]
        a, b = t["candidates"]["A"]["action_id"], t["candidates"]["B"]["action_id"]
        scores = session.run([output], {"obs": state.observation(t["player"])[None].astype(np.float32),
                                          "action_features": state.action_features([a, b])[None].astype(np.float32),
                                          "action_mask": np.ones((1, 2), np.float32)})[0][0]
        if ("A" if scores[0] > scores[1] else "B") == truth[t["task_id"]]:
            right.add(t["task_id"])
    low, high = wilson(len(right), len(tasks))
    return {"accuracy": round(len(right) / len(tasks), 4) if tasks else None, "ci95": [round(low, 4), round(high, 4)],
            "tasks": len(tasks), "right": right}


def _labels_vs_truth(pool: str, policy: Any, seed: int, where: dict[str, Path], values: dict) -> dict:
    """How many of the decisive judgments a dataset keeps (every split) agree with the truth."""
    from extrarlhf.preferences.policy import PreferencePolicy, wilson
    from extrarlhf.preferences.selection import select_judgments

    folder = where["preferences_dir"] / pool
    chosen = select_judgments(folder, PreferencePolicy.coerce(policy))
    ids = {j["task_id"] for j in chosen["kept"]}
    truth, _ = _truth(folder, [t for t in chosen["doc"]["tasks"] if t["task_id"] in ids], values, seed, where)
    decisive = [j for j in chosen["kept"] if j["choice"] != "tie" and truth[j["task_id"]] is not None]
    right = sum(j["choice"] == truth[j["task_id"]] for j in decisive)
    low, high = wilson(right, len(decisive))
    return {"accuracy": round(right / len(decisive), 4), "ci95": [round(low, 4), round(high, 4)],
            "judgments": len(decisive)}


def _consensus_accuracy(pool: str, seed: int, where: dict[str, Path], values: dict) -> dict:
    """The dataset's two consensus columns (selection.py: majority and Dawid-Skene, the judges'
    gold answers anchoring it) against the noise-free truth on the tasks (not gold) two judges
    or more answered: over the kept judgments and over every judgment (flagged judges in, no cap)."""
    from extrarlhf.preferences.policy import PreferencePolicy
    from extrarlhf.preferences.selection import select_judgments

    folder = where["preferences_dir"] / pool
    out = {}
    for label, policy in (("kept", PreferencePolicy()), ("all", PreferencePolicy(drop_flagged=False,
                                                                                  max_judge_share=1.0))):
        chosen = select_judgments(folder, policy)
        consensus = chosen["consensus"]  # task -> (majority, Dawid-Skene, judges)
        shared = [t for t in chosen["doc"]["tasks"] if consensus.get(t["task_id"], (None, None, 0))[2] >= 2]
        truth, _ = _truth(folder, shared, values, seed, where)
        shared = [t["task_id"] for t in shared if truth[t["task_id"]] is not None]
        votes = {t: consensus[t][0] for t in shared}
        estimate = {t: consensus[t][1] for t in shared}
        decided = [t for t in shared if votes[t] is not None]
        undecided = [t for t in shared if votes[t] is None]
        out[label] = {"tasks": len(shared), "majority": round(sum(votes[t] == truth[t] for t in shared) / len(shared), 4),
                      "dawid_skene": round(sum(estimate[t] == truth[t] for t in shared) / len(shared), 4),
                      "majority_undecided": len(undecided),
                      "where_majority_decides": {  # the same tasks, both methods
                          "majority": round(sum(votes[t] == truth[t] for t in decided) / max(1, len(decided)), 4),
                          "dawid_skene": round(sum(estimate[t] == truth[t] for t in decided) / max(1, len(decided)),
                                               4)},
                      "dawid_skene_right_where_undecided": sum(estimate[t] == truth[t] for t in undecided)}
    return out


def _speed(pool_folder: Path, prefs: Path, n: int) -> dict[str, Any]:
    """judge_quality and the leaderboard on a copy of the pool with ``n`` synthetic log lines."""
    from extrarlhf.preferences.leaderboard import preference_leaderboard
    from extrarlhf.preferences.selection import judge_quality

    doc = json.loads((pool_folder / "pool.json").read_text())
    target = prefs / "speed"
    target.mkdir()
    for name in ("pool.json", "gold.json"):
        if (pool_folder / name).exists():
            data = json.loads((pool_folder / name).read_text())
            data["pool"] = "speed"
            (target / name).write_text(json.dumps(data))
    rng = random.Random(0)
    ids = [t["task_id"] for t in doc["tasks"]]
    judges = max(2, -(-n // min(len(ids), 500)))  # rounded up: enough (judge, task) pairs for n lines
    lines, seen = [], set()
    while len(lines) < n:
        judge, task = f"judge-{rng.randrange(judges):016x}", rng.choice(ids)
        if (judge, task) in seen:
            continue
        seen.add((judge, task))
        lines.append(orjson.dumps({"task_id": task, "judge": judge, "judge_kind": "human",
                                   "choice": rng.choice(("A", "B", "tie", "A", "B")), "reason": None,
                                   "served_at": "2026-01-01T00:00:00Z", "judged_at": "2026-01-01T00:00:01Z",
                                   "think_ms": rng.randrange(500, 20000)}))
    (target / "judgments.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    out = {"judgments": n, "judges": judges, "tasks": len(ids)}
    for what, call in (("judges_s", lambda: judge_quality("speed", preferences_dir=prefs)),
                       ("leaderboard_s", lambda: preference_leaderboard("speed", resamples=1000,
                                                                        preferences_dir=prefs))):
        started = time.perf_counter()
        call()
        out[what] = round(time.perf_counter() - started, 3)  # first call in this process: logs parsed cold
    return out


def _variant(text: str) -> dict[str, Any]:
    """``--reward-model`` ``BASE[,lr=X][,epochs=N]``: BASE ``scratch`` (a fresh network) or a v5
    checkpoint name (``champion``: the shipped champion, registered in the benchmark's
    checkpoints); lr default 1e-3, epochs default 20."""
    base, *options = text.split(",")
    out: dict[str, Any] = {"label": text, "base": None if base == SCRATCH else base, "lr": 1e-3, "epochs": 20}
    for option in options:
        key, _, value = option.partition("=")
        if key not in ("lr", "epochs") or not value:
            raise argparse.ArgumentTypeError(f"{option!r}: a reward model option is lr=X or epochs=N")
        try:
            out[key] = int(value) if key == "epochs" else float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{option!r}: {key} must be a number") from None
    return out


def _reward_pool(seed: int, n_tasks: int, variants: list[dict[str, Any]], where_rm: dict[str, Path]) -> dict:
    """One reward pool (module docstring): judged by the panel, and by the truth once each; three
    preference datasets (kept, all, truth_labels) and, per variant, a reward model on each, scored
    against the noise-free truth on the same held-out tasks."""
    from extrarlhf.preferences import (create_preference_pool, judge_synthetically, materialize_preference_dataset,
                                       train_reward_model)

    where = {k: where_rm[k] for k in ("datasets_dir", "preferences_dir")}
    pool, truth_pool = f"reward-{seed}", f"truth-{seed}"
    made = create_preference_pool(pool, "bench", sources=SOURCES, n_tasks=n_tasks, seed=100 + seed,
                                  gold_share=0.1, overlap_share=0.2, overlap_judges=3, **where)
    values: dict = {}
    _judge_panel(pool, 100 + seed, where, values)
    row: dict[str, Any] = {"seed": 100 + seed, "tasks": made["tasks"], "shortfall": made["shortfall"],
                           "datasets": {}, "models": {}}
    # the ceiling: the same tasks (same seed) judged once each by the truth itself (a search
    # judge without noise: the values the truth is read from)
    create_preference_pool(truth_pool, "bench", sources=SOURCES, n_tasks=n_tasks, seed=100 + seed,
                           gold_share=0.1, overlap_share=0.2, overlap_judges=3, **where)
    judge_synthetically(truth_pool, judges=1, kind="search", prefix="truth", noise=0.0, seed=100 + seed,
                        values=values, **where)
    datasets = {}
    everyone = {"drop_flagged": False, "max_judge_share": 1.0}
    for label, judged, policy in (("kept", pool, None), ("all", pool, everyone), ("truth_labels", truth_pool, None)):
        made = materialize_preference_dataset(judged, name=f"prefs-{pool}-{label}", policy=policy,
                                              fractions=REWARD_FRACTIONS, **where)
        datasets[label] = made["dataset_id"]
        row["datasets"][label] = {"judgments": made["left_out"]["kept"]["judgments"],
                                  "labels_vs_truth": _labels_vs_truth(judged, policy, 100 + seed, where, values)}
    for k, variant in enumerate(variants):
        got: dict[str, Any] = {}
        if variant["base"] is not None:  # the starting network's own scores, before any judgment
            alone = _truth_accuracy(variant["base"], where["preferences_dir"] / pool, values, 100 + seed, where_rm)
            got["base_alone"] = {"test_vs_truth": {key: v for key, v in alone.items() if key != "right"}}
        for label, dataset in datasets.items():
            model = f"rm-{pool}-{label}-{k}"
            trained = train_reward_model(dataset, model, seed=0, base=variant["base"], epochs=variant["epochs"],
                                         lr=variant["lr"], require_ready=False, datasets_dir=where["datasets_dir"],
                                         checkpoints_dir=where_rm["checkpoints_dir"], overwrite=True)
            got[label] = {"best_epoch": trained["final"]["best_epoch"],
                          "test_vs_judges": trained["final"]["test"]["accuracy"],
                          "test_vs_truth": _truth_accuracy(model, where["preferences_dir"] / pool, values,
                                                           100 + seed, where_rm),
                          "train_vs_truth": _truth_accuracy(model, where["preferences_dir"] / pool, values,
                                                            100 + seed, where_rm, "train")}
        got["gain"] = round(got["kept"]["test_vs_truth"]["accuracy"] - got["all"]["test_vs_truth"]["accuracy"], 4)
        kept_right, all_right = got["kept"]["test_vs_truth"]["right"], got["all"]["test_vs_truth"]["right"]
        got["paired"] = {"kept_right_all_wrong": len(kept_right - all_right),
                         "all_right_kept_wrong": len(all_right - kept_right)}
        for label in datasets:
            got[label]["test_vs_truth"].pop("right")
            got[label]["train_vs_truth"].pop("right")
        row["models"][variant["label"]] = got
        _log(json.dumps({"seed": 100 + seed, "model": variant["label"], **got}))
    return row


def _trust_seeds(report: dict[str, Any], seeds: int, tasks: int, where: dict[str, Path]) -> None:
    """The judge-quality and consensus rows of ``seeds`` pools of ``tasks`` tasks (module docstring)."""
    from extrarlhf.preferences import create_preference_pool
    from extrarlhf.preferences.selection import judge_quality

    for seed in range(seeds):
        t0 = time.perf_counter()
        pool = f"trust-{seed}"
        made = create_preference_pool(pool, "bench", sources=SOURCES, n_tasks=tasks, seed=seed, gold_share=0.1,
                                      overlap_share=0.2, overlap_judges=3, **where)
        values: dict = {}
        _judge_panel(pool, seed, where, values)
        quality = judge_quality(pool, preferences_dir=where["preferences_dir"])
        names = _names(where["preferences_dir"])
        flagged_kinds = {names[j["judge"]]: 0 for j in quality["judges"]}
        for j in quality["judges"]:
            flagged_kinds[names[j["judge"]]] += j["flagged"]
        row = {"seed": seed, "tasks": made["tasks"], "gold": made["gold"], "shortfall": made["shortfall"],
               "overlap_tasks": made["overlap_tasks"], "judgments": quality["judgments"],
               "flagged_by_kind": flagged_kinds,
               "target_flags": flagged_kinds == {"search": 0, "random": 2, "steer": 1},
               "alpha": quality["krippendorff_alpha"],
               "gold_accuracy": {names[j["judge"]] + f"-{k}": j["gold_accuracy"]
                                 for k, j in enumerate(quality["judges"])},
               "reasons": sorted({(j["reason"] or "").split(":")[0] for j in quality["judges"] if j["flagged"]}),
               "consensus": _consensus_accuracy(pool, seed, where, values),
               "seconds": round(time.perf_counter() - t0, 1)}
        report["seeds"].append(row)
        _log(json.dumps(row))
    report["flag_target_seeds"] = sum(r["target_flags"] for r in report["seeds"])
    report["alpha_kept_above_all_seeds"] = sum(r["alpha"]["kept"] > r["alpha"]["all"] for r in report["seeds"])
    report["consensus"] = {label: {"tasks": sum(r["consensus"][label]["tasks"] for r in report["seeds"]),
                                   "majority_mean": _mean([r["consensus"][label]["majority"] for r in report["seeds"]]),
                                   "dawid_skene_mean": _mean([r["consensus"][label]["dawid_skene"]
                                                              for r in report["seeds"]]),
                                   "seeds_dawid_skene_above": sum(r["consensus"][label]["dawid_skene"]
                                                                  > r["consensus"][label]["majority"]
                                                                  for r in report["seeds"]),
                                   "seeds_dawid_skene_below": sum(r["consensus"][label]["dawid_skene"]
                                                                  < r["consensus"][label]["majority"]
                                                                  for r in report["seeds"]),
                                   "where_majority_decides": {
                                       m: _mean([r["consensus"][label]["where_majority_decides"][m]
                                                 for r in report["seeds"]]) for m in ("majority", "dawid_skene")},
                                   "undecided": sum(r["consensus"][label]["majority_undecided"] for r in report["seeds"]),
                                   "dawid_skene_right_where_undecided": sum(
                                       r["consensus"][label]["dawid_skene_right_where_undecided"]
                                       for r in report["seeds"])}
                           for label in ("kept", "all")}


def main(argv: list[str] | None = None) -> int:
    from extrarlhf.policies.champion import CHAMPION_NAME, ensure_champion

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--battles", type=int, default=300)
    parser.add_argument("--tasks", type=int, default=600)
    parser.add_argument("--p1", default="baseline:greedy", help="player 1 of the dataset's battles")
    parser.add_argument("--opponent", default="baseline:greedy", help="player 2 of the dataset's battles")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--reward-seeds", type=int, default=3)
    parser.add_argument("--reward-tasks", type=int, default=2000)
    parser.add_argument("--engine-games", type=int, default=20)
    parser.add_argument("--speed-judgments", type=int, default=100000)
    parser.add_argument("--reward-model", action="append", type=_variant, metavar="BASE[,lr=X][,epochs=N]",
                        help=f"a reward model to train on each reward pool's datasets (repeat to compare): BASE is "
                             f"{SCRATCH} or a v5 checkpoint ({CHAMPION_NAME}: the shipped champion); default "
                             f"{DEFAULT_REWARD_MODEL}")
    parser.add_argument("--only", choices=["reward"], help="run only this part (the dataset, then the reward pools)")
    parser.add_argument("--out", help="keep the data here (default: a temporary folder)")
    args = parser.parse_args(argv)
    variants = args.reward_model or [_variant(DEFAULT_REWARD_MODEL)]
    os.environ["RLHF_JUDGE_KEY"] = "benchmark-preference-trust-judges"  # repeatable gold places and pseudonyms

    from extrarlhf.datasets import materialize_v5_dataset
    from extrarlhf.preferences import create_preference_pool
    from extrarlhf.preferences.leaderboard import preference_leaderboard
    from extrarlhf.preferences.gold import read_gold
    from extrarlhf.preferences.selection import pool_judgments
    from extrarlhf.runtime.series import run_series

    tmp = tempfile.TemporaryDirectory() if args.out is None else None
    root = Path(args.out or tmp.name)  # type: ignore[union-attr]
    where = {"datasets_dir": root / "datasets", "preferences_dir": root / "preferences"}
    started = time.perf_counter()
    run_series(root / "sessions", "bench", args.battles, p1_model=args.p1, opponent=args.opponent, seed=11)
    materialize_v5_dataset("bench", "bench", sessions_dir=root / "sessions", datasets_dir=where["datasets_dir"])
    report: dict[str, Any] = {"battles": args.battles, "players": [args.p1, args.opponent], "tasks": args.tasks,
                              "sources": SOURCES,
                              "panel": {p: n for _, p, n in PANEL}, "seeds": [], "data_s": 0.0}
    report["data_s"] = round(time.perf_counter() - started, 1)
    if args.only is None:
        _trust_seeds(report, args.seeds, args.tasks, where)

    where_rm = {**where, "checkpoints_dir": root / "checkpoints"}
    if any(v["base"] == CHAMPION_NAME for v in variants):
        ensure_champion(where_rm["checkpoints_dir"])
    report["reward_models"] = [v["label"] for v in variants]
    report["reward"] = []
    for seed in range(args.reward_seeds):
        report["reward"].append(_reward_pool(seed, args.reward_tasks, variants, where_rm))
    report["reward_gain"] = {v["label"]: {"mean": _mean([r["models"][v["label"]]["gain"] for r in report["reward"]]),
                                          "pools_at_least_0.05": sum(r["models"][v["label"]]["gain"] >= 0.05
                                                                     for r in report["reward"]),
                                          "pools": len(report["reward"])} for v in variants}
    if args.only == "reward":
        return _finish(report, started, tmp)

    board = preference_leaderboard("trust-0", resamples=1000, games=args.engine_games, seed=0,
                                   preferences_dir=where["preferences_dir"], checkpoints_dir=where_rm["checkpoints_dir"])
    all_kept = preference_leaderboard("trust-0", resamples=1000, seed=0, preferences_dir=where["preferences_dir"],
                                      policy={"drop_flagged": False})
    create_preference_pool("steer-0", "bench", sources=SOURCES, n_tasks=args.tasks, seed=0, gold_share=0.1,
                           overlap_share=0.2, overlap_judges=3, **where)
    # the preferring judge answers three times as fast as each search judge, so its share of the
    # judgments (not gold) is above the cap and the cap binds
    _judge_panel("steer-0", 0, where, {}, (("search", "search", 4), ("prefers:baseline:random", "steer", 1, 60)))
    steered = {}
    for label, policy in (("default", None), ("flagged_kept", {"drop_flagged": False})):
        got = preference_leaderboard("steer-0", resamples=1000, seed=0, preferences_dir=where["preferences_dir"],
                                     policy=policy)
        capped = got["left_out"]["capped"]
        steered[label] = {"order": got["order"], "ratings": got["ratings"], "judgments": got["judgments"],
                          "flagged_left_out": got["left_out"]["flagged"]["judgments"] if policy is None else 0,
                          "max_judge_share": capped["max_judge_share"], "capped_judgments": capped["judgments"],
                          "cap_binds": capped["judges"] > 0, "order_flips": got["order"] != board["order"]}
    steer_gold = read_gold(where["preferences_dir"] / "steer-0")
    judged = [j for j in pool_judgments(where["preferences_dir"] / "steer-0")[1]
              if j["task_id"] not in steer_gold and j["choice"] != "skip"]
    mine = [j for j in judged if _names(where["preferences_dir"]).get(j["judge"]) == "steer"]
    report["leaderboard"] = {
        "kept": {"order": board["order"], "ratings": board["ratings"], "judgments": board["judgments"],
                 "all_apart": all(r.get("apart_from_next", True) for r in board["ratings"])},
        "engine": board["engine"],
        "preferring_judge_added_at_cap": {
            "pool": "steer-0 (4 search judges, 20 tasks a turn each, and the preferring one, 60 a turn)",
            "preferring_judgments_not_gold": len(mine), "preferring_share_before_cap": round(len(mine) / len(judged), 4),
            **steered},
        "all_flagged_kept_at_cap": {"order": all_kept["order"], "ratings": all_kept["ratings"],
                                    "order_flips": all_kept["order"] != board["order"]}}
    _log(json.dumps(report["leaderboard"]))
    if args.speed_judgments:
        report["speed"] = _speed(where["preferences_dir"] / "trust-0", where["preferences_dir"], args.speed_judgments)
    return _finish(report, started, tmp)


def _finish(report: dict[str, Any], started: float, tmp: Any) -> int:
    report["total_s"] = round(time.perf_counter() - started, 1)
    print(json.dumps(report, indent=1))
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
