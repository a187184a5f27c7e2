"""The batched API (issue 26, EnvPool-style): N single-seat battles stepped inside the core.

Battle ``i`` of a :class:`BattleBatch` is, episode after episode, what
``extrarlhf.envs.ArenaGymEnv`` plays for the same battle seed (same seat, same opponent
moves, same observations, masks and rewards), with no Python per battle or per opponent move:

* seats: ``seat=1``, ``2``, ``"random"`` or one of these per battle (a sequence of N).
* seeds: ``reset(seed)`` starts episode 0 of every battle; battle ``i``'s ``k``-th episode
  (k = 0, 1, ...) has seed ``engine.derive_seed(seed, f"vector:{i}:{k}")``. As in the single
  env, ``seat="random"`` is ``1 + derive_seed(battle_seed, "gym-seat") % 2`` and the
  opponent's generator is seeded with ``derive_seed(battle_seed, "gym-opponent")``.
* autoreset: same step. A battle that ends in ``step`` reports ``terminated``, its reward
  and its last observation, and its row of ``obs``/``mask``/``seed`` is already the next
  episode's first decision point. ``final_obs`` holds only the ended battles' last
  observations: row ``j`` is battle ``np.flatnonzero(terminated)[j]``'s (float32 [k, OBS_DIM]).
* illegal actions: ``"penalize"`` (default): an illegal id ends that battle's episode with
  reward -1 (``illegal``; the ended episode's state is unchanged). ``"raise"``: the step
  raises IllegalActionError with the reference's reason for the first such battle and steps
  nothing. A wrong shape or dtype, or an id outside 0..162, always raises before anything
  is stepped.
* opponents: ``"baseline:random"``, ``"baseline:greedy"`` (or ``"random"``, ``"greedy"``) and
  ``"search:baseline:greedy?sims=N"`` / ``"search:baseline:random?sims=N"`` (the search
  teacher over a baseline, 1 <= N <= 4096), as ``extrarlhf.runtime.actors`` seeds them.

    batch = BattleBatch(256, opponent="baseline:random")
    out = batch.reset(7)                 # obs float32 [N, OBS_DIM], mask int8 [N, 163], seed uint64 [N], seat
    out = batch.step(actions)            # + reward float32, terminated bool, final_obs [k, OBS_DIM], winner, illegal, final_seed
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from . import _core, hooks

_BASELINES = {"baseline:random": 0, "random": 0, "baseline:greedy": 1, "greedy": 1}
_SEARCH = re.compile(r"search:baseline:(greedy|random)\?sims=([1-9][0-9]{0,3})")
_ROLLOUTS = {"greedy": 0, "random": 1}
SEATS = {1: 1, 2: 2, "random": 0}
ILLEGAL_ACTION_MODES = ("raise", "penalize")


def native_opponent(opponent: Any) -> tuple[int, int, int] | None:
    """(kind, sims, rollout) of an opponent spec the core plays, else None."""
    if not isinstance(opponent, str):
        return None
    if opponent in _BASELINES:
        return _BASELINES[opponent], 1, 0
    match = _SEARCH.fullmatch(opponent)
    if match is None or int(match.group(2)) > 4096:
        return None
    return 2, int(match.group(2)), _ROLLOUTS[match.group(1)]


def check_seed(seed: Any) -> int:
    """A base seed: an integer >= 0 (Python or numpy), not a bool."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    return int(seed)


class BattleBatch:
    """N single-seat battles on the native core (see the module doc)."""

    def __init__(self, num_battles: int, opponent: str = "baseline:random", seat: int | str = 1,
                 illegal_action: str = "penalize") -> None:
        if isinstance(num_battles, bool) or not isinstance(num_battles, (int, np.integer)) or num_battles < 1:
            raise ValueError(f"num_battles must be an integer >= 1, got {num_battles!r}")
        kind = native_opponent(opponent)
        if kind is None:
            raise ValueError(f"the native batch plays 'baseline:random', 'baseline:greedy' and "
                             f"'search:baseline:greedy?sims=N' / 'search:baseline:random?sims=N' (N in 1..4096), "
                             f"got {opponent!r}")
        seats = hooks().check_batch_seats(seat, int(num_battles))
        if illegal_action not in ILLEGAL_ACTION_MODES:
            raise ValueError(f"illegal_action must be one of {ILLEGAL_ACTION_MODES}, got {illegal_action!r}")
        self.num_battles = int(num_battles)
        self.opponent = opponent
        self.illegal_action = illegal_action
        self._core = _core.Batch(self.num_battles, [SEATS[s] for s in seats], illegal_action == "penalize", *kind)
        self._started = False

    def reset(self, seed: int) -> dict[str, np.ndarray]:
        """Episode 0 of every battle: ``obs``, ``mask``, ``seed`` (battle seeds), ``seat``."""
        out = self._core.reset(str(check_seed(seed)))
        self._started = True
        return out

    def step(self, actions: Any) -> dict[str, np.ndarray]:
        """One learner action per battle (int array [N]); the arrays of :meth:`reset` plus
        ``reward``, ``terminated``, ``final_obs`` (the ended battles' rows only), and where
        terminated ``winner`` (-1: none, an illegal action), ``illegal``, ``final_seed``."""
        if not self._started:
            raise RuntimeError("call reset(seed) before step()")
        ids = hooks().check_action_batch(actions, self.num_battles)
        if self.illegal_action == "raise":
            i = self._core.first_illegal(ids)
            if i >= 0:
                self._raise_illegal(i, int(ids[i]))
        return self._core.step(ids)

    @property
    def actions_applied(self) -> int:
        """Engine actions applied so far in all battles, the learners' and the opponents' (the
        unit of the Python engine's steps/s)."""
        return self._core.actions_applied

    def battle(self, index: int) -> _core.State:
        """A copy of battle ``index``'s current state."""
        return self._core.battle(index)

    def _raise_illegal(self, i: int, action: int) -> None:
        """The reference's reason (engine.State.apply's message, with the legal ids) for battle ``i``."""
        try:
            self._core.battle(i).apply(action)  # the core's apply raises the reference's IllegalActionError
        except hooks().IllegalActionError as exc:
            raise hooks().IllegalActionError(f"battle {i}: {exc}; nothing was stepped") from None
        raise AssertionError(f"battle {i}: action {action} is legal in the Python engine but not in the native core")
