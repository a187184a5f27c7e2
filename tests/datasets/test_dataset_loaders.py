"""Fixed-size vector columns as the tools users load them with see them: the loader block of
docs/datasets.md (pandas, polars, DuckDB) run as written on a real dataset, the shapes each
tool reports, and the training reader on files a third-party tool rewrote."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import engine
from extrarlhf.datasets import materialize_v5_dataset, split_nemesis_training_dataset
from extrarlhf.datasets.tables import TABLES
from extrarlhf.training.data import read_decisions
from tests.datasets_helpers import GREEDY, expect_error, shared_sessions

ROOT = Path(__file__).resolve().parents[2]
OBS_TYPE = f"FLOAT[{engine.OBS_DIM}]"
FEATURES_TYPE = f"FLOAT[{engine.ACTION_FEATURE_DIM}][]"


@pytest.fixture(scope="module")
def datasets(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("loaders") / "datasets"
    materialize_v5_dataset([GREEDY], "greedy", sessions_dir=shared_sessions(), datasets_dir=root)
    split_nemesis_training_dataset("greedy", "lite", datasets_dir=root,
                                   policy={"min_nemesis_lite_battles": 1, "min_nemesis_lite_decks": 1})
    return root


@pytest.fixture(scope="module")
def decisions(datasets: Path) -> Path:
    return datasets / "greedy" / "v1" / "decisions.parquet"


def _readme_block() -> str:
    text = (ROOT / "docs" / "datasets.md").read_text(encoding="utf-8")
    match = re.search(r"<!-- dataset loaders -->\n```python\n(.*?)```", text, re.S)
    assert match, "docs/datasets.md's loader block (marked <!-- dataset loaders -->) is missing"
    return match.group(1)


def test_the_readme_loaders_run_on_a_real_dataset(decisions: Path) -> None:
    code = _readme_block()
    # the block's literal sizes are the engine's (a layout change must update docs/datasets.md)
    assert f"FLOAT[{engine.OBS_DIM}]" in code and f"FLOAT[{engine.ACTION_FEATURE_DIM}][]" in code
    assert f"({engine.OBS_DIM},)" in code and f"shape=({engine.ACTION_FEATURE_DIM},)" in code
    assert code.count('"datasets/NAME/v1/decisions.parquet"') == 1
    namespace: dict = {}
    exec(compile(code.replace("datasets/NAME/v1/decisions.parquet", str(decisions)), "docs/datasets.md", "exec"), namespace)
    expected = read_decisions(decisions, "all").obs
    rows = pq.ParquetFile(decisions).metadata.num_rows
    assert expected.shape == (rows, engine.OBS_DIM) and rows > 100
    for name in ("obs_pandas", "obs_polars"):
        got = namespace[name]
        assert got.shape == (rows, engine.OBS_DIM) and got.dtype == np.float32, name
        assert np.array_equal(got, expected), name
    assert namespace["pf"].schema["observation"] == pl.Array(pl.Float32, engine.OBS_DIM)
    assert namespace["features_polars"] == pl.List(pl.Array(pl.Float32, engine.ACTION_FEATURE_DIM))
    assert namespace["arrow_types"] == [(OBS_TYPE, FEATURES_TYPE)]
    assert namespace["sql_types"] == [(OBS_TYPE, FEATURES_TYPE)]
    namespace["con"].close()


def test_duckdbs_own_parquet_reader_loses_the_fixed_size(decisions: Path) -> None:
    """What docs/datasets.md says of DuckDB: the Parquet file alone reads as variable lists (if a DuckDB
    release reads Arrow's fixed sizes one day, this fails and the page's cast can go)."""
    got = duckdb.sql(f"SELECT typeof(observation), typeof(legal_action_features) FROM read_parquet('{decisions}') "
                     f"LIMIT 1").fetchall()
    assert got == [("FLOAT[]", "FLOAT[][]")]


def test_every_fixed_size_column_keeps_its_shape_in_pyarrow_pandas_and_polars(datasets: Path) -> None:
    files = {"decisions": datasets / "greedy" / "v1" / "decisions.parquet",
             "nemesis": datasets / "greedy-nemesis-lite" / "v1" / "train.parquet",
             "battles": datasets / "greedy" / "v1" / "battles.parquet"}
    polars_types = {pa.float32(): pl.Float32, pa.int16(): pl.Int16}
    for table, path in files.items():
        fixed = {name: typ for name, typ, *_ in TABLES[table] if pa.types.is_fixed_size_list(typ)}
        assert set(fixed) == ({"p1_deck", "p2_deck"} if table == "battles" else {"observation"}), table
        schema = pq.read_schema(path)
        frame = pl.read_parquet(path, columns=list(fixed))
        pandas = pd.read_parquet(path, columns=list(fixed), dtype_backend="pyarrow")
        for name, typ in fixed.items():
            assert schema.field(name).type == typ, (table, name)
            assert frame.schema[name] == pl.Array(polars_types[typ.value_type], typ.list_size), (table, name)
            assert pandas[name].dtype.pyarrow_dtype == typ, (table, name)
            assert np.stack(pd.read_parquet(path, columns=[name])[name].to_numpy()).shape == (len(frame),
                                                                                                typ.list_size)
    assert pq.read_schema(files["battles"]).field("p1_deck").type.list_size == engine.DECK_SIZE
    features = pq.read_schema(files["decisions"]).field("legal_action_features").type
    assert features.value_type == pa.list_(pa.field("element", pa.float32()), engine.ACTION_FEATURE_DIM)


def test_the_training_reader_takes_a_file_duckdb_rewrote(decisions: Path, tmp_path: Path) -> None:
    """A round trip through DuckDB's COPY drops the fixed sizes; the reader still gives the same
    arrays, and a row of the wrong length is named (never reshaped into the wrong rows)."""
    copied = tmp_path / "copied.parquet"
    con = duckdb.connect()
    con.sql(f"COPY (SELECT * FROM read_parquet('{decisions}')) TO '{copied}' (FORMAT parquet)")
    assert pa.types.is_list(pq.read_schema(copied).field("observation").type)
    original, rewritten = read_decisions(decisions, "all"), read_decisions(copied, "all")
    for field in ("obs", "features", "offsets", "labels"):
        assert np.array_equal(getattr(original, field), getattr(rewritten, field)), field
    short = tmp_path / "short.parquet"
    con.sql(f"COPY (SELECT * EXCLUDE (file_row_number) REPLACE (CASE WHEN file_row_number = 5 "
            f"THEN observation[1:{engine.OBS_DIM - 1}] ELSE observation END AS observation) "
            f"FROM read_parquet('{decisions}', file_row_number=true)) TO '{short}' (FORMAT parquet)")
    con.close()
    error = expect_error("invalid_argument", read_decisions, short, "all")
    assert f"observation: row 5 has {engine.OBS_DIM - 1} values where every row must have {engine.OBS_DIM}" in str(error)
