"""Decision points of a V5 dataset: the recorded decisions a judge can be shown.

A point is one recorded decision. Its state is rebuilt by replaying the battle (the battles
table's seed, decks and starting player, then the recorded actions in order) and checked
against the recorded ``state_hash_before``, so what a judge sees is exactly the state the
decision was taken in, rendered from the acting player's side only (``engine`` ``render``).
The decisions table is read row group by row group, a few narrow columns at a time: a pool of
tasks never loads a dataset's observations.
"""

from __future__ import annotations

import hashlib
import heapq
import hmac
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import orjson

import engine

from ..core.errors import IntegrityError, InvalidArgument

POINT_COLUMNS = ["battle_id", "group", "decision_index", "turn", "player", "state_hash_before", "legal_action_ids",
                 "action_id", "actor_spec", "policy_json"]
REPLAY_COLUMNS = ["battle_id", "decision_index", "action_id"]
BATTLE_COLUMNS = ["battle_id", "seed", "p1_deck", "p2_deck", "starting_player"]


@dataclass(frozen=True)
class DecisionPoint:
    """One recorded decision (no state: :func:`states_at` rebuilds it)."""

    battle_id: str
    group: str
    decision_index: int
    turn: int
    player: int
    state_hash: str
    legal: tuple[int, ...]
    chosen: int
    actor_spec: str | None
    action_values: tuple[float | None, ...] | None  # a search actor's values over ``legal``

    @property
    def key(self) -> tuple[str, int]:
        return self.battle_id, self.decision_index


def _action_values(text: str | None, n_legal: int) -> tuple[float | None, ...] | None:
    if not text or "action_values" not in text:
        return None
    values = orjson.loads(text).get("action_values")
    if not isinstance(values, list) or len(values) != n_legal:
        return None
    return tuple(None if v is None else float(v) for v in values)


def rank(seed: int, battle_id: str, decision_index: int, salt: str = "point") -> int:
    """A point's place in the seeded order: a keyed hash, so the order is the same for a seed
    whatever the row order of the file and differs between seeds."""
    digest = hmac.new(str(seed).encode(), f"{salt}\0{battle_id}\0{decision_index}".encode(),
                      hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big")


def iter_points(decisions: Path) -> Iterator[DecisionPoint]:
    """Every decision of a decisions table, one row group at a time."""
    import pyarrow.parquet as pq  # here, not at import: the MCP server lists its tools without pyarrow

    file = pq.ParquetFile(decisions)
    for g in range(file.num_row_groups):
        table = file.read_row_group(g, columns=POINT_COLUMNS)
        cols = {name: table.column(name).to_pylist() for name in POINT_COLUMNS}
        for i in range(table.num_rows):
            legal = tuple(cols["legal_action_ids"][i])
            yield DecisionPoint(cols["battle_id"][i], cols["group"][i], cols["decision_index"][i], cols["turn"][i],
                                cols["player"][i], cols["state_hash_before"][i], legal, cols["action_id"][i],
                                cols["actor_spec"][i], _action_values(cols["policy_json"][i], len(legal)))


def first_points(decisions: Path, seed: int, keep: int, eligible: Any = None) -> list[DecisionPoint]:
    """The ``keep`` points first in the seeded order (``eligible(point)`` filters), with a bounded heap."""
    if keep <= 0:
        return []
    heap: list[tuple[int, tuple[str, int], DecisionPoint]] = []
    for point in iter_points(decisions):
        if len(point.legal) < 2 or (eligible is not None and not eligible(point)):
            continue
        item = (-rank(seed, point.battle_id, point.decision_index), point.key, point)
        if len(heap) < keep:
            heapq.heappush(heap, item)
        elif item[:2] > heap[0][:2]:
            heapq.heapreplace(heap, item)
    return [p for _, _, p in sorted(heap, key=lambda t: (-t[0], t[1]))]


def states_at(folder: Path, points: list[tuple[str, int, str]]) -> dict[tuple[str, int], engine.State]:
    """The state of every ``(battle_id, decision_index, state_hash)``, replayed from its battle
    and checked against the recorded hash."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    battle_ids = sorted({bid for bid, _, _ in points})
    if not battle_ids:
        return {}
    battles = pq.read_table(folder / "battles.parquet", columns=BATTLE_COLUMNS,
                            filters=[("battle_id", "in", battle_ids)]).to_pylist()
    actions = pq.read_table(folder / "decisions.parquet", columns=REPLAY_COLUMNS,
                            filters=[("battle_id", "in", battle_ids)])
    order = pc.sort_indices(actions, sort_keys=[("battle_id", "ascending"), ("decision_index", "ascending")])
    actions = actions.take(order)
    by_battle: dict[str, list[int]] = {}
    for bid, action in zip(actions.column("battle_id").to_pylist(), actions.column("action_id").to_pylist()):
        by_battle.setdefault(bid, []).append(action)
    wanted: dict[str, set[int]] = {}
    for bid, index, _ in points:
        wanted.setdefault(bid, set()).add(index)
    expected = {(bid, index): digest for bid, index, digest in points}
    out: dict[tuple[str, int], engine.State] = {}
    for row in battles:
        bid = row["battle_id"]
        state = engine.new_battle(int(row["seed"]), list(row["p1_deck"]), list(row["p2_deck"]),
                                  int(row["starting_player"]))
        last = max(wanted[bid])
        for index, action in enumerate(by_battle.get(bid, [])[:last + 1]):
            if index in wanted[bid]:
                if state.state_hash() != expected[(bid, index)]:
                    raise IntegrityError(f"battle {bid} decision {index}: the replayed state does not match the "
                                         f"recorded state_hash_before; validate the dataset (validate_dataset)")
                out[(bid, index)] = state.clone()
            state.apply(int(action))
    missing = [k for k in expected if k not in out]
    if missing:
        raise IntegrityError(f"{len(missing)} decision point(s) could not be replayed (first: battle {missing[0][0]} "
                             f"decision {missing[0][1]}); validate the dataset (validate_dataset)")
    return out


def check_count(value: Any, what: str, cap: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 1 <= int(value) <= cap:
        raise InvalidArgument(f"{what} must be an integer from 1 to {cap}, got {value!r}")
    return int(value)


def check_number(value: Any, what: str, lo: float, hi: float, integer: bool = False) -> Any:
    """``value`` when it is a number (an integer if ``integer``) in [lo, hi]; else a clear error."""
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not lo <= value <= hi:
        raise InvalidArgument(f"{what} must be {'an integer' if integer else 'a number'} from {lo} to {hi}, "
                              f"got {value!r}")
    return value
