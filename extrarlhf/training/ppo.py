"""PPO: policy-gradient fine-tuning of a ``v5`` network against opponents the native core plays.

Behaviour cloning learns what the search teacher does and stops below it. The fine-tune
optimizes the score itself: PPO (Schulman et al. 2017, clipped surrogate, GAE with
gamma = 1, reward +1 win / 0 draw / -1 loss at the end of a battle) on battles stepped by the
batched API (``engine_native.batch.BattleBatch``: the opponent's moves are played inside the
core, seats drawn per battle), starting from a trained network (``from_onnx``) whose value
head (fitted to battle outcomes) is the critic from the first update.

Each update plays ``horizon`` learner decisions in each of ``num_envs`` battles per opponent
(sampling from the softmax over the legal actions), then takes ``epochs`` passes of
minibatches over them. Every ``eval_every`` updates the network plays its *argmax* policy
(what a checkpoint plays) against the first opponent on ``eval_battles`` fixed battles of its
own seeds (never the benchmark's); the best-scoring network so far is what
:func:`finetune` returns, so an update that makes play worse is never kept.

With ``ema`` > 0 (default 0.99) the network evaluated (and returned) is an exponential moving
average of the learner's weights (``torch.optim.swa_utils.AveragedModel``, updated after every
update with that decay) while the learner goes on: at PPO's plateau the iterates wander around
a better point than any one of them. Measured (docs/training.md, 15-minute fine-tunes of the
same 40,000-battle student, 4,096 fresh battles against greedy): 0.7118 with ema 0.99, 0.7061
with 0.997, where the learner itself (ema 0) peaked at 0.692-0.700.

With ``learners`` > 1 the fine-tune uses more cores (a learner is one single-threaded process,
its battles stepped by the native core on the same core): that many independent learners, the
first with the run's seed, the others with seeds derived from it (:func:`learner_seed`), run
in worker processes that die with this one (more learners than cores share the cores); then
the base, each learner's best network, the average of their weights (a "model soup", Wortsman
et al. 2022; measured here, two 15-minute learners of one base: 0.7118 and 0.7012, their
average 0.7104) and their ensemble (:func:`.model.pack_ensemble`: the learners side by side in
one network, the mean of their logits; measured, 16,384 fresh battles: learners of about 0.70
each, 3 of them 0.714, 6 0.717) play the same ``selection_battles`` battles (4,096: on 1,024 the
selection kept the luckiest of six learners over their ensemble) of a selection seed none of the
learners evaluated on, in the learners' processes, and the best-scoring one is returned (ties:
the base, then the ensemble).

With ``stages`` > 1 the learners' time comes in that many stages: after each stage but the last,
the ensemble of every learner so far is distilled into one plain network (:mod:`.distill`, about
two minutes in this process), and the next stage's learners start from it instead of the base.
The ensemble candidate then holds every stage's learners and the distilled networks are
candidates too. Measured (docs/training.md, 16,384 fresh battles against greedy): the
ensemble of six fine-tunes of one base 0.7173 (0.7202 on a second seed); distilled, 0.711 as one
network; two PPO learners restarted from that, 0.7068 and 0.7102 each, and with the six as a
third of the weight, 0.7198 (0.7227).

Determinism: one ``torch.Generator`` (sampling, minibatch order) seeded by the run, the
battle seeds derived from it, and :func:`.model.deterministic`; the same network, settings,
seed and thread count give the same result on the same machine.
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import asdict, dataclass, replace
from typing import Any, Callable

import numpy as np
import torch
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

from adapters import work
from engine import backend, derive_seed

from ..core.errors import InvalidArgument
from .acting import action_ids, choose, decision_points, flat_rows, segments
from .distill import DistillSettings, distill
from .model import ActionScorer, Architecture, deterministic, pack_ensemble, segment_log_softmax

Progress = Callable[[int, dict[str, Any]], None]  # (updates done, the last update's figures)
MAX_LEARNERS = 8
MAX_STAGES = 4
DISTILL_SECONDS = 150.0         # kept per distillation between stages (measured: 100-150 s on one core)
SELECTION_SECONDS_PER_1K = 4.0  # kept per candidate and 1,024 selection battles at the end of a multi-learner run
POOL_START_SECONDS = 6.0        # a multi-learner run's worker processes importing torch before they learn


@dataclass(frozen=True)
class FinetuneSettings:
    """What a fine-tune is configured with (recorded with its result)."""

    opponents: tuple[str, ...] = ("baseline:greedy",)
    num_envs: int = 128          # battles per opponent stepped at once
    horizon: int = 32            # learner decisions per battle per update
    epochs: int = 4
    minibatch: int = 1024        # decisions
    lr: float = 1e-4             # measured: 3e-4 made play worse, 3e-5 hardly moved it
    temperature: float = 0.3     # the policy played and optimized is softmax(logits / temperature)
    clip: float = 0.2
    value_coef: float = 0.5
    entropy_coef: float = 0.0
    gae_lambda: float = 0.95
    max_grad_norm: float = 0.5
    eval_battles: int = 1024
    eval_every: int = 10
    # battles each candidate of a multi-learner selection plays: on 1,024 (standard error 0.014) the
    # selection kept the luckiest of six learners over their ensemble, 0.015 better on 16,384 battles
    selection_battles: int = 4096
    ema: float = 0.99            # decay of the weight average evaluated and returned (0: the learner itself)
    threads: int = 1             # two intra-op threads ran up to 8x slower whenever another process was busy
    learners: int = 1            # independent PPO learners, one process each, then the selection (docstring)
    stages: int = 1              # with learners > 1: stages of learners, each later one from a distillation (docstring)
    distill_battles: int = 1024  # the distillation's teacher battles stepped at once ...
    distill_steps: int = 256     # ... and its decisions in each (262,144 decisions)
    max_updates: int = 1_000_000  # a cap besides the time budget (tests: a fixed number of updates)

    def __post_init__(self) -> None:
        native_opponent = backend.require_native("PPO fine-tuning").batch.native_opponent

        if not self.opponents or any(native_opponent(o) is None for o in self.opponents):
            raise InvalidArgument(f"opponents must be specs the native core plays (baseline:greedy, baseline:random, "
                                  f"search:baseline:greedy?sims=N), got {list(self.opponents)!r}")
        for name in ("num_envs", "horizon", "epochs", "minibatch", "eval_battles", "eval_every", "threads",
                     "max_updates", "learners", "selection_battles", "stages", "distill_battles", "distill_steps"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidArgument(f"{name} must be an integer >= 1, got {value!r}")
        if self.learners > MAX_LEARNERS:
            raise InvalidArgument(f"learners must be at most {MAX_LEARNERS} (one process each), got {self.learners}")
        if self.stages > MAX_STAGES or (self.stages > 1 and self.learners < 2):
            raise InvalidArgument(f"stages must be 1, or up to {MAX_STAGES} with learners >= 2 (a later stage starts "
                                  f"from the distilled ensemble of the learners before it), got stages {self.stages} "
                                  f"with learners {self.learners}")
        # name -> (low, high): lr, clip, temperature and the grad norm above low, the others at least low
        for name, (low, high) in {"lr": (0.0, 1.0), "clip": (0.0, 1.0), "temperature": (0.0, 10.0),
                                  "max_grad_norm": (0.0, 1e6), "value_coef": (0.0, 100.0),
                                  "entropy_coef": (0.0, 1.0), "gae_lambda": (0.0, 1.0),
                                  "ema": (0.0, 0.9999)}.items():
            value = getattr(self, name)
            strict = name in ("lr", "clip", "temperature", "max_grad_norm")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or not (low < value if strict else low <= value) or value > high:
                raise InvalidArgument(f"{name} must be a number in {'(' if strict else '['}{low}, {high}], "
                                      f"got {value!r}")


@dataclass
class Rollout:
    """The decisions of one update, in (step, battle) order; ``features`` are flat rows."""

    obs: np.ndarray       # float32 [D, OBS_DIM]
    features: np.ndarray  # float32 [R, ACTION_FEATURE_DIM]
    counts: np.ndarray    # int64 [D]
    chosen: np.ndarray    # int64 [D], position of the action taken among its decision's rows
    logp: np.ndarray      # float32 [D]
    advantage: np.ndarray  # float32 [D]
    returns: np.ndarray   # float32 [D]


def _play(net: ActionScorer, batch: Any, out: dict[str, np.ndarray], horizon: int, generator: torch.Generator,
          lam: float, temperature: float) -> tuple[Rollout, dict[str, np.ndarray], dict[str, float]]:
    obs_l, feat_l, count_l, chosen_l, logp_l, value_l, reward_l, done_l = ([] for _ in range(8))
    wins = losses = ended = 0
    for _ in range(horizon):
        work.check()
        ids, features, counts = decision_points(batch)
        obs = out["obs"]
        chosen, logp, value = choose(net, obs, features, counts, generator, temperature)
        actions = action_ids(ids, chosen)
        out = batch.step(actions)
        obs_l.append(obs.copy()); feat_l.append(features); count_l.append(counts); chosen_l.append(chosen)
        logp_l.append(logp); value_l.append(value); reward_l.append(out["reward"].copy())
        done_l.append(out["terminated"].copy())
        ended += int(out["terminated"].sum())
        wins += int((out["reward"] > 0).sum())
        losses += int((out["reward"] < 0).sum())
    with torch.no_grad():
        last = net.value(torch.from_numpy(out["obs"])).numpy()
    values, rewards, dones = np.stack(value_l), np.stack(reward_l), np.stack(done_l).astype(np.float32)
    advantage = np.zeros_like(values)
    running = np.zeros(values.shape[1], np.float32)
    for t in range(horizon - 1, -1, -1):
        following = last if t == horizon - 1 else values[t + 1]
        delta = rewards[t] + (1.0 - dones[t]) * following - values[t]
        running = delta + lam * (1.0 - dones[t]) * running
        advantage[t] = running
    rollout = Rollout(obs=np.concatenate(obs_l), features=np.concatenate(feat_l), counts=np.concatenate(count_l),
                      chosen=np.concatenate(chosen_l), logp=np.concatenate(logp_l),
                      advantage=advantage.reshape(-1), returns=(advantage + values).reshape(-1))
    return rollout, out, {"battles_ended": ended, "wins": wins, "losses": losses}


def _update(net: ActionScorer, opt: torch.optim.Optimizer, roll: Rollout, s: FinetuneSettings,
            generator: torch.Generator) -> dict[str, float]:
    n = roll.counts.size
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(roll.counts, out=offsets[1:])
    adv = (roll.advantage - roll.advantage.mean()) / (roll.advantage.std() + 1e-8)
    sums = {"policy_loss": 0.0, "value_loss": 0.0, "entropy": 0.0, "clipped": 0.0, "kl": 0.0}
    batches = 0
    for _ in range(s.epochs):
        order = torch.randperm(n, generator=generator).numpy()
        for k in range(0, n, s.minibatch):
            work.check()
            idx = np.sort(order[k:k + s.minibatch])
            counts = roll.counts[idx]
            rows = flat_rows(offsets, idx)
            c = torch.from_numpy(counts)
            seg, starts = segments(c)
            obs = torch.from_numpy(roll.obs[idx])
            scores = net.flat_logits(obs, torch.from_numpy(roll.features[rows]), seg) / s.temperature
            logp_all = segment_log_softmax(scores, seg, c)
            logp = logp_all[starts + torch.from_numpy(roll.chosen[idx])]
            old = torch.from_numpy(roll.logp[idx])
            a = torch.from_numpy(adv[idx])
            ratio = torch.exp(logp - old)
            policy_loss = -torch.minimum(ratio * a, ratio.clamp(1 - s.clip, 1 + s.clip) * a).mean()
            value_loss = ((net.value(obs) - torch.from_numpy(roll.returns[idx])) ** 2).mean()
            entropy = -torch.zeros(c.numel()).index_add(0, seg, torch.exp(logp_all) * logp_all).mean()
            loss = policy_loss + s.value_coef * value_loss - s.entropy_coef * entropy
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), s.max_grad_norm)
            opt.step()
            with torch.no_grad():
                sums["policy_loss"] += float(policy_loss)
                sums["value_loss"] += float(value_loss)
                sums["entropy"] += float(entropy)
                sums["clipped"] += float(((ratio - 1).abs() > s.clip).float().mean())
                sums["kl"] += float((old - logp).mean())
            batches += 1
    figures = {k: round(v / max(batches, 1), 5) for k, v in sums.items()}
    spread = float(roll.returns.var())
    figures["explained_variance"] = round(1.0 - float(roll.advantage.var()) / spread, 4) if spread > 0 else None
    return figures


def evaluate(net: ActionScorer, opponent: str, battles: int, seed: int) -> dict[str, Any]:
    """The argmax policy's score against ``opponent`` over the first episode of ``battles``
    battles (seats drawn per battle) from ``seed``."""
    BattleBatch = backend.require_native("PPO fine-tuning").batch.BattleBatch  # noqa: N806

    batch = BattleBatch(battles, opponent=opponent, seat="random")
    out = batch.reset(seed)
    result = np.full(battles, np.nan, np.float32)
    while np.isnan(result).any():
        work.check()
        ids, features, counts = decision_points(batch)
        chosen, _, _ = choose(net, out["obs"], features, counts, None)
        out = batch.step(action_ids(ids, chosen))
        ended = out["terminated"] & np.isnan(result)
        result[ended] = out["reward"][ended]
    wins, losses = int((result > 0).sum()), int((result < 0).sum())
    return {"opponent": opponent, "battles": battles, "wins": wins, "draws": battles - wins - losses,
            "losses": losses, "score": round((wins + 0.5 * (battles - wins - losses)) / battles, 4)}


@dataclass
class FinetuneResult:
    net: ActionScorer
    settings: dict[str, Any]
    history: list[dict[str, Any]]
    evaluations: list[dict[str, Any]]
    best: dict[str, Any]
    start: dict[str, Any]
    seconds: float
    sample: Rollout  # the last update's decisions (real decision points, to verify an export on)
    improved: bool   # False: the base network is returned (no update or learner beat it)


def finetune(net: ActionScorer, settings: FinetuneSettings, seed: int, *, seconds: float,
             progress: Progress | None = None) -> FinetuneResult:
    """PPO updates on a copy of ``net`` for about ``seconds`` (module docstring); returns the
    best-evaluated network (``net`` itself unchanged when no update improved on it)."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds) or seconds <= 0:
        raise InvalidArgument(f"seconds must be a positive number, got {seconds!r}")
    if settings.stages > 1 and net.arch.members != 1:
        raise InvalidArgument(f"stages > 1 distills the learners into a plain network, and this base is an ensemble "
                              f"of {net.arch.members}: fine-tune it with stages 1")
    if settings.learners > 1:
        return _learn_in_parallel(net, settings, seed, seconds, progress)
    return _learn(net, settings, seed, seconds, progress)


def _learn(net: ActionScorer, settings: FinetuneSettings, seed: int, seconds: float,
           progress: Progress | None) -> FinetuneResult:
    """One PPO learner (module docstring)."""
    BattleBatch = backend.require_native("PPO fine-tuning").batch.BattleBatch  # noqa: N806

    started = time.perf_counter()
    with deterministic(settings.threads):
        generator = torch.Generator().manual_seed(seed)
        learner = copy.deepcopy(net)
        learner.train()
        opt = torch.optim.Adam(learner.parameters(), lr=settings.lr)
        averaged = AveragedModel(learner, multi_avg_fn=get_ema_multi_avg_fn(settings.ema)) if settings.ema else None
        candidate = learner if averaged is None else averaged.module  # what is evaluated and returned
        eval_seed = int(torch.randint(0, 2 ** 62, (1,), generator=generator))
        start = evaluate(learner, settings.opponents[0], settings.eval_battles, eval_seed)
        best, best_state = start, copy.deepcopy(learner.state_dict())
        batches = [BattleBatch(settings.num_envs, opponent=o, seat="random") for o in settings.opponents]
        outs = [b.reset(int(torch.randint(0, 2 ** 62, (1,), generator=generator))) for b in batches]
        history: list[dict[str, Any]] = []
        evaluations = [{"update": 0, **start}]
        update = 0
        per_update = 0.0
        merged = None
        while update < settings.max_updates and time.perf_counter() - started + per_update < seconds:
            t0 = time.perf_counter()
            update += 1
            figures: dict[str, Any] = {"update": update}
            rolls = []
            for k, batch in enumerate(batches):
                roll, outs[k], played = _play(learner, batch, outs[k], settings.horizon, generator,
                                              settings.gae_lambda, settings.temperature)
                rolls.append(roll)
                figures[settings.opponents[k]] = played
            merged = rolls[0] if len(rolls) == 1 else Rollout(
                *(np.concatenate([getattr(r, f) for r in rolls]) for f in Rollout.__dataclass_fields__))
            figures.update(_update(learner, opt, merged, settings, generator))
            if averaged is not None:
                averaged.update_parameters(learner)
            if update % settings.eval_every == 0:
                score = evaluate(candidate, settings.opponents[0], settings.eval_battles, eval_seed)
                evaluations.append({"update": update, **score})
                figures["eval_score"] = score["score"]
                if score["score"] > best["score"]:
                    best, best_state = {"update": update, **score}, copy.deepcopy(candidate.state_dict())
            per_update = time.perf_counter() - t0
            figures["seconds"] = round(per_update, 2)
            history.append(figures)
            if progress is not None:
                progress(update, figures)
        learner.load_state_dict(best_state)
        learner.eval()
    if merged is None:  # not one update fitted in the time given
        merged, _, _ = _play(learner, batches[0], outs[0], 1, generator, settings.gae_lambda, settings.temperature)
    return FinetuneResult(net=learner, settings=asdict(settings), history=history, evaluations=evaluations,
                          best=best, start=start, seconds=round(time.perf_counter() - started, 1), sample=merged,
                          improved="update" in best)


def learner_seed(seed: int, index: int) -> int:
    """Learner ``index``'s seed: the run's own for the first (one learner is the plain fine-tune)."""
    return seed if index == 0 else derive_seed(seed, f"ppo-learner:{index}") >> 2


def _network(arch: Architecture, state: dict[str, torch.Tensor]) -> ActionScorer:
    net = ActionScorer(arch)
    net.load_state_dict(state)
    return net


def _remote_learn(arch: Architecture, state: dict[str, torch.Tensor], settings: FinetuneSettings, seed: int,
                  seconds: float) -> dict[str, Any]:
    """A learner in a worker process: the network travels as its architecture and weights."""
    result = _learn(_network(arch, state), settings, seed, seconds, None)
    return {"state": result.net.state_dict(), "history": result.history, "evaluations": result.evaluations,
            "best": result.best, "start": result.start, "sample": result.sample}


def _remote_evaluate(arch: Architecture, state: dict[str, torch.Tensor], opponent: str, battles: int, seed: int,
                     threads: int) -> dict[str, Any]:
    """:func:`evaluate` in a worker process."""
    with deterministic(threads):
        return evaluate(_network(arch, state), opponent, battles, seed)


def weight_average(nets: list[ActionScorer]) -> ActionScorer:
    """The network whose every weight is the mean of ``nets``' (same architecture): a "model
    soup" (Wortsman et al. 2022) of fine-tunes of one base."""
    soup = copy.deepcopy(nets[0])
    states = [n.state_dict() for n in nets]
    soup.load_state_dict({k: sum(st[k] for st in states) / len(states) for k in states[0]})
    return soup


def _learn_in_parallel(net: ActionScorer, settings: FinetuneSettings, seed: int, seconds: float,
                       progress: Progress | None) -> FinetuneResult:
    """``settings.learners`` independent learners (seeds :func:`learner_seed`), one worker
    process each, for the time budget less the selection's; then the selection: the base, the
    learners' ensemble (of plain networks only), the weight average of their best networks and
    each of them play the same ``selection_battles`` battles of a selection seed none of the
    learners evaluated on (in the same worker processes), and the best-scoring one is returned;
    ties go to the earlier candidate in that order, so the base unless a candidate beats it, and
    the ensemble (measured the strongest, module docstring) over any single learner that only
    equals it."""
    from ..core.procs import machine_workers, process_pool, stop_flag

    started = time.perf_counter()
    n, stages = settings.learners, settings.stages
    selection = selection_seconds(net.arch.members, n * stages, settings.selection_battles, min(n, machine_workers()),
                                  distilled=stages - 1)
    single = replace(settings, learners=1, stages=1)
    stop = stop_flag("extrarlhf.training.ppo")
    pool = process_pool(n, "extrarlhf.training.ppo", stop=stop)

    def report(stage: str, done: int, total: int) -> None:
        if progress is not None:
            progress(0, {"seconds": round(time.perf_counter() - started, 1), "learners": n, "stage": stage,
                         "done": done, "total": total})

    try:
        learned: list[dict[str, Any]] = []
        distilled: list[tuple[ActionScorer, dict[str, Any]]] = []
        start = net
        for stage in range(stages):
            left = seconds - (time.perf_counter() - started) - selection - DISTILL_SECONDS * (stages - 1 - stage)
            state = {k: v.detach().clone() for k, v in start.state_dict().items()}
            label = "learners" if stages == 1 else f"stage {stage + 1}/{stages} learners"
            learned += _gather([pool.submit(_remote_learn, net.arch, state, single, learner_seed(seed, stage * n + i),
                                            max(left / (stages - stage), 1.0)) for i in range(n)],
                               lambda done: report(label, done, n))
            if stage < stages - 1:  # the next stage starts from the distilled ensemble of every learner so far
                report("distill", 0, 1)
                teacher = pack_ensemble([_network(net.arch, one["state"]) for one in learned])
                distilled.append(distill(teacher, net, settings.opponents[0], settings.temperature,
                                         derive_seed(seed, f"ppo-distill:{stage}") >> 2,
                                         DistillSettings(battles=settings.distill_battles,
                                                         steps=settings.distill_steps), settings.threads))
                start = distilled[-1][0]
        nets = [_network(net.arch, one["state"]) for one in learned]
        candidates: list[tuple[str, ActionScorer, int | None]] = [("base", net, None)]
        if net.arch.members == 1:
            candidates.append(("ensemble", pack_ensemble(nets), None))
        candidates += [(f"distilled {i + 1}", d, None) for i, (d, _) in enumerate(distilled)]
        candidates += [("average", weight_average(nets), None)] + [(f"learner {i}", m, i) for i, m in enumerate(nets)]
        selection_seed = derive_seed(seed, "ppo-selection") >> 2
        # the slowest (the ensemble) first, so that the pool's last minutes are not one process's
        order = sorted(range(len(candidates)), key=lambda i: -candidates[i][1].arch.members)
        futures = {i: pool.submit(_remote_evaluate, candidates[i][1].arch, candidates[i][1].state_dict(),
                                  settings.opponents[0], settings.selection_battles, selection_seed, settings.threads)
                   for i in order}
        played = _gather([futures[i] for i in range(len(candidates))],
                         lambda done: report("selection", done, len(candidates)))
    finally:
        stop.set()  # work still running (a cancel, a failure) stops at its next check
        pool.shutdown(wait=True, cancel_futures=True)
    scored = [{"candidate": name, **score} for (name, _, _), score in zip(candidates, played)]
    pick = max(range(len(scored)), key=lambda i: (scored[i]["score"], -i))
    chosen = copy.deepcopy(candidates[pick][1])
    chosen.eval()
    best = {**scored[pick], "selection": scored}
    if candidates[pick][2] is not None:
        best["update"] = learned[candidates[pick][2]]["best"].get("update")
    if distilled:
        best["distilled"] = [figures for _, figures in distilled]
    return FinetuneResult(
        net=chosen, settings=asdict(settings),
        history=[{"learner": i, **h} for i, one in enumerate(learned) for h in one["history"]],
        evaluations=[{"learner": i, **e} for i, one in enumerate(learned) for e in one["evaluations"]],
        best=best, start=scored[0], seconds=round(time.perf_counter() - started, 1), sample=learned[0]["sample"],
        improved=pick != 0)


def selection_seconds(members: int, learners: int, battles: int, parallel: int, distilled: int = 0) -> float:
    """Seconds kept for a multi-learner selection: the base, the average and the learners (each
    as slow as the base's ``members`` networks), the ``distilled`` networks of a staged run and, of
    a plain base, their ensemble (as slow as ``learners`` networks), ``battles`` each, ``parallel`` at a time. (Measured: a two-learner
    fine-tune of a six-member ensemble that counted its candidates as one network each overran
    its 14 minutes by 76 s.)"""
    networks = members * (learners + 2 + distilled) + (learners if members == 1 else 0)
    return POOL_START_SECONDS + SELECTION_SECONDS_PER_1K * networks * battles / 1024 / parallel


def _gather(futures: list[Any], done: Callable[[int], None]) -> list[Any]:
    """The futures' results in their order, reporting how many are done every second and
    checking for a cancel meanwhile."""
    from concurrent.futures import FIRST_COMPLETED, wait

    pending = set(futures)
    while pending:
        _, pending = wait(pending, timeout=1.0, return_when=FIRST_COMPLETED)
        work.check()
        done(len(futures) - len(pending))
    return [f.result() for f in futures]
