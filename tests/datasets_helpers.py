"""Shared real inputs and small tools for the dataset-plane tests (tests/test_datasets_*.py).

The session groups are played once per test process by the real runtime and are read-only
for the tests (a test that needs to change sessions copies them first).
"""

from __future__ import annotations

import atexit
import hashlib
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from extrarlhf.core.errors import RLHFError
from extrarlhf.runtime.match import start_match
from extrarlhf.runtime.series import run_series
from extrarlhf.runtime.sessions import SessionStore

ROOT = Path(__file__).resolve().parents[1]
_CACHE: dict[str, Path] = {}

GREEDY, RANDOM, HUMAN = "greedy", "random", "human"


def _play_p1(match, rationale: str | None = None) -> None:
    k = 0
    while not match.done:
        action = match.legal_actions()[-1]["action_id"]  # deterministic: plays/attacks before END_TURN
        match.submit(action, rationale=None if rationale is None else f"{rationale} #{k}")
        k += 1


def _human_group(root: Path) -> None:
    """human-vs-bot battles of every kind the dataset plane must tell apart."""
    store = SessionStore(root)
    a = start_match(store, HUMAN, "human", "baseline:greedy", seed=101)
    _play_p1(a, "I trade first")
    a.finish()
    b = start_match(store, HUMAN, "human", "baseline:greedy", seed=102)
    _play_p1(b)
    b.finish()
    c = start_match(store, HUMAN, "human", "baseline:greedy", seed=103)
    c.submit(c.legal_actions()[-1]["action_id"])
    c.abandon("closed the tab")
    d = start_match(store, HUMAN, "human", "baseline:greedy", seed=104)
    d.recorder.warn({"decision_index": 0, "kind": "runtime_error", "message": "the model failed; greedy played",
                     "fallback": "baseline:greedy"})
    _play_p1(d)
    d.finish()
    e = start_match(store, HUMAN, "human", "baseline:greedy", seed=105)
    e.submit(e.legal_actions()[-1]["action_id"])
    e.omniscient_view()  # a peek at both hands: the battle is tainted
    _play_p1(e)
    e.finish()
    start_match(store, HUMAN, "human", "baseline:greedy", seed=106)  # started, never finished: unfinished


def shared_sessions() -> Path:
    """``greedy`` (24 greedy-vs-greedy battles: ready for V5 and Nemesis Lite), ``random``
    (8 battles against baseline:random) and ``human`` (human-vs-bot: 2 finished, 1 abandoned,
    1 degraded, 1 with an omniscient peek, 1 unfinished)."""
    if "root" not in _CACHE:
        root = Path(tempfile.mkdtemp(prefix="extrarlhf-ds-sessions-"))
        atexit.register(shutil.rmtree, root, True)
        run_series(root, GREEDY, 24, p1_model="baseline:greedy", opponent="baseline:greedy", seed=0)
        run_series(root, RANDOM, 8, p1_model="baseline:greedy", opponent="baseline:random", seed=5)
        _human_group(root)
        _CACHE["root"] = root
    return _CACHE["root"]


def copy_sessions(dest: Path) -> Path:
    shutil.copytree(shared_sessions(), dest)
    return dest


def expect_error(code: str, fn: Callable, *args: Any, **kwargs: Any) -> RLHFError:
    with pytest.raises(RLHFError) as info:
        fn(*args, **kwargs)
    assert info.value.code == code, f"code {info.value.code!r} != {code!r}: {info.value}"
    return info.value


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tree_bytes(root: Path) -> dict[str, bytes]:
    """Every file under root (locks excluded) by relative path."""
    if not root.exists():
        return {}
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.name.endswith(".lock")}


def read_manifest(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "manifest.json").read_text())


def write_manifest(folder: Path, manifest: dict[str, Any]) -> None:
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def rewrite_table(folder: Path, table: str, transform: Callable[[pa.Table], pa.Table], *,
                  fix_manifest: bool = True) -> None:
    """Rewrite one table of a dataset through ``transform``; with ``fix_manifest`` its sha256,
    size and row count are updated too, so only what the transform broke remains to be found."""
    manifest = read_manifest(folder)
    info = manifest["tables"][table]
    path = folder / info["file"]
    original = pq.read_table(path)
    pq.write_table(transform(original), path)
    if fix_manifest:
        info["sha256"] = manifest["files"][info["file"]] = sha256(path)
        info["bytes"] = path.stat().st_size
        info["rows"] = manifest["row_counts"][table] = pq.ParquetFile(path).metadata.num_rows
        info["row_groups"] = pq.ParquetFile(path).metadata.num_row_groups
        write_manifest(folder, manifest)


def set_cell(table: pa.Table, column: str, row: int, value: Any) -> pa.Table:
    values = table.column(column).to_pylist()
    values[row] = value
    index = table.schema.get_field_index(column)
    field = table.schema.field(index)
    return table.set_column(index, field, pa.array(values, field.type))
