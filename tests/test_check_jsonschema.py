"""A third-party validator on real output, offline: the ``check-jsonschema`` CLI with the
README's recipe (``--base-uri`` pointing at the schema folder, JSON Lines split one record
per file) on the files a real series writes."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from extrarlhf.runtime.series import run_series

SCHEMAS = Path(__file__).resolve().parents[1] / "extrarlhf" / "schemas"
CLI = Path(sys.executable).with_name("check-jsonschema")
pytestmark = pytest.mark.skipif(not CLI.exists() and shutil.which("check-jsonschema") is None,
                                reason="check-jsonschema (test extra) is not installed")


def _check(schema: str, files: list[Path], base_uri: bool = True) -> subprocess.CompletedProcess:
    command = [str(CLI if CLI.exists() else shutil.which("check-jsonschema")), "--schemafile",
               str(SCHEMAS / f"{schema}.schema.json")]
    if base_uri:
        command += ["--base-uri", SCHEMAS.as_uri() + "/"]
    return subprocess.run(command + [str(f) for f in files], capture_output=True, text=True, timeout=300)


def _split_lines(path: Path, out: Path) -> list[Path]:
    """The README's JSON Lines recipe (``split -l 1``), done in Python: one record per file."""
    out.mkdir(parents=True, exist_ok=True)
    files = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        files.append(out / f"{path.stem}-{i:06d}.json")
        files[-1].write_text(line, encoding="utf-8")
    return files


def test_check_jsonschema_validates_a_real_series_offline(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    run_series(sessions, "g", 2, seed=3)
    group = sessions / "g"
    battle = next((group / "battles").iterdir()) / "v5"
    for schema, source in (("meta", battle / "meta.jsonl"), ("turn", battle / "turns.jsonl"),
                           ("action", battle / "actions.jsonl"), ("catalog_entry", group / "catalog.jsonl")):
        files = _split_lines(source, tmp_path / "lines" / schema)
        result = _check(schema, files)
        assert result.returncode == 0 and "ok -- validation done" in result.stdout, (schema, result.stdout,
                                                                                      result.stderr)
    assert _check("summary", [group / "summary.json"]).returncode == 0


def test_check_jsonschema_reports_a_broken_record_offline(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    run_series(sessions, "g", 1, seed=4)
    battle = next((sessions / "g" / "battles").iterdir()) / "v5"
    [first, *_] = _split_lines(battle / "actions.jsonl", tmp_path / "lines")
    first.write_text(first.read_text().replace('"decision_index":0', '"decision_index":"zero"'))
    result = _check("action", [first])
    assert result.returncode == 1 and "decision_index" in result.stdout and "'zero' is not of type" in result.stdout
    # without --base-uri the $refs resolve against https://extrarlhf.local/ (the $ids): no network here
    assert _check("action", [first], base_uri=False).returncode != 0
