"""One battle's lifecycle: start -> play -> finish (or abandon), writing its V5 trace.

``p1_actor_type`` human/llm: player 1's moves come in one at a time through :meth:`Match.submit`
(with an optional rationale); the opponent (player 2) is a policy that moves on its own up to
the next player-1 decision. ``rl``: player 1 is a policy too and :meth:`Match.run` plays the
battle to its end. Bots are baselines or models named by spec (see actors.py).

``think_provenance="arena"`` (the browser arena) records player 1's time from the state being
shown to the move as an observed think time in the trace's audit (trace.py); MCP play leaves it
unset, so its latencies stay synthetic audit data.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

import engine
from adapters import Decision, decide, work
from engine import IllegalActionError, derive_seed
from engine.actions import check_action_id

from ..core.errors import InvalidArgument, MatchError
from ..core.names import check_name
from . import ownership, settled
from .actors import Actor, battle_tag, check_p1_actor_type, resolve_actor
from .codenames import check_codename
from .sessions import SessionStore, battle_id_for
from .trace import THINK_TIME_PROVENANCES, BattleRecorder
from .trace_files import stored_name

MAX_RATIONALE_CHARS = 4000
MAX_SEED = (1 << 63) - 1


def check_think_provenance(value: Any) -> str | None:
    if value is not None and value not in THINK_TIME_PROVENANCES:
        raise InvalidArgument(f"think_provenance must be one of {', '.join(THINK_TIME_PROVENANCES)} or None, "
                              f"got {value!r}")
    return value


def check_seed(seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise InvalidArgument(f"seed must be an integer in 0..2**63-1, got {seed!r}")
    return seed


def configuration(p1_actor_type: str, opponent: Actor, p1_model: Actor | None) -> dict[str, Any]:
    """What a group's battles are: recorded in its manifest and checked for every battle."""
    return {"p1_actor_type": p1_actor_type,
            "p1_model": p1_model.as_dict() if p1_model else None,
            "opponent": opponent.as_dict(),
            "battle_tag": battle_tag(p1_actor_type, opponent)}


def resolve_players(p1_actor_type: Any, opponent: Any, p1_model: Any,
                    checkpoints_dir: str | None = None) -> tuple[str, Actor, Actor | None]:
    p1_actor_type = check_p1_actor_type(p1_actor_type)
    opponent_actor = resolve_actor(opponent, "opponent", checkpoints_dir)
    if p1_actor_type == "rl":
        if p1_model is None:
            raise InvalidArgument("p1_actor_type 'rl' needs p1_model (the spec of the model that plays player 1)")
        return p1_actor_type, opponent_actor, resolve_actor(p1_model, "p1_model", checkpoints_dir)
    if p1_model is not None:
        raise InvalidArgument(f"p1_model is only for p1_actor_type 'rl'; a {p1_actor_type} plays player 1 "
                              f"through submit_action")
    return p1_actor_type, opponent_actor, None


def _played(actor: Actor, policy: Any) -> dict[str, Any]:
    """The actor as it plays: a model records the weights hash of the file actually loaded (a
    search actor, that of its rollout model, in its provenance too)."""
    played = {**actor.as_dict(), "weights_hash": getattr(policy, "weights_hash", actor.weights_hash)}
    if "search" in played:
        played["search"] = policy.provenance()
    return played


class Match:
    """A live battle bound to its group and battle id. Not thread-safe: callers serialize."""

    def __init__(self, store: SessionStore, group: str, index: int, seed: int, p1_actor_type: str,
                 opponent: Actor, p1_model: Actor | None = None, codename: str | None = None,
                 think_provenance: str | None = None, compact: bool = False) -> None:
        self.store, self.group, self.index, self.seed = store, group, index, seed
        self.compact = compact  # store turns/actions as zstd (series; trace_files.py)
        self.battle_id = battle_id_for(group, index, seed)
        self.p1_actor_type = p1_actor_type
        self.tag = battle_tag(p1_actor_type, opponent)
        self.codename = codename
        self.state = engine.new_battle(seed)
        self.policies: dict[int, Any] = {2: opponent.make_policy(derive_seed(seed, "policy-p2"))}
        if p1_model is not None:
            self.policies[1] = p1_model.make_policy(derive_seed(seed, "policy-p1"))
        self.actors: dict[int, dict[str, Any]] = {
            1: {"type": p1_actor_type, **(_played(p1_model, self.policies[1]) if p1_model else
                                           {"spec": None, "kind": p1_actor_type, "weights_hash": None}),
                "codename": codename},
            2: {"type": "bot" if opponent.is_baseline else "rl", **_played(opponent, self.policies[2]),
                "codename": None},
        }
        decks = self.state.decks
        self.deck_ids = [engine.deck_id(decks[0]), engine.deck_id(decks[1])]
        header = {
            "battle_id": self.battle_id, "group": group, "index": index, "seed": seed,
            "ruleset": engine.RULESET, "engine_version": engine.ENGINE_VERSION,
            "obs_version": engine.OBS_VERSION, "state_schema_version": engine.STATE_SCHEMA_VERSION,
            "decks": {"p1": list(decks[0]), "p2": list(decks[1])},
            "deck_ids": {"p1": self.deck_ids[0], "p2": self.deck_ids[1]},
            "starting_player": self.state.starting_player,
            "p1_actor_type": p1_actor_type, "battle_tag": self.tag, "codename": codename,
            "actors": {"p1": self.actors[1], "p2": self.actors[2]},
        }
        self.recorder = BattleRecorder(header, self.state)
        self.recorder.think_provenance = check_think_provenance(think_provenance)
        self.status = "active"
        self.abandon_reason: str | None = None
        self.refresh_summary = False  # one-by-one matches refresh summary.json; series do it in bulk
        # one-by-one matches publish under the group's allocation lock, so a repair never sees their
        # trace folder without its final line; a series' battles are covered by its group lease
        self.serialize_publish = False
        self.paths: dict[str, str] | None = None
        self.paused: dict[str, Any] | None = None  # set when the last advance stopped at its work cap
        self._shown_at = time.perf_counter()

    # ------------------------------------------------------------------ playing
    @property
    def done(self) -> bool:
        return self.state.is_terminal

    @property
    def awaiting_p1(self) -> bool:
        """True when it is player 1's move and player 1 is a human or an LLM."""
        return self.status == "active" and not self.done and self.state.to_move == 1 and 1 not in self.policies

    def legal_actions(self) -> list[dict[str, Any]]:
        legal = self.state.legal_actions()
        return [{"action_id": a, "description": d} for a, d in zip(legal, self.state.describe_actions(legal))]

    def _require_active(self) -> None:
        if self.status != "active":
            raise MatchError(f"match of battle {self.battle_id} is {self.status}; start a new battle",
                             "match_finished")

    def _record(self, action_id: int, latency_s: float, rationale: str | None = None,
                policy: dict[str, Any] | None = None) -> list[dict]:
        before = self.state.clone()
        events = self.state.apply(action_id)
        self.recorder.record(before, action_id, events, self.actors[before.active + 1], latency_s=latency_s,
                             rationale=rationale, policy=policy)
        return events

    def omniscient_view(self) -> dict[str, Any]:
        """The full state (both hands, deck orders). Shown to a player mid-battle it taints the
        next decisions as training data, so it is recorded (``omniscient_peeks``) and such a
        battle is never eligible for training."""
        if self.status == "active" and not self.done:
            index = len(self.recorder.decisions)
            if index not in self.recorder.omniscient_peeks:
                self.recorder.omniscient_peeks.append(index)
        return self.state.omniscient_view()

    @property
    def decision_count(self) -> int:
        return len(self.recorder.decisions)

    def moves_since(self, start: int) -> list[dict[str, Any]]:
        """Decisions taken since decision ``start``: who moved, the action, its description (from
        the mover's side: "your" means the mover's) and the rationale."""
        return [{"player": d.before.active + 1, "action_id": d.action_id,
                 "description": d.before.describe_action(d.action_id), "rationale": d.rationale}
                for d in self.recorder.decisions[start:]]

    def pending_policy(self) -> Any | None:
        """The policy due to move now, or None (a human/LLM decision is due, or the battle is over)."""
        if self.status != "active" or self.state.is_terminal:
            return None
        return self.policies.get(self.state.to_move)

    def play_decision(self, decision: Decision, latency_s: float) -> list[dict[str, Any]]:
        """Apply a policy's decision for the player to move; a fallback is recorded as a warning."""
        if decision.warning is not None:
            self.recorder.warn({"decision_index": len(self.recorder.decisions), "player": self.state.to_move,
                                **decision.warning})
        return self._record(decision.action_id, latency_s, policy=decision.policy_record())

    def submit(self, action_id: Any, rationale: str | None = None) -> list[dict[str, Any]]:
        """Player 1's move (human/llm). The opponent then plays up to the next player-1 decision."""
        self._require_active()
        if 1 in self.policies:
            raise MatchError("this is an rl battle: player 1 is a model and the battle plays itself",
                             "invalid_argument")
        if self.done:
            raise MatchError(f"battle {self.battle_id} is over (winner {self.state.winner}); call finish_battle",
                             "match_finished")
        if self.state.to_move != 1:
            raise MatchError("it is player 2's move; call advance_bot", "not_your_turn")
        if rationale is not None and (not isinstance(rationale, str) or len(rationale) > MAX_RATIONALE_CHARS):
            raise InvalidArgument(f"rationale must be text of at most {MAX_RATIONALE_CHARS} characters")
        try:
            action_id = check_action_id(action_id)  # refuses floats, bools, strings and ids outside 0..162
            if action_id not in self.state.legal_actions():
                self.state.clone().apply(action_id)  # raises with the reason and the legal ids
        except IllegalActionError as exc:
            raise MatchError(str(exc), "illegal_action") from None
        think_s = time.perf_counter() - self._shown_at
        events = self._record(action_id, think_s, rationale)
        if self.recorder.think_provenance is not None:
            self.recorder.observe_think_time(think_s)
        events += self.advance()
        return events

    def advance(self) -> list[dict[str, Any]]:
        """Let the policies move until a human/LLM decision is due or the battle ends.

        Under a work scope (:mod:`adapters.work`) a cancelled call stops before the next
        decision or inside a search decision (nothing of that decision is recorded: the match
        stays as it was after the last one), and a call whose rollout cap is spent stops at
        the next decision boundary with ``paused`` set (reason, limit, rollouts spent): call
        advance again to go on."""
        self._require_active()
        events: list[dict[str, Any]] = []
        self.paused = None
        while (policy := self.pending_policy()) is not None:
            work.check()
            if work.cap_reached():
                scope = work.current()
                self.paused = {"reason": "work_cap", "limit": scope.max_rollouts, "rollouts": scope.rollouts}
                break
            t0 = time.perf_counter()
            decision = decide(policy, self.state)
            events += self.play_decision(decision, time.perf_counter() - t0)
        self._shown_at = time.perf_counter()
        return events

    def run(self) -> None:
        """Play an rl battle (both seats are policies) to its end."""
        if 1 not in self.policies:
            raise MatchError(f"a {self.p1_actor_type} battle needs player 1's moves; use submit", "invalid_argument")
        self.advance()

    # ------------------------------------------------------------------ ending
    def finish(self) -> dict[str, Any]:
        """Write the finished battle's trace and catalog line; returns the result."""
        self._require_active()
        if not self.done:
            raise MatchError(f"battle {self.battle_id} is not over (player {self.state.to_move} to move); "
                             f"play on, or abandon it", "invalid_argument")
        return self._publish("finished")

    def abandon(self, reason: str = "abandoned by the caller") -> dict[str, Any]:
        """Stop a battle early; its trace is kept, marked abandoned, never training-ready."""
        self._require_active()
        if not isinstance(reason, str) or len(reason) > MAX_RATIONALE_CHARS:
            raise InvalidArgument(f"reason must be text of at most {MAX_RATIONALE_CHARS} characters")
        self.abandon_reason = reason
        return self._publish("abandoned", reason)

    def crash(self, error: BaseException) -> dict[str, Any]:
        """Record a battle that failed with an unexpected error (marked crashed)."""
        self.recorder.warn({"decision_index": len(self.recorder.decisions), "kind": "crash",
                            "message": f"{type(error).__name__}: {error}"})
        return self._publish("crashed", f"crashed: {type(error).__name__}")

    def _publish(self, status: str, reason: str | None = None) -> dict[str, Any]:
        # The group must still be there (and confined) before anything is written: a trace written
        # into a re-created folder would be invisible (no manifest). The match stays active, so the
        # call can be retried once the folder is restored.
        self.store.require_present(self.group, f"battle {self.battle_id} ({status}) was not recorded")
        files = self.recorder.finish(self.state, status, reason)
        with self.store.allocation_lock(self.group) if self.serialize_publish else contextlib.nullcontext():
            hashes, compact_sha256 = self.store.write_battle(self.group, self.battle_id, files, compact=self.compact)
            entry = self.catalog_entry(status, hashes, compact_sha256)
            self.store.append_catalog(self.group, entry)
            if self.refresh_summary:  # under the lock: the store's index of the group is shared by its matches
                self.store.write_summary(self.group, live=self.store.followed_index(self.group))
        self.status = status
        battle_dir = self.store.battle_dir(self.group, self.battle_id)
        self.paths = {name: str(battle_dir / "v5" / stored_name(name, self.compact)) for name in hashes}
        return self.result()

    def catalog_entry(self, status: str, hashes: dict[str, str] | None = None,
                      compact_sha256: str | None = None) -> dict[str, Any]:
        final = status != "started"
        return {
            "battle_id": self.battle_id, "index": self.index, "status": status, "seed": self.seed,
            "battle_tag": self.tag, "codename": self.codename,
            "winner": self.state.winner if final else None,
            "turns": self.state.turn if final else None,
            "decisions": len(self.recorder.decisions) if final else None,
            "degraded": self.recorder.degraded if final else None,
            "policy_warnings": len(self.recorder.policy_warnings) if final else None,
            "omniscient_peeks": len(self.recorder.omniscient_peeks) if final else None,
            "weights_hashes": sorted({a["weights_hash"] for a in self.actors.values() if a["weights_hash"]}),
            "deck_ids": self.deck_ids,
            "files": hashes,
            **({} if compact_sha256 is None else {"compact_sha256": compact_sha256}),
        }

    def result(self) -> dict[str, Any]:
        return {
            "battle_id": self.battle_id, "group": self.group, "status": self.status, "done": self.done,
            "winner": self.state.winner, "reason": self.state.end_reason or self.abandon_reason,
            "turns": self.state.turn,
            "decisions": len(self.recorder.decisions), "battle_tag": self.tag,
            "degraded": self.recorder.degraded, "policy_warnings": list(self.recorder.policy_warnings),
            "paths": self.paths,
        }


def start_match(store: SessionStore, group: str, p1_actor_type: Any, opponent: Any = "baseline:greedy",
                p1_model: Any = None, seed: Any = None, codename: str | None = None,
                checkpoints_dir: str | None = None, think_provenance: str | None = None) -> Match:
    """Start a battle in a group of one-by-one battles (created on first use).

    ``seed`` None derives one from the group and the battle's index. The opponent plays
    right away when it starts, up to player 1's first decision (human/llm). ``think_provenance``:
    see the module docstring (only for a human player 1).
    """
    check_name(group, "group")
    if codename is not None:
        check_codename(codename)
    p1_actor_type, opponent_actor, p1_actor = resolve_players(p1_actor_type, opponent, p1_model, checkpoints_dir)
    if seed is not None:
        check_seed(seed)
    if check_think_provenance(think_provenance) is not None and p1_actor_type != "human":
        raise InvalidArgument(f"think times are observed for a human player 1 only, not {p1_actor_type!r}")
    store.confine_group(group)  # a group (or a file of it) symlinked out of the sessions dir is refused
    owner = ownership.current_owner(store, group)
    if owner is not None:  # a series or a repair owns the group right now
        raise ownership.busy_error(group, owner, "a battle cannot be started in it meanwhile")
    store.ensure_group(group, configuration(p1_actor_type, opponent_actor, p1_actor), {"mode": "explicit"},
                       codename)
    with store.allocation_lock(group):
        index = settled.next_index(store, group)  # never acts on a damaged catalog, never reuses an index
        if seed is None:
            seed = derive_seed(index, f"group:{group}") >> 1
        match = Match(store, group, index, seed, p1_actor_type, opponent_actor, p1_actor, codename,
                      think_provenance)
        match.refresh_summary = True
        match.serialize_publish = True
        store.append_catalog(group, match.catalog_entry("started"))
    if p1_actor_type != "rl":
        play_or_abandon(match)
    return match


CANCELLED_AT_START = "cancelled by the caller before the battle was handed over"


def play_or_abandon(match: Match) -> None:
    """``match.advance()`` for a battle nobody holds yet: if the call is cancelled meanwhile
    (see :mod:`adapters.work`), nobody ever gets its match id, so it is recorded as abandoned
    (its trace kept, never training-ready) instead of staying half-started in the catalog."""
    try:
        match.advance()
    except work.WorkCancelled:
        match.abandon(CANCELLED_AT_START)
        raise
