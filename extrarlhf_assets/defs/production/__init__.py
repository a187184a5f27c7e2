"""Production: daily exports of the game backend's database and their datasets (DESIGN 12.1),
among them the Nemesis Lite and Standard splits of each day's V5 export (DESIGN 12.3: the only
place a Standard split can be ready, since it needs human-vs-human production rows).

- assets.py: ``production_v5_export``, ``returnclock_export`` (pool ``production_db``),
  ``timestamp_dataset``, ``metronome_dataset``, ``returnclock_training_split``,
  ``production_nemesis_lite_split``, ``production_nemesis_standard_split``.
- checks.py: ``replay_verified``, ``no_raw_identifiers`` (every asset that writes files),
  ``organic_only``; ``export_complete``, ``latest_refresh`` and the Nemesis readiness checks are
  evaluated by their assets' own steps.

The domain is part of the code location only when production is opted in: the process that
loads it (webserver, daemon, code server, run worker) has ``RLHF_ENABLE_PRODUCTION_DATASETS``
set. Without it a deployment has no production database, so 334 days of partitions that can
never be built would only show "Missing" forever. With it set and another gate variable missing
or invalid, the assets are there and skip with the missing names (assets.py)."""

import os
from collections.abc import Mapping
from typing import Any

from extrarlhf.production.gate import ENABLE_VAR


def opted_in(environ: Mapping[str, str] | None = None) -> bool:
    """Whether production is opted in: ``RLHF_ENABLE_PRODUCTION_DATASETS`` is set (non-empty;
    the gate itself then says whether its value, exactly ``1``, and the other variables open it)."""
    return bool((os.environ if environ is None else environ).get(ENABLE_VAR))


def production_definitions(environ: Mapping[str, str] | None = None) -> dict[str, list[Any]]:
    """The production domain's ``assets``, ``asset_checks`` and ``jobs`` (``production_daily``)
    for ``dg.Definitions``; empty lists unless production is opted in (:func:`opted_in`)."""
    if not opted_in(environ):
        return {"assets": [], "asset_checks": [], "jobs": []}
    import dagster as dg

    from ..training.jobs import production_daily
    from . import assets, checks

    return {"assets": list(dg.load_assets_from_modules([assets])),
            "asset_checks": list(dg.load_asset_checks_from_modules([checks])), "jobs": [production_daily]}


def with_production(defs: Any) -> Any:
    """``defs`` (a ``dg.Definitions``) as the code location is when production is opted in: with
    the production domain added, unless it is there already. For tests and tools that need the
    production job in a process without ``RLHF_ENABLE_PRODUCTION_DATASETS``."""
    import dagster as dg

    if any(job.name == "production_daily" for job in defs.jobs or []):
        return defs
    return dg.Definitions.merge(defs, dg.Definitions(**production_definitions({ENABLE_VAR: "1"})))
