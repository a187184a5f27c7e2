"""One damaged group is reported by `sessions list` and the sensor skips it; the others are
still listed (issue 14, item 3)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from extrarlhf.runtime.series import run_series

ROOT = Path(__file__).resolve().parents[2]


def test_sessions_list_reports_a_damaged_group_and_lists_the_others(tmp_path):
    run_series(tmp_path, "good", 2)
    run_series(tmp_path, "bad", 2)
    manifest = tmp_path / "bad" / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"configuration"', '"configuratio"'))
    proc = subprocess.run([sys.executable, "-m", "extrarlhf", "sessions", "list", "--sessions-dir", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = {line.split()[0]: line for line in proc.stdout.splitlines()[1:]}
    assert "error [corrupt_record]" in lines["bad"] and "manifest.json" in lines["bad"]
    assert "error" not in lines["good"] and "Traceback" not in proc.stderr
