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
  engine's turn limit is a real end, a draw); ``truncations``: bool [T], all False;
* ``infos``: ``action_mask`` int8 [T + 1, 163] (the env's ``MASK_DTYPE``) and ``legal_ids``
  int64 [T + 1, 163] (ascending, then -1), row ``t`` for observation ``t`` as the env's
  ``info`` gives them (the final row: no legal action), from ``decisions.legal_action_ids``;
* ``actor`` / ``opponent``: the acting seat's and the other seat's ``{"spec", "kind",
  "weights_hash", "seat"}`` from the decisions' actor columns.

``acting_spec="search:..."`` keeps only the decisions of the actor with that spec (an episode
per battle and seat it played), e.g. the teacher's and not the greedy opponent's.

The source is validated first (``validated_source``), so an episode is never built from a
tampered file. Reading streams the decisions by battle; the final states are gathered first,
one JSON per battle (memory grows with the number of battles, not with decisions).
:func:`export_minari` needs the optional ``minari`` extra.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.compute as pc

import engine

from ..core.errors import InvalidArgument
from .paths import DatasetsDir
from .splits import _battle_chunks, _source
from .tables import fixed_vectors, iter_batches

__all__ = ["export_minari", "offline_rl_episodes"]

_ACTOR_COLUMNS = ["actor_spec", "actor_kind", "actor_weights_hash", "opponent_spec", "opponent_kind",
                  "opponent_weights_hash"]
_COLUMNS = ["battle_id", "decision_index", "player", "observation", "action_id", "outcome", "legal_action_ids",
            *_ACTOR_COLUMNS]
_MASK_DTYPE = np.int8  # extrarlhf.envs.observations.MASK_DTYPE (not imported: that needs the 'rl' extra)


def _final_states(path: Path) -> dict[str, str]:
    """battle id -> ``state_end_json`` of its last turn."""
    last: dict[str, tuple[int, str]] = {}
    for batch in iter_batches(path / "turns.parquet", ["battle_id", "turn", "state_end_json"], 4096):
        for battle_id, turn, state in zip(*(batch.column(c).to_pylist() for c in ("battle_id", "turn",
                                                                                   "state_end_json"))):
            if battle_id not in last or turn > last[battle_id][0]:
                last[battle_id] = (turn, state)
    return {b: s for b, (_, s) in last.items()}


def offline_rl_episodes(dataset: str, *, datasets_dir: Any = "datasets",
                        acting_spec: str | None = None) -> Iterator[dict[str, Any]]:
    """Episodes (one per battle and seat, in dataset order: battle, then seat 1 before 2), each
    ``{"battle_id", "seat", "observations", "actions", "rewards", "terminations", "truncations",
    "infos", "actor", "opponent"}`` (see the module doc); only ``acting_spec``'s when given."""
    dirs = datasets_dir if isinstance(datasets_dir, DatasetsDir) else DatasetsDir(datasets_dir)
    resolved, _ = _source(dirs, dataset)
    _check_acting_spec(resolved.path, resolved.dataset_id, acting_spec)
    return _episodes(resolved.path, acting_spec)


def _check_acting_spec(path: Path, dataset_id: str, acting_spec: str | None) -> None:
    """A clear error, before anything is written, for an ``acting_spec`` no decision has."""
    if acting_spec is None:
        return
    specs: set[str] = set()
    for batch in iter_batches(path / "decisions.parquet", ["actor_spec"], 65536):
        specs.update(s for s in batch.column("actor_spec").to_pylist() if s is not None)
    if not isinstance(acting_spec, str) or acting_spec not in specs:
        raise InvalidArgument(f"acting_spec {acting_spec!r} acts in no decision of {dataset_id}; "
                              f"its actors' specs are {sorted(specs)}: pass one of them, or none for every seat")


def _legal(rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """(action_mask int8, legal_ids int64 padded with -1), [len(rows) + 1, 163]: a final row with none."""
    mask = np.zeros((len(rows) + 1, engine.ACTION_SPACE_SIZE), dtype=_MASK_DTYPE)
    ids = np.full((len(rows) + 1, engine.ACTION_SPACE_SIZE), -1, dtype=np.int64)
    for t, legal in enumerate(rows):
        mask[t, legal] = 1
        ids[t, :len(legal)] = legal
    return mask, ids


def _actor(row: dict[str, Any], prefix: str, seat: int) -> dict[str, Any]:
    return {"spec": row[f"{prefix}_spec"], "kind": row[f"{prefix}_kind"],
            "weights_hash": row[f"{prefix}_weights_hash"], "seat": seat}


def _episodes(path: Path, acting_spec: str | None = None) -> Iterator[dict[str, Any]]:
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
            legal = rows.column("legal_action_ids").to_pylist()
            for seat in (1, 2):
                take = order[players[order] == seat]
                if take.size == 0:
                    continue  # a seat that never decided gives no episode
                first = rows.slice(int(take[0]), 1).select(_ACTOR_COLUMNS).to_pylist()[0]
                if acting_spec is not None and first["actor_spec"] != acting_spec:
                    continue
                mask, ids = _legal([legal[i] for i in take])
                rewards = np.zeros(take.size, dtype=np.float32)
                rewards[-1] = float(outcomes[take[-1]])
                terminations = np.zeros(take.size, dtype=bool)
                terminations[-1] = True
                yield {"battle_id": battle_id, "seat": seat,
                       "observations": np.concatenate([obs[take], final.observation(seat)[None]]),
                       "actions": actions[take], "rewards": rewards, "terminations": terminations,
                       "truncations": np.zeros(take.size, dtype=bool),
                       "infos": {"action_mask": mask, "legal_ids": ids},
                       "actor": _actor(first, "actor", seat), "opponent": _actor(first, "opponent", 3 - seat)}


def export_minari(dataset: str, dataset_id: str, *, datasets_dir: Any = "datasets",
                  author: str | None = None, acting_spec: str | None = None) -> dict[str, Any]:
    """Write the episodes of ``dataset`` (only ``acting_spec``'s when given) as the Minari dataset
    ``dataset_id`` (``"namespace/name-v0"``) in Minari's root (``MINARI_DATASETS_PATH``, else
    ``~/.minari/datasets``), Arrow storage; returns its id, path, counts and the recorded env
    kwargs. Each step's ``infos`` carry ``action_mask`` and ``legal_ids``; each episode's metadata
    (``dataset.storage.get_episode_metadata([i])``) its ``battle_id``, ``seat``, ``actor`` and
    ``opponent``. The env recorded is ``ExtraArena-v1`` (the episodes follow its steps) with
    :func:`_recording_kwargs`; ``minari.load_dataset`` reads it back."""
    try:
        import minari
        from minari.data_collector import EpisodeBuffer
        from minari.dataset.minari_dataset import parse_dataset_id
    except ModuleNotFoundError as exc:
        raise InvalidArgument(f"export_minari needs the optional 'minari' extra ({exc.name} is not installed): "
                              "pip install 'extrarlhf[minari]'") from None
    import dataclasses

    import gymnasium
    from gymnasium import spaces

    from ..envs import ENV_ID  # registers ExtraArena-v1, the dataset's env spec

    try:  # Minari's own parser: it rejects ids a looser check would pass (one-letter names among them)
        parse_dataset_id(dataset_id)
    except (ValueError, TypeError):
        raise InvalidArgument(f"dataset_id must look like 'namespace/name-v0' (Minari's format), got {dataset_id!r}") from None
    dirs = datasets_dir if isinstance(datasets_dir, DatasetsDir) else DatasetsDir(datasets_dir)
    resolved, _ = _source(dirs, dataset)
    _check_acting_spec(resolved.path, resolved.dataset_id, acting_spec)
    buffers, metadata, steps = [], [], 0
    for i, episode in enumerate(_episodes(resolved.path, acting_spec)):
        buffers.append(EpisodeBuffer(id=i, observations=episode["observations"], actions=episode["actions"],
                                     rewards=list(episode["rewards"]), terminations=list(episode["terminations"]),
                                     truncations=list(episode["truncations"]), infos=episode["infos"]))
        metadata.append({k: episode[k] for k in ("battle_id", "seat", "actor", "opponent")})
        steps += len(episode["actions"])
    if not buffers:
        raise InvalidArgument(f"dataset {resolved.dataset_id} has no decisions: no episode to export")
    kwargs, conditions = _recording_kwargs(metadata)
    env_spec = dataclasses.replace(gymnasium.spec(ENV_ID), kwargs=kwargs)
    whose = f"the decisions of {acting_spec}" if acting_spec else "every seat's decisions"
    created = minari.create_dataset_from_buffers(  # the dataset, its metadata, no episode yet
        dataset_id, [], env=env_spec, eval_env=env_spec,
        observation_space=spaces.Box(-1.0, 1.0, (engine.OBS_DIM,), np.float32),
        action_space=spaces.Discrete(engine.ACTION_SPACE_SIZE), algorithm_name="recorded ExtraArena battles",
        author=author, description=f"ExtraArena battles of {resolved.dataset_id}, {whose}, one episode per battle "
                                   "and seat",
        data_format="arrow")
    with _size_measured_once(created.storage):
        created.storage.update_episodes(buffers)
        created.storage.update_episode_metadata(metadata, range(len(metadata)))
    created.storage.update_metadata({"recording_conditions": conditions})
    return {"dataset_id": dataset_id, "source": resolved.dataset_id, "path": str(created.storage.data_path),
            "episodes": len(buffers), "steps": steps, "env_kwargs": kwargs}


@contextmanager
def _size_measured_once(storage: Any) -> Iterator[None]:
    """Minari (0.5) re-measures the whole dataset folder (a recursive glob) and rewrites its
    metadata after every episode it writes, which makes an export quadratic in its episodes
    (600 episodes: 91 of 95 profiled seconds). Inside this block the storage's size updates are
    skipped; the size is measured once at the end, so the dataset is the one Minari writes."""
    storage.get_size = lambda: 0.0  # instance attributes: the class is untouched
    update = storage.update_metadata
    storage.update_metadata = lambda doc: None if set(doc) == {"dataset_size"} else update(doc)
    try:
        yield
    finally:
        del storage.get_size, storage.update_metadata
    storage.update_metadata({"dataset_size": storage.get_size()})


def _recording_kwargs(metadata: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``ExtraArena-v1`` kwargs of the recording conditions, and their description.

    ``seat`` is the exported actors' seat, ``"random"`` when episodes of both seats are exported;
    ``opponent`` the opponents' spec, a pool (list, sorted) when there were several: the env then
    draws one per episode uniformly, not in the recorded proportions (``recording_conditions``
    in the dataset's metadata counts the episodes per seat and opponent). An opponent without a spec (a human or an LLM)
    cannot be replayed: it is left out of the pool (no ``opponent`` kwarg when none has a spec)
    and listed under ``unreproducible_opponents``."""
    pairs = Counter((m["seat"], m["opponent"]["spec"], m["opponent"]["kind"]) for m in metadata)
    seats = {seat for seat, _, _ in pairs}
    opponents = sorted({spec for _, spec, _ in pairs if spec is not None})
    kwargs: dict[str, Any] = {"seat": next(iter(seats)) if len(seats) == 1 else "random"}
    if opponents:
        kwargs["opponent"] = opponents[0] if len(opponents) == 1 else opponents
    conditions = {"episodes": [{"seat": seat, "opponent_spec": spec, "opponent_kind": kind, "count": n}
                               for (seat, spec, kind), n in sorted(pairs.items(), key=str)],
                  "unreproducible_opponents": sorted({kind for _, spec, kind in pairs if spec is None})}
    return kwargs, conditions
