"""The arena's state in one server process: the browser sessions and their matches.

Every match lives in one :class:`extrarlhf.runtime.live.MatchRegistry` (the MCP server's), so a
battle is started, played and recorded exactly as ``start_battle`` / ``submit_action`` /
``finish_battle`` do with ``p1_actor_type="human"``, plus ``think_provenance="arena"`` (player 1's
think times observed, see extrarlhf/runtime/trace.py). A browser session (``sid``, from the
signed cookie) sees only its own matches: a match id of another session is an unknown match.
A battle that ends is finished at once (its trace written); it then stays listed with its result
and replay, and can never be driven again.

Every method is blocking (a move of a search opponent is long work): the app calls them in its
worker threads under an :mod:`adapters.work` scope capped at ``MAX_ROLLOUTS_PER_CALL``.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any

from extrarlhf.core.errors import InvalidArgument, RLHFError
from extrarlhf.core.names import check_name
from extrarlhf.policies.champion import CHAMPION_NAME, champion_summary
from extrarlhf.production.pseudonyms import player_pseudonym
from extrarlhf.runtime.actors import available_specs, resolve_actor
from extrarlhf.runtime.live import MatchRegistry
from extrarlhf.runtime.sessions import SessionStore

from .config import ArenaConfig
from .views import from_player_side

MAX_NAME_CHARS = 64
MAX_SPEC_CHARS = 200
SEARCH_EXAMPLES = ("search:baseline:greedy?sims=16",)  # offered besides the registry's specs


class ArenaError(RLHFError):
    """A request the arena refuses; ``status`` is the HTTP status of its page."""

    def __init__(self, message: str, code: str, status: int) -> None:
        super().__init__(message, code)
        self.status = status


@dataclass
class Played:
    """One match of one browser session, as its pages show it."""

    match_id: str
    battle_id: str
    group: str
    opponent: str
    battle_tag: str
    player: str | None  # the player's pseudonym (the trace's codename), never the name typed
    opponent_moves: list[str] = field(default_factory=list)  # since player 1's last decision
    result: dict[str, Any] | None = None  # once finished or abandoned
    final_view: dict[str, Any] | None = None  # player 1's view of the final state, once finished
    touched: float = 0.0  # the arena clock when its browser last showed or moved it (idle expiry)

    @property
    def live(self) -> bool:
        return self.result is None


def default_group(spec: str) -> str:
    """The group of the arena's battles against ``spec`` (a group holds one configuration):
    ``arena-<spec>`` with ``:`` as ``-`` (``arena-baseline-greedy``), with a short digest
    instead when the spec has other characters a name cannot."""
    if re.fullmatch(r"[A-Za-z0-9._:-]{1,58}", spec):
        return f"arena-{spec.replace(':', '-')}"
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", spec).strip("-.")
    return f"arena-{slug[:45].strip('-.')}-{hashlib.sha256(spec.encode()).hexdigest()[:8]}"


class Arena:
    """The matches of every browser session of one server (see the module docstring)."""

    def __init__(self, config: ArenaConfig) -> None:
        self.config = config
        self.registry = MatchRegistry(SessionStore(config.sessions_dir), str(config.checkpoints_dir))
        self._lock = threading.Lock()
        self._sessions: dict[str, OrderedDict[str, Played]] = {}
        self._seen: dict[str, float] = {}  # sid -> the arena clock at its last start or page (pruning)
        # starts reserved under the lock and not yet registered: the caps count them (atomic caps)
        self._reserved: dict[str, int] = {}
        self._starts: dict[str, deque[float]] = {}  # client address -> its recent starts (rate limit)
        self.clock = time.monotonic  # replaceable in tests

    def live_count(self) -> int:
        with self._lock:
            return len(self.registry.list()) + sum(self._reserved.values())

    # ------------------------------------------------------------------ listing
    def opponents(self) -> list[str]:
        """What can play player 2: ``champion`` first when it is registered, the registry's specs
        (baselines, checkpoints, ``@promoted`` when something is promoted) and a search example; any
        other spec can be typed."""
        specs = [s for s in available_specs(self.config.checkpoints_dir) if "<" not in s]
        if CHAMPION_NAME in specs:
            specs.insert(0, specs.pop(specs.index(CHAMPION_NAME)))
        if "@promoted" in specs:
            try:
                resolve_actor("@promoted", "opponent", self.config.checkpoints_dir)
            except RLHFError:  # nothing promoted yet: not offered
                specs.remove("@promoted")
        return specs + list(SEARCH_EXAMPLES)

    def champion(self) -> dict[str, Any] | None:
        """What the lobby says about ``champion`` (its benchmark when it is the shipped one), or None."""
        return champion_summary(self.config.checkpoints_dir)

    def matches(self, sid: str) -> list[Played]:
        with self._lock:
            if sid in self._sessions:
                self._seen[sid] = self.clock()
            return list(reversed(self._sessions.get(sid, {}).values()))

    def get(self, sid: str, match_id: str) -> Played:
        with self._lock:
            played = self._sessions.get(sid, {}).get(match_id)
            if played is not None:
                self._seen[sid] = self.clock()
        if played is None:  # another session's match is unknown here: no cross-talk
            raise ArenaError("unknown match: no battle of yours has this id (a battle belongs to the browser that "
                             "started it, and lives as long as this server runs)", "unknown_match", 404)
        return played

    # ------------------------------------------------------------------ playing
    def start(self, sid: str, spec: Any, name: Any = None, group: Any = None, client: str = "?") -> Played:
        """Start a battle against ``spec`` (validated by the core: its error names what exists).
        The caps and ``client``'s start rate are checked and a place reserved under one lock, so
        concurrent starts never pass a cap."""
        if not isinstance(spec, str) or not spec.strip():
            raise InvalidArgument("choose an opponent, or type a spec such as 'baseline:greedy'")
        spec = spec.strip()
        if len(spec) > MAX_SPEC_CHARS:
            raise InvalidArgument(f"an opponent spec has at most {MAX_SPEC_CHARS} characters")
        opponent = resolve_actor(spec, "opponent", self.config.checkpoints_dir)
        group = check_name(group.strip(), "group") if isinstance(group, str) and group.strip() else \
            default_group(opponent.spec)
        player = self._pseudonym(name)
        self.sweep()
        now = self.clock()
        with self._lock:
            self._admit_start(sid, client, now)
            self._reserved[sid] = self._reserved.get(sid, 0) + 1  # counted by the caps until registered
            self._seen[sid] = now
        try:
            match_id, match = self.registry.start("human", opponent.spec, None, group, None, player,
                                                  think_provenance="arena")
            with self.registry.use(match_id) as m:
                played = Played(match_id, m.battle_id, m.group, m.actors[2]["spec"], m.tag, player,
                                [move["description"] for move in m.moves_since(0)], touched=now)
                self._finish_if_over(played, m)
            with self._lock:
                mine = self._sessions.setdefault(sid, OrderedDict())
                mine[match_id] = played
                self._prune(mine)
        finally:
            with self._lock:
                self._reserved[sid] -= 1
                if not self._reserved[sid]:
                    del self._reserved[sid]
        return played

    def _admit_start(self, sid: str, client: str, now: float) -> None:
        """Refuse a start past the client's rate, the session's cap or the server's (under the lock)."""
        recent = self._starts.setdefault(client, deque())
        while recent and recent[0] <= now - self.config.start_window_s:
            recent.popleft()
        if len(recent) >= self.config.starts_per_window:
            raise ArenaError(f"too many battles started from your address ({self.config.starts_per_window} per "
                             f"{self.config.start_window_s:g} s): wait a minute, or go on with a battle you have",
                             "too_many_starts", 429)
        mine = self._sessions.get(sid, {})
        live = sum(p.live for p in mine.values()) + self._reserved.get(sid, 0)
        if live >= self.config.max_live_per_session:
            raise ArenaError(f"you already have {live} battles in play (at most "
                             f"{self.config.max_live_per_session}): finish or abandon one first",
                             "too_many_matches", 429)
        if len(self.registry.list()) + sum(self._reserved.values()) >= self.config.max_live:
            raise ArenaError(f"the arena is full ({self.config.max_live} battles in play): try again later",
                             "too_many_matches", 429)
        recent.append(now)

    def sweep(self) -> list[str]:
        """Abandon every live battle idle longer than ``idle_timeout_s`` (its trace is written and
        marked abandoned, as ``abandon_battle`` does over MCP), forget rate-limit entries past their
        window and sessions with nothing live unused for ``session_max_age_s`` (their cookie is void). Returns the expired match ids."""
        now = self.clock()
        idle = self.config.idle_timeout_s
        with self._lock:
            stale = [(sid, match_id, p) for sid, mine in self._sessions.items() for match_id, p in mine.items()
                     if p.live and p.touched <= now - idle]
            for client in [c for c, recent in self._starts.items()
                           if not recent or recent[-1] <= now - self.config.start_window_s]:
                del self._starts[client]
        expired = []
        for sid, match_id, played in stale:
            try:
                with self.registry.use(match_id) as m:
                    if not played.live or played.touched > self.clock() - idle:  # moved meanwhile
                        continue
                    played.result = m.abandon(f"expired: idle for more than {idle:g} s at the browser arena")
                    expired.append(match_id)
            except RLHFError:  # ended meanwhile
                continue
        with self._lock:
            for sid in [s for s, mine in self._sessions.items() if not any(p.live for p in mine.values())
                        and self._seen.get(s, 0.0) <= now - self.config.session_max_age_s
                        and s not in self._reserved]:  # its cookie is void by now
                del self._sessions[sid]
                self._seen.pop(sid, None)
        return expired

    def move(self, sid: str, match_id: str, action_id: Any, decision: Any, rationale: Any = None) -> Played:
        """Player 1's move; the opponent then plays up to player 1's next decision."""
        played = self._live(sid, match_id)
        played.touched = self.clock()
        action = _int(action_id, "action_id")
        seen = _int(decision, "decision")
        if isinstance(rationale, str):
            rationale = rationale.strip() or None
        if not self.config.record_free_text:
            rationale = None  # the server was started with free text off: nothing typed is kept
        with self.registry.use(match_id) as m:
            if seen != m.decision_count:
                raise ArenaError("this page was out of date (the battle moved on since it was shown, e.g. in another "
                                 "tab): nothing was played; here is the battle as it is now", "stale_page", 409)
            start = m.decision_count
            m.submit(action, rationale)
            played.opponent_moves = [from_player_side(move["description"]) for move in m.moves_since(start + 1)
                                     if move["player"] == 2]
            self._finish_if_over(played, m)
        return played

    def resume(self, sid: str, match_id: str) -> Played:
        """Let the opponent go on after a call stopped at its rollout cap (``paused``)."""
        played = self._live(sid, match_id)
        played.touched = self.clock()
        with self.registry.use(match_id) as m:
            start = m.decision_count
            m.advance()
            played.opponent_moves += [from_player_side(move["description"]) for move in m.moves_since(start)
                                      if move["player"] == 2]
            self._finish_if_over(played, m)
        return played

    def abandon(self, sid: str, match_id: str) -> Played:
        played = self._live(sid, match_id)
        with self.registry.use(match_id) as m:
            played.result = m.abandon("abandoned by the player at the browser arena")
        return played

    def state(self, sid: str, match_id: str) -> tuple[Played, dict[str, Any] | None]:
        """The match and, while it is live, what player 1 may see: ``view`` (the player view),
        ``legal`` (the legal actions while it is player 1's move), ``decision`` (the count a move
        form carries), ``paused``."""
        played = self.get(sid, match_id)
        if not played.live:
            return played, None
        played.touched = self.clock()
        with self.registry.use(match_id) as m:
            return played, {"view": m.state.player_view(1), "legal": m.legal_actions() if m.awaiting_p1 else [],
                            "decision": m.decision_count, "paused": m.paused is not None and not m.done}

    # ------------------------------------------------------------------ helpers
    def _live(self, sid: str, match_id: str) -> Played:
        played = self.get(sid, match_id)
        if not played.live:
            raise ArenaError(f"this battle is over ({played.result['status']}): it cannot be played any more; see "
                             f"its result and replay", "match_finished", 409)
        return played

    @staticmethod
    def _finish_if_over(played: Played, match: Any) -> None:
        if match.done:
            played.final_view = match.state.player_view(1)
            played.result = match.finish()

    def _pseudonym(self, name: Any) -> str | None:
        if name is None or (isinstance(name, str) and not name.strip()):
            return None
        if not isinstance(name, str) or len(name.strip()) > MAX_NAME_CHARS:
            raise InvalidArgument(f"a player name is text of at most {MAX_NAME_CHARS} characters")
        return player_pseudonym(self.config.pseudonym_key, name.strip())

    def _prune(self, mine: OrderedDict[str, Played]) -> None:
        ended = [key for key, p in mine.items() if not p.live]
        for key in ended[:max(0, len(ended) - self.config.max_kept_per_session)]:
            del mine[key]


def _int(value: Any, what: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise InvalidArgument(f"{what} must be a whole number, got {str(value)[:20]!r}") from None


__all__ = ["Arena", "ArenaError", "Played", "default_group"]
