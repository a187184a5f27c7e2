"""Reserved names (issue 13, item 7): the project's own index, pointer, lock and temp file names
can never be used for groups, datasets or pointers; a directory squatting the codename index
is reported clearly; lock files and stray folders are never listed as groups."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from extrarlhf.core.errors import RLHFError
from extrarlhf.core.names import check_name
from extrarlhf.datasets.paths import check_dataset_name, check_pointer_name
from extrarlhf.runtime import codenames
from extrarlhf.runtime.series import run_series
from extrarlhf.runtime.sessions import SessionStore

ROOT = Path(__file__).resolve().parents[2]
RESERVED = ["agents_index.json", "AGENTS_INDEX.JSON", "promoted.json", "index.json", "catalog.jsonl",
            "summary.json", "x.lock", "group.tmp", "benchmarks"]


@pytest.mark.parametrize("name", RESERVED)
def test_reserved_names_are_refused_everywhere(name, tmp_path):
    for check in (check_name, check_dataset_name, check_pointer_name):
        with pytest.raises(RLHFError, match="reserved"):
            check(name)
    with pytest.raises(RLHFError, match="reserved"):
        run_series(tmp_path, name, 1)
    assert not (tmp_path / name).exists()


def test_a_directory_at_the_index_path_is_a_clear_error_not_a_crash(tmp_path):
    (tmp_path / "agents_index.json").mkdir()
    with pytest.raises(RLHFError) as info:
        codenames.claim(tmp_path, "Alpha", "g")
    assert info.value.code == "corrupt_index" and "reserved" in str(info.value)
    proc = subprocess.run([sys.executable, "-m", "extrarlhf", "collect", "--group", "g", "--battles", "1",
                           "--codename", "Alpha", "--sessions-dir", str(tmp_path)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.startswith("error [corrupt_index]") and "Traceback" not in proc.stderr


def test_lock_files_and_stray_folders_are_not_groups(tmp_path):
    run_series(tmp_path, "real", 2, codename="Beta")
    (tmp_path / "stray.lock").mkdir()
    (tmp_path / "stray.lock" / "manifest.json").write_text("{}")
    (tmp_path / "agents_index.json.lock").touch()
    assert SessionStore(tmp_path).list_groups() == ["real"]
