"""Headless duels between two policies, and paired-seed series with sides swapped.

A duel is the lightest way to play: no traces, just the result. Pairing plays each seed
twice with the policies in swapped seats, so both see the same decks and the same
starting seat, which removes most of the luck from a comparison.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import engine
from adapters import Policy
from engine import derive_seed

PolicyFactory = Callable[[int], Policy]  # seed -> policy


@dataclass(frozen=True)
class DuelResult:
    seed: int
    winner: int  # 0 draw, 1, 2
    end_reason: str
    turns: int
    decisions: int


def play_duel(seed: int, p1: Policy, p2: Policy, starting_player: int | None = None) -> DuelResult:
    """Play one battle to the end between two policies."""
    state = engine.new_battle(seed, starting_player=starting_player)
    policies = (p1, p2)
    decisions = 0
    while not state.is_terminal:
        state.apply(policies[state.active].act(state))
        decisions += 1
    return DuelResult(seed, state.winner, state.end_reason, state.turn, decisions)


@dataclass
class PairedStats:
    """Results of policy A against policy B, counted from A's side."""

    a: str
    b: str
    wins: int = 0
    draws: int = 0
    losses: int = 0
    turns: int = 0
    decisions: int = 0
    seconds: float = 0.0
    results: list[DuelResult] = field(default_factory=list)

    @property
    def battles(self) -> int:
        return self.wins + self.draws + self.losses

    @property
    def score(self) -> float:
        """(wins + draws/2) / battles."""
        return (self.wins + 0.5 * self.draws) / self.battles if self.battles else 0.0

    @property
    def win_rate(self) -> float:
        return self.wins / self.battles if self.battles else 0.0

    def as_dict(self) -> dict:
        n = self.battles or 1
        return {"a": self.a, "b": self.b, "battles": self.battles, "wins": self.wins, "draws": self.draws,
                "losses": self.losses, "win_rate": round(self.win_rate, 4), "score": round(self.score, 4),
                "mean_turns": round(self.turns / n, 2), "mean_decisions": round(self.decisions / n, 2),
                "battles_per_s": round(self.battles / self.seconds, 1) if self.seconds else None}


def paired_series(make_a: PolicyFactory, make_b: PolicyFactory, seeds: range | list[int],
                  progress: Callable[[int, int], None] | None = None) -> PairedStats:
    """Each seed twice: A as player 1 then A as player 2. Policy seeds derive from the battle seed."""
    seeds = list(seeds)
    stats: PairedStats | None = None
    total = 2 * len(seeds)
    start = time.perf_counter()
    for i, seed in enumerate(seeds):
        for a_seat in (1, 2):
            pa = make_a(derive_seed(seed, f"policy-p{a_seat}"))
            pb = make_b(derive_seed(seed, f"policy-p{3 - a_seat}"))
            if stats is None:
                stats = PairedStats(pa.spec, pb.spec)
            result = play_duel(seed, *((pa, pb) if a_seat == 1 else (pb, pa)))
            stats.results.append(result)
            stats.turns += result.turns
            stats.decisions += result.decisions
            if result.winner == 0:
                stats.draws += 1
            elif result.winner == a_seat:
                stats.wins += 1
            else:
                stats.losses += 1
            if progress is not None:
                progress(2 * i + a_seat, total)
    if stats is None:
        raise ValueError("paired_series needs at least one seed")
    stats.seconds = time.perf_counter() - start
    return stats
