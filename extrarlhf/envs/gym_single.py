"""Gymnasium single-seat ExtraArena environment, registered as ``"ExtraArena-v1"`` (needs the ``rl`` extra).

The learner plays one seat; an opponent policy plays the other automatically inside
``reset`` and ``step``, so every observation the learner sees is its own decision point.
Since a turn is many actions, one ``step`` is one learner action (END_TURN hands over to
the opponent, whose whole turn is played before ``step`` returns).

Illegal actions, and why check_env is run with ``illegal_action="penalize"``
--------------------------------------------------------------------------------
The action space is the engine's fixed ``Discrete(163)``; in a given state only a few ids
are legal. The mask is ``info["action_mask"]`` (int8, usable as
``env.action_space.sample(mask=info["action_mask"])``) and ``env.action_masks()`` (bool,
what sb3-contrib's MaskablePPO calls).

* ``illegal_action="raise"`` (default): an illegal id raises
  :class:`engine.IllegalActionError` whose message gives the reason and the legal ids. The
  state is unchanged. Nothing is silently replaced or penalized, so a masking bug in the
  learner surfaces at once.
* ``illegal_action="penalize"``: an id of the action space that is illegal now ends the
  episode with reward -1 (``terminated=True``, state unchanged,
  ``info["illegal_action"]`` holds the reason). Values that are not action ids at all
  (wrong type, outside 0..162) still raise: they are bugs, not moves.

``gymnasium.utils.env_checker.check_env`` steps with ``env.action_space.sample()``, which it
cannot mask, and in ``check_step_determinism`` it even samples before the reset it steps
after. Those ids are almost always illegal, so the default env would (correctly) raise.
The project's tests therefore run ``check_env`` on ``illegal_action="penalize"``, whose
spaces, reset, seeding, rendering and step return types are the same code as the
default's; legal-action steps are checked separately with gymnasium's own
``data_equivalence``/``data_shares_objects`` helpers and full masked episodes.

Seeding: ``reset(seed=s)`` plays ``engine.new_battle(s)`` and reseeds ``self.np_random``;
``reset()`` draws the battle seed from ``self.np_random``. The opponent baseline's seed and
a ``seat="random"`` choice are derived from the battle seed, so ``info["battle_seed"]``
alone reproduces an episode. Global random state is never used.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

import engine
from adapters import BASELINES, Policy, make_baseline
from engine import ACTION_SPACE_SIZE, OBS_DIM, IllegalActionError, State, derive_seed
from engine.actions import check_action_id

from .aec import check_render_mode, draw_battle_seed, illegal_action_message, is_legal

ENV_ID = "ExtraArena-v1"
ILLEGAL_ACTION_MODES = ("raise", "penalize")


def _is_action_id(action: Any) -> bool:
    try:
        check_action_id(action)
    except IllegalActionError:
        return False
    return True


class ArenaGymEnv(gym.Env[np.ndarray, np.int64]):
    """One seat of an ExtraArena battle against ``opponent`` (see the module doc).

    Args:
        opponent: a baseline name (``"random"``, ``"greedy"``), built afresh each episode
            with a seed derived from the battle seed, or a policy object with
            ``act(state) -> action_id`` that is used as is (its own seeding).
        seat: the learner's player number, 1 or 2, or ``"random"`` (derived from the battle seed).
        render_mode: None or ``"ansi"`` (``render()`` returns the learner's text view).
        illegal_action: ``"raise"`` (default) or ``"penalize"``.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(self, opponent: str | Policy = "greedy", seat: int | str = 1, render_mode: str | None = None,
                 illegal_action: str = "raise") -> None:
        if isinstance(opponent, str):
            if opponent not in BASELINES:
                raise ValueError(f"unknown opponent baseline {opponent!r}; available: {', '.join(BASELINES)}, "
                                 "or pass a policy object with act(state)")
        elif not callable(getattr(opponent, "act", None)):
            raise TypeError(f"opponent must be a baseline name or have act(state), got {opponent!r}")
        if seat not in (1, 2, "random") or isinstance(seat, bool):
            raise ValueError(f"seat must be 1, 2 or 'random', got {seat!r}")
        if illegal_action not in ILLEGAL_ACTION_MODES:
            raise ValueError(f"illegal_action must be one of {ILLEGAL_ACTION_MODES}, got {illegal_action!r}")
        self.opponent_spec = opponent
        self.seat_choice = seat
        self.illegal_action = illegal_action
        self.render_mode = check_render_mode(render_mode, self.metadata["render_modes"])
        self.observation_space = spaces.Box(-1.0, 1.0, (OBS_DIM,), np.float32)
        self.action_space = spaces.Discrete(ACTION_SPACE_SIZE)
        self._state: State | None = None
        self._opponent: Policy | None = None
        self._done = True
        self.seat: int | None = None  # the learner's seat in the current episode
        self.battle_seed: int | None = None

    @property
    def battle(self) -> State:
        """The live engine state (read it, do not mutate it; ``clone()`` it to search)."""
        if self._state is None:
            raise RuntimeError("call reset() before using the environment")
        return self._state

    # ------------------------------------------------------------------ API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start a battle; ``options`` are accepted for API compatibility and currently unused."""
        super().reset(seed=seed)
        self.battle_seed = int(seed) if seed is not None else draw_battle_seed(self.np_random)
        self.seat = (self.seat_choice if self.seat_choice != "random"
                     else 1 + derive_seed(self.battle_seed, "gym-seat") % 2)
        self._opponent = (make_baseline(self.opponent_spec, derive_seed(self.battle_seed, "gym-opponent"))
                          if isinstance(self.opponent_spec, str) else self.opponent_spec)
        self._state = engine.new_battle(self.battle_seed)
        self._done = False
        opponent_actions = self._play_opponent()
        return self._state.observation(self.seat), self._info(opponent_actions)

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        state = self.battle
        if self._done:
            raise RuntimeError("the episode is over (terminated); call reset() before step()")
        if not is_legal(state, action):
            message = illegal_action_message(state, action, f"ArenaGymEnv learner (player {self.seat})")
            if self.illegal_action == "penalize" and _is_action_id(action):
                self._done = True
                info = self._info([])
                info["illegal_action"] = message
                return state.observation(self.seat), -1.0, True, False, info
            raise IllegalActionError(message)
        state.apply(action)
        opponent_actions = self._play_opponent()
        terminated = state.is_terminal
        reward = 0.0
        if terminated:
            self._done = True
            reward = 0.0 if state.winner == 0 else (1.0 if state.winner == self.seat else -1.0)
        return state.observation(self.seat), reward, terminated, False, self._info(opponent_actions)

    def action_masks(self) -> np.ndarray:
        """Bool mask of the learner's legal actions (all False once the episode is over)."""
        if self._done or self._state is None:
            return np.zeros(ACTION_SPACE_SIZE, dtype=bool)
        return self._state.legal_action_mask()

    def render(self) -> str | None:
        if self.render_mode is None:
            gym.logger.warn("render() was called without a render_mode; use render_mode='ansi'")
            return None
        return self.battle.render(self.seat)

    def close(self) -> None:
        """Nothing to release (no window, no process)."""

    # ------------------------------------------------------------------ internals
    def _play_opponent(self) -> list[int]:
        """Let the opponent act until it is the learner's decision or the battle is over."""
        state = self.battle
        played: list[int] = []
        while not state.is_terminal and state.to_move != self.seat:
            action = self._opponent.act(state)
            try:
                state.apply(action)
            except IllegalActionError as exc:
                raise IllegalActionError(f"the opponent policy {self.opponent_spec!r} chose an illegal "
                                         f"action: {exc}") from None
            played.append(int(action))
        return played

    def _info(self, opponent_actions: list[int]) -> dict[str, Any]:
        state = self.battle
        info: dict[str, Any] = {
            "action_mask": self.action_masks().astype(np.int8),
            "battle_seed": self.battle_seed,
            "seat": self.seat,
            "turn": state.turn,
            "opponent_actions": opponent_actions,
        }
        if state.is_terminal:
            info["winner"] = state.winner
            info["end_reason"] = state.end_reason
        return info


def register() -> None:
    """Register ``"ExtraArena-v1"`` with gymnasium once (importing this module does it)."""
    if ENV_ID not in gym.registry:
        gym.register(id=ENV_ID, entry_point="extrarlhf.envs.gym_single:ArenaGymEnv")


register()
