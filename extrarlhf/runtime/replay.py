"""Replay a recorded battle from its meta + actions and compare every state hash."""

from __future__ import annotations

from typing import Any

import engine

from .sessions import SessionStore


def replay_battle(store: SessionStore, group: str, battle_id: str) -> dict[str, Any]:
    """Re-run a battle; ``reproduces`` is True when every hash and the result match.

    ``first_divergence`` names the first decision (and field) that differs.
    """
    ref = store.battle(group, battle_id)
    meta = ref.meta()
    state = engine.new_battle(meta["seed"], meta["decks"]["p1"], meta["decks"]["p2"], meta["starting_player"])
    checked = 0
    divergence = None
    for record in ref.decisions():
        i = record["decision_index"]
        actual = state.state_hash()
        if actual != record["state_hash_before"]:
            divergence = {"decision_index": i, "field": "state_hash_before",
                          "expected": record["state_hash_before"], "actual": actual}
            break
        try:
            state.apply(record["action_id"])
        except engine.IllegalActionError as exc:
            divergence = {"decision_index": i, "field": "action_id", "expected": record["action_id"],
                          "actual": f"illegal in the replayed state: {exc}"}
            break
        actual = state.state_hash()
        if actual != record["state_hash_after"]:
            divergence = {"decision_index": i, "field": "state_hash_after",
                          "expected": record["state_hash_after"], "actual": actual}
            break
        checked += 1
    result = meta["result"]
    if divergence is None:
        for field, actual in (("decisions", checked), ("final_state_hash", state.state_hash()),
                              ("winner", state.winner), ("turns", state.turn)):
            if result[field] != actual:
                divergence = {"decision_index": None, "field": f"result.{field}", "expected": result[field],
                              "actual": actual}
                break
    return {"group": group, "battle_id": battle_id, "status": result["status"], "reproduces": divergence is None,
            "decisions_checked": checked, "decisions_recorded": result["decisions"],
            "first_divergence": divergence}
