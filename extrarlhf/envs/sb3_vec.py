"""A Stable-Baselines3 ``VecEnv`` on the batched API (needs the ``sb3`` extra).

``ArenaSB3VecEnv(num_envs, opponent=..., seat=..., illegal_action=...)`` is the batch of
:mod:`extrarlhf.envs.vector` (native in the core where it can be, else one ``ArenaGymEnv``
per battle; the same seeds and results) behind SB3's API, for ``MaskablePPO`` and friends:
``env_method("action_masks")`` returns each battle's int8 mask (what
``sb3_contrib.common.maskable.utils.get_action_masks`` stacks), an ended episode's last
observation is ``infos[i]["terminal_observation"]`` and the row is already the next episode
(SB3's autoreset). ``seed(s)`` before ``reset()`` sets the base seed of the seed stream
(battle ``i``'s ``k``-th episode: ``derive_seed(s, f"vector:{i}:{k}")``); without it the base
seed is drawn from the env's own generator.

    from sb3_contrib import MaskablePPO
    model = MaskablePPO("MlpPolicy", ArenaSB3VecEnv(16, opponent="baseline:random"), n_steps=64)
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from gymnasium import spaces
from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvIndices, VecEnvStepReturn

from engine import ACTION_SPACE_SIZE

from .aec import draw_battle_seed
from .observations import vector_space
from .vector import batch_backend, make_batch


class ArenaSB3VecEnv(VecEnv):
    """SB3 ``VecEnv`` of ``num_envs`` single-seat battles (see the module doc)."""

    def __init__(self, num_envs: int = 8, opponent: Any = "baseline:greedy", seat: int | str = 1,
                 illegal_action: str = "penalize", checkpoints_dir: str | None = None) -> None:
        self._batch = make_batch(num_envs, opponent, seat, illegal_action, checkpoints_dir)
        self.backend = batch_backend(self._batch)
        self.render_mode = None
        self._rng = np.random.default_rng()
        self._actions: np.ndarray | None = None
        self._out: dict[str, np.ndarray] | None = None
        super().__init__(int(num_envs), vector_space(), spaces.Discrete(ACTION_SPACE_SIZE))

    def reset(self) -> np.ndarray:
        base = self._seeds[0] if self._seeds[0] is not None else draw_battle_seed(self._rng)
        self._out = self._batch.reset(int(base))
        self._reset_seeds()
        self._reset_options()
        self.reset_infos = [self._info(i) for i in range(self.num_envs)]
        return self._out["obs"]

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = actions

    def step_wait(self) -> VecEnvStepReturn:
        if self._out is None:
            raise RuntimeError("call reset() before step()")
        actions, self._actions = self._actions, None
        self._out = out = self._batch.step(actions)
        infos = [self._info(i) for i in range(self.num_envs)]
        for j, i in enumerate(np.flatnonzero(out["terminated"])):
            infos[i].update(terminal_observation=out["final_obs"][j], final_battle_seed=int(out["final_seed"][i]),
                            winner=int(out["winner"][i]), illegal_action=bool(out["illegal"][i]))
            infos[i]["TimeLimit.truncated"] = False
        return out["obs"], out["reward"], out["terminated"].copy(), infos

    def action_masks(self) -> np.ndarray:
        """int8 [num_envs, 163]."""
        if self._out is None:
            return np.zeros((self.num_envs, ACTION_SPACE_SIZE), np.int8)
        return self._out["mask"]

    def close(self) -> None:
        """Nothing to release (no process, no window)."""

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        rows = self._get_indices(indices)
        if attr_name == "action_masks":
            return [(lambda i=i: self.action_masks()[i]) for i in rows]
        if attr_name == "render_mode":
            return [None for _ in rows]
        if attr_name in ("battle_seed", "seat") and self._out is not None:
            key = "seed" if attr_name == "battle_seed" else "seat"
            return [int(self._out[key][i]) for i in rows]
        raise AttributeError(f"ArenaSB3VecEnv battles have no attribute {attr_name!r} "
                             f"(available: action_masks, render_mode, battle_seed, seat)")

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        raise AttributeError(f"ArenaSB3VecEnv battles do not take attributes (asked to set {attr_name!r}); "
                             f"build a new env with other arguments")

    def env_method(self, method_name: str, *method_args: Any, indices: VecEnvIndices = None,
                   **method_kwargs: Any) -> list[Any]:
        if method_name != "action_masks":
            raise AttributeError(f"ArenaSB3VecEnv battles have no method {method_name!r} (available: action_masks)")
        masks = self.action_masks()
        return [masks[i] for i in self._get_indices(indices)]

    def env_is_wrapped(self, wrapper_class: type, indices: VecEnvIndices = None) -> list[bool]:
        return [False for _ in self._get_indices(indices)]

    def _info(self, i: int) -> dict[str, Any]:
        return {"battle_seed": int(self._out["seed"][i]), "seat": int(self._out["seat"][i])}

    def get_images(self) -> Sequence[np.ndarray | None]:
        return [None for _ in range(self.num_envs)]
