"""PettingZoo AEC environment for ExtraArena battles (needs the ``rl`` extra).

Agents are ``"player_1"`` and ``"player_2"`` (engine players 1 and 2). A turn is many
actions ended by END_TURN, so the same agent is usually selected several times in a row:
``agent_selection`` simply follows the engine's ``to_move``.

* Observation of an agent: ``{"observation": float32[OBS_DIM] in [-1, 1] (that player's
  view, no hidden information), "action_mask": int8[163]}``. The mask is all zeros for the
  agent that is not to move and once the battle is over (as in PettingZoo's classic envs).
  ``observation_mode="dict"`` adds ``legal_ids`` and padded ``action_features`` (see
  :mod:`extrarlhf.envs.observations`).
* Render modes: ``human`` (prints the selected agent's text view), ``ansi`` (returns it),
  ``rgb_array`` (a uint8 frame, see :mod:`extrarlhf.envs.render`).
* Rewards: +1 win / -1 loss / 0 draw, given when the battle ends; 0 otherwise.
* Terminations: both agents when the battle ends. Truncations are always False: the
  engine's turn limit is a real end of the game (a draw), not a time limit.
* ``step`` takes an int, a numpy integer scalar or a one-element numpy integer array
  (floats, bools, strings and longer arrays are refused, the error saying what was got):
  :mod:`extrarlhf.envs.actions`.
* An illegal action raises :class:`engine.IllegalActionError` naming the legal ids; it is
  never replaced. For "illegal move loses" semantics wrap the env in PettingZoo's
  ``pettingzoo.utils.wrappers.TerminateIllegalWrapper(env, illegal_reward=-1)``, which
  reads the ``action_mask`` this env already provides.
* Seeding: ``reset(seed=s)`` plays ``engine.new_battle(s)`` (the same battle as the engine
  with that seed) and reseeds the env's own generator with ``s``; ``reset()`` draws the
  battle seed from that generator (seeded at construction or at the last seeded reset).
  Global random state is never used.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding
from pettingzoo import AECEnv
from pettingzoo.utils import wrappers
from pettingzoo.utils.env_logger import EnvLogger

import engine
from engine import ACTION_SPACE_SIZE, IllegalActionError, State

from .actions import env_action_id
from .observations import action_mask, check_observation_mode, dict_observation, dict_space, mask_space, vector_space
from .render import RENDER_MODES, check_render_mode, render_view

AGENTS: tuple[str, str] = ("player_1", "player_2")
_SEED_BOUND = 2**63 - 1  # battle seeds drawn by the env are non-negative int64 values


def draw_battle_seed(rng: np.random.Generator) -> int:
    """A battle seed drawn from an env's own generator (never global random state)."""
    return int(rng.integers(0, _SEED_BOUND))


def is_legal(state: State, action: Any) -> bool:
    """Whether ``action`` is a legal action id for the player to move (False for non-ids;
    the accepted forms of an id: :mod:`extrarlhf.envs.actions`)."""
    try:
        action_id = env_action_id(action)
    except IllegalActionError:
        return False
    return action_id in state.legal_actions()  # a short cached list: cheaper than building the mask


def illegal_action_message(state: State, action: Any, who: str) -> str:
    """Why ``action`` is refused, always ending with the legal ids (shared by both envs)."""
    legal = state.legal_actions()
    try:
        action_id = env_action_id(action)
    except IllegalActionError as exc:  # not an id at all (a refused form or outside 0..162)
        return f"{who}: {exc}; legal action ids now: {legal}"
    try:
        state.clone().apply(action_id)
    except IllegalActionError as exc:  # the engine's reason already ends with the legal ids
        return f"{who}: {exc}"
    raise AssertionError(f"action {action!r} is legal")  # callers only ask about refused actions


class ArenaAECEnv(AECEnv):
    """Two-seat ExtraArena battle as a PettingZoo AEC environment (see the module doc).

    ``env.battle`` is the live engine :class:`engine.State` (read it, do not mutate it: use
    ``env.battle.clone()`` to search) and ``env.battle_seed`` the seed of the current battle.
    ``options`` of :meth:`reset` are accepted for API compatibility and currently unused.
    """

    metadata = {"name": "extraarena_v1", "is_parallelizable": False, "render_modes": RENDER_MODES}

    def __init__(self, render_mode: str | None = None, seed: int | None = None,
                 observation_mode: str = "vector") -> None:
        super().__init__()
        self.render_mode = check_render_mode(render_mode, self.metadata["render_modes"])
        self.observation_mode = check_observation_mode(observation_mode)
        self.possible_agents = list(AGENTS)
        self.agents = []
        self._player = {agent: i + 1 for i, agent in enumerate(AGENTS)}
        self._agent = {i + 1: agent for i, agent in enumerate(AGENTS)}
        self.action_spaces = {agent: spaces.Discrete(ACTION_SPACE_SIZE) for agent in AGENTS}
        self.observation_spaces = {
            agent: dict_space() if observation_mode == "dict"
            else spaces.Dict({"observation": vector_space(), "action_mask": mask_space()})
            for agent in AGENTS
        }
        self._np_random, _ = seeding.np_random(seed)
        self._state: State | None = None
        self.battle_seed: int | None = None

    # ------------------------------------------------------------------ spaces
    def observation_space(self, agent: str) -> spaces.Dict:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Discrete:
        return self.action_spaces[agent]

    @property
    def battle(self) -> State:
        if self._state is None:
            raise RuntimeError("call reset() before using the environment")
        return self._state

    # ------------------------------------------------------------------ API
    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        if seed is not None:
            self._np_random, _ = seeding.np_random(seed)
            self.battle_seed = int(seed)
        else:
            self.battle_seed = draw_battle_seed(self._np_random)
        self._state = engine.new_battle(self.battle_seed)
        self.agents = list(self.possible_agents)
        self.rewards = dict.fromkeys(self.agents, 0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos = {agent: {} for agent in self.agents}
        self.agent_selection = self._agent[self._state.to_move]
        self._skip_agent_selection = None

    def observe(self, agent: str) -> dict[str, np.ndarray]:
        state, player = self.battle, self._player[agent]
        if self.observation_mode == "dict":
            return dict_observation(state, player)
        return {"observation": state.observation(player), "action_mask": action_mask(state, player)}

    def step(self, action: Any) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)  # the API's way: a done agent steps with None and leaves
            return
        state = self.battle
        player = self._player[agent]
        assert state.to_move == player, f"agent_selection {agent} is out of sync with the engine"
        if not is_legal(state, action):
            raise IllegalActionError(illegal_action_message(state, action, f"{agent} (player {player})"))
        self._cumulative_rewards[agent] = 0
        self._clear_rewards()
        state.apply(action if type(action) is int else env_action_id(action))
        if state.is_terminal:
            other = self._agent[3 - player]
            for a in self.agents:
                self.rewards[a] = 0 if state.winner == 0 else (1 if self._player[a] == state.winner else -1)
                self.infos[a] = {"winner": state.winner, "end_reason": state.end_reason, "turn": state.turn}
            self.terminations = dict.fromkeys(self.agents, True)
            self.agent_selection = other  # both are done; each now steps with None
        else:
            self.agent_selection = self._agent[state.to_move]
        self._accumulate_rewards()

    def render(self) -> str | np.ndarray | None:
        """The selected agent's view: printed (``human``), text (``ansi``) or a uint8 frame (``rgb_array``)."""
        if self.render_mode is None:
            gymnasium.logger.warn("render() was called without a render_mode; pass render_mode='ansi', "
                                  "'rgb_array' or 'human'")
            return None
        return render_view(self.battle, self._player[self.agent_selection], self.render_mode)

    def close(self) -> None:
        """Nothing to release (no window, no process)."""


class OrderEnforcing(wrappers.OrderEnforcingWrapper):
    """PettingZoo's OrderEnforcingWrapper whose ``last()`` and ``step()`` read the env directly:
    the same checks and results, without forwarding each read through the wrapper's
    ``__getattr__`` (that forwarding cost more than a native engine step; benchmarks/envs.py)."""

    def last(self, observe: bool = True) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        if not self._has_reset:
            if observe:
                EnvLogger.error_observe_before_reset()
            raise AttributeError("agent_selection cannot be accessed before reset")
        return self.env.last(observe)

    def step(self, action: Any) -> None:
        if self._has_reset and self.env.agents:
            self._has_updated = True
            self.env.step(action)
        else:
            super().step(action)  # before reset: the error; after the end: the warning

    def __str__(self) -> str:
        return str(self.env)


def env(**kwargs: Any) -> AECEnv:
    """``ArenaAECEnv`` behind PettingZoo's order enforcing, as the classic ``env()`` factories do.

    No TerminateIllegalWrapper or AssertOutOfBoundsWrapper: the raw env already refuses
    illegal and out-of-range actions with a clear error.
    """
    return OrderEnforcing(ArenaAECEnv(**kwargs))
