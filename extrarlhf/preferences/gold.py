"""Gold tasks: judgment tasks whose better move the engine proves, never estimates.

The rule proved (``wins_at_once``): applied to the replayed state, one candidate ends the
battle at once with the acting player the winner, and the other does not and leaves the
battle going with no move that wins at once (the turn passes, or the win is thrown away): the
first is a certain win now, the second gives it up. (A move that does not win at once but
keeps the win for later in the same turn proves nothing: both may be certain wins.) The winning
candidate is the recorded action when it wins, else the first winning one in a seeded order;
the other is the recorded action when it does not win (a missed win), else a seeded
non-winning legal action. Points already used by the pool's other tasks are not used again
(a judge never sees the same board and moves twice).

A gold task looks like any other to a judge: it sits in ``pool.json`` among the tasks, with a
task id made the same way and candidates whose origins say nothing (``gold``), and what a
judge is shown (pool.task_view) never holds its source. Which candidate is better, and why,
is kept in ``gold.json`` beside the pool: read by the judge-quality report and the dataset
(quality.py, dataset.py), never by what serves or lists tasks to a judge.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import orjson

import engine

from ..core.fileio import read_json_document
from .points import DecisionPoint, first_points, rank, states_at

GOLD = "gold"  # the source name of a gold task in pool.json (never shown to a judge)
GOLD_FILE = "gold.json"
GOLD_SCHEMA_VERSION = 1
RULE = "wins_at_once"
_SCAN = 60  # points looked at per gold task wanted: a winning move is available at few decisions


def wins_at_once(state: engine.State, action: int, player: int) -> bool:
    """Whether ``action`` ends the battle at once with ``player`` the winner."""
    after = state.clone()
    after.apply(int(action))
    return after.is_terminal and after.winner == player


def _forfeits(state: engine.State, action: int, player: int) -> bool:
    """After ``action`` the battle goes on and ``player`` has no move that wins at once."""
    after = state.clone()
    after.apply(int(action))
    if after.is_terminal:
        return False
    return after.to_move != player or not any(wins_at_once(after, a, player) for a in after.legal_actions())


def prove(point: DecisionPoint, state: engine.State, seed: int) -> tuple[int, int] | None:
    """``(better, worse)`` actions of a point under the ``wins_at_once`` rule, or None."""
    legal = list(point.legal)
    order = sorted(legal, key=lambda a: rank(seed, point.battle_id, point.decision_index, f"gold:{a}"))
    winning = [a for a in order if wins_at_once(state, a, point.player)]
    if not winning:
        return None
    losing = [a for a in order if a not in winning and _forfeits(state, a, point.player)]
    if not losing:
        return None
    better = point.chosen if point.chosen in winning else winning[0]
    worse = point.chosen if point.chosen in losing else losing[0]
    return better, worse


def gold_tasks(folder: Path, seed: int, wanted: int, used: set[tuple[str, int]],
               make_task: Callable[..., dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """Up to ``wanted`` gold tasks from the points of ``folder`` (a V5 dataset) not in ``used``,
    in the seeded order, and their answers by task id. ``make_task(point, state, first, second)``
    builds a task like the pool's others (``first``/``second``: ``(action_id, origin)``)."""
    if wanted <= 0:
        return [], {}
    points = [p for p in first_points(folder / "decisions.parquet", seed, wanted * _SCAN) if p.key not in used]
    states = states_at(folder, [(p.battle_id, p.decision_index, p.state_hash) for p in points])
    tasks, answers = [], {}
    for point in points:
        if len(tasks) == wanted:
            break
        proved = prove(point, states[point.key], seed)
        if proved is None:
            continue
        swap = rank(seed, point.battle_id, point.decision_index, "swap:gold") % 2 == 1
        first, second = ((proved[1], GOLD), (proved[0], GOLD)) if swap else ((proved[0], GOLD), (proved[1], GOLD))
        task = make_task(point, states[point.key], first, second)
        tasks.append(task)
        answers[task["task_id"]] = {"better": "B" if swap else "A", "rule": RULE}
    return tasks, answers


def gold_document(pool: str, answers: dict[str, dict[str, Any]]) -> bytes:
    return orjson.dumps({"schema_version": GOLD_SCHEMA_VERSION, "pool": pool, "rule": RULE, "answers": answers},
                        option=orjson.OPT_SORT_KEYS)


def read_gold(folder: Path) -> dict[str, dict[str, Any]]:
    """The pool's gold answers by task id (``{}`` for a pool without gold)."""
    path = folder / GOLD_FILE
    if not path.is_file():
        return {}
    return read_json_document(path, GOLD_SCHEMA_VERSION, what="gold answers")["answers"]
