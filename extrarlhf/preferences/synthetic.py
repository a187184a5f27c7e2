"""Synthetic judges answering a pool's tasks (judges.py says how one judges), for tests and demos."""

from __future__ import annotations

import os
from typing import Any

import engine

from ..core.errors import InvalidArgument
from ..datasets.paths import DatasetsDir
from ..datasets.pointers import resolve
from ..runtime.series import Progress
from .judges import candidate_values, synthetic_choice
from .points import check_count, states_at
from .pool import DEFAULT_PREFERENCES_DIR, next_task, pool_dir, read_pool, submit_preference

MAX_SYNTHETIC_JUDGES = 32


def judge_synthetically(pool: str, *, judges: int = 3, noise: float = 0.05, tie_margin: float = 0.0, sims: int = 128,
                        seed: int = 0, per_judge: int | None = None, datasets_dir: str | os.PathLike[str] = "datasets",
                        preferences_dir: str | os.PathLike[str] = DEFAULT_PREFERENCES_DIR,
                        progress: Progress | None = None) -> dict[str, Any]:
    """``judges`` synthetic judges (``synthetic-0``...) each answer up to ``per_judge`` tasks
    (default: all they have not seen) through next_task/submit_preference, like any judge."""
    judges = check_count(judges, "judges", MAX_SYNTHETIC_JUDGES)
    for what, value in (("noise", noise), ("tie_margin", tie_margin)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 10:
            raise InvalidArgument(f"{what} must be a number from 0 to 10, got {value!r}")
    doc = read_pool(pool_dir(preferences_dir, pool))
    limit = len(doc["tasks"]) if per_judge is None else check_count(per_judge, "per_judge", len(doc["tasks"]))
    folder = resolve(DatasetsDir(datasets_dir), doc["dataset_id"]).path
    tasks = {t["task_id"]: t for t in doc["tasks"]}
    states = states_at(folder, sorted({(t["battle_id"], t["decision_index"], t["state_hash"]) for t in tasks.values()}))
    values: dict[str, tuple[float, float]] = {}
    answered = {"A": 0, "B": 0, "tie": 0}
    total = judges * limit
    for j in range(judges):
        name = f"synthetic-{j}"
        for n in range(limit):
            got = next_task(pool, name, "synthetic", preferences_dir=preferences_dir)
            if got["task"] is None:
                break
            task = tasks[got["task"]["task_id"]]
            if task["task_id"] not in values:
                c = task["candidates"]
                state = states[(task["battle_id"], task["decision_index"])]
                values[task["task_id"]] = tuple(candidate_values(  # type: ignore[assignment]
                    state, [c["A"]["action_id"], c["B"]["action_id"]], sims,
                    engine.derive_seed(seed, f"values:{task['state_hash']}")))
            choice = synthetic_choice(values[task["task_id"]], float(noise), float(tie_margin),
                                      engine.derive_seed(seed, f"judge:{j}:{task['task_id']}"))
            submit_preference(pool, task["task_id"], name, "synthetic", choice, preferences_dir=preferences_dir)
            answered[choice] += 1
            if progress is not None:
                progress(j * limit + n + 1, total)
    return {"pool": doc["pool"], "judges": judges, "judgments": sum(answered.values()), "by_choice": answered,
            "noise": noise, "tie_margin": tie_margin, "sims": sims, "seed": seed}
