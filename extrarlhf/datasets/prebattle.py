"""TimeStamp's approved prebattle inputs derived from the decks: one definition, used by the
export that writes them (production/timestamp.py) and by the validator that recomputes them
(validate.py), so a value that is not what its definition gives -- a label written under a
feature's name, say -- is refused wherever the dataset is read."""

from __future__ import annotations

from typing import Any

import numpy as np

import engine

__all__ = ["PREBATTLE_FEATURES", "DERIVED_INPUTS", "derived_inputs"]

PREBATTLE_FEATURES = {
    "p1_mean_cost": "mean mana cost of player 1's 30 cards", "p2_mean_cost": "mean mana cost of player 2's 30 cards",
    "p1_creatures": "creature cards in player 1's deck", "p2_creatures": "creature cards in player 2's deck",
}
# every input computed from the decks: the features and the deck ids (engine.deck_id)
DERIVED_INPUTS = ("p1_deck_id", "p2_deck_id", *PREBATTLE_FEATURES)

_SIZE = max(engine.CARD_IDS) + 1
_COST = np.zeros(_SIZE, dtype=np.float64)
_CREATURE = np.zeros(_SIZE, dtype=np.int64)
for _id, _card in engine.CARDS.items():
    _COST[_id], _CREATURE[_id] = _card.cost, _card.type == "creature"


def derived_inputs(p1_decks: Any, p2_decks: Any) -> dict[str, list]:
    """Every deck-derived input (``DERIVED_INPUTS``) of rows whose decks are ``p1_decks`` and
    ``p2_decks`` (sequences of card-id sequences, one per row; every card id in the pool, as
    engine.validate_deck checks). Means are float32, as the ``timestamp_inputs`` column."""
    out: dict[str, list] = {}
    ids: dict[tuple[int, ...], str] = {}  # decks repeat: each id is computed once
    for seat, decks in (("p1", p1_decks), ("p2", p2_decks)):
        cards = np.asarray([list(d) for d in decks], dtype=np.int64).reshape(-1, engine.DECK_SIZE)
        out[f"{seat}_deck_id"] = [ids.setdefault(key, engine.deck_id(key))
                                  for key in map(tuple, cards.tolist())]
        out[f"{seat}_mean_cost"] = _COST[cards].mean(axis=1).astype(np.float32).tolist()
        out[f"{seat}_creatures"] = _CREATURE[cards].sum(axis=1).tolist()
    return {name: out[name] for name in DERIVED_INPUTS}
