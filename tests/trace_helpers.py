"""Reading and tampering with a battle's V5 files whatever form they are stored in.

Series store ``turns``/``actions`` compact (``*.jsonl.zst``, extrarlhf/runtime/trace_files.py)
and interactive battles plain: tests read the logical file through :func:`read_trace` and
rewrite it through :func:`write_trace`, which keeps the form it finds (a tampered compact file
is a valid zstd frame of the tampered bytes, so a test checks what it meant to check, not a
decompression error).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from extrarlhf.runtime import trace_files


def v5_of(path: Path) -> Path:
    """The ``v5`` folder of a battle folder (or the folder itself)."""
    return path if path.name == "v5" else path / "v5"


def trace_path(battle: Path, name: str) -> Path:
    """The stored file of logical trace file ``name`` (e.g. ``actions.jsonl``), either form."""
    found = trace_files.find(v5_of(battle), name)
    assert found is not None, f"{name} is stored in neither form in {v5_of(battle)}"
    return found


def read_trace(battle: Path, name: str) -> bytes:
    """The plain bytes of logical trace file ``name`` of a battle folder (or its v5 folder)."""
    return trace_files.read(v5_of(battle), name)


def read_text(battle: Path, name: str) -> str:
    return read_trace(battle, name).decode("utf-8")


def read_records(battle: Path, name: str) -> list[dict[str, Any]]:
    """The JSON records of a trace file, one per line."""
    return [json.loads(line) for line in read_trace(battle, name).splitlines() if line.strip()]


def write_trace(battle: Path, name: str, data: bytes) -> Path:
    """Replace logical trace file ``name`` by the plain bytes ``data``, in the form it is stored
    in; returns the stored path."""
    path = trace_path(battle, name)
    if path.name.endswith(trace_files.SUFFIX):
        data = trace_files.encode({name: data}, True)[path.name]
    path.write_bytes(data)
    return path


def all_traces(battle: Path) -> dict[str, bytes]:
    """Logical name -> plain bytes of the three trace files."""
    return {name: read_trace(battle, name) for name in trace_files.TRACE_FILES}


def counting_parses(monkeypatch) -> list[int]:
    """A counter of the catalog lines parsed (every reader parses through parse_catalog_line)."""
    from extrarlhf.runtime import catalog_lines

    count = [0]
    parse = catalog_lines.parse_catalog_line

    def counted(*args, **kwargs):
        count[0] += 1
        return parse(*args, **kwargs)

    monkeypatch.setattr(catalog_lines, "parse_catalog_line", counted)
    return count
