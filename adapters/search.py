"""The search actor ``search:<rollout policy>?sims=N``: decision-time search over the acting
player's information set (DESIGN section 14).

At each decision the actor samples worlds from what the acting player can know
(:func:`determinize`), tries its candidate actions in them with about ``sims`` truncated
rollouts in all, and plays the one whose rollouts end best:

* a world keeps every public part of the state (heroes, mana, boards, turn, the hand and deck
  *sizes*), the player's own hand and the *contents* of their own remaining deck (they know
  their deck list and what they drew); it re-draws what the player cannot see: the order of
  their own deck, the opponent's hand and deck (from two copies of every pool card minus the
  opponent's creatures on the board, the prior the default decks are drawn from), the
  battle's generator and seed. Nothing of the real hidden cards survives into a world, and
  the search's own generator is seeded from the actor's seed and a digest of the
  information set, so two states the player cannot tell apart give the same decision;
* a rollout applies the candidate, lets the rollout policy finish the player's turn, play
  the opponent's reply and the player's next turn (:data:`LOOKAHEAD_TURNS` turns counting
  the current one), and stops when the opponent's turn after that starts (or the battle ended); the leaf
  is scored by :func:`adapters.baselines.evaluate` squashed to [-1, 1] (``tanh(evaluate /
  30)``; a win is 1, a loss -1, a draw 0). Truncated rollouts keep a decision near 30-40 ms
  with greedy in Python (about 0.3 ms in the native core) instead of seconds for full games, and measured stronger: full-game rollouts
  from determinized worlds scored far worse, and stopping right after the opponent's reply
  (2 turns) scored 0.63 against greedy where 3 turns scored 0.71 (the same 50 pairs, 32
  sims);
* the budget is spent by sequential halving (Karnin et al. 2013): every candidate gets the
  same worlds (common random numbers), the worse half is dropped each round, and every
  surviving candidate gets at least one rollout per round (so a decision with many
  candidates and a small ``sims`` runs a few more rollouts than ``sims``). More than
  :data:`MAX_CANDIDATES` legal actions are first cut to the best by a one-ply evaluation in
  the first world.

On the native backend (``engine.backend.native()``) a search whose rollout policy is a baseline
runs in the C++ core (native/src/search.cc), with the same worlds, rollouts, choices, values
and visits bit for bit; a checkpoint rollout policy and the play policy of a labeller run here.

The decision's policy record carries the search's action values (mean leaf value per legal
action, null where an action was not searched), the visits per action and the chosen
action's value.

``&play=<spec>`` (a baseline or a checkpoint) makes the search a labeller (DAgger, Ross et al.
2011): it searches every decision as above and records its values and its own choice
(``search_choice``), but the play policy's action is the one played. A student trained on the
teacher's values at the states the *student* reaches learns what to do after its own mistakes,
which a student trained only on the teacher's states never sees. A rollout policy that falls back (a model that cannot act) makes the search
decision carry its warning, so the battle is marked degraded.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

import orjson

from engine import CARD_IDS, MAX_COPIES, SplitMix64, State, backend, derive_seed
from engine.errors import StateFormatError
from engine.native_state import NativeState

from . import work
from .baselines import GreedyPolicy, RandomPolicy, evaluate
from .decision import AdapterError, Decision

SEARCH_PREFIX = "search:"
DEFAULT_SIMS = 32  # measured: 0.741 against greedy over 400 pairs (docs/training.md)
MAX_SIMS = 4096
MAX_CANDIDATES = 12
LEAF_SCALE = 30.0
LOOKAHEAD_TURNS = 3  # the player's turn, the opponent's reply, the player's next turn
_OPTION = re.compile(r"([a-z_]+)=([^&=]*)")
_SIMS = re.compile(r"[0-9]{1,9}")  # ASCII digits only ('²', '٣' are str.isdigit()), bounded before int()
OPTIONS = ("sims", "play", "guide", "turns")
GUIDES = ("value", "mix", "rollout")  # a guided search's leaf scoring (adapters/guided.py)
MAX_GUIDED_TURNS = 8
DEFAULT_GUIDED_TURNS = 3


@dataclass(frozen=True)
class SearchSpec:
    """A parsed ``search:`` spec: ``guide`` (and ``turns``) set only for the network-guided
    search ``search:<checkpoint>?sims=N&guide=<value|mix|rollout>[&turns=T]``."""

    rollout: str
    sims: int
    play: str | None = None
    guide: str | None = None
    turns: int | None = None

    @property
    def canonical(self) -> str:
        return search_spec(self.rollout, self.sims, self.play, self.guide, self.turns)


def is_search_spec(spec: Any) -> bool:
    return isinstance(spec, str) and spec.startswith(SEARCH_PREFIX)


def parse_search_spec(spec: str) -> tuple[str, int, str | None]:
    """``search:<rollout spec>[?sims=N][&play=<spec>][&guide=...&turns=T]`` -> (rollout spec,
    sims, play spec or None); a bad spec is an AdapterError saying what is wrong and what a good
    one looks like. :func:`parse_search` gives the guided search's options too."""
    parsed = parse_search(spec)
    return parsed.rollout, parsed.sims, parsed.play


def parse_search(spec: str) -> SearchSpec:
    """The whole of a search spec (:func:`parse_search_spec`'s checks, and ``guide``/``turns``)."""
    def bad(why: str) -> AdapterError:
        return AdapterError(f"search spec {spec!r}: {why} (e.g. 'search:baseline:greedy?sims=64', "
                            f"'search:<checkpoint name>?sims=32' or 'search:<checkpoint name>?sims=32&guide=value')")

    if not is_search_spec(spec):
        raise bad(f"a search spec starts with {SEARCH_PREFIX!r}")
    body = spec[len(SEARCH_PREFIX):]
    rollout, _, query = body.partition("?")
    if not rollout:
        raise bad("names no rollout policy")
    if is_search_spec(rollout):
        raise bad("nests a search as its rollout policy; the rollout policy must be a baseline or a checkpoint")
    if "?" in body and not query:
        raise bad("ends with '?' but sets no option; options: sims=N, play=<spec>, guide=<leaf>, turns=T")
    sims, play, guide, turns, seen = DEFAULT_SIMS, None, None, None, set()
    for part in query.split("&") if query else []:
        match = _OPTION.fullmatch(part)
        if match is None:
            raise bad(f"option {part!r} is not name=value")
        name, value = match.groups()
        if name not in OPTIONS:
            raise bad(f"unknown option {name!r}; options: {', '.join(OPTIONS)}")
        if name in seen:
            raise bad(f"option {name!r} is given twice")
        seen.add(name)
        if name == "play":
            if not value:
                raise bad("play names no policy; play=<a baseline or a checkpoint>")
            if is_search_spec(value):
                raise bad("play must be a baseline or a checkpoint, not a search")
            play = value
            continue
        if name == "guide":
            if value not in GUIDES:
                raise bad(f"guide must be one of {', '.join(GUIDES)} (how the network scores the leaves), "
                          f"got {value!r}")
            guide = value
            continue
        if name == "turns":
            if not _SIMS.fullmatch(value) or not 1 <= int(value) <= MAX_GUIDED_TURNS:
                raise bad(f"turns must be an integer in 1..{MAX_GUIDED_TURNS}, got {value!r} (written with the "
                          f"digits 0-9)")
            turns = int(value)
            continue
        if not _SIMS.fullmatch(value) or not 1 <= int(value) <= MAX_SIMS:
            raise bad(f"sims must be an integer in 1..{MAX_SIMS}, got {value!r} (written with the digits 0-9)")
        sims = int(value)
    if turns is not None and guide is None:
        raise bad("turns is an option of the network-guided search; add guide=value (or mix, rollout)")
    if guide is not None:
        if rollout.startswith("baseline:"):
            raise bad(f"guide={guide} needs a checkpoint (a v5 network) to guide the search, not {rollout!r}")
        turns = DEFAULT_GUIDED_TURNS if turns is None else turns
    return SearchSpec(rollout, sims, play, guide, turns)


def search_spec(rollout_spec: str, sims: int, play: str | None = None, guide: str | None = None,
                turns: int | None = None) -> str:
    """The canonical spec (sims always explicit, then guide and turns, then play), as traces and
    reports record it."""
    guided = f"&guide={guide}&turns={turns if turns is not None else DEFAULT_GUIDED_TURNS}" if guide else ""
    return f"{SEARCH_PREFIX}{rollout_spec}?sims={sims}{guided}" + (f"&play={play}" if play else "")


# ---------------------------------------------------------------------------- information sets
def information_set(state: State, player: int) -> dict[str, Any]:
    """Everything ``player`` can know in ``state``: the player view (no opponent hand, no deck
    order), their own deck list and the contents (not the order) of their remaining deck."""
    me = state.players[player - 1]
    return {"view": state.player_view(player), "own_deck_list": sorted(state.decks[player - 1]),
            "own_deck_contents": sorted(me.deck)}


def information_set_digest(state: State, player: int) -> str:
    """sha256 hex of :func:`information_set`'s sorted-key orjson; computed in the core (the same
    bytes: tests/engine/test_native_policies.py) for a state on the native core."""
    if isinstance(state, NativeState):
        return backend.load_native().information_set_digest(state, player)
    return hashlib.sha256(orjson.dumps(information_set(state, player), option=orjson.OPT_SORT_KEYS)).hexdigest()


def determinize(state: State, player: int, rng: SplitMix64) -> State:
    """A world consistent with what ``player`` knows, with every hidden part re-drawn from ``rng``.
    A state on the native core (whose fields are read-only) is determinized there, identically."""
    if isinstance(state, NativeState):
        return NativeState.adopt(backend.load_native().determinize(state, player, rng))
    world = state.clone()
    me = world.players[player - 1]
    opp = world.players[2 - player]
    own = sorted(me.deck)
    rng.shuffle(own)
    me.deck = own
    unseen = Counter({card_id: MAX_COPIES for card_id in CARD_IDS})
    unseen.subtract(c.card_id for c in opp.board if c is not None)
    pool = sorted(unseen.elements())
    rng.shuffle(pool)
    n_hand, n_deck = len(opp.hand), len(opp.deck)
    opp.hand = pool[:n_hand]
    opp.deck = pool[n_hand:n_hand + n_deck]
    decks = [state.decks[player - 1], tuple(sorted(pool[:30]))]
    world.decks = (decks[0], decks[1]) if player == 1 else (decks[1], decks[0])
    world.seed = 0
    world.rng = SplitMix64(rng.next_u64())
    world._legal = None
    world.last_events = []  # the last events may name a card the opponent drew
    return world


# ---------------------------------------------------------------------------- the actor
def _described(policy: Any) -> dict[str, Any]:
    return {"spec": getattr(policy, "spec", None), "kind": getattr(policy, "kind", None),
            "weights_hash": getattr(policy, "weights_hash", None)}


def _native_rollout(policy: Any) -> str | None:
    """The native core's name of a baseline rollout policy ("greedy", "random"), else None
    (a checkpoint or any other policy: the search runs in Python)."""
    kind = type(policy)
    return "greedy" if kind is GreedyPolicy else "random" if kind is RandomPolicy else None


def leaf_value(state: State, player: int) -> float:
    """A rollout's end scored for ``player`` in [-1, 1]."""
    if state.is_terminal:
        return 0.0 if state.winner == 0 else (1.0 if state.winner == player else -1.0)
    return math.tanh(evaluate(state, player) / LEAF_SCALE)


class SearchPolicy:
    """Plays ``search:<rollout>?sims=N`` (module docstring). One instance per battle; the
    rollout policy is any adapter policy (``decide``/``act``)."""

    kind = "search"

    def __init__(self, rollout: Any, sims: int = DEFAULT_SIMS, seed: int = 0, spec: str | None = None,
                 play: Any = None) -> None:
        if isinstance(sims, bool) or not isinstance(sims, int) or not 1 <= sims <= MAX_SIMS:
            raise AdapterError(f"sims must be an integer in 1..{MAX_SIMS}, got {sims!r}")
        if not (hasattr(rollout, "decide") or hasattr(rollout, "act")):
            raise AdapterError(f"the rollout policy must have decide(state) or act(state), got "
                               f"{type(rollout).__name__}")
        if play is not None and not (hasattr(play, "decide") or hasattr(play, "act")):
            raise AdapterError(f"the play policy must have decide(state) or act(state), got {type(play).__name__}")
        self.rollout = rollout
        self.play = play
        self.sims = sims
        self.seed = seed
        self.spec = spec or search_spec(getattr(rollout, "spec", type(rollout).__name__), sims,
                                        None if play is None else getattr(play, "spec", type(play).__name__))
        self.weights_hash = getattr(rollout, "weights_hash", None)
        self._warning: dict | None = None

    def provenance(self) -> dict[str, Any]:
        """What searched, for traces: the sims and the rollout (and play) policy's spec, kind and weights."""
        out = {"sims": self.sims, "rollout": _described(self.rollout)}
        if self.play is not None:
            out["play"] = _described(self.play)
        return out

    def act(self, state: State) -> int:
        return self.decide(state).action_id

    def decide_batch(self, states: list[State]) -> list[Decision]:
        return [self.decide(s) for s in states]

    def _rollout_action(self, world: State) -> int:
        return self._policy_action(self.rollout, world, "in the search's rollouts")

    def _policy_action(self, policy: Any, state: State, where: str) -> int:
        decide = getattr(policy, "decide", None)
        if decide is None:
            return int(policy.act(state))
        decision = decide(state)
        if decision.warning is not None and self._warning is None:
            self._warning = {**decision.warning, "message": f"{where}: {decision.warning['message']}"}
        return decision.action_id

    def _value(self, world: State, action: int, player: int, horizon: int) -> float:
        world = world.clone()
        world.apply(action)
        while not world.is_terminal and world.turn < horizon:
            world.apply(self._rollout_action(world))
        return leaf_value(world, player)

    def decide(self, state: State) -> Decision:
        if state.is_terminal:
            raise ValueError(f"cannot decide in a finished battle ({state!r})")
        legal = state.legal_actions()
        player = state.to_move
        if len(legal) == 1:
            outputs = {"action_values": [None], "visits": [0]}
            return Decision(legal[0], outputs=outputs if self.play is None else {**outputs, "search_choice": legal[0]})
        self._warning = None
        search_seed = derive_seed(self.seed, f"search:{information_set_digest(state, player)}")
        found = self._native_search(state, search_seed)
        best, visits, means = found or self._search(state, legal, player, SplitMix64(search_seed))
        values = [None if mean is None else round(mean, 6) for mean in means]
        outputs = {"action_values": values, "visits": visits}
        if self.play is not None:  # a labeller: the search's choice is recorded, the play policy's is played
            outputs["search_choice"] = best
            best = self._policy_action(self.play, state, "the play policy")
            if best not in legal:
                raise AdapterError(f"the play policy chose action {best}, which is not legal here")
        return Decision(best, value=values[legal.index(best)], warning=self._warning, outputs=outputs)

    def _native_search(self, state: State, search_seed: int) -> tuple[int, list[int], list[float | None]] | None:
        """_search in the C++ core (native/src/search.cc, bit-identical) when the backend is
        native and the rollout policy a baseline; None otherwise. One native decision takes
        about a millisecond, so cancellation is checked between decisions, not per rollout (the
        rollouts still count against the work scope, as _search's work.check(1) each does)."""
        core = backend.native()
        rollout = _native_rollout(self.rollout) if core is not None else None
        if rollout is None:
            return None
        work.check()
        try:
            found = core.search(state, search_seed, self.sims, rollout,
                                self.rollout.rng if rollout == "random" else None)
        except StateFormatError:  # an integer beyond the core's range (an extreme from_dict): Python searches
            return None
        work.check(sum(found[1]))
        return found

    def _search(self, state: State, legal: list[int], player: int,
                rng: SplitMix64) -> tuple[int, list[int], list[float | None]]:
        """Sequential halving over common worlds: the chosen action and, per legal action, the
        visits and the mean leaf value (None where not searched)."""
        worlds = [determinize(state, player, rng)]
        candidates = self._candidates(worlds[0], legal, player)
        horizon = state.turn + LOOKAHEAD_TURNS
        totals = dict.fromkeys(candidates, 0.0)
        visits = dict.fromkeys(candidates, 0)
        alive = list(candidates)
        rounds = max(1, math.ceil(math.log2(len(alive))))
        for r in range(rounds):
            each = max(1, self.sims // (rounds * len(alive)))
            for action in alive:
                for _ in range(each):
                    work.check(1)  # a cancelled caller stops within one rollout
                    j = visits[action]
                    while j >= len(worlds):
                        worlds.append(determinize(state, player, rng))
                    totals[action] += self._value(worlds[j], action, player, horizon)
                    visits[action] += 1
            if r < rounds - 1:
                alive.sort(key=lambda a: (-totals[a] / visits[a], a))
                alive = alive[:math.ceil(len(alive) / 2)]
        best = max(alive, key=lambda a: (totals[a] / visits[a], -a))
        means = [totals[a] / visits[a] if visits.get(a) else None for a in legal]
        return best, [visits.get(a, 0) for a in legal], means

    def _candidates(self, world: State, legal: list[int], player: int) -> list[int]:
        if len(legal) <= MAX_CANDIDATES:
            return list(legal)
        scored = []
        for action in legal:
            child = world.clone()
            child.apply(action)
            scored.append((-evaluate(child, player), action))
        scored.sort()
        return sorted(a for _, a in scored[:MAX_CANDIDATES])
