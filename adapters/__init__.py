"""Policies that play ExtraArena. Imports engine only."""

from .baselines import BASELINES, GreedyPolicy, RandomPolicy, evaluate


def make_baseline(name: str, seed: int = 0):
    """A baseline policy by name (``random`` or ``greedy``); unknown names list what exists."""
    policies = {"random": RandomPolicy, "greedy": GreedyPolicy}
    if name not in policies:
        raise ValueError(f"unknown baseline {name!r}; available: {', '.join(BASELINES)}")
    return policies[name](seed)


__all__ = ["BASELINES", "GreedyPolicy", "RandomPolicy", "evaluate", "make_baseline"]
