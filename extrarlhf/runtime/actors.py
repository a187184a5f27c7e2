"""Actor specs: how opponents and models are named.

``baseline:random`` and ``baseline:greedy`` are the baselines; a registered checkpoint is
named by its registry name (names never contain ``:``); ``search:<rollout spec>?sims=N``
is the search actor over one of those (adapters/search.py), recorded with its canonical spec
(sims explicit) and the rollout policy's weights hash; ``&play=<spec>`` makes it a labeller that
plays another baseline's or checkpoint's actions (DAgger); ``&guide=value|mix|rollout`` over a v5
checkpoint is the network-guided search (adapters/guided.py: the network's prior and value).
``@promoted`` (and ``promoted``, unless a checkpoint is registered under that very name) is the
promoted checkpoint of the registry, resolved to its concrete name, so traces and reports record
that name and its weights hash. A spec resolves to an :class:`Actor` (spec, kind, weights hash)
that builds a fresh policy per battle. Unknown specs are refused with the list of what exists.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from adapters import BASELINES, AdapterError, make_baseline
from adapters.guided import GuidedSearchPolicy, guided_options
from adapters.search import SearchPolicy, is_search_spec, parse_search, search_spec
from engine import derive_seed

from ..checkpoints.registry import CheckpointRegistry
from ..core.errors import InvalidArgument, UnknownSpec

P1_ACTOR_TYPES = ("human", "llm", "rl")
DEFAULT_CHECKPOINTS = "checkpoints"
PROMOTED_SPECS = ("@promoted", "promoted")


@dataclass(frozen=True)
class Actor:
    spec: str
    kind: str
    weights_hash: str | None = None
    checkpoints_dir: str | None = None  # where a checkpoint actor's registry lives
    rollout: "Actor | None" = None  # a search actor's rollout policy
    sims: int | None = None  # a search actor's budget
    play: "Actor | None" = None  # a labelling search actor's play policy
    guide: str | None = None  # a network-guided search's leaf scoring (adapters/guided.py)
    turns: int | None = None  # ... and its turns simulated before a leaf

    @property
    def is_baseline(self) -> bool:
        return self.kind == "baseline"

    def make_policy(self, seed: int):
        """A fresh policy for one battle, seeded from the battle (sampling uses it)."""
        if self.is_baseline:
            return make_baseline(self.spec.split(":", 1)[1], seed)
        if self.rollout is not None:
            play = None if self.play is None else self.play.make_policy(derive_seed(seed, "play"))
            if self.guide is not None:
                return GuidedSearchPolicy(self.rollout.make_policy(derive_seed(seed, "rollout")), self.sims, seed,
                                          self.spec, self.guide, self.turns, play)
            return SearchPolicy(self.rollout.make_policy(derive_seed(seed, "rollout")), self.sims, seed, self.spec,
                                play)
        return CheckpointRegistry(self.checkpoints_dir).policy(self.spec, seed)

    def as_dict(self) -> dict[str, Any]:
        out = {"spec": self.spec, "kind": self.kind, "weights_hash": self.weights_hash}
        if self.rollout is not None:
            out["search"] = {"sims": self.sims, "rollout": self.rollout.as_dict()}
            if self.guide is not None:
                out["search"]["guide"] = guided_options(self.guide, self.turns)
            if self.play is not None:
                out["search"]["play"] = self.play.as_dict()
        return out


def available_specs(checkpoints_dir: str | os.PathLike[str] | None = None) -> list[str]:
    """Baseline specs, then the registered checkpoint names, then the search form over them."""
    registry = CheckpointRegistry(checkpoints_dir or DEFAULT_CHECKPOINTS)
    return ([f"baseline:{name}" for name in BASELINES] + registry.specs() + ["@promoted"]
            + ["search:<one of these>?sims=N[&play=<one of these>]",
               "search:<a v5 checkpoint>?sims=N&guide=value|mix|rollout[&turns=T]"])


def _promoted_name(spec: str, role: str, root: str) -> str | None:
    """The promoted checkpoint's name for ``@promoted`` / ``promoted`` (None for other specs and
    for ``promoted`` when a checkpoint has that name); nothing promoted is a clear error."""
    from ..checkpoints.promoted import read_promoted

    if spec not in PROMOTED_SPECS or (spec == "promoted" and spec in CheckpointRegistry(root).specs()):
        return None
    pointer = read_promoted(root)
    if pointer is None:
        raise UnknownSpec(f"{role} {spec!r}: nothing is promoted in the checkpoint registry {os.path.abspath(root)} "
                          f"yet; promote a benchmarked checkpoint first (promote_checkpoint) or name one")
    return pointer["name"]


def concrete_spec(spec: Any, role: str = "model", checkpoints_dir: str | os.PathLike[str] | None = None) -> Any:
    """``spec`` with ``@promoted`` / ``promoted`` replaced by the promoted checkpoint's name (what
    reports and comparisons must record); any other value unchanged."""
    if isinstance(spec, str) and spec in PROMOTED_SPECS:
        return _promoted_name(spec, role, str(checkpoints_dir or DEFAULT_CHECKPOINTS)) or spec
    return spec


def resolve_actor(spec: Any, role: str = "opponent",
                  checkpoints_dir: str | os.PathLike[str] | None = None) -> Actor:
    """Resolve a spec string; ``role`` names the argument in error messages."""
    if not isinstance(spec, str) or not spec:
        raise InvalidArgument(f"{role} must be a spec string such as 'baseline:greedy' or a registered "
                              f"checkpoint name, got {spec!r}")
    if is_search_spec(spec):
        try:
            parsed = parse_search(spec)
        except AdapterError as exc:
            raise InvalidArgument(f"{role}: {exc}") from None
        rollout = resolve_actor(parsed.rollout, f"{role}'s rollout policy", checkpoints_dir)
        if parsed.guide is not None and rollout.kind != "v5":
            raise InvalidArgument(f"{role}: search spec {spec!r}: guide={parsed.guide} needs a v5 checkpoint (policy "
                                  f"logits and a value) to guide the search; {rollout.spec!r} is of kind "
                                  f"{rollout.kind!r}")
        play = None if parsed.play is None else resolve_actor(parsed.play, f"{role}'s play policy", checkpoints_dir)
        return Actor(spec=search_spec(rollout.spec, parsed.sims, None if play is None else play.spec, parsed.guide,
                                      parsed.turns), kind="search",
                     weights_hash=rollout.weights_hash, checkpoints_dir=rollout.checkpoints_dir or
                     (play.checkpoints_dir if play else None), rollout=rollout, sims=parsed.sims, play=play,
                     guide=parsed.guide, turns=parsed.turns)
    if spec.startswith("baseline:"):
        if spec.split(":", 1)[1] in BASELINES:
            return Actor(spec=spec, kind="baseline")
    elif ":" not in spec:
        root = str(checkpoints_dir or DEFAULT_CHECKPOINTS)
        spec = _promoted_name(spec, role, root) or spec
        registry = CheckpointRegistry(root)
        if spec in registry.specs():
            checkpoint = registry.get(spec)
            return Actor(spec=spec, kind=checkpoint.kind, weights_hash=checkpoint.weights_hash,
                         checkpoints_dir=os.path.abspath(root))
    where = os.path.abspath(str(checkpoints_dir or DEFAULT_CHECKPOINTS))
    raise UnknownSpec(f"unknown {role} spec {spec!r}; available: {', '.join(available_specs(checkpoints_dir))} "
                      f"(checkpoints looked up in {where})")


def check_p1_actor_type(value: Any) -> str:
    if value not in P1_ACTOR_TYPES:
        raise InvalidArgument(f"p1_actor_type must be one of {', '.join(P1_ACTOR_TYPES)}; got {value!r}")
    return value


def battle_tag(p1_actor_type: str, opponent: Actor) -> str:
    """``{p1_actor_type}-vs-{bot|rl}``: ``bot`` when player 2 is a baseline, ``rl`` when a model."""
    return f"{p1_actor_type}-vs-{'bot' if opponent.is_baseline else 'rl'}"
