"""Offline-RL episodes of a V5 decisions dataset, and a Minari dataset made of them.

One episode per battle and seat, with the step semantics of the Gymnasium env
(``extrarlhf.envs.ArenaGymEnv``): step ``t`` is the seat's ``t``-th decision; its next
observation is the seat's next decision point (after the opponent's whole turn when the action
was END_TURN), and after the seat's last decision the seat's view of the final state.

* ``observations``: float32 [T + 1, OBS_DIM]: the recorded decision observations, then the
  seat's view of the battle's final state (rebuilt from the last ``turns`` row's
  ``state_end_json``, which is lossless);
* ``actions``: int64 [T], the chosen action ids;
* ``rewards``: float32 [T], 0 but the last: the seat's ``outcome`` (1 win, 0 draw, -1 loss);
* ``terminations``: bool [T], True at the last step only (every V5 battle is finished; the
  engine's turn limit is a real end, a draw); ``truncations``: bool [T], all False.

The source is validated first (``validated_source``), so an episode is never built from a
tampered file. Reading streams the decisions by battle; the final states are gathered first,
one JSON per battle (memory grows with the number of battles, not with decisions).
:func:`export_minari` needs the optional ``minari`` extra.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.compute as pc

import engine

from ..core.errors import InvalidArgument
from .paths import DatasetsDir
from .splits import _battle_chunks, _source
from .tables import fixed_vectors, iter_batches

__all__ = ["offline_rl_episodes", "export_minari"]

_COLUMNS = ["battle_id", "decision_index", "player", "observation", "action_id", "outcome"]


def _final_states(path: Path) -> dict[str, str]:
    """battle id -> ``state_end_json`` of its last turn."""
    last: dict[str, tuple[int, str]] = {}
    for batch in iter_batches(path / "turns.parquet", ["battle_id", "turn", "state_end_json"], 4096):
        for battle_id, turn, state in zip(*(batch.column(c).to_pylist() for c in ("battle_id", "turn",
                                                                                   "state_end_json"))):
            if battle_id not in last or turn > last[battle_id][0]:
                last[battle_id] = (turn, state)
    return {b: s for b, (_, s) in last.items()}


def offline_rl_episodes(dataset: str, *, datasets_dir: Any = "datasets") -> Iterator[dict[str, Any]]:
    """Episodes (one per battle and seat, in dataset order: battle, then seat 1 before 2), each
    ``{"battle_id", "seat", "observations", "actions", "rewards", "terminations", "truncations"}``
    (see the module doc)."""
    dirs = datasets_dir if isinstance(datasets_dir, DatasetsDir) else DatasetsDir(datasets_dir)
    resolved, _ = _source(dirs, dataset)
    return _episodes(resolved.path)


def _episodes(path: Path) -> Iterator[dict[str, Any]]:
    finals = _final_states(path)
    for chunk in _battle_chunks(path / "decisions.parquet", _COLUMNS):
        for battle_id in pc.unique(chunk.column("battle_id")).to_pylist():
            rows = chunk.filter(pc.equal(chunk.column("battle_id"), battle_id))
            final = engine.State.from_dict(json.loads(finals[battle_id]))
            players = rows.column("player").to_numpy()
            obs = fixed_vectors(rows.column("observation"), engine.OBS_DIM, "observation")
            actions = rows.column("action_id").to_numpy().astype(np.int64)
            outcomes = rows.column("outcome").to_numpy()
            order = np.argsort(rows.column("decision_index").to_numpy(), kind="stable")
            for seat in (1, 2):
                take = order[players[order] == seat]
                if take.size == 0:
                    continue  # a seat that never decided gives no episode
                rewards = np.zeros(take.size, dtype=np.float32)
                rewards[-1] = float(outcomes[take[-1]])
                terminations = np.zeros(take.size, dtype=bool)
                terminations[-1] = True
                yield {"battle_id": battle_id, "seat": seat,
                       "observations": np.concatenate([obs[take], final.observation(seat)[None]]),
                       "actions": actions[take], "rewards": rewards, "terminations": terminations,
                       "truncations": np.zeros(take.size, dtype=bool)}


_MINARI_ID = re.compile(r"(?:[A-Za-z0-9_-]+/)*[A-Za-z0-9_-]+-v[0-9]+")


def export_minari(dataset: str, dataset_id: str, *, datasets_dir: Any = "datasets",
                  author: str | None = None) -> dict[str, Any]:
    """Write the episodes of ``dataset`` as the Minari dataset ``dataset_id``
    (``"namespace/name-v0"``) in Minari's root (``MINARI_DATASETS_PATH``, else
    ``~/.minari/datasets``), Arrow storage; returns its id, path and counts. The env recorded is
    ``ExtraArena-v1`` (the episodes follow its steps); ``minari.load_dataset`` reads it back."""
    try:
        import minari
        from minari.data_collector import EpisodeBuffer
    except ModuleNotFoundError as exc:
        raise InvalidArgument(f"export_minari needs the optional 'minari' extra ({exc.name} is not installed): "
                              "pip install 'extrarlhf[minari]'") from None
    from gymnasium import spaces

    import extrarlhf.envs  # noqa: F401  (registers ExtraArena-v1, the dataset's env spec)

    if not isinstance(dataset_id, str) or not _MINARI_ID.fullmatch(dataset_id):
        raise InvalidArgument(f"dataset_id must look like 'namespace/name-v0' (Minari's format), got {dataset_id!r}")
    dirs = datasets_dir if isinstance(datasets_dir, DatasetsDir) else DatasetsDir(datasets_dir)
    resolved, _ = _source(dirs, dataset)
    buffers, steps = [], 0
    for i, episode in enumerate(_episodes(resolved.path)):
        buffers.append(EpisodeBuffer(id=i, observations=episode["observations"], actions=episode["actions"],
                                     rewards=list(episode["rewards"]), terminations=list(episode["terminations"]),
                                     truncations=list(episode["truncations"]), infos={}))
        steps += len(episode["actions"])
    if not buffers:
        raise InvalidArgument(f"dataset {resolved.dataset_id} has no decisions: no episode to export")
    created = minari.create_dataset_from_buffers(
        dataset_id, buffers, env="ExtraArena-v1", eval_env="ExtraArena-v1",
        observation_space=spaces.Box(-1.0, 1.0, (engine.OBS_DIM,), np.float32),
        action_space=spaces.Discrete(engine.ACTION_SPACE_SIZE), algorithm_name="recorded ExtraArena battles",
        author=author, description=f"ExtraArena battles of {resolved.dataset_id}, one episode per battle and seat",
        data_format="arrow")
    return {"dataset_id": dataset_id, "source": resolved.dataset_id, "path": str(created.storage.data_path),
            "episodes": len(buffers), "steps": steps}
