"""Opponents of the single-seat env: the project's actor specs, policy objects, and pools of them.

``opponent=`` takes what ``run_series`` takes (``"baseline:greedy"``, ``"baseline:random"``,
a registered checkpoint name, resolved by :func:`extrarlhf.runtime.actors.resolve_actor`
against ``checkpoints_dir``), the bare baseline names ``"random"``/``"greedy"``, any object
with ``act(state) -> action_id`` (used as is, with its own seeding), or a list of any of
these: a pool, from which each episode draws one member, uniformly, with a seed derived
from the battle seed (so ``info["battle_seed"]`` still reproduces the episode). For
self-play, put policy objects (snapshots of the learner) in the pool and grow it between
rollouts with ``env.get_wrapper_attr("add_opponent")(policy)`` (``vec_env.env_method``
for a vectorized env).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from adapters import BASELINES, Policy

from ..runtime.actors import Actor, resolve_actor


@dataclass(frozen=True)
class Opponent:
    """One pool member: an actor spec resolved once, or a policy object used as is."""

    label: str
    actor: Actor | None = None
    policy: Policy | None = None

    def make(self, seed: int) -> Policy:
        """The policy for one episode (a fresh, seeded one for a spec)."""
        return self.actor.make_policy(seed) if self.actor is not None else self.policy


def resolve_opponent(spec: Any, checkpoints_dir: str | os.PathLike[str] | None = None) -> Opponent:
    """One opponent from a spec string or a policy object; unknown specs list what exists."""
    if isinstance(spec, str):
        full = f"baseline:{spec}" if spec in BASELINES else spec
        actor = resolve_actor(full, "opponent", checkpoints_dir)
        return Opponent(label=actor.spec, actor=actor)
    if callable(getattr(spec, "act", None)):
        return Opponent(label=getattr(spec, "spec", None) or type(spec).__name__, policy=spec)
    raise TypeError(f"opponent must be an actor spec ('baseline:greedy', a checkpoint name), a policy object "
                    f"with act(state), or a list of them; got {spec!r}")


def resolve_pool(opponent: Any, checkpoints_dir: str | os.PathLike[str] | None = None) -> list[Opponent]:
    """The pool for ``opponent``: a one-member pool, or one member per list/tuple entry."""
    if isinstance(opponent, (list, tuple)):
        if not opponent:
            raise ValueError("an opponent pool needs at least one opponent")
        return [resolve_opponent(o, checkpoints_dir) for o in opponent]
    return [resolve_opponent(opponent, checkpoints_dir)]
