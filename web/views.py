"""Template contexts: a view of the state turned into a game table, legal actions attached.

:func:`table` takes what one player may see (``State.player_view(1)``: the opponent's hand is a
count) or, for the replay of a finished battle, the omniscient view, and gives the template two
sides (hero, mana, deck, hand, six board slots) with each legal action placed on the card it
concerns: a hand card carries its plays (one button per target), a creature of player 1's board
its attacks, and a targeted character is marked. :func:`replay_steps` reads a finished trace.
"""

from __future__ import annotations

from typing import Any

import engine
from engine.actions import BOARD_SLOTS

from extrarlhf.runtime.sessions import SessionStore


def _side(player: dict[str, Any], hand_visible: bool) -> dict[str, Any]:
    slots: list[dict[str, Any] | None] = [None] * BOARD_SLOTS
    for creature in player["board"]:
        slots[creature["slot"]] = {**creature, "actions": [], "targeted": False}
    return {"player": player["player"], "hero_health": player["hero_health"], "mana": player["mana"],
            "max_mana": player["max_mana"], "fatigue": player["fatigue"], "deck_size": player["deck_size"],
            "hand_size": player["hand_size"],
            "hand": [{**card, "actions": []} for card in player.get("hand", [])] if hand_visible else None,
            "slots": slots, "hero_targeted": False}


def _target_label(target: dict[str, Any], me: dict[str, Any], them: dict[str, Any]) -> str:
    kind = target["kind"]
    if kind == "own_hero":
        return "your hero"
    if kind == "enemy_hero":
        return "enemy hero"
    side = me if kind == "own_creature" else them
    creature = side["slots"][target["slot"]]
    name = creature["name"] if creature else f"slot {target['slot']}"
    return f"your {name}" if kind == "own_creature" else name


def _mark(target: dict[str, Any], me: dict[str, Any], them: dict[str, Any]) -> None:
    kind = target["kind"]
    if kind in ("own_hero", "enemy_hero"):
        (me if kind == "own_hero" else them)["hero_targeted"] = True
    elif kind in ("own_creature", "enemy_creature"):
        creature = (me if kind == "own_creature" else them)["slots"][target["slot"]]
        if creature:
            creature["targeted"] = True


def table(view: dict[str, Any], legal: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The game table of ``view`` (player or omniscient) with ``legal`` ([{action_id,
    description}], player 1's) attached: ``me``, ``them``, ``end_turn`` (its action or None),
    ``legal`` (every action, the plain fallback list), ``turn``, ``to_move``."""
    if view["view"] == "player":
        me, them = _side(view["you"], True), _side(view["opponent"], False)
    else:
        me, them = (_side(p, True) for p in view["players"])
    end_turn = None
    for action in legal or []:
        decoded = engine.decode_action(action["action_id"])
        entry = {"action_id": action["action_id"], "description": action["description"]}
        if decoded["kind"] == "end_turn":
            end_turn = entry
        elif decoded["kind"] == "play":
            target = decoded["target"]
            entry["label"] = "Play" if target["kind"] == "none" else f"Play on {_target_label(target, me, them)}"
            me["hand"][decoded["hand_slot"]]["actions"].append(entry)
            _mark(target, me, them)
        else:
            target = decoded["target"]
            entry["label"] = f"Attack {_target_label(target, me, them)}"
            me["slots"][decoded["attacker_slot"]]["actions"].append(entry)
            _mark(target, me, them)
    return {"me": me, "them": them, "end_turn": end_turn, "legal": list(legal or []), "turn": view["turn"],
            "to_move": view["to_move"], "winner": view["winner"], "end_reason": view["end_reason"]}


def _their_target(target: str) -> str:
    """A target of the opponent's move (its text says "your" for the opponent's own side and
    "enemy" for player 1's) as player 1 reads it."""
    for mover_side, player_side in (("your hero", "their hero"), ("the enemy hero", "your hero"),
                                    ("your ", "their "), ("enemy ", "your ")):
        if target.startswith(mover_side):
            return player_side + target[len(mover_side):]
    return target


def from_player_side(description: str) -> str:
    """The opponent's move, described from player 1's side: the engine describes a move from its
    mover's side ("Attack with Stormcaller -> your Stormcaller" is the opponent's own creature), so
    "your" becomes "their" and "enemy" becomes "your". Card texts never hold " on " or " -> ", so
    the target is what follows the last of them."""
    if description.startswith("Attack with "):
        attacker, arrow, target = description[len("Attack with "):].rpartition(" -> ")
        if arrow:
            return f"Attack with their {attacker} -> {_their_target(target)}"
    elif description.startswith("Play "):
        card, on, target = description.rpartition(" on ")
        if on:
            return f"{card} on {_their_target(target)}"
    return description


def replay_steps(store: SessionStore, group: str, battle_id: str) -> list[dict[str, Any]]:
    """Every step of a finished battle for its replay page, in order: the omniscient table before
    each decision (the battle is over: nothing is hidden any more), who moved, the move and its
    rationale, then the final state (``move`` None)."""
    ref = store.battle(group, battle_id)
    steps: list[dict[str, Any]] = []
    last = None
    for record in ref.decisions():
        state = engine.State.from_dict(record["state_before"])
        steps.append({"table": table(state.omniscient_view()), "player": record["player"],
                      "actor": record["actor"]["type"],
                      "move": record["action"]["description"] if record["player"] == 1
                      else from_player_side(record["action"]["description"]),
                      "rationale": record["rationale"], "decision_index": record["decision_index"]})
        last = (state, record["action_id"])
    if last is not None:
        state, action_id = last
        state.apply(action_id)
        steps.append({"table": table(state.omniscient_view()), "player": None, "actor": None, "move": None,
                      "rationale": None, "decision_index": None})
    return steps
