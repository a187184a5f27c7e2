"""Gymnasium single-seat ExtraArena environment, registered as ``"ExtraArena-v1"`` (needs the ``rl`` extra).

The learner plays one seat; an opponent policy plays the other automatically inside
``reset`` and ``step``, so every observation the learner sees is its own decision point.
Since a turn is many actions, one ``step`` is one learner action (END_TURN hands over to
the opponent, whose whole turn is played before ``step`` returns).

Illegal actions
---------------
The action space is the engine's fixed ``Discrete(163)``; in a given state only a few ids
are legal. The mask is int8 everywhere: ``info["action_mask"]``, ``action_masks()`` (what
sb3-contrib's MaskablePPO calls; ``gym.make`` adds :class:`ActionMasks` as its outermost
wrapper so ``gym.make(ENV_ID).action_masks()`` works, and ``env.get_wrapper_attr("action_masks")()``
works through any wrapper) and ``obs["action_mask"]`` in the Dict mode, so
``env.action_space.sample(mask=...)`` takes any of them. It is built once per decision point
(``action_masks()`` returns that step's ``info["action_mask"]`` array itself), and a step checks
legality by applying the action (the engine refuses an illegal one before changing anything),
so the legal actions are computed once per learner decision, as by the raw engine.

* ``illegal_action="penalize"`` (default): an id of the action space that is illegal now
  ends the episode with reward -1 (``terminated=True``, state unchanged,
  ``info["illegal_action"]`` holds the reason, which lists the legal ids). This is what
  generic tools expect: ``check_env`` (Gymnasium's and Stable-Baselines3's) and
  unmasked algorithms step with ``env.action_space.sample()``, which cannot know the mask.
  Values that are not action ids at all (a refused form, outside 0..162) still raise: they
  are bugs, not moves. ``step`` takes an int, a numpy integer scalar or a one-element numpy
  integer array of any shape (``np.array([5])`` steps as ``5``); floats (even ``3.0``), bools,
  strings, ``None`` and longer arrays are refused, the error saying what was got
  (:mod:`extrarlhf.envs.actions`).
* ``illegal_action="raise"``: an illegal id raises :class:`engine.IllegalActionError`
  whose message gives the reason and the legal ids; the state is unchanged. Use it with a
  masked learner, so a masking bug surfaces at once instead of as a lost episode.

Seeding: ``reset(seed=s)`` plays ``engine.new_battle(s)`` and reseeds ``self.np_random``;
``reset()`` draws the battle seed from ``self.np_random``. The opponent baseline's seed and
a ``seat="random"`` choice are derived from the battle seed, so ``info["battle_seed"]``
alone reproduces an episode. Global random state is never used.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

import engine
from adapters import Policy
from engine import ACTION_SPACE_SIZE, IllegalActionError, State, derive_seed

from .actions import env_action_id
from .aec import draw_battle_seed, illegal_action_message
from .observations import MASK_DTYPE, action_mask, check_observation_mode, dict_observation, dict_space, \
    vector_space
from .opponents import Opponent, resolve_opponent, resolve_pool
from .render import RENDER_MODES, check_render_mode, render_view

ENV_ID = "ExtraArena-v1"
ILLEGAL_ACTION_MODES = ("raise", "penalize")


def _is_action_id(action: Any) -> bool:
    try:
        env_action_id(action)
    except IllegalActionError:
        return False
    return True


class ArenaGymEnv(gym.Env[Any, np.int64]):
    """One seat of an ExtraArena battle against ``opponent`` (see the module doc).

    Args:
        opponent: an actor spec (``"baseline:greedy"`` (default), ``"baseline:random"``, a
            checkpoint name registered in ``checkpoints_dir``; ``"random"``/``"greedy"`` too),
            a policy object with ``act(state) -> action_id`` (used as is, its own seeding), or
            a list of these: a pool, one member drawn per episode (see
            :mod:`extrarlhf.envs.opponents`). A spec's policy is built afresh each episode with
            a seed derived from the battle seed. ``info["opponent"]`` names the episode's one.
        seat: the learner's player number, 1 or 2, or ``"random"`` (derived from the battle seed).
        render_mode: None, ``"human"`` (the text view printed at every reset/step),
            ``"ansi"`` (``render()`` returns the text view) or ``"rgb_array"`` (a uint8 frame).
        illegal_action: ``"penalize"`` (default) or ``"raise"``.
        observation_mode: ``"vector"`` (default, float32 [OBS_DIM]) or ``"dict"``
            (``observation``, ``action_mask``, ``legal_ids``, ``action_features``; see
            :mod:`extrarlhf.envs.observations`).
        checkpoints_dir: where checkpoint names are looked up (default ``checkpoints``).
    """

    metadata = {"render_modes": RENDER_MODES, "render_fps": 4}

    def __init__(self, opponent: Any = "baseline:greedy", seat: int | str = 1, render_mode: str | None = None,
                 illegal_action: str = "penalize", observation_mode: str = "vector",
                 checkpoints_dir: str | None = None) -> None:
        if seat not in (1, 2, "random") or isinstance(seat, bool):
            raise ValueError(f"seat must be 1, 2 or 'random', got {seat!r}")
        if illegal_action not in ILLEGAL_ACTION_MODES:
            raise ValueError(f"illegal_action must be one of {ILLEGAL_ACTION_MODES}, got {illegal_action!r}")
        self.observation_mode = check_observation_mode(observation_mode)
        self.render_mode = check_render_mode(render_mode, self.metadata["render_modes"])
        self.checkpoints_dir = checkpoints_dir
        self.opponents: list[Opponent] = resolve_pool(opponent, checkpoints_dir)
        self.seat_choice = seat
        self.illegal_action = illegal_action
        self.observation_space = dict_space() if observation_mode == "dict" else vector_space()
        self.action_space = spaces.Discrete(ACTION_SPACE_SIZE)
        self._state: State | None = None
        self._opponent: Policy | None = None
        self._done = True
        self._mask = np.zeros(ACTION_SPACE_SIZE, dtype=MASK_DTYPE)  # the learner's mask at this decision point
        self.seat: int | None = None  # the learner's seat in the current episode
        self.battle_seed: int | None = None
        self.opponent_label: str | None = None  # the current episode's opponent

    def add_opponent(self, opponent: Any) -> None:
        """Add a member to the opponent pool (a spec or a policy object); used from the next reset."""
        self.opponents.append(resolve_opponent(opponent, self.checkpoints_dir))

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
        self._begin(seed)
        return self._decision_point(self._play_opponent())

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        refused = self._learner_move(action)
        if refused is not None:
            return refused
        return self._end_step(self._play_opponent())

    def action_masks(self) -> np.ndarray:
        """int8 mask of the learner's legal actions (all zeros before reset and once the episode is over).

        It is computed once per decision point: the same array as that step's ``info["action_mask"]``
        (and the Dict observation's ``action_mask``)."""
        return self._mask

    def render(self) -> str | np.ndarray | None:
        if self.render_mode is None:
            gym.logger.warn("render() was called without a render_mode; pass render_mode='ansi', 'rgb_array' "
                            "or 'human' to gym.make")
            return None
        return render_view(self.battle, self.seat, self.render_mode)

    def close(self) -> None:
        """Nothing to release (no window, no process)."""

    # ------------------------------------------------------------------ internals
    # reset = _begin + the opponent's opening moves (_play_opponent) + _decision_point;
    # step = _learner_move + _play_opponent + _end_step. ReferenceBatch (vector.py) calls the
    # same parts, playing the opponents' moves of many battles together (_opponent_to_move,
    # _opponent_plays).
    def _begin(self, seed: int | None, make: Callable[[Opponent, int], Policy] | None = None) -> None:
        """Everything of ``reset`` before the opponent's opening moves: the seed, seat,
        opponent (a fresh policy for a spec: ``member.make(seed)``, or ``make(member, seed)``,
        which must build the same) and the new battle."""
        super().reset(seed=seed)
        self.battle_seed = int(seed) if seed is not None else draw_battle_seed(self.np_random)
        self.seat = (self.seat_choice if self.seat_choice != "random"
                     else 1 + derive_seed(self.battle_seed, "gym-seat") % 2)
        member = self.opponents[0] if len(self.opponents) == 1 else \
            self.opponents[derive_seed(self.battle_seed, "gym-opponent-pick") % len(self.opponents)]
        self.opponent_label = member.label
        opponent_seed = derive_seed(self.battle_seed, "gym-opponent")
        self._opponent = member.make(opponent_seed) if make is None else make(member, opponent_seed)
        self._state = engine.new_battle(self.battle_seed)
        self._done = False

    def _learner_move(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]] | None:
        """Apply the learner's action: None when applied, the step's result when refused
        (penalize mode; raise mode raises)."""
        state = self._state
        if state is None:
            raise RuntimeError("call reset() before using the environment")
        if self._done:
            raise RuntimeError("the episode is over (terminated); call reset() before step()")
        try:
            if type(action) is not int:
                action = env_action_id(action)  # a numpy integer or a one-element integer array
            state.apply(action)  # checks the id and its legality first; a refused action changes nothing
        except IllegalActionError:
            return self._refuse(action)
        return None

    def _end_step(self, opponent_actions: list[int]) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """The step's result once the opponent has played (the learner to move or the battle over)."""
        reward = 0.0
        winner = self._state.winner
        if winner is not None:
            self._done = True
            reward = 0.0 if winner == 0 else (1.0 if winner == self.seat else -1.0)
        obs, info = self._decision_point(opponent_actions)
        return obs, reward, self._done, False, info

    def _opponent_to_move(self) -> bool:
        state = self._state
        return state.winner is None and state.active == 2 - self.seat  # the opponent's 0-based index

    def _opponent_plays(self, action: int, played: list[int]) -> None:
        """Apply the opponent's chosen ``action`` (appended to ``played``)."""
        try:
            self._state.apply(action)
        except IllegalActionError as exc:
            raise IllegalActionError(f"the opponent {self.opponent_label!r} chose an illegal "
                                     f"action: {exc}") from None
        played.append(int(action))

    def _decision_point(self, opponent_actions: list[int]) -> tuple[Any, dict[str, Any]]:
        """The observation and info of the learner's current decision point; sets the mask once."""
        state, seat = self._state, self.seat
        if self.render_mode == "human":
            render_view(state, seat, "human")
        if self.observation_mode == "dict":
            # after a penalized illegal action the learner is still "to move" but has no move left
            obs = dict_observation(state, seat, live=not self._done)
            mask = obs["action_mask"]
        else:
            obs = state.observation(seat)
            mask = np.zeros(ACTION_SPACE_SIZE, dtype=MASK_DTYPE) if self._done else action_mask(state, seat)
        self._mask = mask
        return obs, self._info(opponent_actions)

    def _refuse(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """An action the engine refused: the penalty (a real action id in "penalize" mode) or the error."""
        message = illegal_action_message(self._state, action, f"ArenaGymEnv learner (player {self.seat})")
        if self.illegal_action == "penalize" and _is_action_id(action):
            self._done = True
            obs, info = self._decision_point([])
            info["illegal_action"] = message
            return obs, -1.0, True, False, info
        raise IllegalActionError(message)

    def _play_opponent(self) -> list[int]:
        """Let the opponent act until it is the learner's decision or the battle is over."""
        played: list[int] = []
        while self._opponent_to_move():
            self._opponent_plays(self._opponent.act(self._state), played)
        return played

    def _info(self, opponent_actions: list[int]) -> dict[str, Any]:
        state = self._state
        info: dict[str, Any] = {
            "action_mask": self._mask,
            "battle_seed": self.battle_seed,
            "seat": self.seat,
            "turn": state.turn,
            "opponent_actions": opponent_actions,
            "opponent": self.opponent_label,
        }
        if state.winner is not None:
            info["winner"] = state.winner
            info["end_reason"] = state.end_reason
        return info


class ActionMasks(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Exposes ``action_masks()`` on the outside of a wrapper stack (gymnasium wrappers do not
    forward attributes); ``gym.make(ENV_ID)`` adds it last, so ``env.action_masks()`` works."""

    def __init__(self, env: gym.Env) -> None:
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)

    def action_masks(self) -> np.ndarray:
        return self.env.get_wrapper_attr("action_masks")()


def register() -> None:
    """Register ``"ExtraArena-v1"`` with gymnasium once (importing this module does it)."""
    if ENV_ID not in gym.registry:
        gym.register(id=ENV_ID, entry_point="extrarlhf.envs.gym_single:ArenaGymEnv",
                     additional_wrappers=(gym.envs.registration.WrapperSpec(
                         "ActionMasks", "extrarlhf.envs.gym_single:ActionMasks", {}),))


register()
