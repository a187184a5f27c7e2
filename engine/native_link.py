"""What the Python engine hands the native core in its one registration call (engine.backend).

The core (``engine_native``) never imports ``engine``: the card table, the player view's fixed
card texts, the error classes and the reference functions whose words it reuses (so the two
engines never word an error differently) come from here.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from . import views
from .actions import check_action_batch, check_action_id, check_batch_seats
from .cards import AREA_SCOPES, CARDS, EFFECTS, KEYWORD_BIT, TARGET_RULES
from .decks import validate_deck
from .errors import CardPoolError, IllegalActionError, StateFormatError
from .state import State, new_battle, state_from_dict


def card_rows() -> list[tuple[int, ...]]:
    """engine.CARDS as the tuples the core reads (enum values = index in engine.cards' tuples)."""
    return [(card.id, card.is_creature, card.cost, card.attack, card.health, card.keywords,
             0 if card.effect is None else 1 + EFFECTS.index(card.effect), TARGET_RULES.index(card.target),
             card.amount, card.buff_attack, card.buff_health, KEYWORD_BIT.get(card.keyword, 0),
             0 if card.scope is None else 1 + AREA_SCOPES.index(card.scope))
            for card in CARDS.values()]


def view_card_rows() -> list[tuple[int, str, str, str]]:
    """Each card's fixed parts of the player view, printed by orjson itself (so the core's
    information-set JSON escapes names and texts exactly as orjson does): the name, and the
    members of {"hand_slot": h, **card_json(id)} sorted before and after "hand_slot"."""
    import orjson

    rows = []
    for card_id, card in CARDS.items():
        fields = views.card_json(card_id)
        parts = [orjson.dumps({k: v for k, v in fields.items() if (k < "hand_slot") == before},
                              option=orjson.OPT_SORT_KEYS).decode()[1:-1] for before in (True, False)]
        rows.append((card_id, orjson.dumps(card.name).decode(), parts[0], parts[1]))
    return rows


def describe_card_rows() -> list[tuple[int, str, str, bool]]:
    """Each card's words in action lines (engine.views.describe_actions / action_json): its
    name, its text "Name (cost mana, text)" and whether it is a creature."""
    return [(card_id, card.name, views.card_text(card_id), card.type == "creature") for card_id, card in CARDS.items()]


def explain_illegal(data: dict[str, Any], action_id: int) -> None:
    """Raises the reference's IllegalActionError (why, and the legal ids) for the state ``data``."""
    state_from_dict(data).apply(action_id)


def normalize_dict(data: Any) -> dict[str, Any]:
    """The reference's verdict on a state dict: its StateFormatError, or the dict it rebuilds."""
    return state_from_dict(data).to_dict()


def checked_dict(state: State) -> dict[str, Any]:
    """The reference's verdict on a Python engine.State whose fields were edited (its slots are
    writable): the StateFormatError ``from_dict`` gives for its ``to_dict``, or that dict."""
    try:
        data = State.to_dict(state)
    except Exception as exc:  # noqa: BLE001 - any broken field: say which kind, as from_dict does
        raise StateFormatError(f"malformed arena-1 state: {type(exc).__name__}: {exc}") from None
    return normalize_dict(data)


def registration() -> SimpleNamespace:
    """The one object ``engine_native.register`` takes."""
    return SimpleNamespace(
        card_rows=card_rows(), view_card_rows=view_card_rows(), describe_card_rows=describe_card_rows(), StateFormatError=StateFormatError,
        CardPoolError=CardPoolError, IllegalActionError=IllegalActionError, State=State,
        check_action_id=check_action_id, check_action_batch=check_action_batch, check_batch_seats=check_batch_seats,
        validate_deck=validate_deck, new_battle=new_battle, explain_illegal=explain_illegal,
        normalize_dict=normalize_dict, checked_dict=checked_dict)
