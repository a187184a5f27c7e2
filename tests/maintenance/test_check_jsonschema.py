"""A third-party validator on real output, offline: the ``check-jsonschema`` CLI with the
recipe of docs/collecting.md (JSON Lines split one record per file, ``--base-uri`` at the schema folder or
the schema folder as working directory) on the files a real series, a real dataset
publication and a real checkpoint promotion write. Every run has its proxies pointed at a
closed port, so a validator that tried the network would fail the test."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import engine
from extrarlhf.datasets import promote_dataset, split_v5_training_dataset
from extrarlhf.policies.promotion import POINTER, promote_checkpoint
from extrarlhf.runtime.series import run_series
from tests.policies.test_promotion import _pass_vs_random
from tests.test_schemas import VALIDATORS
from tests.trace_helpers import read_text
from tests.training_helpers import copy_datasets, train_small

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "extrarlhf" / "schemas"
CLI = Path(sys.executable).with_name("check-jsonschema")
pytestmark = pytest.mark.skipif(not CLI.exists() and shutil.which("check-jsonschema") is None,
                                reason="check-jsonschema (test extra) is not installed")
# any HTTP(S) request goes to a closed port and fails at once: "offline" is checked, not assumed
OFFLINE = {**{k: v for k, v in os.environ.items() if k.lower() not in ("no_proxy", "http_proxy", "https_proxy",
                                                                       "all_proxy")},
           "HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9", "ALL_PROXY": "http://127.0.0.1:9"}


def _check(schema: str, files: list[Path], *, base_uri: bool = True, cwd: Path | None = None,
           schemafile: str | None = None) -> subprocess.CompletedProcess:
    command = [str(CLI if CLI.exists() else shutil.which("check-jsonschema")), "--no-cache", "--schemafile",
               schemafile or str(SCHEMAS / f"{schema}.schema.json")]
    if base_uri:
        command += ["--base-uri", SCHEMAS.as_uri() + "/"]
    return subprocess.run(command + [str(f) for f in files], capture_output=True, text=True, timeout=300,
                          cwd=cwd or ROOT, env=OFFLINE)


def _ok(result: subprocess.CompletedProcess) -> bool:
    return result.returncode == 0 and "ok -- validation done" in result.stdout


def _split_lines(path: Path, out: Path) -> list[Path]:
    """The docs' JSON Lines recipe (``split -l 1 -d -a 6``), done in Python: one record per
    file, named by its 0-based line number."""
    out.mkdir(parents=True, exist_ok=True)
    files = []
    text = read_text(path.parent, path.name) if path.parent.name == "v5" else path.read_text(encoding="utf-8")
    for i, line in enumerate(text.splitlines()):
        files.append(out / f"{path.stem}-{i:06d}.json")
        files[-1].write_text(line, encoding="utf-8")
    return files


def _readme_recipe() -> str:
    text = (ROOT / "docs" / "collecting.md").read_text(encoding="utf-8")
    match = re.search(r"<!-- check-jsonschema recipe -->\n```(?:sh|bash)?\n(.*?)```", text, re.S)
    assert match, "docs/collecting.md's check-jsonschema recipe block (marked <!-- check-jsonschema recipe -->) is missing"
    return match.group(1)


@pytest.fixture(scope="module")
def series(tmp_path_factory) -> Path:
    sessions = tmp_path_factory.mktemp("sessions")
    run_series(sessions, "g", 2, seed=3)
    return sessions / "g"


def _battle(group: Path) -> Path:
    return next((group / "battles").iterdir()) / "v5"


def test_check_jsonschema_validates_a_real_series_offline(series: Path, tmp_path: Path) -> None:
    battle = _battle(series)
    for schema, source in (("meta", battle / "meta.jsonl"), ("turn", battle / "turns.jsonl"),
                           ("action", battle / "actions.jsonl"), ("catalog_entry", series / "catalog.jsonl")):
        files = _split_lines(source, tmp_path / "lines" / schema)
        result = _check(schema, files)
        assert _ok(result), (schema, result.stdout, result.stderr)
    assert _ok(_check("summary", [series / "summary.json"]))
    assert _ok(_check("manifest", [series / "manifest.json"]))


def test_relative_ids_resolve_from_the_schema_folder_without_any_flag(series: Path, tmp_path: Path) -> None:
    """Run from the schema folder, check-jsonschema needs no --base-uri (it resolves a relative
    $id against the working directory); run elsewhere without it, it fails on a local file, never
    on the network."""
    files = _split_lines(_battle(series) / "actions.jsonl", tmp_path / "lines")
    assert _ok(_check("action", files, base_uri=False, cwd=SCHEMAS, schemafile="action.schema.json"))
    elsewhere = _check("action", files[:1], base_uri=False, cwd=tmp_path)
    assert elsewhere.returncode != 0 and "common.schema.json" in elsewhere.stdout + elsewhere.stderr
    assert "127.0.0.1" not in elsewhere.stdout + elsewhere.stderr  # no request was even tried


def test_the_readme_recipe_runs_as_written(series: Path, tmp_path: Path) -> None:
    """The shell block of docs/collecting.md, with its placeholders filled in, checks every line of a trace."""
    battle = _battle(series)
    script = _readme_recipe()
    for placeholder in ("GROUP", "BATTLE"):
        assert placeholder in script, placeholder
    script = script.replace("sessions/GROUP/battles/BATTLE", str(battle.parent)).replace(
        "sessions/GROUP", str(series))
    bindir = str(Path(sys.executable).parent)
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True, timeout=300,
                            cwd=ROOT, env={**OFFLINE, "PATH": bindir + os.pathsep + OFFLINE.get("PATH", ""),
                                           "TMPDIR": str(tmp_path)})
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert result.stdout.count("ok -- validation done") >= 2, result.stdout


def test_check_jsonschema_reports_a_broken_record_offline(series: Path, tmp_path: Path) -> None:
    [first, *_] = _split_lines(_battle(series) / "actions.jsonl", tmp_path / "lines")
    good = first.read_text()
    first.write_text(good.replace('"decision_index":0', '"decision_index":"zero"'))
    result = _check("action", [first])
    assert result.returncode == 1 and "decision_index" in result.stdout and "'zero' is not of type" in result.stdout


def _observation_variants(line: str) -> dict[str, str]:
    record = json.loads(line)
    data = record["observation"]["data"]
    short = base64.b64encode(bytes(4 * (engine.OBS_DIM - 1))).decode()
    out = {}
    for label, value in (("truncated", data[:-4]), ("one_float_short", short), ("corrupt_padding", data[:-2] + "B=")):
        record["observation"]["data"] = value
        out[label] = json.dumps(record)
    record["observation"]["data"] = data
    record["observation"]["shape"] = [engine.OBS_DIM - 1]
    out["wrong_shape"] = json.dumps(record)
    return out


def test_an_observation_of_the_wrong_length_is_rejected_by_both_validators(series: Path, tmp_path: Path) -> None:
    [first, *_] = _split_lines(_battle(series) / "actions.jsonl", tmp_path / "lines")
    assert _ok(_check("action", [first])) and VALIDATORS["action"].is_valid(json.loads(first.read_text()))
    for label, text in _observation_variants(first.read_text()).items():
        broken = tmp_path / f"{label}.json"
        broken.write_text(text)
        result = _check("action", [broken])
        assert result.returncode == 1 and "observation" in result.stdout, (label, result.stdout, result.stderr)
        assert not VALIDATORS["action"].is_valid(json.loads(text)), label


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> Path:
    """A real datasets dir: the shared V5 dataset ``gg`` promoted to pointer ``best``, and its V5
    split promoted to ``best-split``."""
    datasets = copy_datasets(tmp_path_factory.mktemp("published") / "datasets")
    promote_dataset("gg", "best", datasets_dir=datasets)
    split_v5_training_dataset("gg", name="gg-split", datasets_dir=datasets, promote="best-split")
    return datasets


def test_dataset_manifests_and_pointers_validate_offline(published: Path) -> None:
    manifests = [published / "gg" / "v1" / "manifest.json", published / "gg-split" / "v1" / "manifest.json"]
    pointers = [published / "pointers" / "best.json", published / "pointers" / "best-split.json"]
    assert _ok(result := _check("dataset_manifest", manifests)), (result.stdout, result.stderr)
    assert _ok(result := _check("dataset_pointer", pointers)), (result.stdout, result.stderr)
    kinds = {json.loads(m.read_text())["kind"] for m in manifests}
    assert kinds == {"v5_decisions", "v5_policy_split"}
    for path in manifests:
        assert VALIDATORS["dataset_manifest"].is_valid(json.loads(path.read_text())), path
    for path in pointers:
        assert VALIDATORS["dataset_pointer"].is_valid(json.loads(path.read_text())), path


def test_the_dataset_schemas_bite(published: Path, tmp_path: Path) -> None:
    manifest = json.loads((published / "gg" / "v1" / "manifest.json").read_text())
    pointer = json.loads((published / "pointers" / "best.json").read_text())
    column = next(c for c in manifest["tables"]["decisions"]["columns"] if c["name"] == "observation")
    broken = {
        "manifest_obs_dim": ("dataset_manifest", {**manifest, "obs_dim": engine.OBS_DIM - 1}),
        "manifest_unknown_field": ("dataset_manifest", {**manifest, "note": "x"}),
        "manifest_bad_sha": ("dataset_manifest", {**manifest, "files": {"decisions.parquet": "abc"}}),
        "manifest_variable_observation": ("dataset_manifest", _with_column_type(manifest, "list<element: float>")),
        "pointer_bad_id": ("dataset_pointer", {**pointer, "dataset_id": "gg"}),
        "pointer_missing_sha": ("dataset_pointer", {k: v for k, v in pointer.items() if k != "manifest_sha256"}),
    }
    assert column["type"] == "fixed_size_list<element: float>[476]"
    for label, (schema, doc) in broken.items():
        path = tmp_path / f"{label}.json"
        path.write_text(json.dumps(doc))
        result = _check(schema, [path])
        assert result.returncode == 1, (label, result.stdout, result.stderr)
        assert not VALIDATORS[schema].is_valid(doc), label


def _with_column_type(manifest: dict, typ: str) -> dict:
    out = json.loads(json.dumps(manifest))
    for c in out["tables"]["decisions"]["columns"]:
        if c["name"] == "observation":
            c["type"] = typ
    return out


def test_a_real_promoted_pointer_validates_offline(tmp_path: Path) -> None:
    ck = tmp_path / "ck"
    train_small(ck, "bc", seed=0)
    _pass_vs_random(ck, "bc")
    promote_checkpoint("bc", checkpoints_dir=ck, require_current_incumbent=False)
    path = ck / POINTER
    assert _ok(result := _check("promoted", [path])), (result.stdout, result.stderr)
    doc = json.loads(path.read_text())
    assert VALIDATORS["promoted"].is_valid(doc)
    # a rollback's pointer carries restored_at, restored_by and rolled_back together
    restored = {**doc, "restored_at": doc["promoted_at"], "restored_by": "rollback",
                "rolled_back": {"name": "bc0", "weights_hash": doc["weights_hash"]}}
    assert VALIDATORS["promoted"].is_valid(restored)
    assert not VALIDATORS["promoted"].is_valid({k: v for k, v in restored.items() if k != "rolled_back"})
    assert not VALIDATORS["promoted"].is_valid({**doc, "weights_hash": "nothex"})
