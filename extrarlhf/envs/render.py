"""Rendering shared by both envs: ``human`` (printed), ``ansi`` (text) and ``rgb_array`` (a picture).

Every mode shows one player's view only (no hidden information: the enemy hand is a count).
``rgb_array`` is a schematic, not art: a uint8 [H, W, 3] frame with the enemy side on top and
the player's side below, one row per side: hero health (red) and mana (blue) bars, the six
board slots (a grey cell per creature with its attack (orange) and health (green) as bar
heights, dimmed while it cannot attack) and one small block per card in hand. It exists so
the tools that ask for ``rgb_array`` (Stable-Baselines3's ``make_vec_env``, video recorders,
PettingZoo's ``render_test``) get a valid frame of the real state.
"""

from __future__ import annotations

import sys

import numpy as np

from engine import HERO_HEALTH, State
from engine.state import MAX_MANA

RENDER_MODES = ["human", "ansi", "rgb_array"]

_CELL, _GAP, _SLOTS, _BAR = 24, 4, 6, 6
WIDTH = _GAP + _SLOTS * (_CELL + _GAP)
_SIDE = _BAR * 2 + _GAP * 4 + _CELL + 8  # hero bar, mana bar, board cells, hand blocks
HEIGHT = 2 * _SIDE + _GAP
_BACKGROUND, _GREY, _DIM = (24, 24, 32), (150, 150, 160), (80, 80, 90)
_RED, _BLUE, _ORANGE, _GREEN, _CARD = (200, 50, 50), (60, 110, 220), (230, 140, 30), (60, 190, 80), (210, 200, 150)
_MAX_STAT = 12.0  # attack/health shown up to this; higher values fill the cell


def check_render_mode(render_mode: str | None, modes: list[str]) -> str | None:
    if render_mode is not None and render_mode not in modes:
        raise ValueError(f"render_mode must be None or one of {modes}, got {render_mode!r}")
    return render_mode


def _bar(frame: np.ndarray, y: int, fraction: float, color: tuple[int, int, int]) -> None:
    width = int(round((WIDTH - 2 * _GAP) * min(max(fraction, 0.0), 1.0)))
    frame[y:y + _BAR, _GAP:_GAP + width] = color


def _side(frame: np.ndarray, top: int, state: State, player: int, show_hand: bool) -> None:
    side = state.player(player)
    _bar(frame, top, side.hp / HERO_HEALTH, _RED)
    _bar(frame, top + _BAR + _GAP, side.mana / MAX_MANA, _BLUE)
    y = top + 2 * (_BAR + _GAP)
    for slot, creature in enumerate(side.board):
        if creature is None:
            continue
        x = _GAP + slot * (_CELL + _GAP)
        frame[y:y + _CELL, x:x + _CELL] = _GREY if creature.can_attack else _DIM
        for offset, value, color in ((2, creature.attack, _ORANGE), (_CELL // 2 + 1, creature.health, _GREEN)):
            height = int(round((_CELL - 4) * min(value / _MAX_STAT, 1.0)))
            frame[y + _CELL - 2 - height:y + _CELL - 2, x + offset:x + offset + _CELL // 2 - 3] = color
    y += _CELL + _GAP
    for i in range(len(side.hand)):
        x = _GAP + i * 10
        frame[y:y + 8, x:x + 8] = _CARD if show_hand else _DIM


def rgb_frame(state: State, player: int) -> np.ndarray:
    """``player``'s view of ``state`` as a uint8 [HEIGHT, WIDTH, 3] picture (see the module doc)."""
    frame = np.empty((HEIGHT, WIDTH, 3), dtype=np.uint8)
    frame[:] = _BACKGROUND
    _side(frame, 0, state, 3 - player, show_hand=False)
    _side(frame, _SIDE + _GAP, state, player, show_hand=True)
    return frame


def render_view(state: State, player: int, mode: str) -> str | np.ndarray | None:
    """What ``render()`` returns in ``mode``; ``human`` prints the text view and returns None."""
    if mode == "rgb_array":
        return rgb_frame(state, player)
    text = state.render(player)
    if mode == "ansi":
        return text
    print(text, file=sys.stdout, flush=True)
    return None
