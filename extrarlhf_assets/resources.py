"""Resources wrapping the core: where sessions, datasets and checkpoints live, and readiness.

Paths are resolved to absolute paths when used, so runs, sensors and the UI agree whatever
the working directory of the process that loads the code location.
"""


import os
from pathlib import Path
from typing import Any

import dagster as dg

from extrarlhf.checkpoints import CheckpointRegistry
from extrarlhf.runtime.sessions import SessionStore


class SessionsResource(dg.ConfigurableResource):
    """The sessions dir (DESIGN section 6). ``settle_seconds``: how long a group's catalog must
    be untouched before the sensor treats the group as finished."""

    sessions_dir: str = "sessions"
    settle_seconds: float = 30.0

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


def default_resources() -> dict[str, Any]:
    """Resources for the code location: dirs from RLHF_* environment variables, else ./sessions etc."""
    env = os.environ
    return {
        "sessions": SessionsResource(sessions_dir=env.get("RLHF_SESSIONS_DIR", "sessions"),
                                     settle_seconds=float(env.get("RLHF_SENSOR_SETTLE_SECONDS", "30"))),
        "datasets": DatasetsResource(datasets_dir=env.get("RLHF_DATASETS_DIR", "datasets")),
        "checkpoints": CheckpointsResource(checkpoints_dir=env.get("RLHF_CHECKPOINTS_DIR", "checkpoints")),
    }
