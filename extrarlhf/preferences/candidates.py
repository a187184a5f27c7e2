"""Where a task's two candidate actions come from (its *source*).

- ``search_top2``: the two best actions by the recorded search values of a search actor's
  decision (the teacher's own top two; decisions of other actors are not eligible);
- ``A vs B``: what two players would do in the state, each a spec (``baseline:greedy``, a
  checkpoint, ``@promoted``, a search spec) or ``recorded`` (the action the battle recorded).
  A point where both choose the same action gives no task for this source.

A source is given as that string; :func:`parse_source` checks it and resolves the specs once.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import engine

from ..core.errors import InvalidArgument
from ..runtime.actors import Actor, concrete_spec, resolve_actor
from .points import DecisionPoint

SEARCH_TOP2 = "search_top2"
RECORDED = "recorded"
MAX_SOURCES = 8


@dataclass
class Source:
    """A parsed source: its canonical name and, for ``A vs B``, the two sides."""

    name: str
    sides: tuple[str, str] | None = None
    actors: dict[str, Actor] = field(default_factory=dict)

    def eligible(self, point: DecisionPoint) -> bool:
        if self.sides is None:
            return point.action_values is not None and sum(v is not None for v in point.action_values) >= 2
        return True

    def candidates(self, point: DecisionPoint, state: engine.State, seed: int) -> tuple[tuple[int, str], tuple[int, str]] | None:
        """Two distinct ``(action_id, origin)`` for the point, or None when this source has none there."""
        if self.sides is None:
            valued = sorted(((v, -a) for a, v in zip(point.legal, point.action_values or ()) if v is not None),
                            reverse=True)
            if len(valued) < 2:
                return None
            return (-valued[0][1], "search:top1"), (-valued[1][1], "search:top2")
        chosen = tuple(self._choose(side, point, state, seed) for side in self.sides)
        if chosen[0] == chosen[1]:
            return None
        return (chosen[0], self.sides[0]), (chosen[1], self.sides[1])

    def _choose(self, side: str, point: DecisionPoint, state: engine.State, seed: int) -> int:
        if side == RECORDED:
            return point.chosen
        return spec_action(self.actors[side], point.battle_id, point.decision_index, state, seed)


def spec_action(actor: Actor, battle_id: str, decision_index: int, state: engine.State, seed: int) -> int:
    """The action ``actor`` plays at a decision point, seeded from the pool's seed and the point."""
    policy = actor.make_policy(engine.derive_seed(seed, f"{battle_id}:{decision_index}"))
    return int(policy.act(state.clone()))


def parse_source(value: Any, checkpoints_dir: str | os.PathLike[str] | None = None) -> Source:
    """``search_top2`` or ``A vs B``; an unknown spec is the runtime's clear ``unknown_spec`` error."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgument(f"a preference source must be 'search_top2' or 'A vs B' (two specs or 'recorded'), "
                              f"got {value!r}")
    text = " ".join(value.split())
    if text == SEARCH_TOP2:
        return Source(SEARCH_TOP2)
    parts = text.split(" vs ")
    if len(parts) != 2 or not all(parts):
        raise InvalidArgument(f"a preference source must be 'search_top2' or 'A vs B' (e.g. 'baseline:greedy vs "
                              f"recorded'), got {value!r}")
    sides = tuple(RECORDED if p == RECORDED else str(concrete_spec(p, "preference source", checkpoints_dir))
                  for p in parts)
    if sides[0] == sides[1]:
        raise InvalidArgument(f"a preference source compares two different players; {value!r} names "
                              f"{sides[0]!r} twice")
    actors = {s: resolve_actor(s, "preference source", checkpoints_dir) for s in sides if s != RECORDED}
    return Source(f"{sides[0]} vs {sides[1]}", sides, actors)  # type: ignore[arg-type]


def parse_sources(values: Any, checkpoints_dir: str | os.PathLike[str] | None = None) -> list[Source]:
    if isinstance(values, str):
        values = [values]
    if not isinstance(values, (list, tuple)) or not 1 <= len(values) <= MAX_SOURCES:
        raise InvalidArgument(f"sources must be a list of 1 to {MAX_SOURCES} sources, got {values!r}")
    sources = [parse_source(v, checkpoints_dir) for v in values]
    names = [s.name for s in sources]
    if len(set(names)) != len(names):
        raise InvalidArgument(f"sources must be distinct, got {names}")
    return sources
