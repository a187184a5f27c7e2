"""A group's summary (``summary.json``) as a fold over its battles' latest catalog entries, one
entry at a time: :class:`SummaryFold`. ``SessionStore`` folds a whole catalog with it; a series
keeps one current as it appends (catalog_index.LiveIndex), where a battle's ``unfinished``
entry is taken back when its final line arrives."""

from __future__ import annotations

from typing import Any

from ..core.clock import utc_now
from ..core.readiness import ReadinessPolicy, session_readiness
from .catalog_lines import SESSIONS_SCHEMA_VERSION
from .records import FINAL_STATUSES


class SummaryFold:
    """The aggregates of the latest entries added (each as readers see it: ``started`` shown as
    ``unfinished``); independent of their order."""

    def __init__(self) -> None:
        self.battles = 0
        self.by_status = {s: 0 for s in (*FINAL_STATUSES, "unfinished")}
        self.results = {"p1_wins": 0, "draws": 0, "p2_wins": 0}
        self.decisions = self.degraded = self.warnings = self.peeked = self.eligible = self.eligible_decisions = 0
        self.hashes: set[str] = set()
        self.decks: set[str] = set()
        self.tags: dict[str, int] = {}

    def add(self, e: dict[str, Any]) -> None:
        self.battles += 1
        self.by_status[e["status"]] = self.by_status.get(e["status"], 0) + 1
        if e["status"] not in FINAL_STATUSES:
            return
        self.decisions += e["decisions"]
        self.degraded += int(e["degraded"])
        self.warnings += e["policy_warnings"]
        self.peeked += int(bool(e.get("omniscient_peeks")))
        self.hashes.update(h for h in e["weights_hashes"] if h)
        if e["status"] == "finished":
            self.results[("draws", "p1_wins", "p2_wins")[e["winner"]]] += 1
            self.tags[e["battle_tag"]] = self.tags.get(e["battle_tag"], 0) + 1
            if not e["degraded"] and not e.get("omniscient_peeks"):
                self.eligible += 1
                self.eligible_decisions += e["decisions"]
                self.decks.update(e["deck_ids"])

    def retract(self, status: str) -> bool:
        """Undo :meth:`add` of an entry with ``status`` that a later line of its battle replaces;
        False (nothing changed) for a final one, whose weights hashes and decks a set cannot take
        back (a non-final entry adds nothing but its count)."""
        if status in FINAL_STATUSES:
            return False
        self.battles -= 1
        self.by_status[status] -= 1
        return True

    def summary(self, group: str, policy: ReadinessPolicy | None) -> dict[str, Any]:
        counts = {"eligible_battles": self.eligible, "eligible_decisions": self.eligible_decisions,
                  "distinct_decks": len(self.decks)}
        return {
            "schema_version": SESSIONS_SCHEMA_VERSION,
            "group": group,
            "updated_at": utc_now(),
            "battles": self.battles,
            "by_status": dict(self.by_status),
            "results": dict(self.results),
            "battle_tags": dict(sorted(self.tags.items())),
            "decisions": self.decisions,
            "degraded": self.degraded,
            "policy_warnings": self.warnings,
            "omniscient_peek_battles": self.peeked,
            "weights_hashes": sorted(self.hashes),
            **counts,
            "readiness": session_readiness(counts, policy),
        }
