"""Baseline policies: ``random`` (uniform over legal actions, own seeded generator) and
``greedy`` (a one-ply lookahead over a board evaluation, with an explicit lethal check).

A policy acts for the player to move: ``policy.act(state) -> action_id``; ``decide(state)``
returns the same action as a :class:`~adapters.decision.Decision` (the interface model
policies share), ``decide_batch(states)`` one per state.

On the native backend (``engine.backend.native()``) the greedy policy's ``act`` runs in the C++
core (native/src/policies.cc, the same floats bit for bit); the code below is the reference and
the Python engine's path. ``evaluate`` stays in Python: converting a state for it would cost more
than evaluating it. The random policy is one draw: the core has its own copy for in-core battles.
"""

from __future__ import annotations

from engine import ATTACK_BASE, CARDS, END_TURN, SplitMix64, State, backend
from engine.actions import ATTACK_TARGETS
from engine.cards import BREAKTHROUGH, DRAIN, GUARD, LETHAL, WARD
from engine.errors import StateFormatError

from .decision import Decision

BASELINES = ("random", "greedy")


class RandomPolicy:
    """Uniform choice over the legal actions, from its own SplitMix64 generator."""

    kind = "baseline"
    name = "random"

    def __init__(self, seed: int = 0) -> None:
        self.rng = SplitMix64(seed)

    @property
    def spec(self) -> str:
        return "baseline:random"

    def act(self, state: State) -> int:
        legal = state.legal_actions()
        return legal[self.rng.below(len(legal))]

    def decide(self, state: State) -> Decision:
        return Decision(self.act(state))

    def decide_batch(self, states: list[State]) -> list[Decision]:
        """One decision per state, in order (draws from the generator in that order)."""
        return [self.decide(s) for s in states]


# Board evaluation weights, tuned by hand against the random baseline and by self-play.
_KEYWORD_VALUE = {GUARD: 1.0, WARD: 1.5, DRAIN: 1.0, LETHAL: 2.0, BREAKTHROUGH: 0.5}
_WIN = 1e6


def _creature_value(c) -> float:
    value = 1.0 + c.attack + 0.8 * c.health
    for bit, bonus in _KEYWORD_VALUE.items():
        if c.keywords & bit:
            value += bonus
    return value


def _hero_value(hp: int) -> float:
    """Health is worth more the closer a hero is to death."""
    return hp + (10 - hp) * 1.5 if hp < 10 else float(hp)


def evaluate(state: State, player: int) -> float:
    """Static value of ``state`` for ``player`` (higher is better)."""
    if state.is_terminal:
        return _WIN if state.winner == player else (-_WIN if state.winner != 0 else -_WIN / 10)
    me = state.players[player - 1]
    opp = state.players[2 - player]
    score = _hero_value(me.hp) - 1.2 * _hero_value(opp.hp)
    score += sum(_creature_value(c) for c in me.board if c is not None)
    score -= 1.1 * sum(_creature_value(c) for c in opp.board if c is not None)
    score += 0.6 * len(me.hand)
    return score


class GreedyPolicy:
    """Plays the action whose immediate result evaluates best; ends the turn when nothing helps.

    Before the lookahead it checks for lethal: with no enemy guard and enough ready attack
    (plus affordable face damage) to kill the enemy hero, it goes face.
    """

    kind = "baseline"
    name = "greedy"

    def __init__(self, seed: int = 0) -> None:  # deterministic; the seed is accepted for a uniform factory
        del seed

    @property
    def spec(self) -> str:
        return "baseline:greedy"

    def decide(self, state: State) -> Decision:
        return Decision(self.act(state))

    def decide_batch(self, states: list[State]) -> list[Decision]:
        return [self.decide(s) for s in states]

    def act(self, state: State) -> int:
        core = backend.native()
        if core is not None:
            try:
                return core.greedy_act(state)
            except StateFormatError:  # an integer beyond the core's range (an extreme from_dict): Python plays
                pass
        return self._act_reference(state)

    def _act_reference(self, state: State) -> int:
        legal = state.legal_actions()
        if len(legal) == 1:
            return legal[0]
        player = state.to_move
        face = self._lethal_face_action(state, legal)
        if face is not None:
            return face
        best_action, best_value = END_TURN, evaluate(state, player) + 1e-6
        for action in legal:
            if action == END_TURN:
                continue
            child = state.clone()
            child.apply(action)
            value = evaluate(child, player)
            if value > best_value:
                best_action, best_value = action, value
        return best_action

    @staticmethod
    def _lethal_face_action(state: State, legal: list[int]) -> int | None:
        me = state.players[state.active]
        opp = state.players[1 - state.active]
        if any(c is not None and c.keywords & GUARD for c in opp.board):
            return None
        face_attacks = [a for a in legal if a >= ATTACK_BASE and (a - ATTACK_BASE) % ATTACK_TARGETS == 0]
        damage = sum(me.board[(a - ATTACK_BASE) // ATTACK_TARGETS].attack for a in face_attacks)
        mana = me.mana
        for card_id in sorted(me.hand, key=lambda cid: CARDS[cid].cost):
            card = CARDS[card_id]
            if card.effect == "damage" and card.target in ("enemy_hero", "any_character") and card.cost <= mana:
                damage += card.amount
                mana -= card.cost
        if damage < opp.hp:
            return None
        if face_attacks:
            return face_attacks[0]
        return None  # spells only: the one-ply lookahead finds the killing spell itself
