"""The preference dataset: a pool's judgments as a versioned, validated Parquet dataset.

``materialize_preference_dataset`` publishes ``<name>/vN`` (kind ``preference_pairs``) through
the datasets plane (publish.py: built in a temp folder, validated there, renamed into place;
the Hugging Face card follows): ``train`` / ``val`` / ``test`` tables of the PREFERENCES layout
(tables.py), split by battle with the keyed hash of assign.py (contour ``preferences``), so a
battle's states never straddle two splits. Each row is one A/B/tie judgment with the board text
the judge saw and, for learners, the acting player's observation and both candidates' action
features, recomputed from the replayed state. Skips are counted, not kept; gold tasks, flagged
judges' judgments and judgments over a judge's share cap are left out (selection.py), and the
manifest's ``left_out`` says how many and why. ``consensus`` is the strict-majority answer of
the kept judges on a task two of them or more answered, ``consensus_ds`` their Dawid-Skene
estimate (consensus.py). Readiness (``preference_ready``)
needs enough non-tie judgments, distinct states and distinct (kept) judges; when every judge
is flagged, materializing is refused (NotReady naming each flag's reason) and nothing is written.

``export_trl_preferences`` writes the TRL preference shape (``prompt`` / ``chosen`` /
``rejected`` as text, ties left out) for people who train language-model players.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import engine

from ..core.errors import InvalidArgument, NotReady, RLHFError
from ..datasets.assign import DEFAULT_FRACTIONS, DEFAULT_SPLIT_KEY, bucket, check_fractions, check_split_key, split_of
from ..datasets.manifest import read_manifest, write_manifest
from ..datasets.paths import DatasetsDir, check_dataset_name
from ..datasets.pointers import resolve
from ..datasets.publish import publish_version
from ..datasets.tables import COMPRESSION, COMPRESSION_LEVEL, SCHEMAS
from ..datasets.validate import validate_dir, validated_source
from .points import states_at
from .policy import PreferencePolicy, preference_readiness
from .pool import DEFAULT_PREFERENCES_DIR, JUDGMENTS, pool_dir
from .selection import everyone_flagged, select_judgments

CONTOUR = "preferences"
SPLITS = ("train", "val", "test")
PROMPT_SUFFIX = "\n\nYour move:"


def _rows(pool_folder: Path, datasets_dir: str | os.PathLike[str], policy: PreferencePolicy
          ) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    chosen = select_judgments(pool_folder, policy)
    doc, kept, consensus = chosen["doc"], chosen["kept"], chosen["consensus"]
    tasks = {t["task_id"]: t for t in doc["tasks"]}
    source = resolve(DatasetsDir(datasets_dir), doc["dataset_id"]).path
    points = sorted({(tasks[j["task_id"]]["battle_id"], tasks[j["task_id"]]["decision_index"],
                      tasks[j["task_id"]]["state_hash"]) for j in kept})
    states = states_at(source, points)
    rows = []
    for j in kept:
        t = tasks[j["task_id"]]
        state = states[(t["battle_id"], t["decision_index"])]
        a, b = t["candidates"]["A"], t["candidates"]["B"]
        features = state.action_features([a["action_id"], b["action_id"]])
        rows.append({
            "task_id": t["task_id"], "pool": doc["pool"], "source": t["source"], "source_dataset": doc["dataset_id"],
            "battle_id": t["battle_id"], "group": t["group"], "decision_index": t["decision_index"],
            "turn": t["turn"], "player": t["player"], "state_hash": t["state_hash"], "board": t["board"],
            "a_action_id": a["action_id"], "b_action_id": b["action_id"], "a_description": a["description"],
            "b_description": b["description"], "a_origin": a["origin"], "b_origin": b["origin"],
            "observation": state.observation(t["player"]).astype(np.float32), "a_features": features[0],
            "b_features": features[1], "choice": j["choice"], "judge": j["judge"], "judge_kind": j["judge_kind"],
            "reason": j.get("reason"), "think_ms": j.get("think_ms"), "judged_at": j["judged_at"],
            "consensus": consensus[t["task_id"]][0], "consensus_ds": consensus[t["task_id"]][1],
            "consensus_judges": consensus[t["task_id"]][2],
        })
    rows.sort(key=lambda r: (r["battle_id"], r["decision_index"], r["task_id"], r["judge"]))
    return doc, rows, chosen


def _evidence(rows: list[dict[str, Any]]) -> dict[str, int]:
    decisive = [r for r in rows if r["choice"] != "tie"]
    return {"judgments": len(rows), "decisive_judgments": len(decisive),
            "states": len({(r["battle_id"], r["decision_index"]) for r in rows}),
            "judges": len({r["judge"] for r in rows}), "battles": len({r["battle_id"] for r in rows})}


def materialize_preference_dataset(pool: str, *, name: str | None = None, fractions: Any = DEFAULT_FRACTIONS,
                                   split_key: str = DEFAULT_SPLIT_KEY, datasets_dir: str | os.PathLike[str] = "datasets",
                                   preferences_dir: str | os.PathLike[str] = DEFAULT_PREFERENCES_DIR,
                                   policy: "PreferencePolicy | Mapping[str, Any] | None" = None) -> dict[str, Any]:
    """Publish the pool's judgments as ``name`` (default ``prefs-<pool>``); returns the
    publication with row counts per split, the evidence and ``preference_ready``. Judgments
    unchanged since the latest version (same hash, same split settings) keep that version
    (``reused: true``) instead of writing an identical copy."""
    fractions = check_fractions(fractions)
    split_key = check_split_key(split_key)
    policy = PreferencePolicy.coerce(policy)
    folder = pool_dir(preferences_dir, pool)
    name = check_dataset_name(name or f"prefs-{folder.name}")
    judged = _judgments_sha256(folder)
    kept = _unchanged(DatasetsDir(datasets_dir), name, folder.name, judged, split_key, fractions, policy)
    if kept is not None:
        return kept
    doc, rows, chosen = _rows(folder, datasets_dir, policy)
    left_out = chosen["left_out"]
    skipped = left_out["skipped"]
    if not rows:
        blockers = everyone_flagged(chosen)
        if blockers:
            raise NotReady(f"pool {folder.name!r} is not ready: " + blockers[0], blockers)
        raise NotReady(f"pool {folder.name!r} has no A/B/tie judgment of an ordinary task yet (gold tasks measure "
                       f"judges and are not in the dataset); judge some tasks first (preference_task / "
                       f"submit_preference)", [f"0 judgments ({skipped} skipped, {left_out['gold']['judgments']} "
                                               f"on gold tasks)"])
    split_rows: dict[str, list[dict[str, Any]]] = {s: [] for s in SPLITS}
    for row in rows:
        split_rows[split_of(bucket(split_key, CONTOUR, row["battle_id"]), fractions)].append(row)
    evidence = _evidence(rows)
    readiness = preference_readiness(evidence, policy)
    quality = chosen["quality"]
    quality_summary = {"krippendorff_alpha": quality["krippendorff_alpha"], "flagged": quality["flagged"],
                       "judges": len(quality["judges"]), "rule": quality["rule"]}

    def build(tmp: Path, dataset_id: str, version: int) -> dict[str, Any]:
        tables = {}
        for split, part in split_rows.items():
            path = tmp / f"{split}.parquet"
            pq.write_table(pa.Table.from_pylist(part, schema=SCHEMAS["preferences"]), path, compression=COMPRESSION,
                           compression_level=COMPRESSION_LEVEL)
            tables[split] = {"file": path.name, "rows": len(part), "table": "preferences"}
        write_manifest(tmp, dataset_id=dataset_id, name=name, version=version, kind="preference_pairs", tables=tables,
                       sources={"kind": "preference_pool", "pool": doc["pool"], "dataset_id": doc["dataset_id"],
                                "dataset_manifest_sha256": doc["dataset_manifest_sha256"], "seed": doc["seed"],
                                "sources": doc["sources"], "tasks": len(doc["tasks"]), "judgments_sha256": judged},
                       readiness={"contours": {"preference_ready": readiness}},
                       extra={"split": {"contour": CONTOUR, "group_key": "battle_id", "split_key": split_key,
                                        "fractions": dict(zip(SPLITS, fractions)), "battles_straddling_splits": 0,
                                        "rows": {s: len(p) for s, p in split_rows.items()}},
                              "skipped_judgments": skipped, "left_out": left_out, "selection": policy.selection(),
                              "judge_quality": quality_summary})
        return {"rows": {s: len(p) for s, p in split_rows.items()}, "evidence": evidence,
                "preference_ready": readiness, "skipped_judgments": skipped, "left_out": left_out,
                "judge_quality": quality_summary}

    return {**publish_version(DatasetsDir(datasets_dir), name, build, validate=validate_dir), "reused": False}


def _judgments_sha256(pool_folder: Path) -> str:
    """The hash of the pool's whole judgment lines (a line still being written is not one yet)."""
    path = pool_folder / JUDGMENTS
    data = path.read_bytes() if path.exists() else b""
    return hashlib.sha256(data[:data.rfind(b"\n") + 1]).hexdigest()


def _unchanged(dirs: DatasetsDir, name: str, pool: str, judged: str, split_key: str,
               fractions: tuple[float, ...], policy: PreferencePolicy) -> dict[str, Any] | None:
    """The latest version of ``name`` when it was made from exactly these judgments with these
    split settings and still validates: materializing again would write an identical copy.
    Its readiness is judged again under ``policy`` (the manifest keeps the one of its build)."""
    versions = dirs.versions(name) if dirs.dataset_dir(name).is_dir() else []
    if not versions:
        return None
    path = dirs.version_dir(name, versions[-1])
    try:
        manifest = read_manifest(path)
    except RLHFError:
        return None
    sources, split = manifest.get("sources") or {}, manifest.get("split") or {}
    if (manifest.get("kind"), sources.get("pool"), sources.get("judgments_sha256"), split.get("split_key"),
            split.get("fractions"), manifest.get("selection")) != (
            "preference_pairs", pool, judged, split_key, dict(zip(SPLITS, fractions)), policy.selection()):
        return None
    if validate_dir(path, expected_id=manifest["dataset_id"]):
        return None
    evidence = manifest["readiness"]["contours"]["preference_ready"]["evidence"]
    readiness = preference_readiness(evidence, policy)
    return {"dataset_id": manifest["dataset_id"], "name": name, "version": versions[-1], "path": str(path),
            "rows": split["rows"], "evidence": evidence, "preference_ready": readiness,
            "skipped_judgments": manifest.get("skipped_judgments", 0), "left_out": manifest.get("left_out"),
            "judge_quality": manifest.get("judge_quality"), "reused": True}


def read_preferences(dataset: str, split: str, *, datasets_dir: str | os.PathLike[str] = "datasets",
                     require_ready: bool = False) -> tuple[pa.Table, dict[str, Any]]:
    """One split of a validated preference dataset, and its manifest (``require_ready``:
    refuse one whose ``preference_ready`` holds blockers)."""
    if split not in SPLITS:
        raise InvalidArgument(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    resolved, manifest = validated_source(
        DatasetsDir(datasets_dir), dataset,
        lambda m: None if m.get("kind") == "preference_pairs" else
        f"is a {m.get('kind')!r} dataset, not a preference dataset (materialize_preference_dataset)",
        "materialize the pool again")
    ready = manifest["readiness"]["contours"]["preference_ready"]
    if require_ready and not ready["ready"]:
        raise NotReady(f"{resolved.dataset_id} is not preference-ready: " + "; ".join(ready["blockers"]),
                       ready["blockers"])
    return pq.ParquetFile(resolved.path / f"{split}.parquet").read(), manifest


def export_trl_preferences(dataset: str, out_dir: str | os.PathLike[str], *,
                           datasets_dir: str | os.PathLike[str] = "datasets") -> dict[str, Any]:
    """``<out_dir>/{train,validation,test}.jsonl`` in TRL's preference shape, ties left out:
    ``prompt`` (the board the judge saw, then ``Your move:``), ``chosen`` and
    ``rejected`` (the moves' descriptions), plus the provenance columns a user may filter on."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    counts = {}
    for split, hf in (("train", "train"), ("val", "validation"), ("test", "test")):
        table, manifest = read_preferences(dataset, split, datasets_dir=datasets_dir)
        lines = []
        for r in table.select(["task_id", "board", "a_description", "b_description", "choice", "judge_kind",
                               "source"]).to_pylist():
            if r["choice"] == "tie":
                continue
            chosen, rejected = ((r["a_description"], r["b_description"]) if r["choice"] == "A"
                                else (r["b_description"], r["a_description"]))
            prompt = r["board"] + PROMPT_SUFFIX
            lines.append({"prompt": prompt, "chosen": chosen, "rejected": rejected, "task_id": r["task_id"],
                          "judge_kind": r["judge_kind"], "source": r["source"]})
        tmp = out / f".{hf}.jsonl.tmp"
        tmp.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
        os.replace(tmp, out / f"{hf}.jsonl")
        counts[hf] = len(lines)
    return {"dataset_id": manifest["dataset_id"], "path": str(out), "rows": counts, "format": "trl_preference"}


def decisive_pairs(table: pa.Table) -> dict[str, np.ndarray]:
    """The A/B (non-tie) rows of a preference table as arrays: ``obs``, ``a`` and ``b`` features,
    ``y`` 1.0 where A was preferred."""
    decisive = table.filter(pc.not_equal(table.column("choice"), "tie"))

    def matrix(column: str, width: int) -> np.ndarray:
        flat = decisive.column(column).combine_chunks().flatten().to_numpy(zero_copy_only=False)
        return flat.astype(np.float32).reshape(-1, width)

    return {"obs": matrix("observation", engine.OBS_DIM), "a": matrix("a_features", engine.ACTION_FEATURE_DIM),
            "b": matrix("b_features", engine.ACTION_FEATURE_DIM),
            "y": (np.array(decisive.column("choice").to_pylist()) == "A").astype(np.float32)}


def load_pairs(dataset: str, *, datasets_dir: str | os.PathLike[str] = "datasets", require_ready: bool = True,
               policy: "PreferencePolicy | Mapping[str, Any] | None" = None
               ) -> tuple[dict[str, dict[str, np.ndarray]], dict[str, Any], dict[str, Any]]:
    """(decisive pairs per split, manifest, ``preference_ready``) of a preference dataset, what
    the reward model and DPO train on: readiness judged again under ``policy`` when one is
    given, :class:`NotReady` with its blockers under ``require_ready``, and :class:`NotReady`
    when the train or test split has no decisive judgment (nothing to fit or to measure on)."""
    train_table, manifest = read_preferences(dataset, "train", datasets_dir=datasets_dir)
    ready = manifest["readiness"]["contours"]["preference_ready"]
    if policy is not None:  # judged again under the caller's thresholds
        ready = preference_readiness(ready["evidence"], policy)
    if require_ready and not ready["ready"]:
        raise NotReady(f"{manifest['dataset_id']} is not preference-ready: " + "; ".join(ready["blockers"]),
                       ready["blockers"])
    splits = {"train": decisive_pairs(train_table),
              **{s: decisive_pairs(read_preferences(dataset, s, datasets_dir=datasets_dir)[0]) for s in ("val", "test")}}
    if len(splits["train"]["y"]) == 0 or len(splits["test"]["y"]) == 0:
        raise NotReady(f"{manifest['dataset_id']} needs non-tie judgments in its train and test splits to fit and "
                       f"measure a model (train {len(splits['train']['y'])}, test {len(splits['test']['y'])})",
                       ["no decisive judgments in a split"])
    return splits, manifest, ready
