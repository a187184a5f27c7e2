"""What one server process allows; ``python -m mcp_server --help`` sets them (light: no imports)."""

from __future__ import annotations

from dataclasses import dataclass

DRAIN_SECONDS = 60.0  # how long the end of input waits for running calls (see drain.py)


@dataclass(frozen=True)
class Limits:
    long_slots: int | None = None  # long calls at once (None: the machine's cores, at least 2)
    long_waiting: int | None = None  # long calls waiting for a slot (None: 2 x long_slots)
    # search rollouts one play call (start_battle, submit_action, advance_bot) may spend: about 5
    # decisions at the maximum sims (~15 s with greedy rollouts), a whole battle or more at the default
    max_rollouts_per_call: int = 20_000
    drain_seconds: float = DRAIN_SECONDS
