"""The Hugging Face dataset card: YAML metadata whose data_files, features and split sizes are the
published files' own, provenance equal to the manifests, no local folder, and the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from extrarlhf.datasets import materialize_v5_dataset, split_v5_training_dataset, validate_dataset, write_dataset_card
from tests.datasets_helpers import GREEDY, expect_error, shared_sessions

LENIENT = {"min_v5_battles": 1, "min_v5_decisions": 1}


@pytest.fixture(scope="module")
def datasets(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("card") / "datasets"
    materialize_v5_dataset([GREEDY], "src", sessions_dir=shared_sessions(), datasets_dir=root)
    materialize_v5_dataset([GREEDY], "src", sessions_dir=shared_sessions(), datasets_dir=root)  # v2
    split_v5_training_dataset("src", datasets_dir=root, policy=LENIENT)
    return root


def _card(path: Path) -> tuple[dict, str]:
    text = path.read_text(encoding="utf-8")
    assert text.startswith("---\n")
    _, meta, body = text.split("---\n", 2)
    return yaml.safe_load(meta), body


def test_card_metadata_is_what_the_files_hold(datasets: Path) -> None:
    result = write_dataset_card("src-v5split", datasets_dir=datasets)
    assert result["versions"] == [1] and Path(result["path"]) == datasets / "src-v5split" / "README.md"
    meta, body = _card(Path(result["path"]))
    assert meta["license"] == "other" and "placeholder" in body
    [config] = meta["configs"]
    assert config["config_name"] == "v1" and config["default"] is True
    assert [f["split"] for f in config["data_files"]] == ["train", "validation", "test"]
    manifest = json.loads((datasets / "src-v5split" / "v1" / "manifest.json").read_text())
    [info] = meta["dataset_info"]
    for entry, split in zip(config["data_files"], info["splits"]):
        path = datasets / "src-v5split" / entry["path"]
        assert path.is_file() and split["name"] == entry["split"]
        assert split["num_examples"] == pq.ParquetFile(path).metadata.num_rows
        assert [f["name"] for f in info["features"]] == pq.read_schema(path).names
    observation = next(f for f in info["features"] if f["name"] == "observation")
    assert observation == {"name": "observation", "sequence": "float32"}
    for file, sha in manifest["files"].items():
        assert f"`v1/{file}` `{sha}`" in body
    assert "grouped by battle" in body and manifest["sources"]["manifest_sha256"] in body
    assert validate_dataset("src-v5split", datasets_dir=datasets)["valid"], "the card is outside every version"


def test_card_of_a_v5_dataset_has_one_config_per_table_newest_first_and_no_local_path(datasets: Path) -> None:
    meta, body = _card(Path(write_dataset_card("src", datasets_dir=datasets)["path"]))
    names = [c["config_name"] for c in meta["configs"]]
    assert names[0] == "v2-decisions" and meta["configs"][0]["default"] is True
    assert set(names) == {f"v{v}-{t}" for v in (1, 2) for t in ("decisions", "turns", "battles", "excluded")}
    assert "### v2 (v5_decisions)" in body and "### v1 (v5_decisions)" in body
    assert "session group `greedy`" in body
    assert str(shared_sessions()) not in body and "sessions_dir" not in body


def test_card_cli_and_errors(datasets: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "extrarlhf", "datasets", "card", "src", "--datasets-dir",
                          str(datasets), "--json"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["versions"] == [1, 2]
    expect_error("not_found", write_dataset_card, "nothing-here", datasets_dir=datasets)
    expect_error("invalid_argument", write_dataset_card, "../escape", datasets_dir=datasets)
    assert not (datasets / "nothing-here").exists()
