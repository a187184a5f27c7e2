"""Readiness per training contour (DESIGN section 9), judged from counts of eligible data.

The thresholds are one policy object, :class:`ReadinessPolicy`, that callers may override
(``ReadinessPolicy(min_v5_battles=5)`` or ``ReadinessPolicy.coerce({"min_v5_battles": 5})``).
Headless and local session data can make the V5 policy and Nemesis Lite contours ready;
Nemesis Standard, Metronome and TimeStamp need production labels that session groups and
datasets built from them never carry, whatever the thresholds say.

Two entry points:

* :func:`session_readiness` - the ``readiness`` block of a group's ``summary.json`` (its
  shape is pinned by ``schemas/summary.schema.json``);
* :func:`contour_readiness` - the full report of ``dataset_readiness`` (every contour with
  its blockers, the evidence it was judged from, and ``contours`` keyed by name).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Mapping

from .errors import InvalidArgument

# The thresholds a session summary reports (schemas/summary.schema.json pins exactly these).
SESSION_POLICY_FIELDS = ("min_v5_battles", "min_v5_decisions", "min_nemesis_lite_battles", "min_nemesis_lite_decks")
BOOLEAN_FIELDS = ("metronome_arena_labels",)  # the policy's switches; every other field is a count

STANDARD_SOURCE_BLOCKER = ("Nemesis Standard needs human-vs-human production rows; session groups (headless, "
                           "human-bot, model-model) train Lite only")
METRONOME_SOURCE_BLOCKER = ("needs observed human decision times from production; headless timings and synthetic "
                            "latency are audit data, never labels")
TIMESTAMP_SOURCE_BLOCKER = "needs observed battle durations from production; session data has none"


@dataclass(frozen=True)
class ReadinessPolicy:
    """Minimums for a contour to be training-ready. Override per call when needed.

    - ``min_v5_battles`` / ``min_v5_decisions``: verified, finished, non-degraded battles and
      their decisions for V5 policy training (behaviour cloning).
    - ``min_nemesis_lite_battles`` / ``min_nemesis_lite_decks``: eligible battles and distinct
      decks for Nemesis Lite (deck-grouped splits need several decks).
    - ``min_nemesis_standard_battles`` / ``min_nemesis_standard_decks``: human-vs-human
      production battles and their distinct decks for Nemesis Standard.
    - ``min_metronome_labels``: observed human decision times (production) for Metronome.
    - ``min_timestamp_labels``: observed battle durations (production) for TimeStamp.
    - ``min_returnclock_rows`` / ``min_returnclock_events``: organic (untreated) ReturnClock
      rows and, among them, observed returns (event 1) for the ReturnClock contour.
    - ``min_decision_ms`` / ``max_decision_ms``: the plausible human think times (inclusive;
      default 50 ms to 15 min). A production export keeps a ``decision_ms`` outside them (a
      clock skew, a client that sent 0 or -5, a tab left open for a day, an overflowed
      2**31-1) in ``metronome_excluded`` for audit, never as a Metronome label, so it never
      counts toward ``min_metronome_labels``. Applied when the export is written (the export
      refuses ``min_decision_ms > max_decision_ms``); readiness read later from the dataset
      counts the labels as exported.
    - ``metronome_arena_labels`` (default False): also count the observed think times of people
      at the browser arena (provenance ``arena``: observed, not production) as Metronome
      labels. Off, Metronome counts production labels only and a session group of arena
      battles stays blocked as not production data.

    Thresholds only ever add blockers: a source that lacks a contour's labels (headless data
    for Metronome/TimeStamp, anything but human-vs-human production rows for Standard) is
    blocked even with every threshold at 0.
    """

    min_v5_battles: int = 20
    min_v5_decisions: int = 1000
    min_nemesis_lite_battles: int = 20
    min_nemesis_lite_decks: int = 4
    min_nemesis_standard_battles: int = 200
    min_nemesis_standard_decks: int = 20
    min_metronome_labels: int = 1000
    min_timestamp_labels: int = 500
    min_returnclock_rows: int = 200
    min_returnclock_events: int = 50
    min_decision_ms: int = 50
    max_decision_ms: int = 15 * 60 * 1000
    metronome_arena_labels: bool = False

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in BOOLEAN_FIELDS:  # true/false (0 and 1 read as false and true)
                if value not in (0, 1) or not isinstance(value, int):
                    raise InvalidArgument(f"readiness policy {f.name} must be true or false, got {value!r}")
                object.__setattr__(self, f.name, bool(value))
            elif isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidArgument(f"readiness policy {f.name} must be an integer >= 0, got {value!r}")

    def as_dict(self, names: tuple[str, ...] | None = None) -> dict[str, int | bool]:
        out = asdict(self)
        return out if names is None else {k: out[k] for k in names}

    @classmethod
    def coerce(cls, value: "ReadinessPolicy | Mapping[str, Any] | None") -> "ReadinessPolicy":
        """A policy from None (defaults), a policy, or a mapping of overrides (unknown keys refused)."""
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        if not isinstance(value, Mapping):
            raise InvalidArgument(f"a readiness policy is an object of thresholds, got {type(value).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(value) - known)
        if unknown:
            raise InvalidArgument(f"unknown readiness policy field(s) {unknown}; known: {sorted(known)}")
        return cls(**dict(value))


def session_readiness(counts: dict[str, Any], policy: ReadinessPolicy | None = None) -> dict[str, Any]:
    """Readiness of session data from its counts: ``eligible_battles`` (finished, not degraded),
    ``eligible_decisions`` and ``distinct_decks`` (of the eligible battles)."""
    policy = policy or ReadinessPolicy()
    battles, decisions = counts["eligible_battles"], counts["eligible_decisions"]
    v5_blockers = _v5_blockers(battles, decisions, policy)
    lite_blockers = _lite_blockers(battles, counts["distinct_decks"], policy)
    v5_ready = not v5_blockers
    return {
        "policy": policy.as_dict(SESSION_POLICY_FIELDS),
        "v5_policy_training_ready": v5_ready,
        "v5_policy_blockers": v5_blockers,
        "training_ready": v5_ready,
        "training_ready_scope": "v5_policy_only",
        "nemesis_lite_ready": not lite_blockers,
        "nemesis_lite_blockers": lite_blockers,
        "training_ready_standard": False,
        "standard_readiness_blockers": [STANDARD_SOURCE_BLOCKER],
        "metronome_ready": False,
        "metronome_blockers": [METRONOME_SOURCE_BLOCKER],
        "timestamp_ready": False,
        "timestamp_blockers": [TIMESTAMP_SOURCE_BLOCKER],
    }


def _v5_blockers(battles: int, decisions: int, policy: ReadinessPolicy) -> list[str]:
    out = []
    if battles < policy.min_v5_battles:
        out.append(f"{battles} eligible (finished, non-degraded) battles; need {policy.min_v5_battles}")
    if decisions < policy.min_v5_decisions:
        out.append(f"{decisions} eligible decisions; need {policy.min_v5_decisions}")
    return out


def _lite_blockers(battles: int, decks: int, policy: ReadinessPolicy) -> list[str]:
    out = []
    if battles < policy.min_nemesis_lite_battles:
        out.append(f"{battles} eligible battles; need {policy.min_nemesis_lite_battles}")
    if decks < policy.min_nemesis_lite_decks:
        out.append(f"{decks} distinct decks; deck-grouped splits need {policy.min_nemesis_lite_decks}")
    return out


_SOURCE_WORDS = {"session_group": "a session group of headless or local battles",
                 "dataset": "a dataset built from session groups"}


def contour_readiness(evidence: dict[str, Any], policy: "ReadinessPolicy | Mapping[str, Any] | None" = None
                      ) -> dict[str, Any]:
    """Every training contour with its blockers, from the evidence of one source.

    ``evidence`` (missing keys count as 0/empty/false):

    - ``source_kind``: ``session_group``, ``dataset`` (built from session groups) or
      ``production`` (rows exported from the production database);
    - ``eligible_battles`` / ``eligible_decisions`` / ``distinct_decks``: verified, finished,
      non-degraded battles, their decisions and distinct deck ids;
    - ``human_vs_human_battles`` / ``human_vs_human_decks``: production battles with two
      human players (the only rows Nemesis Standard may use) and their distinct decks;
    - ``metronome_labels`` / ``timestamp_labels``: observed production labels;
    - ``arena_metronome_labels``: observed think times of people at the browser arena (counted
      toward Metronome only under ``policy.metronome_arena_labels``);
    - ``integrity_failures``: reasons the source is not trustworthy (failed hashes, failed
      validation, battles that do not replay); each blocks every contour.
    """
    policy = ReadinessPolicy.coerce(policy)
    kind = evidence.get("source_kind", "session_group")
    production = kind == "production"
    integrity = [f"integrity: {r}" for r in evidence.get("integrity_failures", [])]
    battles, decisions = evidence.get("eligible_battles", 0), evidence.get("eligible_decisions", 0)

    v5 = integrity + _v5_blockers(battles, decisions, policy)
    lite = integrity + _lite_blockers(battles, evidence.get("distinct_decks", 0), policy)

    standard = list(integrity)
    hvh, hvh_decks = evidence.get("human_vs_human_battles", 0), evidence.get("human_vs_human_decks", 0)
    if not production:
        standard.append(STANDARD_SOURCE_BLOCKER)
    if hvh < max(1, policy.min_nemesis_standard_battles):
        standard.append(f"{hvh} human-vs-human battles; need {max(1, policy.min_nemesis_standard_battles)} "
                        f"(human-bot and model-model rows never enter Standard)")
    if hvh_decks < policy.min_nemesis_standard_decks:
        standard.append(f"{hvh_decks} distinct decks in human-vs-human battles; need "
                        f"{policy.min_nemesis_standard_decks}")

    not_production = f"not production data (source: {_SOURCE_WORDS.get(kind, kind)})"
    metronome = list(integrity)
    labels = evidence.get("metronome_labels", 0)
    arena = evidence.get("arena_metronome_labels", 0)
    if policy.metronome_arena_labels:
        labels += arena
    elif not production:
        metronome.append(f"{not_production}: Metronome {METRONOME_SOURCE_BLOCKER}"
                         + (f" ({arena} observed arena think times are not counted: the readiness policy's "
                            f"metronome_arena_labels is off)" if arena else ""))
    if labels < max(1, policy.min_metronome_labels):
        counted = "production and arena" if policy.metronome_arena_labels else "production"
        metronome.append(f"{labels} observed human decision-time labels ({counted}); need "
                         f"{max(1, policy.min_metronome_labels)}")

    timestamp = list(integrity)
    durations = evidence.get("timestamp_labels", 0)
    if not production:
        timestamp.append(f"{not_production}: TimeStamp {TIMESTAMP_SOURCE_BLOCKER}")
    if durations < max(1, policy.min_timestamp_labels):
        timestamp.append(f"{durations} observed battle-duration labels; need {max(1, policy.min_timestamp_labels)}")

    contours = {
        "v5_policy": {"ready": not v5, "blockers": v5},
        "nemesis_lite": {"ready": not lite, "blockers": lite},
        "nemesis_standard": {"ready": not standard, "blockers": standard},
        "metronome": {"ready": not metronome, "blockers": metronome},
        "timestamp": {"ready": not timestamp, "blockers": timestamp},
    }
    return {
        "policy": policy.as_dict(),
        "evidence": dict(evidence),
        "v5_policy_training_ready": not v5,
        "v5_policy_blockers": v5,
        "training_ready": not v5,
        "training_ready_scope": "v5_policy_only",
        "nemesis_lite_ready": not lite,
        "nemesis_lite_blockers": lite,
        "training_ready_standard": not standard,
        "standard_readiness_blockers": standard,
        "metronome_ready": not metronome,
        "metronome_blockers": metronome,
        "timestamp_ready": not timestamp,
        "timestamp_blockers": timestamp,
        "contours": contours,
    }


def returnclock_readiness(evidence: Mapping[str, Any], policy: "ReadinessPolicy | Mapping[str, Any] | None" = None
                          ) -> dict[str, Any]:
    """Readiness of the ReturnClock contour (DESIGN section 10) from a ReturnClock export's
    evidence: ``source_kind`` (must be ``production``), ``organic_rows`` (untreated rows),
    ``organic_events`` (their returns), ``complete`` (no row ceiling hit) and
    ``integrity_failures``. An incomplete export is never ready."""
    policy = ReadinessPolicy.coerce(policy)
    blockers = [f"integrity: {r}" for r in evidence.get("integrity_failures", [])]
    if evidence.get("source_kind") != "production":
        blockers.append("not production data: ReturnClock needs observed player sessions from production")
    if not evidence.get("complete", False):
        blockers.append("incomplete export (the row ceiling was hit): never training-ready; export a shorter window")
    rows, events = evidence.get("organic_rows", 0), evidence.get("organic_events", 0)
    if rows < max(1, policy.min_returnclock_rows):
        blockers.append(f"{rows} organic (untreated) return rows; need {max(1, policy.min_returnclock_rows)}")
    if events < max(1, policy.min_returnclock_events):
        blockers.append(f"{events} observed returns (event 1) among organic rows; need "
                        f"{max(1, policy.min_returnclock_events)}")
    return {"policy": policy.as_dict(), "evidence": dict(evidence), "returnclock_ready": not blockers,
            "returnclock_blockers": blockers, "contours": {"returnclock": {"ready": not blockers,
                                                                           "blockers": blockers}}}
