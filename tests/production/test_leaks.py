"""The raw-identifier scan behind the no_raw_identifiers check (extrarlhf/production/leaks.py)."""

import json

import pyarrow as pa
import pyarrow.parquet as pq

from extrarlhf.production.leaks import scan_for_identifiers


def test_ids_are_found_in_decoded_parquet_and_text_but_never_reported(tmp_path):
    raw = {"player-8f3a2b1c9d0e", "b-7-0000012", "123456", "ab"}
    pq.write_table(pa.table({"who": ["p-1", "p-2"], "decks": [["x"], ["b-7-0000012"]]}), tmp_path / "t.parquet",
                   compression="zstd")  # compressed pages: the raw bytes would not show the id
    (tmp_path / "manifest.json").write_text(json.dumps({"note": "owner=player-8f3a2b1c9d0e;", "rows": 123456}))
    (tmp_path / "clean.txt").write_text("p-aaaa b-7-00000120 nothing here")
    report = scan_for_identifiers(tmp_path, raw)
    assert report["clean"] is False and report["files_scanned"] == 3
    assert report["findings"] == [{"file": "manifest.json", "distinct_ids": 1}, {"file": "t.parquet", "distinct_ids": 1}]
    # numeric and very short ids cannot be told apart from counts: not scanned, and said so
    assert report["identifiers_scanned"] == 2 and report["identifiers_not_scanned"] == 2
    assert not any(i in json.dumps(report) for i in raw if len(i) > 2)


def test_a_clean_folder_is_clean(tmp_path):
    pq.write_table(pa.table({"who": ["p-1"]}), tmp_path / "t.parquet")
    assert scan_for_identifiers(tmp_path, {"player-000000000001"})["clean"] is True
