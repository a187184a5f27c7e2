"""Deck rules: 30 cards from the pool, at most 2 copies of a card id."""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import Any

from .cards import CARD_IDS, CARDS
from .errors import DeckError
from .rng import SplitMix64

DECK_SIZE = 30
MAX_COPIES = 2
_POOL = frozenset(CARDS)


def validate_deck(deck: Any, who: str = "deck") -> tuple[int, ...]:
    """Return the deck as a tuple of card ids, or raise :class:`DeckError` saying what is wrong."""
    if isinstance(deck, (str, bytes)) or not hasattr(deck, "__iter__"):
        raise DeckError(f"{who} must be a list of {DECK_SIZE} card ids, got {type(deck).__name__}")
    cards = list(deck)
    # a valid deck of plain ints passes in one sort (every new battle and replay checks two);
    # anything else goes through the checks below, which say what is wrong
    if len(cards) == DECK_SIZE and all(type(c) is int for c in cards) and _POOL.issuperset(cards):
        ordered = sorted(cards)
        if all(a != b for a, b in zip(ordered, ordered[MAX_COPIES:])):
            return tuple(cards)
    bad = [c for c in cards if not isinstance(c, int) or isinstance(c, bool)]
    if bad:
        raise DeckError(f"{who} must contain integer card ids; got {bad[0]!r}")
    if len(cards) != DECK_SIZE:
        raise DeckError(f"{who} must have exactly {DECK_SIZE} cards, got {len(cards)}")
    unknown = sorted({c for c in cards if c not in CARDS})
    if unknown:
        raise DeckError(f"{who} has card id(s) {unknown} that are not in the arena-1 pool "
                        f"(valid ids: {CARD_IDS[0]}..{CARD_IDS[-1]})")
    for card_id, count in sorted(Counter(cards).items()):
        if count > MAX_COPIES:
            raise DeckError(f"{who} has {count} copies of card {card_id} ({CARDS[card_id].name}); "
                            f"at most {MAX_COPIES} are allowed")
    return tuple(cards)


def random_deck(rng: SplitMix64) -> tuple[int, ...]:
    """A valid deck drawn uniformly from two copies of every pool card, sorted by id.

    A partial Fisher-Yates shuffle: only the first DECK_SIZE positions are drawn.
    """
    copies = [card_id for card_id in CARD_IDS for _ in range(MAX_COPIES)]
    n = len(copies)
    for i in range(DECK_SIZE):
        j = i + rng.below(n - i)
        copies[i], copies[j] = copies[j], copies[i]
    return tuple(sorted(copies[:DECK_SIZE]))


def deck_id(deck: Any) -> str:
    """Stable id of a deck's contents (order-independent): ``d-`` + 16 hex digits."""
    cards = validate_deck(deck)
    digest = hashlib.sha256(",".join(map(str, sorted(cards))).encode()).hexdigest()
    return "d-" + digest[:16]
