"""``python -m extrarlhf preferences pool|judge|invite|synthetic|list|judges|leaderboard|materialize|reward|dpo|export-trl``.

Each subcommand calls one function of this package and prints a short report (``--json``: the
function's result); business errors are printed by extrarlhf/cli.py as one line (exit 2).
``judge`` is a judge's loop in the terminal: the board, moves A and B, and a prompt for
A / B / tie / skip (an optional reason after a space), until the pool has nothing new or q.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..core.console import print_json
from ..core.progress import ProgressLine


def _report(args: argparse.Namespace, result: dict[str, Any], line: str) -> int:
    if args.json:
        print_json(result)
    else:
        print(line)
    return 0


def _cmd_pool(args: argparse.Namespace) -> int:
    from .pool import create_preference_pool

    r = create_preference_pool(args.name, args.dataset, sources=args.source or ["search_top2"], n_tasks=args.tasks,
                               seed=args.seed, gold_share=args.gold_share, overlap_share=args.overlap_share,
                               overlap_judges=args.overlap_judges, datasets_dir=args.datasets_dir,
                               preferences_dir=args.preferences_dir, checkpoints_dir=args.checkpoints_dir)
    short = "; short of " + json.dumps(r["shortfall"]) if r["shortfall"] else ""
    return _report(args, r, f"pool {r['pool']}: {r['tasks']} tasks from {r['dataset_id']} "
                            f"({', '.join(f'{k} {v}' for k, v in r['by_source'].items())}, gold {r['gold']}; "
                            f"{r['overlap_tasks']} offered to {r['overlap_judges']} judges){short}")


def _cmd_judge(args: argparse.Namespace) -> int:
    from .pool import CHOICES, next_task, submit_preference

    answered = 0
    while True:
        got = next_task(args.pool, args.judge, "human", preferences_dir=args.preferences_dir)
        task = got["task"]
        if task is None:
            print(f"no task left for you in {args.pool} ({answered} answered now)")
            return 0
        print(f"\n{task['board']}\n\n  A: {task['A']}\n  B: {task['B']}")
        try:
            answer = input("A, B, tie or skip (then an optional reason), q to stop: ").strip()
        except EOFError:
            answer = "q"
        if answer.lower() in ("q", "quit"):
            print(f"stopped; {answered} answered (the shown task waits for you)")
            return 0
        choice, _, reason = answer.partition(" ")
        choice = {"a": "A", "b": "B"}.get(choice.lower(), choice.lower())
        if choice not in CHOICES:
            print(f"answer with one of {', '.join(CHOICES)}")
            continue
        submit_preference(args.pool, task["task_id"], args.judge, "human", choice, reason.strip() or None,
                          preferences_dir=args.preferences_dir)
        answered += 1


def _cmd_invite(args: argparse.Namespace) -> int:
    from .judges import issue_invite

    invite = issue_invite(args.preferences_dir, args.judge)
    link = f"{args.base_url.rstrip('/')}/judge/invite/{invite}"
    return _report(args, {"invite": invite, "link": link, "judge": invite.split(".")[1]},
                   f"{link}\n(give it to that judge only: whoever opens it judges as {invite.split('.')[1]}; the "
                   f"name is not in it)")


def _cmd_synthetic(args: argparse.Namespace) -> int:
    from .synthetic import judge_synthetically

    r = judge_synthetically(args.pool, judges=args.judges, kind=args.kind, prefix=args.prefix, noise=args.noise,
                            tie_margin=args.tie_margin, sims=args.sims, seed=args.seed, per_judge=args.per_judge,
                            datasets_dir=args.datasets_dir, preferences_dir=args.preferences_dir,
                            checkpoints_dir=args.checkpoints_dir,
                            progress=None if args.json else ProgressLine(f"judge {args.pool}", unit="judgments"))
    names = ", ".join(f"{n['name']} = {n['judge']}" for n in r["names"])
    return _report(args, r, f"{r['judgments']} {r['kind']} judgments in {r['pool']}: {r['by_choice']} ({names})")


def _cmd_list(args: argparse.Namespace) -> int:
    from .pool import list_preferences

    r = list_preferences(args.pool, limit=args.limit, offset=args.offset, sources=True,
                         preferences_dir=args.preferences_dir)
    return _report(args, r, f"{r['pool']}: {r['judgments']} judgments by {r['judges']} judges over {r['tasks']} "
                            f"tasks; {r['totals']}")


def _cmd_materialize(args: argparse.Namespace) -> int:
    from .dataset import materialize_preference_dataset

    r = materialize_preference_dataset(args.pool, name=args.name, datasets_dir=args.datasets_dir,
                                       preferences_dir=args.preferences_dir, policy=_policy(args))
    ready, out = r["preference_ready"], r["left_out"] or {}
    left = (f"; left out: {out['gold']['judgments']} gold, {out['flagged']['judgments']} of "
            f"{out['flagged']['judges']} flagged judges, {out['capped']['judgments']} over the share cap"
            if out else "")
    return _report(args, r, f"{r['dataset_id']}: rows {r['rows']}{left}; preference_ready "
                            + ("yes" if ready["ready"] else "no: " + "; ".join(ready["blockers"])))


def _policy(args: argparse.Namespace) -> dict[str, Any] | None:
    return {"drop_flagged": False} if getattr(args, "keep_flagged", False) else None


def _cmd_judges(args: argparse.Namespace) -> int:
    from .selection import judge_quality

    r = judge_quality(args.pool, preferences_dir=args.preferences_dir)
    lines = [f"{r['pool']}: {len(r['judges'])} judges, {r['flagged']} flagged; Krippendorff's alpha "
             f"{r['krippendorff_alpha']['all']} over all, {r['krippendorff_alpha']['kept']} over those kept"]
    for j in r["judges"]:
        gold = (f"gold {j['gold_right']}/{j['gold_answered']} [{j['gold_ci95'][0]:.2f}, {j['gold_ci95'][1]:.2f}]"
                if j["gold_answered"] else "gold -")
        lines.append(f"  {j['judge']} {j['kind']}: {j['judgments']} judgments, {gold}, agreement "
                     f"{j['agreement']} ({j['agrees_with']}/{j['partners_measured']} judges), median think "
                     f"{j['median_think_ms']} ms" + (f"; FLAGGED {j['reason']}" if j["flagged"] else ""))
    return _report(args, r, "\n".join(lines))


def _cmd_leaderboard(args: argparse.Namespace) -> int:
    from .leaderboard import preference_leaderboard

    r = preference_leaderboard(args.pool, resamples=args.resamples, games=args.games, seed=args.seed,
                               preferences_dir=args.preferences_dir, checkpoints_dir=args.checkpoints_dir,
                               policy=_policy(args))
    lines = [f"{r['pool']}: {r['judgments']} judgments over {len(r['specs'])} specs ({r['resamples']} resamples)"]
    lines += [f"  {x['rating']:7.1f} [{x['ci95'][0]:.1f}, {x['ci95'][1]:.1f}] {x['spec']} ({x['judgments']} judgments)"
              for x in r["ratings"]]
    if r["engine"]:
        e = r["engine"]
        lines.append(f"engine ({e['games_per_pair']} battles per pair): {' > '.join(e['order'])}; same order: "
                     f"{e['same_order']}, Kendall tau {e['kendall_tau']}")
    return _report(args, r, "\n".join(lines))


def _cmd_reward(args: argparse.Namespace) -> int:
    from .reward import train_reward_model

    r = train_reward_model(args.dataset, args.name, args.seed, epochs=args.epochs, require_ready=not args.not_ready,
                           datasets_dir=args.datasets_dir, checkpoints_dir=args.checkpoints_dir,
                           overwrite=args.overwrite)
    test, ci = r["final"]["test"], r["final"]["test_accuracy_ci95"]
    return _report(args, r, f"{r['name']}: reward model (action_onnx) on {r['dataset_id']}, held-out accuracy "
                            f"{test['accuracy']:.3f} [{ci[0]:.3f}, {ci[1]:.3f}] over {test['pairs']} pairs; card "
                            f"{r['card_path']}")


def _cmd_dpo(args: argparse.Namespace) -> int:
    from .dpo import dpo_finetune

    r = dpo_finetune(args.dataset, args.base, args.name, args.seed, reference=args.reference, beta=args.beta,
                     epochs=args.epochs, lr=args.lr, anchor=args.anchor, require_ready=not args.not_ready,
                     datasets_dir=args.datasets_dir, checkpoints_dir=args.checkpoints_dir, overwrite=args.overwrite)
    f = r["final"]
    return _report(args, r, f"{r['name']}: v5 checkpoint, DPO of {r['base']['name']} against {r['reference']['name']} "
                            f"on {r['dataset_id']}; held-out preference accuracy {f['test']['accuracy']:.3f} (reference "
                            f"{f['reference_test_accuracy']:.3f}) over {f['test']['pairs']} pairs; benchmark it next: "
                            f"python -m extrarlhf benchmark {r['name']} {r['reference']['name']}")


def _cmd_export_trl(args: argparse.Namespace) -> int:
    from .dataset import export_trl_preferences

    r = export_trl_preferences(args.dataset, args.out, datasets_dir=args.datasets_dir)
    return _report(args, r, f"TRL preference files in {r['path']}: {r['rows']}")


def add_parser(sub: Any) -> None:
    p = sub.add_parser("preferences", help="preference tasks, judgments, the preference dataset and reward model")
    verbs = p.add_subparsers(dest="verb", required=True)

    def verb(name: str, func: Any, help_text: str) -> argparse.ArgumentParser:
        v = verbs.add_parser(name, help=help_text)
        v.add_argument("--preferences-dir", default="preferences")
        v.add_argument("--datasets-dir", default="datasets")
        v.add_argument("--checkpoints-dir", default="checkpoints")
        v.add_argument("--json", action="store_true")
        v.set_defaults(func=func)
        return v

    v = verb("pool", _cmd_pool, "sample judgment tasks from a V5 dataset into a new pool")
    v.add_argument("name")
    v.add_argument("dataset")
    v.add_argument("--source", action="append", help="search_top2 (default) or 'A vs B' (specs or recorded); "
                                                     "repeat for several")
    v.add_argument("--tasks", type=int, default=200)
    v.add_argument("--seed", type=int, default=0)
    v.add_argument("--gold-share", type=float, default=0.1,
                   help="share of gold tasks the engine proves, 0 to 0.5 (default 0.1)")
    v.add_argument("--overlap-share", type=float, default=0.0,
                   help="share of tasks offered to several judges, 0 to 1 (default 0)")
    v.add_argument("--overlap-judges", type=int, default=3, help="judges an overlap task is offered to, 2 to 10")
    v = verb("judge", _cmd_judge, "judge a pool's tasks in the terminal")
    v.add_argument("pool")
    v.add_argument("--judge", required=True, help="your name (stored only as a keyed pseudonym)")
    v = verb("invite", _cmd_invite, "an invite link that admits one person as an arena judge")
    v.add_argument("judge", help="who it is for (stored only as a keyed pseudonym, never in the link)")
    v.add_argument("--base-url", default="http://127.0.0.1:8765",
                   help="the arena's address as judges reach it (add ?token=... yourself when it has one)")
    v = verb("synthetic", _cmd_synthetic, "synthetic judges (the search teacher's values with noise)")
    v.add_argument("pool")
    v.add_argument("--judges", type=int, default=3)
    v.add_argument("--kind", default="search", help="search (default), random or prefers:SPEC")
    v.add_argument("--prefix", default="synthetic", help="judges are named PREFIX-0, PREFIX-1...")
    v.add_argument("--noise", type=float, default=0.05)
    v.add_argument("--tie-margin", type=float, default=0.0)
    v.add_argument("--sims", type=int, default=128)
    v.add_argument("--seed", type=int, default=0)
    v.add_argument("--per-judge", type=int)
    v = verb("list", _cmd_list, "a pool's judgments and totals")
    v.add_argument("pool")
    v.add_argument("--limit", type=int, default=50)
    v.add_argument("--offset", type=int, default=0)
    v = verb("judges", _cmd_judges, "how far each judge can be trusted: gold accuracy, agreement, flags")
    v.add_argument("pool")
    v = verb("leaderboard", _cmd_leaderboard, "Bradley-Terry ratings of a pool's 'A vs B' specs, with intervals")
    v.add_argument("pool")
    v.add_argument("--resamples", type=int, default=1000)
    v.add_argument("--games", type=int, default=0, help="battle pairs per spec pair for the engine's order (0: none)")
    v.add_argument("--seed", type=int, default=0)
    v.add_argument("--keep-flagged", action="store_true", help="count flagged judges too (the share cap holds)")
    v = verb("materialize", _cmd_materialize, "publish a pool's judgments as a preference dataset")
    v.add_argument("pool")
    v.add_argument("--name")
    v.add_argument("--keep-flagged", action="store_true", help="keep flagged judges' judgments (the share cap holds)")
    v = verb("reward", _cmd_reward, "train a Bradley-Terry reward model on a preference dataset")
    v.add_argument("dataset")
    v.add_argument("--name", required=True)
    v.add_argument("--seed", type=int, default=0)
    v.add_argument("--epochs", type=int, default=30)
    v.add_argument("--not-ready", action="store_true", help="train even when preference_ready has blockers")
    v.add_argument("--overwrite", action="store_true")
    v = verb("dpo", _cmd_dpo, "a DPO-style fine-tune of a v5 policy on a preference dataset")
    v.add_argument("dataset")
    v.add_argument("--base", required=True, help="the v5 checkpoint to start from (the reference by default)")
    v.add_argument("--name", required=True)
    v.add_argument("--reference", help="another v5 checkpoint as the reference")
    v.add_argument("--seed", type=int, default=0)
    v.add_argument("--beta", type=float, default=0.5)
    v.add_argument("--epochs", type=int, default=10)
    v.add_argument("--lr", type=float, default=1e-4)
    v.add_argument("--anchor", type=float, default=1e-3)
    v.add_argument("--not-ready", action="store_true", help="train even when preference_ready has blockers")
    v.add_argument("--overwrite", action="store_true")
    v = verb("export-trl", _cmd_export_trl, "write the TRL preference shape (prompt/chosen/rejected JSONL)")
    v.add_argument("dataset")
    v.add_argument("--out", required=True)
