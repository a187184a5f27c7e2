"""What a benchmark must show before its candidate may be promoted (DESIGN section 11).

The promotion policy
--------------------
A benchmark counts for promotion only when it passed *and* its settings meet the
:class:`PromotionPolicy`: the SPRT's ``elo0 >= min_elo0`` (0: H1 must mean "stronger than the
incumbent", never "at most 400 Elo weaker"), ``alpha <= max_alpha`` and ``beta <= max_beta``
(0.05 each), and at least ``min_pairs`` pairs played (50: 100 battles over 50 deals, both
seats each; below that the GSPRT's regularized empty cells and Wald's approximate bounds
decide more than the games do, and the Elo interval is wider than about +-70). The defaults
apply everywhere; only a core caller can change them, by passing ``policy=PromotionPolicy(...)``
to :func:`promote_checkpoint` (and to ``benchmark_models`` / ``run_pipeline``). No MCP tool
argument and no CLI flag reaches it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any

from ..core.errors import InvalidArgument

MAX_POLICY_PAIRS = 100_000


@dataclass(frozen=True)
class PromotionPolicy:
    """What a benchmark's settings must satisfy to count for promotion (module docstring).

    - ``min_elo0``: lowest SPRT ``elo0`` (H0: the candidate is at most elo0 Elo stronger).
      With ``elo0 >= 0`` an accepted H1 means the candidate is stronger than the incumbent;
      with ``elo0 = -400`` it would "pass" while losing 5-29.
    - ``max_alpha`` / ``max_beta``: highest SPRT false-positive / false-negative rates.
    - ``min_pairs``: fewest pairs (each deal played from both seats) counted. The benchmark
      never stops on H1 before this many pairs, so a decided SPRT is eligible when
      ``n_pairs >= min_pairs``.

    Only core callers override it (``policy=PromotionPolicy(min_pairs=100)``); facades never
    pass one through from their clients.
    """

    min_elo0: float = 0.0
    max_alpha: float = 0.05
    max_beta: float = 0.05
    min_pairs: int = 50

    def __post_init__(self) -> None:
        def number(value: Any) -> bool:
            return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)

        if not number(self.min_elo0) or not -1000.0 <= self.min_elo0 <= 1000.0:
            raise InvalidArgument(f"promotion policy min_elo0 must be a number in [-1000, 1000], got "
                                  f"{self.min_elo0!r}")
        for name in ("max_alpha", "max_beta"):
            value = getattr(self, name)
            if not number(value) or not 0.0 < value < 0.5:
                raise InvalidArgument(f"promotion policy {name} must be a number in (0, 0.5), got {value!r}")
        if isinstance(self.min_pairs, bool) or not isinstance(self.min_pairs, int) or \
                not 1 <= self.min_pairs <= MAX_POLICY_PAIRS:
            raise InvalidArgument(f"promotion policy min_pairs must be an integer in 1..{MAX_POLICY_PAIRS}, got "
                                  f"{self.min_pairs!r}")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def coerce(cls, value: "PromotionPolicy | None") -> "PromotionPolicy":
        """The policy itself, or the defaults for None. Anything else (a mapping from a client,
        say) is refused: the policy is changed in code, with a ``PromotionPolicy`` object."""
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        raise InvalidArgument(f"a promotion policy is a PromotionPolicy object ({', '.join(f.name for f in fields(cls))}"
                              f"), got {type(value).__name__}")

    def settings_blockers(self, *, elo0: float, elo1: float, alpha: float, beta: float,
                          pairs: int) -> list[dict[str, str]]:
        """Each way these SPRT settings and pair count fall short of the policy, as
        ``{"check": "promotion_policy", "message"}``."""
        out = []
        if elo0 < self.min_elo0:
            out.append(f"elo0={elo0:g} is below the policy's min_elo0={self.min_elo0:g}: accepting H1 (elo >= "
                       f"{elo1:g}) {'would not show the candidate is stronger than the incumbent' if elo1 <= 0 else 'can happen for a candidate weaker than the incumbent'}"
                       f"; benchmark again with elo0 >= {self.min_elo0:g}")
        if alpha > self.max_alpha:
            out.append(f"alpha={alpha:g} is above the policy's max_alpha={self.max_alpha:g}")
        if beta > self.max_beta:
            out.append(f"beta={beta:g} is above the policy's max_beta={self.max_beta:g}")
        if pairs < self.min_pairs:
            out.append(f"{pairs} pair(s) counted; promotion needs at least min_pairs={self.min_pairs} (raise n_pairs)")
        return [{"check": "promotion_policy", "message": m} for m in out]


def benchmark_blockers(report: dict[str, Any], policy: PromotionPolicy | None = None) -> list[dict[str, str]]:
    """Why a benchmark report does not count for promotion under ``policy`` (empty when it
    does): ``benchmark_valid``, ``benchmark_passed`` (the SPRT did not accept H1) and
    ``promotion_policy`` reasons, in that order. Judged from the report's own settings and
    counts, so a report written by an older version (or under a looser policy) is re-judged."""
    policy = PromotionPolicy.coerce(policy)
    reasons = []
    if not report["valid"]:
        reasons.append({"check": "benchmark_valid",
                        "message": "the benchmark is invalid: " + "; ".join(report["invalid_reasons"])})
    sprt = report["match"]["sprt"]
    if sprt["decision"] != "H1":
        verdict = report.get("verdict")
        reasons.append({"check": "benchmark_passed", "message": f"the SPRT did not accept H1 (decision "
                        f"{sprt['decision']}, LLR {sprt['llr']:.3f}, bounds [{sprt['lower']:.3f}, "
                        f"{sprt['upper']:.3f}])" + (f": {verdict}" if verdict else "")})
    reasons += policy.settings_blockers(elo0=sprt["elo0"], elo1=sprt["elo1"], alpha=sprt["alpha"], beta=sprt["beta"],
                                        pairs=report["match"]["pairs"])
    return reasons

