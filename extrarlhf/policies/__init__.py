"""Which policy plays: benchmarks, promotion, the policy ladder, the L0 pipeline and the
improvement loop (DESIGN sections 11 and 14). Imports ``engine``, ``adapters`` and the
``extrarlhf`` concerns below it (core, checkpoints, runtime, datasets, training); nothing below
imports it.

- benchmarking.py      candidate vs incumbent on paired seeds: W/D/L, Elo with an interval, SPRT
- promotion_policy.py  what a benchmark must show before a promotion (``PromotionPolicy``)
- promotion.py         ``promote_checkpoint`` / ``rollback_promotion`` (the records live in
                       ``extrarlhf.checkpoints.promoted``)
- ladder.py            the Elo of every promotion against its predecessor and the baselines
- pipeline.py          collect -> materialize -> readiness -> train -> benchmark -> promote
- improve.py           expert iteration with the search teacher (the improvement loop)
- champion.py          the network shipped with the project: ``ensure_champion`` registers it as
                       ``champion``, ``publish_champion`` replaces it (``extrarlhf/champion/``)
- commands.py          ``python -m extrarlhf benchmark | promote | pipeline | improve | champion | ladder``
"""

from typing import Any


def __getattr__(name: str) -> Any:
    """``extrarlhf.policies.policy_ladder`` (the documented entry point), loaded when used."""
    if name == "policy_ladder":
        from .ladder import policy_ladder

        return policy_ladder
    raise AttributeError(f"module 'extrarlhf.policies' has no attribute {name!r}")
