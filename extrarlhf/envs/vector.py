"""N single-seat battles at once: the batched API and a Gymnasium ``VectorEnv`` on it.

``ArenaVectorEnv(num_envs, opponent=..., seat=..., illegal_action=...)`` (also
``gymnasium.make_vec("ExtraArenaVector-v1", num_envs=N, ...)``) is ``num_envs`` copies of
:class:`~extrarlhf.envs.ArenaGymEnv` stepped together. On the native backend, with a
baseline opponent it plays, the battles and the opponent's moves run inside the C++ core
(``engine_native.batch.BattleBatch``: no Python per battle); otherwise :class:`ReferenceBatch`
steps one ``ArenaGymEnv`` per battle, evaluating checkpoint opponents together (one onnxruntime
run per decision round across the battles, not one per decision). The core plays ``baseline:random``, ``baseline:greedy`` and
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

import os
from itertools import chain
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from adapters.inference_limits import DISABLE_ENV, MAX_TIMEOUTS_ENV, TIMEOUT_ENV
from adapters.onnx_models import ModelPolicy, decide_actions
from engine import ACTION_SPACE_SIZE, OBS_DIM, IllegalActionError, backend, derive_seed
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


class _OpponentPolicies:
    """Builds the batch's per-episode opponent policies (``ArenaGymEnv._begin``'s ``make``):
    ``member.make(seed)``, except that a checkpoint opponent's :class:`ModelPolicy` is built
    once and then reseeded (``ModelPolicy.reseeded``: the same policy without reading the
    registry and hashing the model file again) while the registry index and the model file
    keep their stat (inode, size, mtime, ctime) and the inference-limit variables their
    values; any change builds it afresh, as ArenaGymEnv does every episode."""

    def __init__(self) -> None:
        self._built: dict[str, tuple[tuple, ModelPolicy]] = {}

    @staticmethod
    def _key(actor: Any, path: str) -> tuple:
        return (_stat(os.path.join(actor.checkpoints_dir, "index.json")), _stat(path),
                tuple(os.environ.get(name) for name in _LIMIT_VARIABLES))

    def make(self, member: Any, seed: int) -> Any:
        actor = member.actor
        if actor is None or actor.is_baseline or actor.rollout is not None or actor.checkpoints_dir is None:
            return member.make(seed)
        built = self._built.get(actor.spec)
        if built is not None and built[0] == self._key(actor, built[1].path):
            return built[1].reseeded(seed)
        self._built.pop(actor.spec, None)
        policy = member.make(seed)  # reads the registry and the model file
        if type(policy) is ModelPolicy and policy.model is not None and policy.load_warning is None:
            key = self._key(actor, policy.path)
            again = member.make(seed)  # read again after the stat: kept only if nothing changed in between
            if again.model is policy.model and again.load_warning is None and self._key(actor, policy.path) == key:
                self._built[actor.spec] = (key, again)
        return policy


_LIMIT_VARIABLES = (TIMEOUT_ENV, MAX_TIMEOUTS_ENV, DISABLE_ENV)


def _stat(path: str) -> tuple | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns, st.st_ctime_ns


class ReferenceBatch:
    """The batched API on one :class:`ArenaGymEnv` per battle: the Python engine's batch and
    the native batch's reference (same dict of arrays as ``engine_native.batch.BattleBatch``).

    Opponents played by model checkpoints are evaluated together: in each decision round, the
    battles whose opponent (a :class:`~adapters.ModelPolicy`) is to move are decided with one
    onnxruntime call per model (``adapters.onnx_models.decide_actions``, i.e. ``decide_many``:
    the core builds the feed in one call, and a batch of 32 or more rows runs as 2-4 runs of
    similar widths), then each battle applies its own action; rounds repeat until no battle has its opponent to
    move (a turn is many actions, and an episode that ends within the step starts the next
    one, whose opening moves join the following rounds). So a step costs as many runs as the
    most opponent decisions one battle needs in it, not one run per decision.

    Each battle's episode is still exactly ``ArenaGymEnv``'s (its env holds the battle, seat
    and opponent; the batch plays the same moves in the same order per battle): its policies
    are its own, built per episode from a spec and seeded from the battle seed, so the order
    across battles changes nothing; a checkpoint chooses by argmax over its logits, and a row
    of a batched run has the same float bits as a one-row run for the project's models
    (tests/envs/test_vector_env.py checks rows and trajectories). What differs is failure
    handling: a batched run that times out or fails makes all its rows fall back and counts
    as one timeout of the model. A checkpoint opponent's policy is built once and reseeded per
    episode (``ModelPolicy.reseeded``) while the registry index, the model file (stat) and the
    inference-limit variables are unchanged; ArenaGymEnv re-reads and hashes them each episode.

    ``batched_opponents=False`` steps one ``ArenaGymEnv.step`` per battle, each opponent
    deciding alone (one run per decision), as before the batching; so does any pool with a
    policy object in it (one object shared by every battle: its calls keep their order).
    The batched path steps the envs' battles itself: their ``info``/``action_masks()`` are
    not updated (the batch's arrays are the output).
    """

    def __init__(self, num_battles: int, opponent: Any = "baseline:greedy", seat: int | str = 1,
                 illegal_action: str = "penalize", checkpoints_dir: str | None = None,
                 batched_opponents: bool = True) -> None:
        if isinstance(num_battles, bool) or not isinstance(num_battles, (int, np.integer)) or num_battles < 1:
            raise ValueError(f"num_battles must be an integer >= 1, got {num_battles!r}")
        self.num_battles = int(num_battles)
        self.illegal_action = illegal_action
        self.batched_opponents = bool(batched_opponents)
        self.envs = [ArenaGymEnv(opponent=opponent, seat=s, illegal_action=illegal_action,
                                 checkpoints_dir=checkpoints_dir) for s in check_batch_seats(seat, self.num_battles)]
        self._base: int | None = None
        self._episodes = [0] * self.num_battles
        self._policies = _OpponentPolicies()
        n = self.num_battles
        self._opponent_index = [0] * n  # the engine's 0-based index of battle i's opponent
        self._seeds = np.zeros(n, np.uint64)
        self._seats = np.zeros(n, np.int8)

    def reset(self, seed: int) -> dict[str, np.ndarray]:
        self._base = _check_seed(seed)
        self._episodes = [0] * self.num_battles
        out = self._empty()
        if self._batching():
            for i in range(self.num_battles):
                self._begin(i)
            self._settle_all([True] * self.num_battles, out, {})
            return out
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
        if self._batching():
            return self._step_batched(ids, out)
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
        out["final_obs"] = np.array(final_obs, np.float32).reshape(len(final_obs), OBS_DIM)
        return out

    # ------------------------------------------------------------------ batched opponents
    def _batching(self) -> bool:
        """Batch the opponents' decisions: asked for, and every opponent is built per episode
        from a spec (a policy object is one object shared by all battles)."""
        return self.batched_opponents and all(o.actor is not None for env in self.envs for o in env.opponents)

    def _begin(self, i: int) -> None:
        """Battle ``i``'s current episode (``self._episodes[i]``) up to its opponent's opening moves."""
        env = self.envs[i]
        env._begin(episode_seed(self._base, i, self._episodes[i]), self._policies.make)
        self._opponent_index[i] = 2 - env.seat
        self._seeds[i] = env.battle_seed
        self._seats[i] = env.seat

    def _step_batched(self, ids: np.ndarray, out: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        opening = [False] * self.num_battles  # battle i is in an episode begun during this step
        finals: dict[int, np.ndarray] = {}
        for i, (env, action) in enumerate(zip(self.envs, ids.tolist())):
            try:
                env._state.apply(action)  # what ArenaGymEnv._learner_move does for an int id
            except IllegalActionError:
                obs, reward, _, _, info = env._refuse(action)  # penalized (raise mode refused before)
                out["reward"][i] = reward
                self._episode_ended(i, obs, -1, True, out, finals)
                opening[i] = True
        self._settle_all(opening, out, finals)
        out["final_obs"] = (np.array([finals[i] for i in sorted(finals)], np.float32)
                            .reshape(len(finals), OBS_DIM))
        return out

    def _settle_all(self, opening: list[bool], out: dict[str, np.ndarray], finals: dict[int, np.ndarray]) -> None:
        """Play the opponents in rounds until every battle is at its learner's decision point,
        finishing steps and beginning next episodes on the way; writes ``out``."""
        obs_rows: list[np.ndarray] = [None] * self.num_battles  # type: ignore[list-item]
        legal: list[list[int]] = [[]] * self.num_battles
        waiting = [i for i in range(self.num_battles) if self._settle(i, opening, obs_rows, legal, out, finals)]
        while waiting:
            self._opponent_round(waiting)
            waiting = [i for i in waiting if self._settle(i, opening, obs_rows, legal, out, finals)]
        np.stack(obs_rows, out=out["obs"])
        counts = [len(ids) for ids in legal]
        out["mask"][np.repeat(np.arange(self.num_battles), counts), list(chain.from_iterable(legal))] = 1
        out["seed"] = self._seeds.copy()
        out["seat"] = self._seats.copy()

    def _settle(self, i: int, opening: list[bool], obs_rows: list[np.ndarray], legal: list[list[int]],
                out: dict[str, np.ndarray], finals: dict[int, np.ndarray]) -> bool:
        """True while battle ``i``'s opponent is to move; else ends its step as ArenaGymEnv's
        ``step`` (or ``reset`` for an episode begun in this step) would: its observation and
        legal ids (the mask) into ``obs_rows[i]`` and ``legal[i]``, the rest into ``out``."""
        while True:
            env = self.envs[i]
            state = env._state
            winner = state.winner
            if winner is None:
                if state.active == self._opponent_index[i]:
                    return True
            elif not opening[i]:  # the step ended the episode
                seat = env.seat
                out["reward"][i] = 0.0 if winner == 0 else (1.0 if winner == seat else -1.0)
                env._done = True
                self._episode_ended(i, state.observation(seat), winner, False, out, finals)
                opening[i] = True
                continue
            seat = env.seat
            obs_rows[i] = state.observation(seat)
            if state.to_move == seat:
                legal[i] = state.legal_actions()
            return False

    def _episode_ended(self, i: int, final_obs: np.ndarray, winner: int, illegal: bool, out: dict[str, np.ndarray],
                       finals: dict[int, np.ndarray]) -> None:
        """Record battle ``i``'s ended episode and begin its next one."""
        out["terminated"][i] = True
        finals[i] = final_obs
        out["illegal"][i] = illegal
        out["winner"][i] = winner
        out["final_seed"][i] = self.envs[i].battle_seed
        self._episodes[i] += 1
        self._begin(i)

    def _opponent_round(self, waiting: list[int]) -> None:
        """One decision of each waiting battle's opponent: the model policies' together (one
        onnxruntime run per model), any other policy's by ``act``; each battle applies its own."""
        envs = self.envs
        movers: list[int] = []
        items: list[tuple[Any, Any]] = []
        for i in waiting:
            env = envs[i]
            policy = env._opponent
            if type(policy) is ModelPolicy:
                movers.append(i)
                items.append((policy, env._state))
            else:
                env._opponent_plays(policy.act(env._state), [])
        if items:
            for i, action in zip(movers, decide_actions(items)):
                state = envs[i]._state
                try:
                    state.apply(action)
                except IllegalActionError:
                    envs[i]._opponent_plays(action, [])  # raises with the single env's message

    def _empty(self) -> dict[str, np.ndarray]:
        n = self.num_battles
        return {"obs": np.zeros((n, OBS_DIM), np.float32),
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
