"""The Hugging Face dataset card: YAML metadata whose data_files, features and split sizes are the
published files' own, provenance equal to the manifests, no local folder, and the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

import engine
from extrarlhf.datasets import materialize_v5_dataset, split_v5_training_dataset, validate_dataset, write_dataset_card
from extrarlhf.datasets.paths import DatasetsDir
from extrarlhf.datasets.publish import publish_version
from tests.datasets_helpers import GREEDY, expect_error, sha256, shared_sessions

LENIENT = {"min_v5_battles": 1, "min_v5_decisions": 1}


@pytest.fixture(scope="module")
def datasets(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("card") / "datasets"
    materialize_v5_dataset([GREEDY], "src", sessions_dir=shared_sessions(), datasets_dir=root)
    materialize_v5_dataset([GREEDY], "src", sessions_dir=shared_sessions(), datasets_dir=root)  # v2
    split_v5_training_dataset("src", datasets_dir=root, policy=LENIENT)
    return root


def _expected_type(typ: pa.DataType) -> dict:
    """What Hugging Face's YAML says for an Arrow type, written out for the types the tables use."""
    if isinstance(typ, (pa.ListType, pa.FixedSizeListType)):
        inner = _expected_type(typ.value_type)
        out = {"list": inner.get("dtype", inner)}
        return {**out, "length": typ.list_size} if isinstance(typ, pa.FixedSizeListType) else out
    names = {pa.string(): "string", pa.bool_(): "bool", pa.float32(): "float32", pa.float64(): "float64"}
    return {"dtype": names.get(typ, str(typ))}


def _expected_feature(field: pa.Field) -> dict:
    return {"name": field.name, **_expected_type(field.type)}


def _card(path: Path) -> tuple[dict, str]:
    text = path.read_text(encoding="utf-8")
    assert text.startswith("---\n")
    _, meta, body = text.split("---\n", 2)
    return yaml.safe_load(meta), body


def _assert_arrow_size(num_bytes: int, table: dict, path: Path) -> None:
    """The card's num_bytes is the Arrow size of the rows as written (the manifest's
    arrow_bytes): the file read back is that plus the validity bitmaps the reader gives nested
    columns (a bit per float of a fixed-size list: within 5%), never less."""
    read_back = pq.read_table(path).nbytes
    assert num_bytes == table["arrow_bytes"] > 0 and 0 <= read_back - num_bytes <= 0.05 * num_bytes, \
        (num_bytes, read_back)


def test_card_metadata_is_what_the_files_hold(datasets: Path) -> None:
    result = write_dataset_card("src-v5split", datasets_dir=datasets)
    assert result["versions"] == [1] and Path(result["path"]) == datasets / "src-v5split" / "README.md"
    meta, body = _card(Path(result["path"]))
    assert meta["license"] == "other" and "placeholder" in body
    [config] = meta["configs"]
    assert config["config_name"] == "v1" and config["default"] is True
    manifest = json.loads((datasets / "src-v5split" / "v1" / "manifest.json").read_text())
    names = {"train": "train", "val": "validation", "test": "test"}
    non_empty = [names[t] for t in ("train", "val", "test") if manifest["tables"][t]["rows"]]
    assert [f["split"] for f in config["data_files"]] == non_empty and len(non_empty) < 3, \
        "this small split has an empty split, left out of the configs (load_dataset fails on one)"
    empty = sorted(t for t in ("train", "val", "test") if not manifest["tables"][t]["rows"])
    assert f"- empty, so in no config (`datasets` cannot load a split of no rows): {', '.join(empty)}" in body
    [info] = meta["dataset_info"]
    for entry, split in zip(config["data_files"], info["splits"], strict=True):
        path = datasets / "src-v5split" / entry["path"]
        assert path.is_file() and split["name"] == entry["split"]
        assert split["num_examples"] == pq.ParquetFile(path).metadata.num_rows
        table = next(t for t, info in manifest["tables"].items() if info["file"] == path.name)
        _assert_arrow_size(split["num_bytes"], manifest["tables"][table], path)
        assert [f["name"] for f in info["features"]] == pq.read_schema(path).names
    assert info["download_size"] == sum((datasets / "src-v5split" / e["path"]).stat().st_size
                                         for e in config["data_files"])
    assert info["dataset_size"] == sum(s["num_bytes"] for s in info["splits"])
    observation = next(f for f in info["features"] if f["name"] == "observation")
    assert observation == {"name": "observation", "list": "float32", "length": engine.OBS_DIM}
    features = next(f for f in info["features"] if f["name"] == "legal_action_features")
    assert features == {"name": "legal_action_features",
                        "list": {"list": "float32", "length": engine.ACTION_FEATURE_DIM}}
    for entry in config["data_files"]:
        assert info["features"] == [_expected_feature(f) for f in pq.read_schema(datasets / "src-v5split" /
                                                                                  entry["path"])]
    for file, sha in manifest["files"].items():
        assert f"`v1/{file}` `{sha}`" in body
    assert "grouped by battle" in body and manifest["sources"]["manifest_sha256"] in body
    assert validate_dataset("src-v5split", datasets_dir=datasets)["valid"], "the card is outside every version"


def test_card_of_a_v5_dataset_has_one_config_per_table_newest_first_and_no_local_path(datasets: Path) -> None:
    meta, body = _card(Path(write_dataset_card("src", datasets_dir=datasets)["path"]))
    names = [c["config_name"] for c in meta["configs"]]
    assert names[0] == "v2-decisions" and meta["configs"][0]["default"] is True
    # no battle is excluded from this data: the empty excluded table is in no config (load_dataset fails on one)
    assert set(names) == {f"v{v}-{t}" for v in (1, 2) for t in ("decisions", "turns", "battles")}
    assert body.count("- empty, so in no config (`datasets` cannot load a split of no rows): excluded") == 2
    assert "### v2 (v5_decisions)" in body and "### v1 (v5_decisions)" in body
    assert "session group `greedy`" in body
    assert str(shared_sessions()) not in body and "sessions_dir" not in body


def test_an_older_manifest_without_arrow_bytes_is_sized_by_reading_its_files(datasets: Path) -> None:
    from extrarlhf.datasets.card import _table_sizes

    folder = datasets / "src" / "v1"
    manifest = json.loads((folder / "manifest.json").read_text())
    written = _table_sizes(folder, manifest)
    for info in manifest["tables"].values():
        del info["arrow_bytes"]
    read = _table_sizes(folder, manifest)
    assert set(read) == set(written) and read["decisions"][0] > written["decisions"][0]
    for table, info in manifest["tables"].items():
        assert read[table] == (pq.read_table(folder / info["file"]).nbytes, (folder / info["file"]).stat().st_size)


def test_card_cli_and_errors(datasets: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "extrarlhf", "datasets", "card", "src", "--datasets-dir",
                          str(datasets), "--json"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["versions"] == [1, 2]
    expect_error("not_found", write_dataset_card, "nothing-here", datasets_dir=datasets)
    expect_error("invalid_argument", write_dataset_card, "../escape", datasets_dir=datasets)
    assert not (datasets / "nothing-here").exists()


# ------------------------------------------------------------------ written at every publication


def test_every_publication_writes_the_card_beside_its_versions(tmp_path: Path) -> None:
    root = tmp_path / "datasets"
    first = materialize_v5_dataset([GREEDY], "pub", sessions_dir=shared_sessions(), datasets_dir=root)
    card = root / "pub" / "README.md"
    assert first["card"] == {"path": str(card), "error": None}
    meta, body = _card(card)
    assert {c["config_name"] for c in meta["configs"]} == {f"v1-{t}" for t in ("decisions", "turns", "battles")}
    second = materialize_v5_dataset([GREEDY], "pub", sessions_dir=shared_sessions(), datasets_dir=root)
    assert second["version"] == 2 and second["card"]["error"] is None
    meta, body = _card(card)
    assert meta["configs"][0]["config_name"] == "v2-decisions" and meta["configs"][0]["default"] is True
    [decisions] = [i for i in meta["dataset_info"] if i["config_name"] == "v2-decisions"]
    path = root / "pub" / "v2" / "decisions.parquet"
    assert decisions["features"] == [_expected_feature(f) for f in pq.read_schema(path)]
    [split] = decisions["splits"]
    assert split["name"] == "train" and split["num_examples"] == pq.ParquetFile(path).metadata.num_rows
    _assert_arrow_size(split["num_bytes"], json.loads((path.parent / "manifest.json").read_text())["tables"]["decisions"],
                       path)
    for version in (1, 2):  # the card ties itself to the checksums: every manifest's sha256 and every file's
        manifest = json.loads((root / "pub" / f"v{version}" / "manifest.json").read_text())
        assert f"`v{version}/manifest.json` sha256 `{sha256(root / 'pub' / f'v{version}' / 'manifest.json')}`" in body
        assert all(f"`v{version}/{file}` `{sha}`" in body for file, sha in manifest["files"].items())
        assert "README.md" not in manifest["files"]  # outside every version, by design
    # a split publishes its own card
    split = split_v5_training_dataset("pub", datasets_dir=root, policy=LENIENT)
    meta, _ = _card(Path(split["card"]["path"]))
    tables = json.loads((root / "pub-v5split" / "v1" / "manifest.json").read_text())["tables"]
    assert [s["name"] for s in meta["dataset_info"][0]["splits"]] == [
        name for t, name in (("train", "train"), ("val", "validation"), ("test", "test")) if tables[t]["rows"]]
    assert validate_dataset("pub", datasets_dir=root)["valid"] and validate_dataset("pub/v1", datasets_dir=root)["valid"]


def test_a_failed_publication_leaves_the_card_as_it_was(tmp_path: Path) -> None:
    root = tmp_path / "datasets"
    materialize_v5_dataset([GREEDY], "pub", sessions_dir=shared_sessions(), datasets_dir=root)
    card = root / "pub" / "README.md"
    before = card.read_bytes()

    def build(folder: Path, dataset_id: str, version: int) -> dict:
        raise OSError(28, "No space left on device")

    with pytest.raises(Exception) as info:
        publish_version(DatasetsDir(root), "pub", build)
    assert getattr(info.value, "code", None) == "disk_full"
    expect_error("dataset_exists", materialize_v5_dataset, [GREEDY], "pub", sessions_dir=shared_sessions(),
                 datasets_dir=root, version=1)
    assert card.read_bytes() == before and [p.name for p in (root / "pub").iterdir() if p.name.startswith("v")] == ["v1"]


def test_a_card_that_cannot_be_written_never_undoes_the_publication(tmp_path: Path) -> None:
    root = tmp_path / "datasets"
    materialize_v5_dataset([GREEDY], "pub", sessions_dir=shared_sessions(), datasets_dir=root)
    card = root / "pub" / "README.md"
    card.unlink()
    card.mkdir()  # a folder where the card goes: it cannot be replaced
    result = materialize_v5_dataset([GREEDY], "pub", sessions_dir=shared_sessions(), datasets_dir=root)
    assert result["version"] == 2 and validate_dataset("pub/v2", datasets_dir=root)["valid"]
    assert result["card"]["path"] is None
    assert "README.md was not rewritten" in result["card"]["error"] and "datasets card pub" in result["card"]["error"]
    assert card.is_dir() and not [p for p in (root / "pub").iterdir() if "README" in p.name and p != card]


def test_a_version_the_card_cannot_read_is_named_not_described(tmp_path: Path) -> None:
    root = tmp_path / "datasets"
    materialize_v5_dataset([GREEDY], "pub", sessions_dir=shared_sessions(), datasets_dir=root)
    (root / "pub" / "v1" / "manifest.json").write_text("{ damaged")
    result = materialize_v5_dataset([GREEDY], "pub", sessions_dir=shared_sessions(), datasets_dir=root)
    assert result["card"]["error"] is None
    meta, body = _card(root / "pub" / "README.md")
    assert {c["config_name"].split("-")[0] for c in meta["configs"]} == {"v2"}
    assert "- `v1`: its manifest or files cannot be read by this ExtraRLHF (`unsupported_schema`" in body
    assert str(root) not in body  # the error's local path stays out of the card
    assert write_dataset_card("pub", datasets_dir=root)["unreadable"].keys() == {1}


def test_a_version_whose_parquet_is_damaged_is_named_not_described(tmp_path: Path) -> None:
    root = tmp_path / "datasets"
    materialize_v5_dataset([GREEDY], "pub", sessions_dir=shared_sessions(), datasets_dir=root)
    materialize_v5_dataset([GREEDY], "pub", sessions_dir=shared_sessions(), datasets_dir=root)
    damaged = root / "pub" / "v1" / "turns.parquet"
    damaged.write_bytes(damaged.read_bytes()[: damaged.stat().st_size // 2])  # its sizes cannot be read
    result = write_dataset_card("pub", datasets_dir=root)
    assert result["versions"] == [1, 2]
    assert "v1/turns.parquet is " in result["unreadable"][1]
    assert "bytes where its manifest records" in result["unreadable"][1]
    assert "datasets validate" in result["unreadable"][1] and str(root) not in result["unreadable"][1]
    meta, body = _card(Path(result["path"]))
    assert {c["config_name"].split("-")[0] for c in meta["configs"]} == {"v2"}
    assert "- `v1`: its manifest or files cannot be read by this ExtraRLHF (`integrity_error`" in body


def test_rewriting_the_card_reads_only_the_versions_it_has_not_sized(tmp_path: Path, monkeypatch) -> None:
    """The sizes of each version are cached beside the card: a new version's card re-reads that
    version only; a changed table file is read again; a damaged cache is recomputed."""
    import extrarlhf.datasets.card as card

    root = tmp_path / "datasets"
    materialize_v5_dataset([GREEDY], "src", sessions_dir=shared_sessions(), datasets_dir=root)
    read: list[str] = []
    sizer = card._table_sizes
    monkeypatch.setattr(card, "_table_sizes", lambda folder, manifest: read.append(folder.name) or sizer(folder,
                                                                                                          manifest))
    before = (root / "src" / "README.md").read_bytes()
    materialize_v5_dataset([GREEDY], "src", sessions_dir=shared_sessions(), datasets_dir=root, version=2)
    assert read == ["v2"]
    read.clear()
    write_dataset_card("src", datasets_dir=root)
    assert read == []
    meta, _ = _card(root / "src" / "README.md")
    for config in meta["dataset_info"]:
        for split in config["splits"]:
            version, table = config["config_name"], split["name"]
            assert split["num_bytes"] > 0, (version, table)
    path = root / "src" / "v1" / "battles.parquet"
    path.touch()  # same bytes, a new mtime: read again
    (root / "src" / card.SIZES_CACHE).write_text("{not json")
    write_dataset_card("src", datasets_dir=root)
    assert sorted(read) == ["v1", "v2"]
    read.clear()
    write_dataset_card("src", datasets_dir=root)
    assert read == [] and before.count(b"num_bytes") > 0
