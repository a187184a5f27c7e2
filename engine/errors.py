"""Errors raised by the engine. Each message says what was wrong and what to do."""


class EngineError(ValueError):
    """Base class of every error the engine raises on bad input."""


class CardPoolError(EngineError):
    """A card definition in the pool is invalid (the message names the card)."""


class DeckError(EngineError):
    """A deck breaks the deck rules (size, copies, unknown card ids)."""


class IllegalActionError(EngineError):
    """An action id is not legal in the current state; the state is left unchanged."""


class StateFormatError(EngineError):
    """A serialized state cannot be loaded (wrong schema, ruleset or field)."""
