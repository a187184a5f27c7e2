"""Resources wrapping the core: where sessions, datasets, checkpoints and preference pools live,
readiness, and the production gate.

The directories come from ``RLHF_SESSIONS_DIR`` / ``RLHF_DATASETS_DIR`` / ``RLHF_CHECKPOINTS_DIR`` /
``RLHF_PREFERENCES_DIR``
as ``dg.EnvVar`` values: Dagster reads them in the process that runs the step (a run worker,
a pod), not when the code location is imported, and the UI shows which variable a field comes
from. Unset, a directory defaults to ``sessions/`` etc. under the loading process's working
directory, made absolute when the code location loads so that every step agrees on it.
The production gate's four variables are never resource fields: the core reads them from the
environment of the process that exports (DESIGN 10.1), so no secret reaches the run config.
"""


import os
from pathlib import Path
from typing import Any

import dagster as dg

from extrarlhf.checkpoints.registry import CheckpointRegistry
from extrarlhf.production.gate import gate_status
from extrarlhf.runtime.sessions import SessionStore


class SessionsResource(dg.ConfigurableResource):
    """The sessions dir (DESIGN section 6). ``settle_seconds``: how long a group's catalog must
    be untouched before the sensor treats the group as finished; ``max_runs_per_tick``: the
    most recording runs one sensor tick requests (the rest wait for the next ticks)."""

    sessions_dir: str = "sessions"
    settle_seconds: int = 30
    max_runs_per_tick: int = 25

    @property
    def path(self) -> Path:
        return Path(os.path.abspath(self.sessions_dir))

    def store(self) -> SessionStore:
        return SessionStore(self.path)


class DatasetsResource(dg.ConfigurableResource):
    """The datasets dir (DESIGN section 9) and the readiness thresholds the checks judge by.

    ``None`` keeps the core's default threshold (ReadinessPolicy)."""

    datasets_dir: str = "datasets"
    min_v5_battles: int | None = None
    min_v5_decisions: int | None = None
    min_nemesis_lite_battles: int | None = None
    min_nemesis_lite_decks: int | None = None

    @property
    def path(self) -> Path:
        return Path(os.path.abspath(self.datasets_dir))

    def readiness_policy(self) -> dict[str, Any] | None:
        overrides = {k: getattr(self, k) for k in ("min_v5_battles", "min_v5_decisions", "min_nemesis_lite_battles",
                                                  "min_nemesis_lite_decks") if getattr(self, k) is not None}
        return overrides or None


class CheckpointsResource(dg.ConfigurableResource):
    """The checkpoint registry (DESIGN section 7) with its benchmarks and promoted pointer."""

    checkpoints_dir: str = "checkpoints"

    @property
    def path(self) -> Path:
        return Path(os.path.abspath(self.checkpoints_dir))

    def registry(self) -> CheckpointRegistry:
        return CheckpointRegistry(self.path)


class PreferencesResource(dg.ConfigurableResource):
    """The preference pools' dir, the ``preference_ready`` thresholds and judge-selection keys
    (None: the core's, extrarlhf/preferences/policy.py)."""

    preferences_dir: str = "preferences"
    min_judgments: int | None = None
    min_states: int | None = None
    min_judges: int | None = None
    min_gold_accuracy: float | None = None
    max_judge_share: float | None = None
    drop_flagged: bool | None = None
    leaderboard_games: int = 0  # battle pairs per spec pair for the leaderboard's engine order (0: none)

    @property
    def path(self) -> Path:
        return Path(self.preferences_dir).absolute()

    def policy(self) -> dict | None:
        chosen = {k: getattr(self, k) for k in ("min_judgments", "min_states", "min_judges", "min_gold_accuracy",
                                                "max_judge_share", "drop_flagged")
                  if getattr(self, k) is not None}
        return chosen or None


class ProductionResource(dg.ConfigurableResource):
    """The production plane's gate (DESIGN 10.1) and how the daily exports cut their windows.

    The gate itself is read from the environment of the process that runs the step, every
    time (``extrarlhf.production.gate``); this resource only says whether it is open, by
    variable name. ``settle_seconds``: a daily export's ``ingested_before`` is its window's
    end plus this delay (rows ingested later are invisible to it), unless the run config
    gives one. ``max_rows``: the per-stream row ceiling (None: the core's 1,000,000).
    ``min_*``: readiness thresholds of the production contours (``min_nemesis_standard_*``: the
    human-vs-human battles and decks the Nemesis Standard split of a day needs), and ``min_decision_ms`` /
    ``max_decision_ms`` the plausible human think times of the V5 export's Metronome labels
    (None: the core's defaults)."""

    settle_seconds: int = 3600
    max_rows: int | None = None
    workers: int | None = None
    min_metronome_labels: int | None = None
    min_timestamp_labels: int | None = None
    min_returnclock_rows: int | None = None
    min_returnclock_events: int | None = None
    min_nemesis_standard_battles: int | None = None
    min_nemesis_standard_decks: int | None = None
    min_decision_ms: int | None = None
    max_decision_ms: int | None = None

    def readiness_policy(self, datasets: DatasetsResource) -> dict[str, Any] | None:
        """The datasets resource's thresholds plus the production ones set here."""
        own = {k: getattr(self, k) for k in ("min_metronome_labels", "min_timestamp_labels", "min_returnclock_rows",
                                            "min_returnclock_events", "min_nemesis_standard_battles",
                                            "min_nemesis_standard_decks", "min_decision_ms", "max_decision_ms")
               if getattr(self, k) is not None}
        merged = {**(datasets.readiness_policy() or {}), **own}
        return merged or None

    def status(self) -> dict[str, Any]:
        """Which gate variables are set and valid (names only) and whether the gate is open."""
        return gate_status()

    def skip_reason(self) -> str | None:
        """None while the gate is open, else the reason a production asset skips (names only)."""
        status = self.status()
        if status["open"]:
            return None
        parts = [f"missing: {', '.join(status['missing'])}"] if status["missing"] else []
        parts += [f"invalid: {', '.join(status['invalid'])}"] if status["invalid"] else []
        return f"skipped: production disabled ({'; '.join(parts)})"


def _dir(variable: str, default: str) -> Any:
    """``dg.EnvVar(variable)`` when the variable is set (read at run time), else ``default`` made absolute."""
    return dg.EnvVar(variable) if os.environ.get(variable) else os.path.abspath(default)


def default_resources() -> dict[str, Any]:
    """Resources for the code location (see the module docstring for where the paths come from)."""
    settle = dg.EnvVar.int("RLHF_SENSOR_SETTLE_SECONDS") if os.environ.get("RLHF_SENSOR_SETTLE_SECONDS") else 30
    return {
        "sessions": SessionsResource(sessions_dir=_dir("RLHF_SESSIONS_DIR", "sessions"), settle_seconds=settle),
        "datasets": DatasetsResource(datasets_dir=_dir("RLHF_DATASETS_DIR", "datasets")),
        "checkpoints": CheckpointsResource(checkpoints_dir=_dir("RLHF_CHECKPOINTS_DIR", "checkpoints")),
        "production": ProductionResource(),
        "preferences": PreferencesResource(preferences_dir=_dir("RLHF_PREFERENCES_DIR", "preferences")),
    }
