"""Shared real inputs of the training, benchmark, promotion and MCP training tests.

Session groups and datasets are played and materialized once per test process by the real
runtime (run_series, materialize_v5_dataset) and are read-only for the tests: a test that
trains or benchmarks uses its own checkpoints dir.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path
from typing import Any

from extrarlhf.datasets import materialize_v5_dataset
from extrarlhf.runtime.series import run_series

_CACHE: dict[str, Path] = {}

# Small and fast, still enough for a policy that beats baseline:random clearly.
SMALL = {"epochs": 3, "hidden": 64, "hidden2": 32, "value_hidden": 16, "lr": 3e-3}


def shared_data() -> Path:
    """A root with ``sessions/`` and ``datasets/``:

    * group ``gg``: 40 greedy-vs-greedy battles -> dataset ``gg`` (v1), V5-ready;
    * group ``mixed``: 24 battles greedy (player 1) vs random (player 2) -> dataset ``mixed``.
    """
    if "root" not in _CACHE:
        root = Path(tempfile.mkdtemp(prefix="extrarlhf-train-data-"))
        atexit.register(shutil.rmtree, root, True)
        sessions, datasets = root / "sessions", root / "datasets"
        run_series(sessions, "gg", 40, p1_model="baseline:greedy", opponent="baseline:greedy", seed=3)
        run_series(sessions, "mixed", 24, p1_model="baseline:greedy", opponent="baseline:random", seed=4)
        materialize_v5_dataset(["gg"], "gg", sessions_dir=sessions, datasets_dir=datasets, workers=1)
        materialize_v5_dataset(["mixed"], "mixed", sessions_dir=sessions, datasets_dir=datasets, workers=1)
        _CACHE["root"] = root
    return _CACHE["root"]


def datasets_dir() -> Path:
    return shared_data() / "datasets"


def copy_datasets(dest: Path) -> Path:
    shutil.copytree(datasets_dir(), dest)
    return dest


def train_small(checkpoints: Path, name: str = "bc", seed: int = 0, dataset: str = "gg",
                **overrides: Any) -> dict[str, Any]:
    """A small policy trained on the shared data into ``checkpoints``."""
    from extrarlhf.training import train_policy

    options = {**SMALL, **overrides}
    return train_policy(dataset, name, seed, datasets_dir=options.pop("datasets_dir", datasets_dir()),
                        checkpoints_dir=checkpoints, **options)
