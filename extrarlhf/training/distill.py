"""Distillation: one plain ``v5`` network trained to play like a teacher network (an ensemble).

A fine-tune's learners settle at different points of PPO's plateau and the mean of their logits
(:func:`.model.pack_ensemble`) plays better than any of them. The distilled student gives a
second stage of learners a new, better start: it plays the teacher's own battles (sampling from
``softmax(logits / temperature)`` against the opponent, ``steps`` decisions in each of
``battles`` battles stepped by the native core's batched API) and is trained on those states
toward the teacher's softmax at the same temperature (KL divergence, Adam, ``epochs`` passes of
``minibatch`` decisions), starting from ``student`` (the fine-tune's base, so its value head
stays the critic fitted to outcomes). Measured (docs/training.md, 16,384 fresh battles against
greedy): six PPO fine-tunes of one 40,000-battle student, 0.7173 as an ensemble, each about
0.70, distilled on 409,600 decisions into a copy of that student (0.65): 0.711, one network;
PPO learners restarted from it settle elsewhere on the plateau, so an ensemble of both stages'
learners differs more than one of a single stage's.

Deterministic: the battle seed, the sampling and the minibatch order come from one
``torch.Generator`` seeded by ``seed``, under :func:`.model.deterministic`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from adapters import work
from engine import backend

from .acting import action_ids, choose_from_logits, decision_points, flat_rows, segments
from .model import ActionScorer, deterministic, segment_log_softmax


@dataclass(frozen=True)
class DistillSettings:
    battles: int = 1024     # battles stepped at once
    steps: int = 256        # teacher decisions per battle (finished battles start again)
    epochs: int = 3
    minibatch: int = 512    # decisions
    lr: float = 1e-3


def collect(teacher: ActionScorer, opponent: str, settings: DistillSettings, temperature: float,
            generator: torch.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(obs, flat action features, legal counts, the teacher's flat logits) of the teacher's
    sampled play against ``opponent``."""
    BattleBatch = backend.require_native("the distillation").batch.BattleBatch  # noqa: N806

    batch = BattleBatch(settings.battles, opponent=opponent, seat="random")
    out = batch.reset(int(torch.randint(0, 2 ** 62, (1,), generator=generator)))
    obs_l, feat_l, count_l, logit_l = [], [], [], []
    for _ in range(settings.steps):
        work.check()
        ids, features, counts = decision_points(batch)
        obs = out["obs"].copy()
        with torch.no_grad():
            seg, _ = segments(torch.from_numpy(counts))
            logits = teacher.flat_logits(torch.from_numpy(obs), torch.from_numpy(features), seg)
        chosen, _ = choose_from_logits(logits, counts, generator, temperature)
        out = batch.step(action_ids(ids, chosen))
        obs_l.append(obs); feat_l.append(features); count_l.append(counts); logit_l.append(logits.numpy())
    return np.concatenate(obs_l), np.concatenate(feat_l), np.concatenate(count_l), np.concatenate(logit_l)


def distill(teacher: ActionScorer, student: ActionScorer, opponent: str, temperature: float, seed: int,
            settings: DistillSettings = DistillSettings(), threads: int = 1) -> tuple[ActionScorer, dict[str, Any]]:
    """A copy of ``student`` trained toward ``teacher`` (module docstring); (network, figures)."""
    with deterministic(threads):
        generator = torch.Generator().manual_seed(seed)
        obs, features, counts, logits = collect(teacher, opponent, settings, temperature, generator)
        net = copy.deepcopy(student)
        net.train()
        opt = torch.optim.Adam(net.parameters(), lr=settings.lr)
        offsets = np.zeros(counts.size + 1, np.int64)
        np.cumsum(counts, out=offsets[1:])
        kl = []
        for _ in range(settings.epochs):
            order = torch.randperm(counts.size, generator=generator).numpy()
            total, batches = 0.0, 0
            for k in range(0, counts.size, settings.minibatch):
                work.check()
                idx = np.sort(order[k:k + settings.minibatch])
                c = torch.from_numpy(counts[idx])
                seg, _ = segments(c)
                rows = flat_rows(offsets, idx)
                scores = net.flat_logits(torch.from_numpy(obs[idx]), torch.from_numpy(features[rows]), seg)
                target = segment_log_softmax(torch.from_numpy(logits[rows]) / temperature, seg, c)
                log_p = segment_log_softmax(scores / temperature, seg, c)
                loss = (torch.exp(target) * (target - log_p)).sum() / c.numel()
                opt.zero_grad()
                loss.backward()
                opt.step()
                total += float(loss.detach())
                batches += 1
            kl.append(round(total / max(batches, 1), 5))
        net.eval()
    return net, {"decisions": int(counts.size), "kl_per_epoch": kl}
