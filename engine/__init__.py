"""ExtraArena engine, ruleset arena-1: pure, deterministic, no I/O beyond its card data.

See DESIGN sections 3-4. Start with :func:`new_battle`. Module map: ``state`` (the rules, the
Python reference), ``native_state`` (the same State API on the native core, and the
``new_battle`` that picks it), ``backend`` (the switch), ``native_link`` (what the core is
given at registration), ``reference`` (the Python engine whatever the switch), ``actions``,
``cards``, ``decks``, ``features``, ``views``, ``rng``, ``errors``.
"""

from .actions import (ACTION_SPACE_SIZE, ATTACK_BASE, END_TURN, PLAY_BASE, attack_action, decode_action,
                      play_action)
from .cards import CARD_IDS, CARDS, KEYWORDS, Card, load_card_pool, parse_card_pool
from .decks import DECK_SIZE, MAX_COPIES, deck_id, random_deck, validate_deck
from .errors import CardPoolError, DeckError, EngineError, IllegalActionError, StateFormatError
from .features import ACTION_FEATURE_DIM, ACTION_FEATURE_NAMES, OBS_DIM, OBS_FEATURE_NAMES, OBS_VERSION, observations
from .rng import SplitMix64, derive_seed
from .native_state import new_battle
from .state import HERO_HEALTH, MAX_TURNS, MAX_TURNS_PER_PLAYER, RULESET, STATE_SCHEMA_VERSION, Creature, State

ENGINE_VERSION = "1.0.0"

__all__ = [
    "ACTION_FEATURE_DIM", "ACTION_FEATURE_NAMES", "ACTION_SPACE_SIZE", "ATTACK_BASE", "CARDS", "CARD_IDS",
    "Card", "CardPoolError", "Creature", "DECK_SIZE", "DeckError", "END_TURN", "ENGINE_VERSION", "EngineError",
    "HERO_HEALTH", "IllegalActionError", "KEYWORDS", "MAX_COPIES", "MAX_TURNS", "MAX_TURNS_PER_PLAYER",
    "OBS_DIM", "OBS_FEATURE_NAMES", "OBS_VERSION", "PLAY_BASE", "RULESET", "STATE_SCHEMA_VERSION",
    "SplitMix64", "State", "StateFormatError", "attack_action", "deck_id", "decode_action", "derive_seed",
    "load_card_pool", "new_battle", "observations", "parse_card_pool", "play_action", "random_deck", "validate_deck",
]
