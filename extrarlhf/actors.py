"""Actor specs: how opponents and models are named (``baseline:random``, ``baseline:greedy``).

A spec resolves to an :class:`Actor` (spec, kind, weights hash) that can build a policy for a
battle. Unknown specs are refused with the list of what exists.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from adapters import BASELINES, make_baseline

from .errors import InvalidArgument, UnknownSpec

P1_ACTOR_TYPES = ("human", "llm", "rl")


@dataclass(frozen=True)
class Actor:
    spec: str
    kind: str
    weights_hash: str | None = None

    @property
    def is_baseline(self) -> bool:
        return self.kind == "baseline"

    def make_policy(self, seed: int):
        """A fresh policy for one battle, seeded from the battle (random baseline uses it)."""
        return make_baseline(self.spec.split(":", 1)[1], seed)

    def as_dict(self) -> dict[str, Any]:
        return {"spec": self.spec, "kind": self.kind, "weights_hash": self.weights_hash}


def available_specs() -> list[str]:
    return [f"baseline:{name}" for name in BASELINES]


def resolve_actor(spec: Any, role: str = "opponent") -> Actor:
    """Resolve a spec string; ``role`` names the argument in error messages."""
    if not isinstance(spec, str) or not spec:
        raise InvalidArgument(f"{role} must be a spec string such as 'baseline:greedy', got {spec!r}")
    if spec not in available_specs():
        raise UnknownSpec(f"unknown {role} spec {spec!r}; available: {', '.join(available_specs())}")
    return Actor(spec=spec, kind="baseline")


def check_p1_actor_type(value: Any) -> str:
    if value not in P1_ACTOR_TYPES:
        raise InvalidArgument(f"p1_actor_type must be one of {', '.join(P1_ACTOR_TYPES)}; got {value!r}")
    return value


def battle_tag(p1_actor_type: str, opponent: Actor) -> str:
    """``{p1_actor_type}-vs-{bot|rl}``: ``bot`` when player 2 is a baseline, ``rl`` when a model."""
    return f"{p1_actor_type}-vs-{'bot' if opponent.is_baseline else 'rl'}"
