"""Reference RL results on ``ExtraArena-v1``: win rates of baselines, a BC policy and MaskablePPO.

    .venv/bin/python -m benchmarks.rl_reference [--timesteps T] [--eval-every K] [--battles N]
        [--curve-battles M] [--bc-battles B] [--plot docs/rl_reference_curve.png]

Prints one JSON object and writes the MaskablePPO learning curve (win rate against
``baseline:random`` and ``baseline:greedy`` vs timesteps) as a PNG. One process, one torch
thread, one BLAS thread (a shared 2-core machine); the default budget is a few minutes.

Every agent is measured the same way: ``gym.make("ExtraArena-v1", opponent=O, seat="random")``
over ``--battles`` battles with the seeds ``EVAL_SEED + i`` (the same battles, seats and
opponent seeds for every agent), the agent choosing every learner action; a draw counts
half in ``score``. Agents:

* ``baseline:random`` and ``baseline:greedy``: the project's baselines, playing the learner seat;
* ``bc``: a behaviour-cloning policy trained by the project's own pipeline on a small greedy
  dataset (``run_series`` greedy vs greedy, ``materialize_v5_dataset``, ``train_policy``), in a
  throwaway folder;
* ``maskable_ppo``: sb3-contrib's MaskablePPO (``MlpPolicy`` on the vector observation,
  masks from ``action_masks()``) trained from scratch against a pool of ``baseline:random``
  and ``baseline:greedy`` (one drawn per episode); its curve is evaluated on
  ``--curve-battles`` battles per point, its final figures on ``--battles``. It is measured
  twice: ``maskable_ppo`` plays the argmax action (``predict(deterministic=True)``),
  ``maskable_ppo_sampled`` samples the masked distribution. The curve's first point is the
  untrained network: its argmax already beats ``baseline:random`` most of the time (a fixed
  preference order over the ids rarely ends the turn early, which random play does), while
  its samples are about uniform; the sampled curve is the one that shows what training adds.
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import gymnasium as gym
import numpy as np

import extrarlhf.envs  # noqa: F401  (registers ExtraArena-v1)
from engine import derive_seed
from extrarlhf.datasets import materialize_v5_dataset
from extrarlhf.envs import ENV_ID
from extrarlhf.policies.benchmarking import score_stats
from extrarlhf.runtime.actors import resolve_actor
from extrarlhf.runtime.series import run_series
from extrarlhf.training import train_policy

OPPONENTS = ("baseline:random", "baseline:greedy")
EVAL_SEED = 1_000_000  # evaluation battles are seeds EVAL_SEED + i (training never resets to these)
Chooser = Callable[[gym.Env, Any], int]  # (env, observation) -> action id


def evaluate(agent: Callable[[int], Chooser], opponent: str, battles: int) -> dict[str, Any]:
    """W/D/L, win rate and score (with its 95% interval) of ``agent`` over the evaluation battles;
    ``agent(battle_seed)`` returns the chooser for one battle."""
    env = gym.make(ENV_ID, opponent=opponent, seat="random", illegal_action="raise")
    wins = draws = losses = 0
    for i in range(battles):
        seed = EVAL_SEED + i
        obs, info = env.reset(seed=seed)
        choose, done = agent(seed), False
        while not done:
            obs, _, done, _, info = env.step(choose(env, obs))
        winner = info["winner"]
        wins, draws, losses = wins + (winner == info["seat"]), draws + (winner == 0), \
            losses + (winner not in (0, info["seat"]))
    stats = score_stats(wins, draws, losses)
    return {"battles": battles, "wins": wins, "draws": draws, "losses": losses,
            "win_rate": round(wins / battles, 3), "score": round(stats["score"], 3),
            "score_ci95": [round(x, 3) for x in stats["score_ci95"]]}


def actor_agent(spec: str, checkpoints_dir: Path | None = None) -> Callable[[int], Chooser]:
    """A project actor spec playing the learner seat (a fresh policy per battle, seeded from it)."""
    actor = resolve_actor(spec, "agent", checkpoints_dir)

    def for_battle(seed: int) -> Chooser:
        policy = actor.make_policy(derive_seed(seed, "rl-reference-agent"))
        return lambda env, obs: policy.act(env.unwrapped.battle)
    return for_battle


def ppo_agent(model: Any, deterministic: bool = True) -> Callable[[int], Chooser]:
    """The model's argmax action (``deterministic``) or a sample of its masked distribution; the
    samples come from torch's generator, seeded from the battle seed at each battle."""
    import torch

    def choose(env: gym.Env, obs: Any) -> int:
        action, _ = model.predict(obs, action_masks=env.action_masks(), deterministic=deterministic)
        return int(action)

    def for_battle(seed: int) -> Chooser:
        torch.manual_seed(derive_seed(seed, "rl-reference-ppo") % 2**63)
        return choose
    return for_battle


def train_bc(root: Path, battles: int) -> dict[str, Any]:
    """The project's pipeline on ``battles`` greedy-vs-greedy battles; registers checkpoint ``bc``."""
    t0 = time.perf_counter()
    run_series(root / "sessions", "greedy", battles, p1_model="baseline:greedy", opponent="baseline:greedy",
               seed=0, max_workers=1)
    made = materialize_v5_dataset(["greedy"], "greedy", sessions_dir=root / "sessions",
                                  datasets_dir=root / "datasets")
    trained = train_policy("greedy", "bc", 0, datasets_dir=root / "datasets", checkpoints_dir=root / "checkpoints")
    return {"data": f"{battles} battles baseline:greedy vs baseline:greedy (run_series, seed 0)",
            "decisions": made["row_counts"]["decisions"], "epochs": trained["hyperparameters"]["epochs"],
            "val_top1": trained["final"].get("val_top1"), "seconds": round(time.perf_counter() - t0, 1)}


def train_ppo(timesteps: int, eval_every: int, curve_battles: int) -> tuple[Any, list[dict[str, Any]], float]:
    """MaskablePPO from scratch against the baseline pool; the curve is evaluated every ``eval_every``."""
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.env_util import make_vec_env

    env = make_vec_env(ENV_ID, n_envs=2, seed=0, env_kwargs={"opponent": list(OPPONENTS), "seat": "random"})
    model = MaskablePPO("MlpPolicy", env, n_steps=512, batch_size=128, seed=0, device="cpu")
    curve, seconds = [], 0.0
    while True:
        point = {"timesteps": model.num_timesteps}
        for opponent in OPPONENTS:
            for how, deterministic in (("argmax", True), ("sampled", False)):
                point[f"{how}_vs_{opponent.split(':')[1]}"] = evaluate(ppo_agent(model, deterministic), opponent,
                                                                      curve_battles)["win_rate"]
        curve.append(point)
        if model.num_timesteps >= timesteps:
            return model, curve, seconds
        t0 = time.perf_counter()
        model.learn(total_timesteps=min(eval_every, timesteps - model.num_timesteps), reset_num_timesteps=False)
        seconds += time.perf_counter() - t0


def plot(curve: list[dict[str, Any]], final: dict[str, dict[str, Any]], path: Path, curve_battles: int) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [p["timesteps"] for p in curve]
    fig, ax = plt.subplots(figsize=(9.6, 4.2), dpi=100)
    for opponent, color in zip(OPPONENTS, ("tab:blue", "tab:red")):
        name = opponent.split(":")[1]
        ax.plot(steps, [p[f"argmax_vs_{name}"] for p in curve], marker="o", color=color,
                label=f"MaskablePPO (argmax) vs {opponent}")
        ax.plot(steps, [p[f"sampled_vs_{name}"] for p in curve], marker=".", linestyle="--", color=color,
                label=f"MaskablePPO (sampled) vs {opponent}")
        ax.axhline(final[name]["win_rate"], color=color, linestyle=":", linewidth=1, label=f"BC vs {opponent}")
    ax.set_xlabel("timesteps (learner actions)")
    ax.set_ylabel(f"win rate ({curve_battles} battles per point)")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title("ExtraArena-v1: MaskablePPO learning curve (benchmarks/rl_reference.py)", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, metadata={"Software": None})  # no version stamp: reruns give the same file
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--timesteps", type=int, default=40_960, help="MaskablePPO training budget")
    parser.add_argument("--eval-every", type=int, default=8_192, help="timesteps between curve points")
    parser.add_argument("--battles", type=int, default=200, help="evaluation battles per agent and opponent")
    parser.add_argument("--curve-battles", type=int, default=50, help="evaluation battles per curve point")
    parser.add_argument("--bc-battles", type=int, default=300, help="greedy-vs-greedy battles BC trains on")
    parser.add_argument("--plot", type=Path, default=Path("docs/rl_reference_curve.png"))
    args = parser.parse_args()

    import torch
    torch.set_num_threads(1)
    t_start = time.perf_counter()
    results: dict[str, dict[str, Any]] = {}
    for spec in OPPONENTS:
        results[spec] = {o: evaluate(actor_agent(spec), o, args.battles) for o in OPPONENTS}
    with tempfile.TemporaryDirectory(prefix="extrarlhf-rl-reference-") as tmp:
        bc = train_bc(Path(tmp), args.bc_battles)
        results["bc"] = {o: evaluate(actor_agent("bc", Path(tmp) / "checkpoints"), o, args.battles)
                         for o in OPPONENTS}
    model, curve, ppo_seconds = train_ppo(args.timesteps, args.eval_every, args.curve_battles)
    results["maskable_ppo"] = {o: evaluate(ppo_agent(model), o, args.battles) for o in OPPONENTS}
    results["maskable_ppo_sampled"] = {o: evaluate(ppo_agent(model, False), o, args.battles) for o in OPPONENTS}
    plot(curve, {o.split(":")[1]: results["bc"][o] for o in OPPONENTS}, args.plot, args.curve_battles)

    figures = {
        "benchmark": "rl_reference", "python": platform.python_version(), "machine": platform.machine(),
        "protocol": {"env": f"gym.make('{ENV_ID}', opponent=O, seat='random')", "battles": args.battles,
                     "seeds": f"{EVAL_SEED} + i", "score": "win 1, draw 0.5, loss 0 (95% interval)"},
        "results": {agent: {o: r for o, r in by.items()} for agent, by in results.items()},
        "bc_training": bc,
        "maskable_ppo_training": {"timesteps": model.num_timesteps, "opponents": list(OPPONENTS),
                                  "hyperparameters": "MlpPolicy, n_envs=2, n_steps=512, batch_size=128, seed=0, "
                                                     "other MaskablePPO defaults",
                                  "seconds": round(ppo_seconds, 1), "curve": curve},
        "plot": str(args.plot),
        "seconds": round(time.perf_counter() - t_start, 1),
    }
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
