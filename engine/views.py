"""Readable views of a state: action descriptions and JSON, the player view (no hidden
information), the omniscient view, and a short text rendering for human and LLM players."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .actions import ATTACK_BASE, ATTACK_TARGETS, PLAY_BASE, PLAY_TARGETS, TARGET_ENEMY_SLOT, \
    TARGET_OWN_SLOT, check_action_id, decode_action
from .cards import CARDS, CHARGE, mask_to_keywords

if TYPE_CHECKING:  # pragma: no cover
    from .state import Creature, State


def card_json(card_id: int) -> dict[str, Any]:
    card = CARDS[card_id]
    return {**card.to_json(), "text": card.text()}


def creature_json(c: "Creature", slot: int) -> dict[str, Any]:
    return {"slot": slot, "uid": c.uid, "card_id": c.card_id, "name": CARDS[c.card_id].name,
            "attack": c.attack, "health": c.health, "max_health": c.max_health,
            "keywords": mask_to_keywords(c.keywords), "sick": c.sick, "attacked": c.attacked,
            "can_attack": c.can_attack}


_LABELS: dict[tuple, str] = {}


def _creature_label(c: "Creature", slot: int) -> str:
    key = (c.card_id, c.attack, c.health, c.keywords, slot)
    label = _LABELS.get(key)
    if label is None:
        kws = " ".join(mask_to_keywords(c.keywords))
        label = f"{CARDS[c.card_id].name} (slot {slot}, {c.attack}/{c.health}{' ' + kws if kws else ''})"
        if len(_LABELS) < 100_000:
            _LABELS[key] = label
    return label


def _target_json(state: "State", spec: dict[str, Any]) -> dict[str, Any]:
    """Enrich a decoded target with what occupies it now, relative to the player to move."""
    target = dict(spec)
    kind = target["kind"]
    me = state.players[state.active]
    opp = state.players[1 - state.active]
    if kind in ("own_hero", "enemy_hero"):
        target["hero_health"] = (me if kind == "own_hero" else opp).hp
    elif kind in ("own_creature", "enemy_creature"):
        c = (me if kind == "own_creature" else opp).board[target["slot"]]
        if c is not None:
            target.update(uid=c.uid, card_id=c.card_id, name=CARDS[c.card_id].name)
    return target


def action_json(state: "State", action_id: int, description: str | None = None) -> dict[str, Any]:
    """Stable JSON form of an action in this state (ids, names, target), with its description
    (pass ``description`` when already computed)."""
    a = check_action_id(action_id)
    spec = decode_action(a)
    out: dict[str, Any] = {"action_id": a, **spec}
    me = state.players[state.active]
    if spec["kind"] == "play" and spec["hand_slot"] < len(me.hand):
        card_id = me.hand[spec["hand_slot"]]
        out.update(card_id=card_id, card_name=CARDS[card_id].name, cost=CARDS[card_id].cost)
    if spec["kind"] == "attack":
        c = me.board[spec["attacker_slot"]]
        if c is not None:
            out.update(attacker_uid=c.uid, card_id=c.card_id, card_name=CARDS[c.card_id].name)
    if "target" in out:
        out["target"] = _target_json(state, spec["target"])
    out["description"] = description if description is not None else describe_action(state, a)
    return out


_CARD_TEXT = {card_id: f"{card.name} ({card.cost} mana, {card.text()})" for card_id, card in CARDS.items()}


def card_text(card_id: int) -> str:
    """A card as action lines name it: ``Name (cost mana, text)``."""
    return _CARD_TEXT[card_id]


class _TargetTexts:
    """Texts of play targets 0..14 as seen by the player to move, built on first use."""

    __slots__ = ("state", "texts")

    def __init__(self, state: "State") -> None:
        self.state = state
        self.texts: dict[int, str] = {}

    def __getitem__(self, t: int) -> str:
        text = self.texts.get(t)
        if text is None:
            state = self.state
            if t <= 2:
                hero = state.players[state.active if t == 1 else 1 - state.active]
                text = f"{'your' if t == 1 else 'the enemy'} hero ({hero.hp} health)"
            else:
                own = t < TARGET_ENEMY_SLOT
                slot = t - (TARGET_OWN_SLOT if own else TARGET_ENEMY_SLOT)
                c = state.players[state.active if own else 1 - state.active].board[slot]
                side = "your" if own else "enemy"
                text = f"{side} {_creature_label(c, slot)}" if c is not None else f"{side} slot {slot} (empty)"
            self.texts[t] = text
        return text


def describe_actions(state: "State", action_ids: list[int]) -> list[str]:
    """Readable lines for several actions of the player to move (shares the board texts)."""
    me = state.players[state.active]
    targets = _TargetTexts(state)
    out = []
    for action_id in action_ids:
        a = action_id if type(action_id) is int and 0 <= action_id < 163 else check_action_id(action_id)
        if a == 0:
            out.append("End turn")
        elif a < ATTACK_BASE:
            h, t = divmod(a - PLAY_BASE, PLAY_TARGETS)
            if h >= len(me.hand):
                out.append(f"Play hand slot {h} (empty)")
                continue
            card_id = me.hand[h]
            text = "Play " + _CARD_TEXT[card_id]
            out.append(text if CARDS[card_id].type == "creature" or t == 0 else f"{text} on {targets[t]}")
        else:
            slot, t = divmod(a - ATTACK_BASE, ATTACK_TARGETS)
            c = me.board[slot]
            who = _creature_label(c, slot) if c is not None else f"slot {slot} (empty)"
            out.append(f"Attack with {who} -> {targets[2 if t == 0 else TARGET_ENEMY_SLOT + t - 1]}")
    return out


def describe_action(state: "State", action_id: int) -> str:
    """One readable line, e.g. ``Play Firebolt (1 mana, deal 2 damage to any character) on the enemy hero (30 health)``."""
    return describe_actions(state, [action_id])[0]


def _side(state: "State", index: int, hidden: bool) -> dict[str, Any]:
    p = state.players[index]
    out: dict[str, Any] = {
        "player": index + 1, "hero_health": p.hp, "mana": p.mana, "max_mana": p.max_mana,
        "fatigue": p.fatigue, "deck_size": len(p.deck), "hand_size": len(p.hand),
        "board": [creature_json(c, s) for s, c in enumerate(p.board) if c is not None],
    }
    if not hidden:
        out["hand"] = [{"hand_slot": h, **card_json(card_id)} for h, card_id in enumerate(p.hand)]
    return out


def _header(state: "State") -> dict[str, Any]:
    return {"ruleset": "arena-1", "turn": state.turn, "player_turn": state.player_turn,
            "to_move": state.to_move, "is_terminal": state.is_terminal, "winner": state.winner,
            "end_reason": state.end_reason, "starting_player": state.starting_player}


def player_view(state: "State", player: int) -> dict[str, Any]:
    """What ``player`` may see: own hand, both boards, public counts. Never the opponent's hand
    or any deck order."""
    if player not in (1, 2):
        raise ValueError(f"player must be 1 or 2, got {player!r}")
    return {"view": "player", "player": player, **_header(state), "your_turn": state.to_move == player,
            "you": _side(state, player - 1, hidden=False),
            "opponent": _side(state, 2 - player, hidden=True)}


def omniscient_view(state: "State") -> dict[str, Any]:
    """Everything, for traces and audits: both hands and both decks (``deck`` lists the top first)."""
    players = []
    for index in (0, 1):
        side = _side(state, index, hidden=False)
        side["deck"] = [card_json(card_id) for card_id in reversed(state.players[index].deck)]
        players.append(side)
    return {"view": "omniscient", **_header(state), "players": players}


def _board_line(board: list) -> str:
    cells = []
    for slot, c in enumerate(board):
        if c is None:
            cells.append(f"[{slot}] -")
            continue
        kws = mask_to_keywords(c.keywords)
        flags = []
        if c.sick and not c.keywords & CHARGE:
            flags.append("summoned")
        elif c.attacked:
            flags.append("attacked")
        cell = f"[{slot}] {CARDS[c.card_id].name} {c.attack}/{c.health}"
        cell += f" {' '.join(kws)}" if kws else ""
        cell += f" ({', '.join(flags)})" if flags else ""
        cells.append(cell)
    return "  ".join(cells)


def render(state: "State", player: int) -> str:
    """A short text picture of the board from ``player``'s side (no hidden information)."""
    if player not in (1, 2) or isinstance(player, bool):
        raise ValueError(f"player must be 1 or 2, got {player!r}")
    me = state.players[player - 1]
    opp = state.players[2 - player]
    if state.is_terminal:
        result = "draw" if state.winner == 0 else ("you won" if state.winner == player else "you lost")
        status = f"battle over: {result} ({state.end_reason})"
    else:
        status = "your move" if state.to_move == player else f"player {state.to_move} to move"
    lines = [
        f"Turn {state.turn} (turn {state.player_turn} of the player to move) - you are player {player}; {status}",
        f"Opponent: hero {opp.hp} hp | mana {opp.mana}/{opp.max_mana} | hand {len(opp.hand)} | "
        f"deck {len(opp.deck)} | fatigue {opp.fatigue}",
        f"  enemy board: {_board_line(opp.board)}",
        f"  your board:  {_board_line(me.board)}",
        f"You: hero {me.hp} hp | mana {me.mana}/{me.max_mana} | deck {len(me.deck)} | fatigue {me.fatigue}",
        "  hand: " + ("; ".join(f"[{h}] {CARDS[c].name} ({CARDS[c].cost}) {CARDS[c].text()}"
                               for h, c in enumerate(me.hand)) or "(empty)"),
    ]
    return "\n".join(lines)
