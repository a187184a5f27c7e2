"""A published dataset folder loads with Hugging Face ``datasets.load_dataset``, config by config,
without a warning about its card, and with the card's split sizes (``num_examples``) equal to the
rows loaded."""

from __future__ import annotations

import logging
import math
import warnings
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from extrarlhf.datasets import materialize_v5_dataset, split_v5_training_dataset
from tests.datasets_helpers import GREEDY, shared_sessions

hf = pytest.importorskip("datasets", reason="the test extra (Hugging Face datasets)")


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hf") / "datasets"
    materialize_v5_dataset([GREEDY], "src", sessions_dir=shared_sessions(), datasets_dir=root)
    split_v5_training_dataset("src", datasets_dir=root, policy={"min_v5_battles": 1, "min_v5_decisions": 1})
    return root


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.mark.parametrize("name", ["src", "src-v5split"])
def test_every_config_loads_without_a_card_warning(published: Path, tmp_path: Path, name: str) -> None:
    meta = yaml.safe_load((published / name / "README.md").read_text(encoding="utf-8").split("---\n")[1])
    infos = {i["config_name"]: i for i in meta["dataset_info"]}
    assert [c["config_name"] for c in meta["configs"]] == list(infos)
    records = _Records()
    hf_logger = logging.getLogger("datasets")  # datasets' own root logger, which does not propagate
    hf_logger.addHandler(records)
    try:
        for config in meta["configs"]:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                loaded = hf.load_dataset(str(published / name), config["config_name"], cache_dir=str(tmp_path))
            assert [str(w.message) for w in caught] == [] and records.lines == [], config["config_name"]
            info = infos[config["config_name"]]
            assert list(loaded) == [s["name"] for s in info["splits"]]
            for split, entry in zip(info["splits"], config["data_files"], strict=True):
                path = published / name / entry["path"]
                rows = pq.ParquetFile(path).metadata.num_rows
                assert split["num_examples"] == loaded[split["name"]].num_rows == rows > 0
                recorded = loaded[split["name"]].info.splits[split["name"]]
                assert recorded.num_examples == split["num_examples"]
                # num_bytes: the Arrow size as written; datasets' count adds the validity bitmaps its
                # reader and its cast give nested columns (a bit per float of a fixed-size list)
                fixed_lists = sum(pa.types.is_fixed_size_list(f.type) for f in pq.read_schema(path))
                assert 0 <= recorded.num_bytes - split["num_bytes"] <= (0.05 * split["num_bytes"]
                                                                        + fixed_lists * math.ceil(rows / 8))
    finally:
        hf_logger.removeHandler(records)
