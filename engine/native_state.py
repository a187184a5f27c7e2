"""``engine.State`` on the native core: what the engine API returns when the backend is native.

On the native backend (``engine.backend``), :func:`new_battle`, ``engine.State.from_dict`` and
``clone`` return a :class:`NativeState`: an ``engine.State`` (``isinstance`` holds) holding one
native battle (``engine_native.State``) and nothing else. Every operation runs in the core on
that one object, with no conversion per call: legal actions and the mask, ``apply`` with its
events, observations and action features, ``to_dict`` and the hashes, ``is_terminal``,
``winner`` and ``to_move``; the action lines and their JSON too (``describe_actions``,
``action_json``: the trace names every legal action of every decision). The other views
(``player_view``, ``render``...) are the Python engine's functions reading the fields below.

The fields users read (``seed``, ``decks``, ``starting_player``, ``rng``, ``players``,
``active``, ``turn``, ``next_uid``, ``winner``, ``end_reason``, ``last_events``) stay readable,
as snapshots: ``players[i]`` is a :class:`PlayerView` whose ``deck``, ``hand`` and ``board``
are lists that refuse changes (:class:`ReadOnlyList`). Writing a field is refused with an AttributeError saying what to do instead (edit
``to_dict()`` and rebuild with ``engine.State.from_dict``, or use ``EXTRAARENA_ENGINE=python``,
whose states are plain Python objects). The semantics are the Python engine's, bit for bit
(tests/engine/test_native_state.py and the differential suites).
"""

from __future__ import annotations

from operator import attrgetter, itemgetter
from typing import Any

from . import backend
from .rng import SplitMix64
from .state import Creature, State
from .state import new_battle as _python_new_battle

_READ_ONLY = ("{what} is read-only on the native engine core (EXTRAARENA_ENGINE=native): edit "
              "state.to_dict() and rebuild it with engine.State.from_dict(...), or run with "
              "EXTRAARENA_ENGINE=python, whose states are plain Python objects")


class ReadOnlyList(list):
    """A list that refuses every change: a native state's hand, deck or board as a list (equal
    to the Python engine's), where an edit would otherwise change nothing silently."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> None:
        raise AttributeError(_READ_ONLY.format(what="engine.State.players[i].hand/deck/board"))

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse

    def __reduce__(self) -> tuple:
        return list, (list(self),)


class PlayerView(tuple):
    """A read-only snapshot of one side of a native state, with engine.state.Player's fields
    (``hp``, ``max_mana``, ``mana``, ``fatigue``, ``deck``, ``hand``, ``board``)."""

    __slots__ = ()

    def __new__(cls, fields: tuple) -> "PlayerView":
        hp, max_mana, mana, fatigue, deck, hand, board = fields
        return tuple.__new__(cls, (hp, max_mana, mana, fatigue, ReadOnlyList(deck), ReadOnlyList(hand),
                                   ReadOnlyList([None if c is None else _creature(Creature, c) for c in board])))

    hp = property(itemgetter(0))
    max_mana = property(itemgetter(1))
    mana = property(itemgetter(2))
    fatigue = property(itemgetter(3))
    deck = property(itemgetter(4))
    hand = property(itemgetter(5))
    board = property(itemgetter(6))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(_READ_ONLY.format(what=f"engine.State.players[i].{name}"))

    def __repr__(self) -> str:
        return f"<PlayerView hp={self.hp} mana={self.mana}/{self.max_mana} hand={len(self.hand)} deck={len(self.deck)}>"


_creature = tuple.__new__  # Creature(*c) without NamedTuple's Python-level __new__


def _core_field(name: str) -> property:
    return property(attrgetter(f"_core.{name}"), doc=f"The native battle's {name} (read-only).")


class NativeState(State):
    """An engine.State whose battle lives in the native core (see the module doc)."""

    __slots__ = ("_core", "_players")  # _players: (core version, the snapshot taken at it)

    @classmethod
    def adopt(cls, core: Any) -> "NativeState":
        """Wrap an ``engine_native.State`` (the wrapper owns it from now on)."""
        state = cls.__new__(cls)
        object.__setattr__(state, "_core", core)
        object.__setattr__(state, "_players", (-1, None))
        return state

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(_READ_ONLY.format(what=f"engine.State.{name}"))

    def __delattr__(self, name: str) -> None:
        raise AttributeError(_READ_ONLY.format(what=f"engine.State.{name}"))

    def __reduce__(self) -> tuple:
        return State.from_dict, (self.to_dict(),)

    # ------------------------------------------------------------------ fields (read-only)
    seed = _core_field("seed")
    decks = _core_field("decks")
    starting_player = _core_field("starting_player")
    active = _core_field("active")
    turn = _core_field("turn")
    next_uid = _core_field("next_uid")
    winner = _core_field("winner")
    end_reason = _core_field("end_reason")
    last_events = _core_field("last_events")
    is_terminal = _core_field("is_terminal")
    to_move = _core_field("to_move")
    player_turn = _core_field("player_turn")

    @property
    def rng(self) -> SplitMix64:
        """A copy of the battle's generator (advancing it does not change the battle)."""
        return SplitMix64(self._core.rng_state)

    @property
    def players(self) -> tuple[PlayerView, PlayerView]:
        """Both sides, read once per transition: the views and the Python features read them
        several times per decision, and the snapshot is immutable, so it is shared until ``apply``."""
        core = self._core
        version, players = self._players
        if version != core.version:
            players = PlayerView(core.player_fields(0)), PlayerView(core.player_fields(1))
            object.__setattr__(self, "_players", (core.version, players))
        return players

    # ------------------------------------------------------------------ the rules, in the core
    def legal_actions(self) -> list[int]:
        return self._core.legal_actions()

    def legal_action_mask(self):
        return self._core.legal_action_mask()

    def apply(self, action_id: int) -> list[dict[str, Any]]:
        return self._core.apply(action_id)

    def clone(self) -> "NativeState":
        other = NativeState.adopt(self._core.clone())  # the copy has the same version: it shares the snapshot
        object.__setattr__(other, "_players", self._players)
        return other

    def to_dict(self) -> dict[str, Any]:
        return self._core.to_dict()

    def canonical_json(self) -> str:
        return self._core.canonical_json()

    def state_hash(self) -> str:
        return self._core.state_hash()

    def observation(self, player: int):
        return self._core.observation(player)

    # ------------------------------------------------------------------ views, in the core
    # (engine.views stays the reference: it answers whatever the core leaves to it, e.g. an id
    # that is not a plain int 0..162, with its own checks and words)
    def describe_actions(self, action_ids: list[int]) -> list[str]:
        lines = backend.load_native().describe_actions(self._core, action_ids)
        return State.describe_actions(self, action_ids) if lines is None else lines

    def describe_action(self, action_id: int) -> str:
        lines = backend.load_native().describe_actions(self._core, [action_id])
        return State.describe_action(self, action_id) if lines is None else lines[0]

    def action_json(self, action_id: int, description: str | None = None) -> dict[str, Any]:
        out = backend.load_native().action_json(self._core, action_id, description)
        return State.action_json(self, action_id, description) if out is None else out

    def action_features(self, action_ids: list[int] | None = None):
        return self._core.action_features(action_ids)


def new_battle(seed: int, p1_deck: Any = None, p2_deck: Any = None, starting_player: int | None = None) -> State:
    """Start a battle. Decks default to seeded valid decks; the starting player to a seeded coin flip.

    Each random choice uses its own stream derived from ``seed`` (decks, start, shuffles), so
    passing the default decks explicitly gives the same battle as omitting them. On the native
    backend the battle is stepped in the core (:class:`NativeState`); the same arguments give
    the same battle on both backends.
    """
    core = backend.native()
    if core is None:
        return _python_new_battle(seed, p1_deck, p2_deck, starting_player)
    return NativeState.adopt(core.new_battle(seed, p1_deck, p2_deck, starting_player))


def adopt_python(state: State) -> State:
    """``state`` (a Python engine.State) on the backend in use: itself on the Python engine, a
    NativeState holding its copy on the native one (what engine.State.from_dict returns)."""
    core = backend.native()
    return state if core is None else NativeState.adopt(core.from_state(state))
