"""What a preference dataset must hold, and which judges' judgments it keeps: the readiness
policy (``preference_ready``), the judge-quality rules that flag a judge, and the per-judge
share cap. One frozen dataclass, :class:`PreferencePolicy`; a mapping of its keys overrides
the defaults (the Dagster resource, ``policy=`` in Python).

Defaults, and why:

- ``min_judgments`` 200 non-tie judgments, ``min_states`` 100, ``min_judges`` 2 (kept judges);
- ``min_gold_accuracy`` 0.8 with ``min_gold_answered`` 10: a judge is flagged when the upper
  bound of the Wilson 95% interval of its accuracy on gold tasks lies below 0.8, once it
  answered at least 10 of them (a judge at chance, 0.5, is flagged after about 12 gold
  answers; a careful judge who gets 9 of 10 right never is);
- ``min_agreement`` 0.6 over ``min_shared`` 10 tasks: a judge "agrees with" another when they
  answered at least 10 tasks in common and gave the same answer on at least 60% of them; a
  judge with at least one such partner measured and agreeing with none of them is flagged;
- ``drop_flagged`` true: flagged judges' judgments are left out of the dataset (the logs keep
  them); ``max_judge_share`` 0.25: no judge holds more than a quarter of the kept judgments
  (when fewer than four judges are kept the cap is one over their number, so it never empties
  a dataset).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any, Mapping

from ..core.errors import InvalidArgument


@dataclass(frozen=True)
class PreferencePolicy:
    """What ``preference_ready`` asks of a preference dataset, and which judgments it keeps."""

    min_judgments: int = 200  # A or B (ties say nothing about which action is better)
    min_states: int = 100
    min_judges: int = 2
    min_gold_accuracy: float = 0.8
    min_gold_answered: int = 10
    min_agreement: float = 0.6
    min_shared: int = 10
    drop_flagged: bool = True
    max_judge_share: float = 0.25

    @classmethod
    def coerce(cls, value: "PreferencePolicy | Mapping[str, Any] | None") -> "PreferencePolicy":
        if value is None or isinstance(value, cls):
            return value or cls()
        if not isinstance(value, Mapping) or set(value) - set(asdict(cls())):
            raise InvalidArgument(f"a preference readiness policy takes {sorted(asdict(cls()))}, got {value!r}")
        types = {f.name: f.type for f in fields(cls)}
        for key, v in value.items():
            kind = types[key]
            if kind == "bool":
                if not isinstance(v, bool):
                    raise InvalidArgument(f"{key} must be true or false, got {v!r}")
            elif kind == "float":
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= 1:
                    raise InvalidArgument(f"{key} must be a number above 0 and at most 1, got {v!r}")
            elif isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InvalidArgument(f"{key} must be a positive integer, got {v!r}")
        return cls(**value)

    def selection(self) -> dict[str, Any]:
        """The keys that choose which judgments a dataset keeps (not the readiness thresholds)."""
        return {k: v for k, v in asdict(self).items() if k not in ("min_judgments", "min_states", "min_judges")}


def preference_readiness(evidence: Mapping[str, int], policy: "PreferencePolicy | Mapping[str, Any] | None" = None
                         ) -> dict[str, Any]:
    policy = PreferencePolicy.coerce(policy)
    blockers = []
    for have, need, what in ((evidence["decisive_judgments"], policy.min_judgments, "non-tie judgments"),
                             (evidence["states"], policy.min_states, "distinct states judged"),
                             (evidence["judges"], policy.min_judges, "distinct judges")):
        if have < need:
            blockers.append(f"{have} {what}, needs {need}")
    return {"ready": not blockers, "blockers": blockers, "evidence": dict(evidence), "policy": asdict(policy)}


def wilson(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson 95% interval of a proportion."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)
