"""``make run`` (``python -m extrarlhf_assets.run_main``) as a user runs it: outcomes that are
not errors (an inconclusive benchmark, a refused promotion) end in a successful run, exit 0,
no traceback, a summary that names each reason once, and Dagster's full log in a file."""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(cwd: Path, *args: str) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RLHF_", "DAGSTER_"))}
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run([sys.executable, "-m", "extrarlhf_assets.run_main", "--group", "g", "--battles", "24",
                          "--epochs", "3", "--seed", "1", "--baseline-pairs", "1", "--dagster-home",
                          str(cwd / "home"), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    summary = out.stdout.split("== ExtraRLHF campaign summary", 1)[-1]
    return out.returncode, out.stdout + out.stderr, summary


def test_gates_are_outcomes_not_errors(tmp_path):
    # an inconclusive benchmark against greedy: a warning, promotion skipped with its reason
    code, output, summary = _run(tmp_path, "--pairs", "4", "--quiet")
    assert code == 0, output
    assert "Traceback" not in output and "DagsterAssetCheckFailedError" not in output and "ERROR" not in output
    assert "success) ==" in summary
    assert "benchmark_passed=warn" in summary and "nemesis_standard_ready=warn" in summary
    assert "FAIL" not in summary
    assert "promoted_policy not built: held by benchmark_passed (above)" in summary
    log = Path(re.search(r"Dagster's full log of the run: (\S+)", summary).group(1))
    assert log.parent == tmp_path / "home" / "logs" and "benchmark_passed" in log.read_text()
    assert "STEP_SUCCESS" not in output  # --quiet: the console shows warnings only, the file keeps it all
    assert "DEBUG" in log.read_text()

    # passed against baseline:random, which is not the current incumbent: refused, the reason once
    code, output, summary = _run(tmp_path, "--pairs", "150", "--incumbent", "baseline:random")
    assert code == 0, output
    assert "benchmark_passed=pass" in summary and "not promoted" in summary
    assert summary.count("[current_incumbent]") == 1 and summary.count("was played against") == 1
    assert "Traceback" not in output

    # the switch: a first promotion decided against another reference
    code, output, summary = _run(tmp_path, "--pairs", "150", "--incumbent", "baseline:random",
                                 "--no-require-current-incumbent", "--quiet")
    assert code == 0, output
    assert "PROMOTED g-bc-" in summary and "(previous: none)" in summary
    # the group did not change between the runs: its dataset version was kept
    assert "g/v1 (unchanged group: version kept)" in summary
    assert sorted(p.name for p in (tmp_path / "datasets" / "g").iterdir() if p.name.startswith("v")) == ["v1"]
