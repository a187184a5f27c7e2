"""Acting with a v5 network on a native battle batch: the decision points of every battle, the
flat rows' segments (and the rows of a minibatch of decisions), a choice per decision (a
Gumbel-max draw from the softmax, or the argmax) and its action id. Shared by the PPO fine-tune
(ppo.py) and the distillation (distill.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .model import ActionScorer, segment_log_softmax


def decision_points(batch: Any) -> tuple[list[list[int]], np.ndarray, np.ndarray]:
    """Each battle's legal ids, their flat action features and counts."""
    ids, rows = [], []
    for i in range(batch.num_battles):
        state = batch.battle(i)
        legal = state.legal_actions()
        ids.append(legal)
        rows.append(state.action_features(legal))
    return ids, np.concatenate(rows), np.array([len(x) for x in ids], dtype=np.int64)


def action_ids(ids: list[list[int]], chosen: np.ndarray) -> np.ndarray:
    """The action id of each decision's chosen position (``ids``: each decision's legal ids)."""
    return np.array([legal[k] for legal, k in zip(ids, chosen.tolist())], dtype=np.int64)


def flat_rows(offsets: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """The flat rows of decisions ``idx``, in that order (``offsets[d]``: decision d's first row,
    ``offsets[-1]``: the row count)."""
    counts = offsets[idx + 1] - offsets[idx]
    firsts = np.cumsum(counts) - counts
    return np.repeat(offsets[idx] - firsts, counts) + np.arange(int(counts.sum()))


def segments(counts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(decision of each flat row, first row of each decision)."""
    starts = torch.cumsum(counts, 0) - counts
    return torch.repeat_interleave(torch.arange(counts.numel()), counts), starts


def choose(net: ActionScorer, obs: np.ndarray, features: np.ndarray, counts: np.ndarray,
           generator: torch.Generator | None, temperature: float = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(chosen positions, their log-probabilities, values): a draw from the softmax with
    ``generator`` (Gumbel-max), the argmax without one."""
    with torch.no_grad():
        o = torch.from_numpy(obs)
        seg, _ = segments(torch.from_numpy(counts))
        chosen, logp = choose_from_logits(net.flat_logits(o, torch.from_numpy(features), seg), counts, generator,
                                          temperature)
        return chosen, logp, net.value(o).numpy()


def choose_from_logits(logits: torch.Tensor, counts: np.ndarray, generator: torch.Generator | None,
                       temperature: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """:func:`choose` on flat logits already computed: (chosen positions, their log-probabilities)."""
    with torch.no_grad():
        c = torch.from_numpy(counts)
        seg, starts = segments(c)
        logp = segment_log_softmax(logits / temperature, seg, c)
        keys = logp if generator is None else \
            logp - torch.log(-torch.log(torch.rand(logp.shape, generator=generator).clamp_min(1e-20)))
        width = int(c.max())
        padded = torch.full((c.numel(), width), float("-inf")).index_put((seg, torch.arange(seg.numel()) - starts[seg]),
                                                                           keys)
        chosen = padded.argmax(dim=1)
        return chosen.numpy(), logp[starts + chosen].numpy()
