"""``make run`` (until the Dagster pipeline exists): headless baseline series and a summary."""

from __future__ import annotations

from adapters import make_baseline

from ..core.progress import ProgressLine
from .duel import paired_series

MATCHUPS = (("greedy", "random"), ("greedy", "greedy"), ("random", "random"))


def run_demo(seeds: int = 100, base_seed: int = 0) -> list[dict]:
    """Play every matchup over ``seeds`` paired seeds (2 battles each, sides swapped)."""
    rows = []
    for a, b in MATCHUPS:
        stats = paired_series(lambda s, a=a: make_baseline(a, s), lambda s, b=b: make_baseline(b, s),
                              range(base_seed, base_seed + seeds), progress=ProgressLine(f"{a} vs {b}"))
        rows.append(stats.as_dict())
    return rows


def format_summary(rows: list[dict]) -> str:
    header = f"{'matchup':<36}{'battles':>8}{'W':>6}{'D':>5}{'L':>6}{'win rate':>10}{'turns':>8}{'decisions':>11}{'battles/s':>11}"
    lines = [header, "-" * len(header)]
    for r in rows:
        lines.append(f"{r['a'] + ' vs ' + r['b']:<36}{r['battles']:>8}{r['wins']:>6}{r['draws']:>5}{r['losses']:>6}"
                     f"{r['win_rate']:>10.1%}{r['mean_turns']:>8.1f}{r['mean_decisions']:>11.1f}{r['battles_per_s']:>11.1f}")
    lines.append("W/D/L and win rate are counted for the first policy; turns and decisions are means per battle.")
    return "\n".join(lines)
