"""Observation layouts shared by both envs: the plain vector and the optional Dict.

``observation_mode="dict"`` gives every decision point what an action-conditioned policy
(the project's ``action_onnx``/``v5`` models among them) needs, in fixed shapes:

* ``observation``: float32 [OBS_DIM] in [-1, 1], the player's view;
* ``action_mask``: int8 [163], 1 for the legal action ids (the same array as
  ``info["action_mask"]`` and ``action_masks()``);
* ``legal_ids``: int64 [163], the legal ids ascending (``state.legal_actions()``), then -1;
* ``action_features``: float32 [163, ACTION_FEATURE_DIM] in [-1, 1], row ``k`` the features
  of ``legal_ids[k]`` (``state.action_features``), zero rows for the padding.

A model feed for the ONNX kinds is therefore ``obs = o["observation"][None]``,
``action_features = o["action_features"][None]``, ``action_mask = (o["legal_ids"] >= 0)[None]``,
and candidate ``k`` of its scores is action ``o["legal_ids"][k]`` (see :func:`onnx_feed`).
163 rows are enough for any state: there are only 163 action ids.
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from engine import ACTION_FEATURE_DIM, ACTION_SPACE_SIZE, OBS_DIM, State

OBSERVATION_MODES = ("vector", "dict")
MASK_DTYPE = np.int8  # one mask dtype everywhere: what Discrete.sample(mask=...) requires


def check_observation_mode(mode: str) -> str:
    if mode not in OBSERVATION_MODES:
        raise ValueError(f"observation_mode must be one of {OBSERVATION_MODES}, got {mode!r}")
    return mode


def vector_space() -> spaces.Box:
    return spaces.Box(-1.0, 1.0, (OBS_DIM,), np.float32)


def mask_space() -> spaces.Box:
    return spaces.Box(0, 1, (ACTION_SPACE_SIZE,), MASK_DTYPE)


def dict_space() -> spaces.Dict:
    return spaces.Dict({
        "observation": vector_space(),
        "action_mask": mask_space(),
        "legal_ids": spaces.Box(-1, ACTION_SPACE_SIZE - 1, (ACTION_SPACE_SIZE,), np.int64),
        "action_features": spaces.Box(-1.0, 1.0, (ACTION_SPACE_SIZE, ACTION_FEATURE_DIM), np.float32),
    })


def _mask_of(legal: list[int]) -> np.ndarray:
    buf = bytearray(ACTION_SPACE_SIZE)
    for action_id in legal:  # a handful of ids: cheaper than numpy fancy indexing
        buf[action_id] = 1
    return np.frombuffer(buf, dtype=MASK_DTYPE)


def action_mask(state: State, player: int) -> np.ndarray:
    """int8 [163]: the legal ids of ``player`` (all zeros when it is not to move or the battle is over)."""
    return _mask_of(state.legal_actions() if state.to_move == player else [])


def dict_observation(state: State, player: int, live: bool = True) -> dict[str, np.ndarray]:
    """The Dict observation of ``player`` (see the module doc); legal ids only when it is to move
    (and ``live``: False once an env has ended the episode on an illegal action)."""
    legal = state.legal_actions() if live and state.to_move == player else []
    ids = np.full(ACTION_SPACE_SIZE, -1, dtype=np.int64)
    ids[:len(legal)] = legal
    features = np.zeros((ACTION_SPACE_SIZE, ACTION_FEATURE_DIM), dtype=np.float32)
    if legal:
        features[:len(legal)] = state.action_features(legal)
    return {"observation": state.observation(player), "action_mask": _mask_of(legal), "legal_ids": ids,
            "action_features": features}


def onnx_feed(observation: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The feed of an ``action_onnx``/``v5`` model for one Dict observation (batch of 1, 163 candidates).

    Candidate ``k`` of the model's scores is action ``observation["legal_ids"][k]``; padded
    candidates have ``action_mask`` 0 (float32, the adapters' default mask type)."""
    return {"obs": observation["observation"][None],
            "action_features": observation["action_features"][None],
            "action_mask": (observation["legal_ids"] >= 0).astype(np.float32)[None]}
