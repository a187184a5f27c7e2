"""The fixed arena-1 action space: 163 ids, stable across versions.

* ``0``: END_TURN
* ``1 + h*15 + t``: PLAY hand slot ``h`` (0..7) at target ``t`` (0..14)
* ``121 + a*7 + t``: ATTACK with own board slot ``a`` (0..5) at ``t`` (0 enemy hero, 1..6 enemy slots 0..5)

Play targets: 0 none, 1 own hero, 2 enemy hero, 3..8 own slots 0..5, 9..14 enemy slots 0..5.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from .errors import IllegalActionError

HAND_LIMIT = 8
BOARD_SLOTS = 6
PLAY_TARGETS = 15
ATTACK_TARGETS = 7

END_TURN = 0
PLAY_BASE = 1
ATTACK_BASE = PLAY_BASE + HAND_LIMIT * PLAY_TARGETS  # 121
ACTION_SPACE_SIZE = ATTACK_BASE + BOARD_SLOTS * ATTACK_TARGETS  # 163

TARGET_NONE = 0
TARGET_OWN_HERO = 1
TARGET_ENEMY_HERO = 2
TARGET_OWN_SLOT = 3  # + slot
TARGET_ENEMY_SLOT = 9  # + slot


def play_action(hand_slot: int, target: int = TARGET_NONE) -> int:
    """Action id of playing ``hand_slot`` at play target ``target`` (see module doc)."""
    if not (0 <= hand_slot < HAND_LIMIT and 0 <= target < PLAY_TARGETS):
        raise ValueError(f"hand slot must be 0..{HAND_LIMIT - 1} and target 0..{PLAY_TARGETS - 1}")
    return PLAY_BASE + hand_slot * PLAY_TARGETS + target


def attack_action(attacker_slot: int, target: int = 0) -> int:
    """Action id of attacking with ``attacker_slot``; target 0 is the enemy hero, 1+s enemy slot s."""
    if not (0 <= attacker_slot < BOARD_SLOTS and 0 <= target < ATTACK_TARGETS):
        raise ValueError(f"attacker slot must be 0..{BOARD_SLOTS - 1} and target 0..{ATTACK_TARGETS - 1}")
    return ATTACK_BASE + attacker_slot * ATTACK_TARGETS + target


def _play_target(t: int) -> dict[str, Any]:
    if t == TARGET_NONE:
        return {"kind": "none"}
    if t == TARGET_OWN_HERO:
        return {"kind": "own_hero"}
    if t == TARGET_ENEMY_HERO:
        return {"kind": "enemy_hero"}
    if t < TARGET_ENEMY_SLOT:
        return {"kind": "own_creature", "slot": t - TARGET_OWN_SLOT}
    return {"kind": "enemy_creature", "slot": t - TARGET_ENEMY_SLOT}


def check_action_id(action_id: Any) -> int:
    """Coerce an action id to int, refusing non-integers and ids outside 0..162."""
    if isinstance(action_id, bool):
        raise IllegalActionError(f"action id must be an integer 0..{ACTION_SPACE_SIZE - 1}, got {action_id!r}")
    try:
        value = operator.index(action_id)
    except TypeError:
        raise IllegalActionError(
            f"action id must be an integer 0..{ACTION_SPACE_SIZE - 1}, got {action_id!r}") from None
    if not 0 <= value < ACTION_SPACE_SIZE:
        raise IllegalActionError(f"action id {value} is outside the action space 0..{ACTION_SPACE_SIZE - 1}")
    return value


def check_action_batch(actions: Any, n: int) -> np.ndarray:
    """One action id per battle of a batch as int64 [n]; refuses a wrong shape, a non-integer
    dtype and ids outside 0..162, naming the first bad battle (what a batched step checks first)."""
    array = np.asarray(actions)
    if array.shape != (n,):
        raise ValueError(f"actions must be one action id per battle, shape ({n},); got shape {array.shape}")
    if array.dtype.kind not in "iu":
        raise IllegalActionError(f"actions must be integer action ids 0..{ACTION_SPACE_SIZE - 1} "
                                 f"(an int64 or int32 array); got dtype {array.dtype}")
    bad = np.flatnonzero((array < 0) | (array >= ACTION_SPACE_SIZE))
    if bad.size:
        i = int(bad[0])
        raise IllegalActionError(f"battle {i}: action id {int(array[i])} is outside the action space "
                                 f"0..{ACTION_SPACE_SIZE - 1} ({bad.size} such ids); nothing was stepped")
    return np.ascontiguousarray(array, dtype=np.int64)


def check_batch_seats(seat: Any, n: int) -> list[int | str]:
    """The learner's seat for each of ``n`` battles of a batch, from 1, 2, ``"random"`` (per
    episode, derived from its seed) or a sequence of ``n`` of these."""
    seats = list(seat) if isinstance(seat, (list, tuple, np.ndarray)) else [seat] * n
    if len(seats) != n:
        raise ValueError(f"seat must be 1, 2, 'random' or one of these per battle ({n}); got {len(seats)} seats")
    for s in seats:
        if isinstance(s, (bool, np.bool_)) or not isinstance(s, (int, np.integer, str)) or s not in (1, 2, "random"):
            raise ValueError(f"seat must be 1, 2 or 'random' (or one of these per battle), got {s!r}")
    return [s if isinstance(s, str) else int(s) for s in seats]


def decode_action(action_id: int) -> dict[str, Any]:
    """Stateless JSON form of an action id: kind, slots and target."""
    a = check_action_id(action_id)
    if a == END_TURN:
        return {"kind": "end_turn"}
    if a < ATTACK_BASE:
        h, t = divmod(a - PLAY_BASE, PLAY_TARGETS)
        return {"kind": "play", "hand_slot": h, "target": _play_target(t)}
    s, t = divmod(a - ATTACK_BASE, ATTACK_TARGETS)
    target = {"kind": "enemy_hero"} if t == 0 else {"kind": "enemy_creature", "slot": t - 1}
    return {"kind": "attack", "attacker_slot": s, "target": target}
