"""Live matches of one process (DESIGN section 5): opaque, unguessable, process-local ids.

A ``match_id`` is ``m_<process tag>_<24 random hex>``. The process tag is random per
registry, so an id minted by another server process is recognised as such (``foreign_match``)
instead of looking merely unknown; ids embed nothing else. Calls on one match are serialized
by a per-match lock, so concurrent tool calls are safe.
"""

from __future__ import annotations

import re
import secrets
import threading
from collections import OrderedDict
from contextlib import contextmanager
from typing import Any, Iterator

from adapters import GuidedSearchPolicy, SearchPolicy

from ..core.errors import MatchError
from .match import Match, play_or_abandon, start_match
from .sessions import SessionStore

_ID = re.compile(r"m_([0-9a-f]{8})_([0-9a-f]{24})")
MAX_ENDED = 10_000


class MatchRegistry:
    """The live matches of this process, by match id."""

    def __init__(self, store: SessionStore, checkpoints_dir: str | None = None) -> None:
        self.store = store
        self.checkpoints_dir = checkpoints_dir  # where model specs resolve (default: ./checkpoints)
        self.process_tag = secrets.token_hex(4)
        self._lock = threading.Lock()
        self._live: dict[str, tuple[Match, threading.Lock]] = {}
        self._ended: OrderedDict[str, str] = OrderedDict()  # match_id -> final status, bounded

    def start(self, p1_actor_type: Any, opponent: Any = "baseline:greedy", p1_model: Any = None,
              group: str | None = None, seed: Any = None, codename: str | None = None,
              think_provenance: str | None = None) -> tuple[str, Match]:
        """Start a battle (see :func:`start_match`); an ``rl`` battle is played to its end at once,
        or, under a work scope whose rollout cap is spent first, up to that point (``paused``)."""
        match = start_match(self.store, group or "interactive", p1_actor_type, opponent, p1_model, seed, codename,
                            self.checkpoints_dir, think_provenance)
        if p1_actor_type == "rl":
            play_or_abandon(match)
        match_id = f"m_{self.process_tag}_{secrets.token_hex(12)}"
        with self._lock:
            self._live[match_id] = (match, threading.Lock())
        return match_id, match

    def _lookup(self, match_id: Any) -> tuple[Match, threading.Lock]:
        if not isinstance(match_id, str):
            raise MatchError(f"match_id must be a string, got {type(match_id).__name__}", "invalid_argument")
        parsed = _ID.fullmatch(match_id)
        if parsed is None:
            raise MatchError(f"{match_id!r} is not a match id (they look like m_<8 hex>_<24 hex>); "
                             f"start a battle to get one", "unknown_match")
        if parsed.group(1) != self.process_tag:
            raise MatchError("this match id was not made by this server process: it comes from another MCP server "
                             "process or was mistyped (a live match exists only in the process that started it and "
                             "never crosses processes); call list_matches for this process's matches or start a new "
                             "battle (finished battles are on disk: use inspect_session / replay_battle)",
                             "foreign_match")
        with self._lock:
            entry = self._live.get(match_id)
            ended = self._ended.get(match_id)
        if entry is None:
            if ended is not None:
                raise MatchError(f"match {match_id} is {ended}; its trace is on disk. Start a new battle",
                                 "match_finished")
            raise MatchError(f"no live match {match_id} in this server process; call list_matches",
                             "unknown_match")
        return entry

    def searching(self, match_id: Any) -> bool:
        """True when a live match has a search actor (its moves are long work); False for an
        unknown id too (the call then fails fast with the reason)."""
        with self._lock:
            entry = self._live.get(match_id) if isinstance(match_id, str) else None
        return entry is not None and any(isinstance(p, (SearchPolicy, GuidedSearchPolicy))
                                     for p in entry[0].policies.values())

    @contextmanager
    def use(self, match_id: Any) -> Iterator[Match]:
        """Hold one match for a call; a match that becomes finished/abandoned leaves the live set."""
        match, lock = self._lookup(match_id)
        with lock:
            if match.status != "active":
                raise MatchError(f"match {match_id} is {match.status}; start a new battle", "match_finished")
            try:
                yield match
            finally:
                if match.status != "active":
                    self._retire(match_id, match.status)

    def _retire(self, match_id: str, status: str) -> None:
        with self._lock:
            self._live.pop(match_id, None)
            self._ended[match_id] = status
            while len(self._ended) > MAX_ENDED:
                self._ended.popitem(last=False)

    def list(self) -> list[dict[str, Any]]:
        with self._lock:
            items = list(self._live.items())
        return [{"match_id": match_id, "battle_id": m.battle_id, "group": m.group, "battle_tag": m.tag,
                 "p1_actor_type": m.p1_actor_type, "turn": m.state.turn, "to_move": m.state.to_move,
                 "done": m.done, "codename": m.codename}
                for match_id, (m, _) in items]
