"""RL ecosystem wrappers for ExtraArena: a PettingZoo AEC env and a Gymnasium single-seat env.
Imports ``engine``, ``adapters`` and ``extrarlhf.runtime`` (actor specs).

Importing this package needs the optional ``rl`` extra (``pip install 'extrarlhf[rl]'``,
which brings gymnasium and pettingzoo); the rest of extrarlhf never imports them.
Importing it also registers the Gymnasium id ``"ExtraArena-v1"``, so
``gymnasium.make("ExtraArena-v1")`` works after ``import extrarlhf.envs`` and
``gymnasium.make("extrarlhf.envs:ExtraArena-v1")`` works without it.

* :class:`ArenaAECEnv` (and :func:`aec_env`, the same behind PettingZoo's
  OrderEnforcingWrapper): both seats, agents ``player_1`` / ``player_2``.
* :class:`ArenaGymEnv`: one seat against an actor spec, a policy object or a pool of them.
* :class:`ArenaVectorEnv` (``gymnasium.make_vec("ExtraArenaVector-v1", num_envs=N)``): N
  single-seat battles at once on the batched API (native in the core where built), with
  ``action_masks()``; :mod:`extrarlhf.envs.sb3_vec` has the same as a Stable-Baselines3 VecEnv.
* :func:`onnx_feed`: the feed of the project's action-conditioned ONNX models for a Dict
  observation (``observation_mode="dict"`` in either env).
"""

try:
    from .aec import ArenaAECEnv
    from .aec import env as aec_env
    from .gym_single import ENV_ID, ActionMasks, ArenaGymEnv
    from .observations import onnx_feed
    from .vector import VECTOR_ENV_ID, ArenaVectorEnv, ReferenceBatch
except ModuleNotFoundError as exc:  # pragma: no cover - depends on the installed extras
    if exc.name not in ("gymnasium", "pettingzoo"):
        raise
    raise ModuleNotFoundError(
        f"extrarlhf.envs needs the optional 'rl' extra ({exc.name} is not installed): "
        "pip install 'extrarlhf[rl]'", name=exc.name) from exc

__all__ = ["ENV_ID", "VECTOR_ENV_ID", "ActionMasks", "ArenaAECEnv", "ArenaGymEnv", "ArenaVectorEnv", "ReferenceBatch",
           "aec_env", "onnx_feed"]
