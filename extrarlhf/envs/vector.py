"""N single-seat battles at once: the batched API and a Gymnasium ``VectorEnv`` on it.

``ArenaVectorEnv(num_envs, opponent=..., seat=..., illegal_action=...)`` (also
``gymnasium.make_vec("ExtraArenaVector-v1", num_envs=N, ...)``) is ``num_envs`` copies of
:class:`~extrarlhf.envs.ArenaGymEnv` stepped together. On the native backend, with a
baseline opponent it plays, the battles and the opponent's moves run inside the C++ core
(``engine_native.batch.BattleBatch``: no Python per battle); otherwise :class:`ReferenceBatch`
steps one ``ArenaGymEnv`` per battle. The core plays ``baseline:random``, ``baseline:greedy`` and
``search:baseline:{greedy,random}?sims=N``. Both give the same results (tests/envs/test_vector_env.py):

* seeds: ``reset(seed=s)``; battle ``i``'s ``k``-th episode (k = 0, 1, ...) has battle seed
  ``engine.derive_seed(s, f"vector:{i}:{k}")``, and is exactly ``ArenaGymEnv``'s episode for
  ``reset(seed=that)`` (seat and opponent seeding derived from it as there).
  ``reset()`` draws ``s`` from the env's own ``np_random``. ``info["battle_seed"]`` holds
  each row's battle seed.
* autoreset: ``metadata["autoreset_mode"]`` is ``AutoresetMode.SAME_STEP``. An episode that
  ends in ``step`` reports its reward and ``terminated``, and its row of the returned
  observation is already the next episode's first one; the ended episode's last observation
  is ``info["final_obs"][i]`` and its ``battle_seed``, ``winner`` (-1 none) and
  ``illegal_action`` (ended by a penalized illegal id) are in ``info["final_info"]``, each
  with its ``_key`` mask. ``truncated`` is always False (the turn limit is a draw, terminal).
* seats: ``seat=1``, ``2``, ``"random"`` (per episode, from its seed) or one of these per battle.
* masks: int8 [N, 163] (``MASK_DTYPE``): ``action_masks()`` and ``info["action_mask"]``.
* illegal actions: as ``ArenaGymEnv`` (``"penalize"``: -1 and the episode ends; ``"raise"``:
  IllegalActionError, nothing stepped). Actions must be an integer array of shape (N,) with
  ids 0..162: anything else raises before any battle is stepped.

For Stable-Baselines3 (``MaskablePPO``), :class:`extrarlhf.envs.sb3_vec.ArenaSB3VecEnv` is
the same batch behind SB3's ``VecEnv`` API.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from engine import ACTION_SPACE_SIZE, IllegalActionError, backend, derive_seed
from engine.actions import check_action_batch, check_batch_seats

from .aec import draw_battle_seed
from .gym_single import ILLEGAL_ACTION_MODES, ArenaGymEnv
from .observations import MASK_DTYPE, vector_space
from .opponents import resolve_opponent


def episode_seed(seed: int, battle: int, episode: int) -> int:
    """The battle seed of battle ``battle``'s ``episode``-th episode after ``reset(seed)``."""
    return derive_seed(seed, f"vector:{battle}:{episode}")


def _check_seed(seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    return int(seed)


class ReferenceBatch:
    """The batched API on one :class:`ArenaGymEnv` per battle: the Python engine's batch and
    the native batch's reference (same dict of arrays as ``engine_native.batch.BattleBatch``)."""

    def __init__(self, num_battles: int, opponent: Any = "baseline:greedy", seat: int | str = 1,
                 illegal_action: str = "penalize", checkpoints_dir: str | None = None) -> None:
        if isinstance(num_battles, bool) or not isinstance(num_battles, (int, np.integer)) or num_battles < 1:
            raise ValueError(f"num_battles must be an integer >= 1, got {num_battles!r}")
        self.num_battles = int(num_battles)
        self.illegal_action = illegal_action
        self.envs = [ArenaGymEnv(opponent=opponent, seat=s, illegal_action=illegal_action,
                                 checkpoints_dir=checkpoints_dir) for s in check_batch_seats(seat, self.num_battles)]
        self._base: int | None = None
        self._episodes = [0] * self.num_battles

    def reset(self, seed: int) -> dict[str, np.ndarray]:
        self._base = _check_seed(seed)
        self._episodes = [0] * self.num_battles
        out = self._empty()
        for i in range(self.num_battles):
            self._start(i, out)
        return out

    def step(self, actions: Any) -> dict[str, np.ndarray]:
        if self._base is None:
            raise RuntimeError("call reset(seed) before step()")
        ids = check_action_batch(actions, self.num_battles)
        if self.illegal_action == "raise":
            for i, env in enumerate(self.envs):
                if int(ids[i]) not in env.battle.legal_actions():
                    try:
                        env.battle.clone().apply(int(ids[i]))
                    except IllegalActionError as exc:
                        raise IllegalActionError(f"battle {i}: {exc}; nothing was stepped") from None
        n = self.num_battles
        out = self._empty()
        out.update(reward=np.zeros(n, np.float32), terminated=np.zeros(n, bool), winner=np.full(n, -1, np.int8),
                   illegal=np.zeros(n, bool), final_seed=np.zeros(n, np.uint64))
        final_obs = []
        for i, env in enumerate(self.envs):
            obs, reward, terminated, _, info = env.step(int(ids[i]))
            out["reward"][i] = reward
            if terminated:
                out["terminated"][i] = True
                final_obs.append(obs)
                out["illegal"][i] = "illegal_action" in info
                out["winner"][i] = info.get("winner", -1)
                out["final_seed"][i] = env.battle_seed
                self._episodes[i] += 1
                self._start(i, out)
            else:
                self._write(i, obs, info, out)
        out["final_obs"] = np.array(final_obs, np.float32).reshape(len(final_obs), vector_space().shape[0])
        return out

    def _empty(self) -> dict[str, np.ndarray]:
        n = self.num_battles
        return {"obs": np.zeros((n, vector_space().shape[0]), np.float32),
                "mask": np.zeros((n, ACTION_SPACE_SIZE), MASK_DTYPE), "seed": np.zeros(n, np.uint64),
                "seat": np.zeros(n, np.int8)}

    def _start(self, i: int, out: dict[str, np.ndarray]) -> None:
        obs, info = self.envs[i].reset(seed=episode_seed(self._base, i, self._episodes[i]))
        self._write(i, obs, info, out)

    @staticmethod
    def _write(i: int, obs: np.ndarray, info: dict[str, Any], out: dict[str, np.ndarray]) -> None:
        out["obs"][i] = obs
        out["mask"][i] = info["action_mask"]
        out["seed"][i] = info["battle_seed"]
        out["seat"][i] = info["seat"]


def make_batch(num_battles: int, opponent: Any = "baseline:greedy", seat: int | str = 1,
               illegal_action: str = "penalize", checkpoints_dir: str | None = None):
    """The native batch when the backend is native and plays ``opponent`` in the core, else a
    :class:`ReferenceBatch` (checkpoints, pools, policy objects, a labelling search, the Python engine)."""
    check_batch_seats(seat, num_battles)
    if illegal_action not in ILLEGAL_ACTION_MODES:
        raise ValueError(f"illegal_action must be one of {ILLEGAL_ACTION_MODES}, got {illegal_action!r}")
    core = backend.native()
    if core is not None and isinstance(opponent, str):
        spec = resolve_opponent(opponent, checkpoints_dir).label  # the canonical spec (checks it too)
        if core.batch.native_opponent(spec) is not None:
            return core.batch.BattleBatch(num_battles, opponent=spec, seat=seat, illegal_action=illegal_action)
    return ReferenceBatch(num_battles, opponent, seat, illegal_action, checkpoints_dir)


def batch_backend(batch: Any) -> str:
    """``native`` for the core's batch, ``python`` for a :class:`ReferenceBatch`."""
    return "python" if isinstance(batch, ReferenceBatch) else "native"


class ArenaVectorEnv(gym.vector.VectorEnv):
    """``num_envs`` single-seat battles against ``opponent`` (see the module doc); the other
    arguments are :class:`ArenaGymEnv`'s (vector observations only)."""

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}

    def __init__(self, num_envs: int = 8, opponent: Any = "baseline:greedy", seat: int | str = 1,
                 illegal_action: str = "penalize", render_mode: str | None = None,
                 checkpoints_dir: str | None = None) -> None:
        if render_mode is not None:
            raise ValueError(f"ArenaVectorEnv does not render (render_mode={render_mode!r}); "
                             f"use ArenaGymEnv for render_mode='ansi'/'rgb_array'/'human'")
        self._batch = make_batch(num_envs, opponent, seat, illegal_action, checkpoints_dir)
        self.num_envs = int(num_envs)
        self.backend = batch_backend(self._batch)
        self.single_observation_space = vector_space()
        self.single_action_space = spaces.Discrete(ACTION_SPACE_SIZE)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._mask = np.zeros((self.num_envs, ACTION_SPACE_SIZE), MASK_DTYPE)
        self._started = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[np.ndarray, dict[str, Any]]:
        """Episode 0 of every battle from ``seed`` (drawn from ``np_random`` when None); ``options`` unused."""
        super().reset(seed=seed)
        out = self._batch.reset(_check_seed(seed) if seed is not None else draw_battle_seed(self.np_random))
        self._started = True
        return out["obs"], self._infos(out)

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        if not self._started:
            raise RuntimeError("call reset() before step()")
        out = self._batch.step(actions)
        infos = self._infos(out)
        done = out["terminated"]
        if done.any():
            final_obs = np.full(self.num_envs, None, dtype=object)
            for j, i in enumerate(np.flatnonzero(done)):
                final_obs[i] = out["final_obs"][j]
            infos["final_obs"], infos["_final_obs"] = final_obs, done.copy()
            infos["final_info"] = {"battle_seed": out["final_seed"], "_battle_seed": done.copy(),
                                   "winner": out["winner"], "_winner": done.copy(),
                                   "illegal_action": out["illegal"], "_illegal_action": done.copy()}
            infos["_final_info"] = done.copy()
        return out["obs"], out["reward"], done, np.zeros(self.num_envs, bool), infos

    def action_masks(self) -> np.ndarray:
        """int8 [num_envs, 163]: each battle's legal actions at its current decision point."""
        return self._mask

    def _infos(self, out: dict[str, np.ndarray]) -> dict[str, Any]:
        self._mask = out["mask"]
        every = np.ones(self.num_envs, bool)
        return {"action_mask": out["mask"], "_action_mask": every, "battle_seed": out["seed"],
                "_battle_seed": every, "seat": out["seat"], "_seat": every}


VECTOR_ENV_ID = "ExtraArenaVector-v1"


def register() -> None:
    """Register ``"ExtraArenaVector-v1"`` (``gym.make_vec(VECTOR_ENV_ID, num_envs=N, **kwargs)``
    builds :class:`ArenaVectorEnv`; ``"ExtraArena-v1"`` keeps gymnasium's own vectorizations,
    which its ActionMasks wrapper requires). Importing this module does it."""
    if VECTOR_ENV_ID not in gym.registry:
        gym.register(id=VECTOR_ENV_ID, vector_entry_point="extrarlhf.envs.vector:ArenaVectorEnv")


register()
