"""Readiness per training contour (DESIGN section 9), judged from battle counts.

The thresholds are a policy object callers may override. Headless and local session data
can make the V5 policy and Nemesis Lite contours ready; Nemesis Standard, Metronome and
TimeStamp need production labels that session groups never carry.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class ReadinessPolicy:
    """Minimums for a contour to be training-ready. Override per call when needed."""

    min_v5_battles: int = 20
    min_v5_decisions: int = 1000
    min_nemesis_lite_battles: int = 20
    min_nemesis_lite_decks: int = 4

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def session_readiness(counts: dict[str, Any], policy: ReadinessPolicy | None = None) -> dict[str, Any]:
    """Readiness of session data from its counts: ``eligible_battles`` (finished, not degraded),
    ``eligible_decisions`` and ``distinct_decks`` (of the eligible battles)."""
    policy = policy or ReadinessPolicy()
    battles, decisions = counts["eligible_battles"], counts["eligible_decisions"]
    v5_blockers = []
    if battles < policy.min_v5_battles:
        v5_blockers.append(f"{battles} eligible (finished, non-degraded) battles; need {policy.min_v5_battles}")
    if decisions < policy.min_v5_decisions:
        v5_blockers.append(f"{decisions} eligible decisions; need {policy.min_v5_decisions}")
    lite_blockers = []
    if battles < policy.min_nemesis_lite_battles:
        lite_blockers.append(f"{battles} eligible battles; need {policy.min_nemesis_lite_battles}")
    if counts["distinct_decks"] < policy.min_nemesis_lite_decks:
        lite_blockers.append(f"{counts['distinct_decks']} distinct decks; deck-grouped splits need "
                             f"{policy.min_nemesis_lite_decks}")
    v5_ready = not v5_blockers
    return {
        "policy": policy.as_dict(),
        "v5_policy_training_ready": v5_ready,
        "v5_policy_blockers": v5_blockers,
        "training_ready": v5_ready,
        "training_ready_scope": "v5_policy_only",
        "nemesis_lite_ready": not lite_blockers,
        "nemesis_lite_blockers": lite_blockers,
        "training_ready_standard": False,
        "standard_readiness_blockers": ["Nemesis Standard needs human-vs-human production rows; "
                                        "session groups (headless, human-bot, model-model) train Lite only"],
        "metronome_ready": False,
        "metronome_blockers": ["needs observed human decision times from production; headless timings "
                               "and synthetic latency are audit data, never labels"],
        "timestamp_ready": False,
        "timestamp_blockers": ["needs observed battle durations from production; session data has none"],
    }
