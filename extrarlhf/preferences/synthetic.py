"""Synthetic judges answering a pool's tasks, for tests and demos; some misbehave on purpose.

Kinds (all recorded as judge kind ``synthetic``; judges.py says how ``search`` judges):

- ``search``: the search teacher's value of each candidate plus seeded noise (judges.py);
- ``random``: A, B or tie by a seeded coin, a third each (a judge clicking at random);
- ``prefers:SPEC``: the candidate SPEC would play in the state, else a seeded coin between A and
  B (a judge steering the data toward one policy). SPEC plays with the seed the pool's
  ``A vs B`` sources gave it, so it recognises its own moves there.

Judges are named ``<prefix>-0``, ``<prefix>-1``... and stored, like any judge, only as keyed
pseudonyms; the result lists each name with its pseudonym.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

import engine

from ..core.errors import InvalidArgument
from ..core.names import check_name
from ..datasets.paths import DatasetsDir
from ..datasets.pointers import resolve
from ..runtime.actors import resolve_actor
from ..runtime.series import Progress
from .candidates import spec_action
from .judges import candidate_values, judge_pseudonym, synthetic_choice
from .points import check_count, states_at
from .pool import DEFAULT_PREFERENCES_DIR, next_task, pool_dir, read_pool, submit_preference

MAX_SYNTHETIC_JUDGES = 32
KINDS = ("search", "random", "prefers:SPEC")


def _chooser(kind: Any, pool_seed: int, noise: float, tie_margin: float, sims: int, seed: int,
             checkpoints_dir: str | os.PathLike[str], values: dict[str, tuple[float, float]]) -> Any:
    """``choose(j, task, state) -> choice`` for a judge kind; an unknown kind or a SPEC that does
    not resolve is a clear error before anything is judged."""
    if kind == "search":
        def choose(j: Any, task: dict[str, Any], state: engine.State) -> str:
            if task["task_id"] not in values:
                c = task["candidates"]
                values[task["task_id"]] = tuple(candidate_values(  # type: ignore[assignment]
                    state, [c["A"]["action_id"], c["B"]["action_id"]], sims,
                    engine.derive_seed(seed, f"values:{task['state_hash']}")))
            return synthetic_choice(values[task["task_id"]], float(noise), float(tie_margin),
                                    engine.derive_seed(seed, f"judge:{j}:{task['task_id']}"))
        return choose
    if kind == "random":
        return lambda j, task, state: ("A", "B", "tie")[
            np.random.default_rng(engine.derive_seed(seed, f"random:{j}:{task['task_id']}")).integers(3)]
    if isinstance(kind, str) and kind.startswith("prefers:"):
        actor = resolve_actor(kind.split(":", 1)[1], "prefers: judge", checkpoints_dir)

        def prefer(j: Any, task: dict[str, Any], state: engine.State) -> str:
            action = spec_action(actor, task["battle_id"], task["decision_index"], state, pool_seed)
            for side in ("A", "B"):
                if task["candidates"][side]["action_id"] == action:
                    return side
            coin = np.random.default_rng(engine.derive_seed(seed, f"prefers:{j}:{task['task_id']}")).integers(2)
            return ("A", "B")[coin]
        return prefer
    raise InvalidArgument(f"a synthetic judge kind is one of {', '.join(KINDS)} (e.g. prefers:baseline:random), "
                          f"got {kind!r}")


def judge_synthetically(pool: str, *, judges: int = 3, kind: str = "search", prefix: str = "synthetic",
                        noise: float = 0.05, tie_margin: float = 0.0, sims: int = 128, seed: int = 0,
                        per_judge: int | None = None, datasets_dir: str | os.PathLike[str] = "datasets",
                        preferences_dir: str | os.PathLike[str] = DEFAULT_PREFERENCES_DIR,
                        checkpoints_dir: str | os.PathLike[str] = "checkpoints", progress: Progress | None = None,
                        values: dict[str, tuple[float, float]] | None = None) -> dict[str, Any]:
    """``judges`` synthetic judges of ``kind`` (``<prefix>-0``...) each answer up to ``per_judge``
    tasks (default: all they have not seen) through next_task/submit_preference, like any judge.
    ``values`` caches the search values by task id across calls (a judge answering in chunks)."""
    judges = check_count(judges, "judges", MAX_SYNTHETIC_JUDGES)
    check_name(prefix, "synthetic judge prefix")
    for what, value in (("noise", noise), ("tie_margin", tie_margin)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 10:
            raise InvalidArgument(f"{what} must be a number from 0 to 10, got {value!r}")
    doc = read_pool(pool_dir(preferences_dir, pool))
    choose = _chooser(kind, doc["seed"], noise, tie_margin, sims, seed, checkpoints_dir,
                      {} if values is None else values)
    limit = len(doc["tasks"]) if per_judge is None else check_count(per_judge, "per_judge", len(doc["tasks"]))
    folder = resolve(DatasetsDir(datasets_dir), doc["dataset_id"]).path
    tasks = {t["task_id"]: t for t in doc["tasks"]}
    states = states_at(folder, sorted({(t["battle_id"], t["decision_index"], t["state_hash"]) for t in tasks.values()}))
    answered = {"A": 0, "B": 0, "tie": 0}
    total = judges * limit
    names = []
    for j in range(judges):
        name = f"{prefix}-{j}"
        who = j if prefix == "synthetic" else name  # the default prefix keeps its judges' seeds of before
        names.append({"name": name, "judge": judge_pseudonym(preferences_dir, name)})
        for n in range(limit):
            got = next_task(pool, name, "synthetic", preferences_dir=preferences_dir)
            if got["task"] is None:
                break
            task = tasks[got["task"]["task_id"]]
            choice = choose(who, task, states[(task["battle_id"], task["decision_index"])])
            submit_preference(pool, task["task_id"], name, "synthetic", choice, preferences_dir=preferences_dir)
            answered[choice] += 1
            if progress is not None:
                progress(j * limit + n + 1, total)
    return {"pool": doc["pool"], "kind": kind, "judges": judges, "names": names, "judgments": sum(answered.values()),
            "by_choice": answered, "noise": noise, "tie_margin": tie_margin, "sims": sims, "seed": seed}
