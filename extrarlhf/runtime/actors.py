"""Actor specs: how opponents and models are named.

``baseline:random`` and ``baseline:greedy`` are the baselines; a registered checkpoint is
named by its registry name (names never contain ``:``). A spec resolves to an
:class:`Actor` (spec, kind, weights hash) that builds a fresh policy per battle. Unknown
specs are refused with the list of what exists.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from adapters import BASELINES, make_baseline

from ..checkpoints import CheckpointRegistry
from ..errors import InvalidArgument, UnknownSpec

P1_ACTOR_TYPES = ("human", "llm", "rl")
DEFAULT_CHECKPOINTS = "checkpoints"


@dataclass(frozen=True)
class Actor:
    spec: str
    kind: str
    weights_hash: str | None = None
    checkpoints_dir: str | None = None  # where a checkpoint actor's registry lives

    @property
    def is_baseline(self) -> bool:
        return self.kind == "baseline"

    def make_policy(self, seed: int):
        """A fresh policy for one battle, seeded from the battle (sampling uses it)."""
        if self.is_baseline:
            return make_baseline(self.spec.split(":", 1)[1], seed)
        return CheckpointRegistry(self.checkpoints_dir).policy(self.spec, seed)

    def as_dict(self) -> dict[str, Any]:
        return {"spec": self.spec, "kind": self.kind, "weights_hash": self.weights_hash}


def available_specs(checkpoints_dir: str | os.PathLike[str] | None = None) -> list[str]:
    """Baseline specs, then the registered checkpoint names."""
    registry = CheckpointRegistry(checkpoints_dir or DEFAULT_CHECKPOINTS)
    return [f"baseline:{name}" for name in BASELINES] + registry.specs()


def resolve_actor(spec: Any, role: str = "opponent",
                  checkpoints_dir: str | os.PathLike[str] | None = None) -> Actor:
    """Resolve a spec string; ``role`` names the argument in error messages."""
    if not isinstance(spec, str) or not spec:
        raise InvalidArgument(f"{role} must be a spec string such as 'baseline:greedy' or a registered "
                              f"checkpoint name, got {spec!r}")
    if spec.startswith("baseline:"):
        if spec.split(":", 1)[1] in BASELINES:
            return Actor(spec=spec, kind="baseline")
    elif ":" not in spec:
        root = str(checkpoints_dir or DEFAULT_CHECKPOINTS)
        registry = CheckpointRegistry(root)
        if spec in registry.specs():
            checkpoint = registry.get(spec)
            return Actor(spec=spec, kind=checkpoint.kind, weights_hash=checkpoint.weights_hash,
                         checkpoints_dir=os.path.abspath(root))
    raise UnknownSpec(f"unknown {role} spec {spec!r}; available: {', '.join(available_specs(checkpoints_dir))}")


def check_p1_actor_type(value: Any) -> str:
    if value not in P1_ACTOR_TYPES:
        raise InvalidArgument(f"p1_actor_type must be one of {', '.join(P1_ACTOR_TYPES)}; got {value!r}")
    return value


def battle_tag(p1_actor_type: str, opponent: Actor) -> str:
    """``{p1_actor_type}-vs-{bot|rl}``: ``bot`` when player 2 is a baseline, ``rl`` when a model."""
    return f"{p1_actor_type}-vs-{'bot' if opponent.is_baseline else 'rl'}"
