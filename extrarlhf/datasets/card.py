"""Hugging Face dataset card (``<name>/README.md``) of a published dataset, from its manifests.

The dataset folder ``datasets/<name>/`` is laid out like a Hugging Face dataset repository:
one folder per version, Parquet files inside. The card is that repository's ``README.md``:
YAML metadata (``configs`` with ``data_files`` per version and split, so
``datasets.load_dataset(folder, "v2")`` finds the files; ``dataset_info`` with the features and
each split's ``num_examples`` and ``num_bytes``, the fields ``datasets`` requires of a split, or
it ignores them with a warning; a license *placeholder* to set before publishing anywhere) followed by the
provenance each manifest records (sources, code version, ruleset, observation version, the
manifest's own sha256 and every file's, readiness, split rules). It is derived data: rewritten
whole, atomically, by :func:`write_dataset_card` at every publication (publish.py, under the
dataset's lock, after the commit point) and on demand (``python -m extrarlhf datasets card
NAME``). It is deliberately in no manifest's ``files``: it lives beside the versions, not inside
one, and changes whenever a version is added, while a published version never changes; it
instead lists the sha256 of every version's manifest and files. Local folders (the sessions
dir) are left out: they are no provenance a reader elsewhere can use.

Features follow Hugging Face ``datasets``' YAML: a fixed-size Arrow list (``observation``,
each legal action's feature row) is ``list`` with its ``length``, so the fixed shape survives.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from ..core.errors import IntegrityError, NotFound, RLHFError
from ..core.fileio import atomic_write_bytes
from .manifest import MANIFEST, read_manifest
from .paths import DatasetsDir, check_dataset_name
from .pointers import manifest_sha256
from .tables import TABLES

CARD = "README.md"
# Each version's table sizes, kept beside the card (a dot file: no listing reads it) so that
# rewriting the card after a new version re-reads only that version's tables, not every older
# one (a dataset the improvement loop republishes grows a version a round). An entry is used
# only while its version's manifest sha256 and its files' sizes and mtimes are those recorded.
SIZES_CACHE = ".card-sizes.json"
SPLIT_TABLES = ("train", "val", "test")
_HF_SPLITS = {"train": "train", "val": "validation", "test": "test"}
_LICENSE_NOTE = ("license: other (placeholder) - choose the license of this data before you publish it; the "
                 "card is regenerated at every publication, so set it in your publishing step")


def _feature_type(typ: pa.DataType) -> dict[str, Any]:
    """An Arrow type as a Hugging Face YAML feature type: ``{"dtype": ...}``, or ``{"list": inner}``
    (plus ``length`` for a fixed-size list), the inner type simplified to its dtype when plain."""
    if pa.types.is_fixed_size_list(typ) or pa.types.is_list(typ) or pa.types.is_large_list(typ):
        inner = _feature_type(typ.value_type)
        out: dict[str, Any] = {"list": inner["dtype"] if list(inner) == ["dtype"] else inner}
        if pa.types.is_fixed_size_list(typ):
            out["length"] = typ.list_size
        return out
    dtype = "string" if pa.types.is_string(typ) or pa.types.is_large_string(typ) else \
        "bool" if pa.types.is_boolean(typ) else \
        f"float{typ.bit_width}" if pa.types.is_floating(typ) else str(typ)  # Arrow says "float" for float32
    return {"dtype": dtype}


def _feature(name: str, typ: pa.DataType) -> dict[str, Any]:
    return {"name": name, **_feature_type(typ)}


def _configs(version: int, manifest: dict[str, Any],
             sizes: dict[str, tuple[int, int]]) -> tuple[list[dict], list[dict]]:
    """(configs, dataset_info) entries of one version: one config with train/validation/test for
    a split dataset, else one config per table (split ``train``), ``decisions`` first. An empty
    table or split is left out (``load_dataset`` fails on a split of no rows); the provenance
    names it."""
    tables = manifest["tables"]
    groups = ([(f"v{version}", [t for t in SPLIT_TABLES if t in tables])] if all(t in tables for t in SPLIT_TABLES)
              else [(f"v{version}-{t}", [t]) for t in sorted(tables, key=lambda t: (t != "decisions", t))
                    if t != "assignments"])
    configs, infos = [], []
    for config, members in groups:
        split_of = (lambda t: _HF_SPLITS[t]) if len(members) > 1 else (lambda t: "train")
        members = [t for t in members if tables[t]["rows"]]  # datasets cannot load a split of no rows
        if not members:
            continue
        configs.append({"config_name": config,
                        "data_files": [{"split": split_of(t), "path": f"v{version}/{tables[t]['file']}"}
                                       for t in members]})
        layout = TABLES[tables[members[0]]["table"]]
        splits = [{"name": split_of(t), "num_bytes": sizes[t][0], "num_examples": tables[t]["rows"]}
                  for t in members]
        infos.append({"config_name": config, "features": [_feature(n, typ) for n, typ, *_ in layout],
                      "splits": splits, "download_size": sum(sizes[t][1] for t in members),
                      "dataset_size": sum(s["num_bytes"] for s in splits)})
    return configs, infos


def _table_sizes(folder: Path, manifest: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """Table -> (``num_bytes``, file bytes) of one version. ``num_bytes`` as ``datasets`` means it:
    the uncompressed Arrow size of the rows (``datasets`` sums ``Table.nbytes`` of the batches it
    writes to its cache), not the Parquet file's size (that is the config's ``download_size``).
    A manifest that records a table's ``arrow_bytes`` (the rows' Arrow size as they were written)
    gives it without reading the file; an older one's tables are read one row group at a time
    (memory stays bounded). The two differ only by the validity bitmaps Parquet's reader gives
    nested columns (about 3% of a decisions table), and ``datasets`` adds its own for fixed-size
    lists: ``datasets`` checks only ``num_examples`` against what it loads. A file that cannot be
    read, or whose size is not the manifest's, is an ``integrity_error``."""
    sizes = {}
    for table, info in manifest["tables"].items():
        path = folder / info["file"]
        try:
            written, size = info.get("arrow_bytes"), path.stat().st_size
            if isinstance(written, int) and not isinstance(written, bool) and written >= 0:
                if size != info.get("bytes"):  # cheap, where the sizes are not read from the file
                    raise IntegrityError(f"{folder.name}/{info['file']} is {size} bytes where its manifest records "
                                         f"{info.get('bytes')} (it changed after publication); run `python -m "
                                         f"extrarlhf datasets validate` on this version")
                sizes[table] = (written, size)
                continue
            file = pq.ParquetFile(path)
            sizes[table] = (sum(file.read_row_group(i).nbytes for i in range(file.metadata.num_row_groups)), size)
        except (OSError, pa.ArrowException) as exc:
            raise IntegrityError(f"{folder.name}/{info['file']} cannot be read as Parquet ({type(exc).__name__}); "
                                 f"run `python -m extrarlhf datasets validate` on this version") from None
    return sizes


def _provenance(version: int, m: dict[str, Any], manifest_sha: str) -> list[str]:
    code = m["code_version"]
    code = ", ".join(f"{k} {v}" for k, v in sorted(code.items())) if isinstance(code, dict) else str(code)
    lines = [f"### v{version} ({m['kind']})", "",
             f"- dataset id `{m['dataset_id']}`, created {m['created_at']}, code: {code}, "
             f"ruleset `{m['ruleset']}`, observation version {m['obs_version']} ({m['obs_dim']} floats), "
             f"action features {m['action_feature_dim']} floats",
             f"- `v{version}/{MANIFEST}` sha256 `{manifest_sha}`",
             f"- rows: " + ", ".join(f"{t} {n}" for t, n in sorted(m["row_counts"].items()))]
    empty = sorted(t for t, info in m["tables"].items() if not info["rows"] and t != "assignments")
    if empty:
        lines.append(f"- empty, so in no config (`datasets` cannot load a split of no rows): {', '.join(empty)}")
    sources = m.get("sources") or {}
    if sources.get("kind") == "dataset":
        lines.append(f"- made from `{sources['dataset_id']}` (manifest sha256 `{sources['manifest_sha256']}`)")
    elif sources.get("kind") == "session_groups":
        lines += [f"- session group `{g['group']}`: {g['battles']} battles, catalog sha256 `{g['catalog_sha256']}`"
                  for g in sources.get("groups", [])]
    elif sources:  # local folders are not provenance a reader can use: left out
        shown = {k: v for k, v in sources.items() if not k.endswith(("_dir", "path"))}
        lines.append(f"- sources: `{yaml.safe_dump(shown, default_flow_style=True, width=10**6).strip()}`")
    split = m.get("split")
    if split:
        lines.append(f"- split of contour `{split['contour']}` grouped by {split['group_key']} (keyed hash, key "
                     f"`{split['split_key']}`), fractions {split['fractions']}"
                     + (f"; {split['battles_straddling_splits']} battle(s) straddle splits"
                        if "battles_straddling_splits" in split else ""))
    left = m.get("left_out")
    if isinstance(left, dict):
        flagged, capped = left["flagged"], left["capped"]
        lines.append(f"- judgments kept {left['kept']['judgments']} of {left['judgments_logged']} logged, by "
                     f"{left['kept']['judges']} judges; left out: {left['skipped']} skips, "
                     f"{left['gold']['judgments']} on {left['gold']['tasks']} gold tasks, "
                     f"{flagged['judgments']} of {flagged['judges']} flagged judges"
                     + ("" if flagged["left_out"] or not flagged["judges"] else " (flagged judges kept)")
                     + f", {capped['judgments']} of {capped['judges']} judges over the share cap "
                       f"{capped['max_judge_share']}")
        lines += [f"  - flagged `{judge}`: {reason}" for judge, reason in flagged["reasons"].items()]
    readiness = (m.get("readiness") or {}).get("contours") or {}
    ready = [c for c, state in sorted(readiness.items()) if isinstance(state, dict) and state.get("ready")]
    if readiness:
        lines.append(f"- ready contours at build time: {', '.join(ready) or 'none'}")
    if m.get("pseudonymized"):
        lines.append(f"- **{PSEUDONYMIZED_NOTE}**: pseudonym key `{m.get('pseudonym_key_id')}`")
    lines += ["- files (sha256):"] + [f"  - `v{version}/{f}` `{sha}`" for f, sha in sorted(m["files"].items())]
    return lines + [""]


PSEUDONYMIZED_NOTE = "Pseudonymized, not anonymous"


def dataset_card(name: str, manifests: dict[int, dict[str, Any]], manifest_shas: dict[int, str],
                 sizes: dict[int, dict[str, tuple[int, int]]], unreadable: dict[int, str] | None = None) -> str:
    """The card text for ``name`` given its manifests (and their sha256) and table sizes
    (:func:`_table_sizes`) by version (newest is the default config); ``unreadable`` versions
    (version -> error code) are named, not described."""
    configs, infos = [], []
    for version in sorted(manifests, reverse=True):
        c, i = _configs(version, manifests[version], sizes[version])
        configs += c
        infos += i
    if configs:
        configs[0]["default"] = True
    meta = {"pretty_name": name, "license": "other", "license_name": "to-be-decided",
            "tags": ["reinforcement-learning", "imitation-learning", "games", "extraarena"],
            "configs": configs, "dataset_info": infos}
    body = [f"# {name}", "",
            "ExtraArena battles recorded by ExtraRLHF: per-decision observations (the acting player's "
            "view, no hidden information), legal actions with their features, the chosen action and the "
            "battle's outcome. Column meanings: the project's `docs/data-format.md`, section 10.", "",
            f"**{_LICENSE_NOTE}.**", ""]
    keys = sorted({str(m.get("pseudonym_key_id")) for m in manifests.values() if m.get("pseudonymized")})
    if keys:
        body += [f"**{PSEUDONYMIZED_NOTE}.** Data derived from production: players appear only as keyed "
                 f"pseudonyms (key {', '.join(f'`{k}`' for k in keys)}). Whoever holds that key's salt can link "
                 f"them to the production accounts, and play itself can identify a person: treat these files "
                 f"as personal data.", ""]
    body += ["## Provenance", ""]
    for version in sorted(manifests, reverse=True):
        body += _provenance(version, manifests[version], manifest_shas[version])
    if unreadable:
        body += ["## Versions not described", ""] + [
            f"- `v{v}`: its manifest or files cannot be read by this ExtraRLHF (`{code}`, e.g. an older dataset "
            f"format or a damaged file); "
            f"rebuild it, then regenerate this card" for v, code in sorted(unreadable.items())] + [""]
    return "---\n" + yaml.safe_dump(meta, sort_keys=False, allow_unicode=True) + "---\n\n" + "\n".join(body)


def _stat(path: Path) -> list[int]:
    try:
        st = path.stat()
    except OSError:
        return [-1, -1]
    return [st.st_size, st.st_mtime_ns]


def _read_cache(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}  # missing or damaged: recomputed, then rewritten
    return doc if isinstance(doc, dict) else {}


def write_dataset_card(name: str, *, datasets_dir: Any = "datasets") -> dict[str, Any]:
    """(Re)write ``<name>/README.md`` from every published version's manifest, atomically;
    returns ``{"name", "path", "versions", "unreadable"}`` (versions whose manifest this code
    cannot read, e.g. an older dataset format, are named in the card but not described: version
    -> the error). A name with no published version is ``not_found``."""
    dirs = datasets_dir if isinstance(datasets_dir, DatasetsDir) else DatasetsDir(datasets_dir)
    check_dataset_name(name)
    versions = dirs.versions(name)
    if not versions:
        raise NotFound(f"dataset {name!r} has no published version in {dirs.root}; nothing to describe")
    manifests, shas, sizes, unreadable = {}, {}, {}, {}
    cache_path = dirs.dataset_dir(name) / SIZES_CACHE
    cache = _read_cache(cache_path)
    fresh: dict[str, Any] = {}
    for v in versions:
        try:
            folder = dirs.version_dir(name, v)
            manifest = read_manifest(folder)
            shas[v] = manifest_sha256(folder)
            stamp = [shas[v], sorted([info["file"], *_stat(folder / info["file"])]
                                     for info in manifest["tables"].values())]
            held = cache.get(f"v{v}")
            if isinstance(held, dict) and held.get("stamp") == stamp and isinstance(held.get("sizes"), dict):
                sizes[v] = {table: tuple(pair) for table, pair in held["sizes"].items()}
            else:
                sizes[v] = _table_sizes(folder, manifest)
            fresh[f"v{v}"] = {"stamp": stamp, "sizes": {t: list(pair) for t, pair in sizes[v].items()}}
            manifests[v] = manifest
        except RLHFError as exc:
            unreadable[v] = exc
    if fresh != cache:
        atomic_write_bytes(cache_path, json.dumps(fresh, separators=(",", ":")).encode("utf-8"))
    path = dirs.dataset_dir(name) / CARD
    text = dataset_card(name, manifests, shas, sizes, {v: exc.code for v, exc in unreadable.items()})
    atomic_write_bytes(path, text.encode("utf-8"))
    return {"name": name, "path": str(path), "versions": versions,
            "unreadable": {v: str(exc) for v, exc in unreadable.items()}}
