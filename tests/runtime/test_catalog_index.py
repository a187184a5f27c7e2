"""The catalog index (extrarlhf/runtime/catalog_index.py): written with the summary, used by
readers only while it still describes the catalog (an append, a repair's new file, an edit, a
same-size edit in the build's timestamp tick, a foreign file: the catalog is folded instead),
and giving what the fold gives: the summary, the keys and the entries, page by page over MCP."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from mcp import Client

from extrarlhf.core.errors import CorruptRecord
from extrarlhf.runtime import catalog_index
from extrarlhf.runtime.series import run_series
from extrarlhf.runtime.sessions import SessionStore
from mcp_server import build_server
from mcp_server.paging import paginate, paginate_sorted
from tests.mcp_helpers import Checked
from tests.trace_helpers import counting_parses

SPECS = {"p1_model": "baseline:random", "opponent": "baseline:random"}


@pytest.fixture
def anyio_backend():
    return "asyncio"


def _without_time(summary: dict) -> dict:
    return {k: v for k, v in summary.items() if k != "updated_at"}


def _folded(store: SessionStore, group: str) -> tuple[list, dict]:
    """What readers get by folding the catalog (the index moved away)."""
    index = store.index_path(group)
    moved = index.with_name("moved-away")
    index.rename(moved)
    try:
        view = store.catalog_view(group)
        assert not view.indexed
        return list(view.keys), view.entries(0, len(view.keys))
    finally:
        moved.rename(index)


def test_a_series_writes_the_index_and_readers_get_what_the_fold_gives(tmp_path):
    root = tmp_path / "sessions"
    run_series(root, "g", 12, **SPECS)
    store = SessionStore(root)
    assert store.index_path("g").is_file()
    view = store.catalog_view("g")
    assert view.indexed
    keys, entries = _folded(store, "g")
    assert list(view.keys) == keys and len(keys) == 12
    assert view.entries(0, 12) == entries
    assert view.entries(3, 5) == {b: entries[b] for _, b in keys[3:5]}
    assert _without_time(store.compute_summary("g")) == _without_time(store.compute_summary("g", fresh=True))
    assert store.compute_summary("g")["battles"] == 12


def test_an_append_makes_the_index_stale_and_readers_fold_the_catalog(tmp_path):
    root = tmp_path / "sessions"
    run_series(root, "g", 4, **SPECS)
    store = SessionStore(root)
    stale = store.index_path("g").read_bytes()
    run_series(root, "g", 6, **SPECS)  # resumed: two more battles, a new index
    store.index_path("g").write_bytes(stale)  # the index of four battles, as if the series had been killed
    view = store.catalog_view("g")
    assert not view.indexed and len(view.keys) == 6
    assert store.compute_summary("g")["battles"] == 6


def test_a_same_size_edit_in_the_build_tick_is_caught_by_the_crc(tmp_path):
    root = tmp_path / "sessions"
    run_series(root, "g", 3, **SPECS)
    store = SessionStore(root)
    catalog = store.catalog_path("g")
    built = store.read_catalog_index("g")
    assert built is not None and built.identity.crc32 is not None  # built just after the catalog's last change
    before = os.stat(catalog)
    data = catalog.read_bytes()
    assert b'"winner":1' in data or b'"winner":2' in data or b'"winner":0' in data
    for old, new in ((b'"winner":1', b'"winner":2'), (b'"winner":2', b'"winner":0'), (b'"winner":0', b'"winner":1')):
        if old in data:
            edited = data.replace(old, new, 1)
            break
    with open(catalog, "r+b") as handle:  # in place: same inode, same size
        handle.write(edited)
    os.utime(catalog, ns=(before.st_atime_ns, before.st_mtime_ns))  # and the same time, as within one tick
    assert store.read_catalog_index("g") is None
    assert not store.catalog_view("g").indexed


def test_an_index_built_long_after_the_catalog_changed_records_no_crc(tmp_path):
    root = tmp_path / "sessions"
    run_series(root, "g", 2, **SPECS)
    store = SessionStore(root)
    catalog = store.catalog_path("g")
    os.utime(catalog, ns=(0, 1_000_000_000))
    store.write_summary("g")
    built = store.read_catalog_index("g")
    assert built is not None and built.identity.crc32 is None and built.identity.mtime_ns == 1_000_000_000


@pytest.mark.parametrize("content", [b"", b"not an npz", b"PK\x03\x04 truncated"])
def test_an_unreadable_index_is_ignored(tmp_path, content):
    root = tmp_path / "sessions"
    run_series(root, "g", 3, **SPECS)
    store = SessionStore(root)
    store.index_path("g").write_bytes(content)
    assert store.read_catalog_index("g") is None
    assert len(store.catalog_view("g").keys) == 3 and store.compute_summary("g")["battles"] == 3


def test_a_renamed_group_keeps_its_index_under_its_new_name(tmp_path):
    root = tmp_path / "sessions"
    run_series(root, "old", 3, **SPECS)
    os.rename(root / "old", root / "new")  # same inodes: the index still describes the catalog
    store = SessionStore(root)
    assert store.catalog_view("new").indexed
    assert store.compute_summary("new")["group"] == "new"


def test_a_group_copied_elsewhere_folds_its_catalog(tmp_path):
    root = tmp_path / "sessions"
    run_series(root, "g", 3, **SPECS)
    shutil.copytree(root / "g", root / "h")  # another inode: the copied index does not describe it
    store = SessionStore(root)
    assert not store.catalog_view("h").indexed and len(store.catalog_view("h").keys) == 3


def _same_index(live: catalog_index.CatalogIndex, built: catalog_index.CatalogIndex, same_file: bool = True) -> None:
    assert list(live.keys) == list(built.keys)
    assert live.offsets.tolist() == built.offsets.tolist() and live.lines.tolist() == built.lines.tolist()
    assert _without_time(live.summary) == _without_time(built.summary)
    if same_file:
        assert live.identity == built.identity
    else:
        assert (live.identity.size, live.identity.crc32) == (built.identity.size, built.identity.crc32)


def _series_lines(tmp_path: Path, battles: int = 10) -> tuple[SessionStore, list[bytes]]:
    root = tmp_path / "sessions"
    run_series(root, "g", battles, **SPECS)
    store = SessionStore(root)
    return store, store.catalog_path("g").read_bytes().splitlines(keepends=True)


def test_a_live_index_gives_what_build_gives_as_the_catalog_grows(tmp_path):
    """A series' live index, refreshed after appends of any size (a line cut in the middle, battles
    out of index order, a battle's started line repeated as a resume repeats it), gives what a
    whole fold of the same bytes gives: keys, offsets, line numbers, identity with its crc32, summary."""
    store, lines = _series_lines(tmp_path)
    started = [raw for raw in lines if b'"status":"started"' in raw]
    final = [raw for raw in lines if raw not in started]
    assert len(started) == len(final) == 10
    order = started[5:] + started[:5] + [b"\n", started[9]] + final[::-1]
    data = b"".join(order)
    catalog = store.catalog_path("g")
    catalog.write_bytes(b"")
    live = store.live_index("g")
    folded_upto = []
    for cut in (0, 1, 350, len(order[0]), 3000, len(data) - 200, len(data)):
        with open(catalog, "r+b") as handle:  # appended in place, as a series appends
            handle.seek(0, 2)
            handle.write(data[handle.tell():cut])
        index = live.refresh(lambda fold: fold.summary("g", None))
        whole = data[:cut].rfind(b"\n") + 1  # a line being appended waits for the next refresh
        folded_upto.append(index.identity.size)
        copy = tmp_path / f"copy-{cut}.jsonl"
        copy.write_bytes(data[:whole])
        built = catalog_index.build(copy, lambda entries: store._summarize("g", entries, None))
        assert index.identity.crc32 is not None  # just written: a racy index records its crc32
        _same_index(index, built, same_file=False)
    assert folded_upto == sorted(folded_upto) and folded_upto[-1] == len(data) and index.summary["battles"] == 10
    _same_index(index, catalog_index.build(catalog, lambda entries: store._summarize("g", entries, None)))
    store.write_summary("g", live=live)  # the index it writes is the one readers take
    assert store.catalog_view("g").indexed and list(store.catalog_view("g").keys) == list(index.keys)


def test_a_live_index_starts_over_on_another_file_and_folds_whole_when_a_final_line_is_replaced(tmp_path):
    store, lines = _series_lines(tmp_path, 6)
    catalog = store.catalog_path("g")
    live = store.live_index("g")
    finish = lambda fold: fold.summary("g", None)  # noqa: E731
    whole = lambda: catalog_index.build(catalog, lambda entries: store._summarize("g", entries, None))  # noqa: E731
    _same_index(live.refresh(finish), whole())
    replaced = tmp_path / "new.jsonl"  # a repair renames a new catalog in: fewer lines, another inode
    replaced.write_bytes(b"".join(lines[:5]))
    os.replace(replaced, catalog)
    _same_index(live.refresh(finish), whole())
    with open(catalog, "ab") as handle:  # the same final line twice: the first cannot be taken back
        handle.write(b"".join(lines[5:]) + lines[-1])
    assert live.refresh(finish).summary["battles"] == 6
    _same_index(live.refresh(finish), whole())


def test_a_damaged_line_raises_from_a_live_index_and_the_next_refresh_starts_over(tmp_path):
    store, lines = _series_lines(tmp_path, 3)
    catalog = store.catalog_path("g")
    live = store.live_index("g")
    finish = lambda fold: fold.summary("g", None)  # noqa: E731
    live.refresh(finish)
    with open(catalog, "ab") as handle:
        handle.write(b'{"schema_version":1,"battle_id":"oops"}\n')
    with pytest.raises(CorruptRecord, match="line 7"):
        live.refresh(finish)
    catalog.write_bytes(b"".join(lines))  # restored in place: the same inode, folded again from its start
    _same_index(live.refresh(finish), catalog_index.build(catalog, lambda es: store._summarize("g", es, None)))


def test_a_resume_folds_the_live_index_in_its_one_pass_and_the_first_refresh_reads_only_appends(tmp_path,
                                                                                                 monkeypatch):
    """The reconcile of a resume parses each catalog line once and folds the series' live index
    as it goes (battles out of index order, a blank line): the first refresh parses nothing,
    gives what build gives, and later appends are folded on top; ``finished`` marks every final battle."""
    store, lines = _series_lines(tmp_path, 6)
    _, more = _series_lines(tmp_path / "more", 7)  # battle 6's lines, as this group's next battle would write them
    started = [raw for raw in lines if b'"status":"started"' in raw]
    final = [raw for raw in lines if raw not in started]
    catalog = store.catalog_path("g")
    catalog.write_bytes(b"".join(started[3:] + started[:3] + [b"\n"] + final[::-1]))
    finish = lambda fold: fold.summary("g", None)  # noqa: E731
    whole = lambda: catalog_index.build(catalog, lambda entries: store._summarize("g", entries, None))  # noqa: E731
    parses = counting_parses(monkeypatch)
    live = store.live_index("g")
    result = store.reconcile("g", live)
    assert result["finished"] == bytearray(b"\1" * 6) and result["rebuilt"] == [] and parses[0] == 12
    index = live.refresh(finish)
    assert parses[0] == 12  # nothing appended: nothing parsed again
    _same_index(index, whole())
    new = [raw for raw in more if b"b000006-" in raw]
    assert len(new) == 2
    with open(catalog, "ab") as handle:
        handle.write(b"".join(new))
    before = parses[0]
    index = live.refresh(finish)
    assert parses[0] - before == 2 and index.summary["battles"] == 7
    _same_index(index, whole())


def test_a_resume_that_repairs_the_catalog_leaves_the_live_index_to_fold_the_new_file(tmp_path):
    """A damaged line seen in the reconcile's pass: the repair renames a new catalog in and the
    live index, fed the damaged pass, starts over at its first refresh (what build gives of the
    repaired file); a battle whose final line was lost is rebuilt and counted finished."""
    store, lines = _series_lines(tmp_path, 4)
    catalog = store.catalog_path("g")
    kept = [raw for raw in lines if b"b000002-" not in raw or b'"status":"started"' in raw]
    catalog.write_bytes(b"".join(kept[:2] + [b'{"schema_version":1,"battle_id":"oops"}\n'] + kept[2:]))
    live = store.live_index("g")
    result = store.reconcile("g", live)
    assert result["dropped_lines"] == [3] and len(result["rebuilt"]) == 1
    assert result["finished"] == bytearray(b"\1" * 4)
    index = live.refresh(lambda fold: fold.summary("g", None))
    _same_index(index, catalog_index.build(catalog, lambda entries: store._summarize("g", entries, None)))
    assert index.summary["by_status"]["unfinished"] == 0 and index.summary["battles"] == 4


def test_a_resume_pass_that_sees_a_final_line_replaced_leaves_the_index_to_build(tmp_path):
    """The same final line twice in the reconcile's pass (the first cannot be taken back from the
    summary): the live index gives what build gives, then and after an append."""
    store, lines = _series_lines(tmp_path, 3)
    catalog = store.catalog_path("g")
    catalog.write_bytes(b"".join(lines + [lines[-1]]))
    live = store.live_index("g")
    assert store.reconcile("g", live)["finished"] == bytearray(b"\1" * 3)
    finish = lambda fold: fold.summary("g", None)  # noqa: E731
    whole = lambda: catalog_index.build(catalog, lambda entries: store._summarize("g", entries, None))  # noqa: E731
    _same_index(live.refresh(finish), whole())
    with open(catalog, "ab") as handle:
        handle.write(lines[0])  # battle 0's started line again, as a resume's retry writes one
    index = live.refresh(finish)
    _same_index(index, whole())
    assert index.summary["battles"] == 3


def test_paginate_sorted_pages_like_paginate():
    keys = catalog_index.SortedKeys(np.array([1, 2, 2, 5], np.int64), np.array([b"b1", b"b2a", b"b2b", b"b5"]))
    plain = [(1, "b1"), (2, "b2a"), (2, "b2b"), (5, "b5")]
    assert list(keys) == plain and keys[1:3] == plain[1:3]
    cursor = None
    for _ in range(2):
        a = paginate(plain, tool="t", limit=2, cursor=cursor, key=lambda k: k, scope="s")
        b = paginate_sorted(keys, tool="t", limit=2, cursor=cursor, scope="s")
        assert (a.items, a.total, a.next_cursor) == (b.items, b.total, b.next_cursor)
        cursor = a.next_cursor
    assert cursor is None


@pytest.mark.anyio
async def test_inspect_session_pages_the_same_through_the_index_and_the_fold(tmp_path):
    root = tmp_path / "sessions"
    run_series(root, "g", 9, **SPECS)
    store = SessionStore(root)

    async def pages() -> list:
        out, cursor = [], None
        async with Client(build_server(root, tmp_path / "datasets", tmp_path / "checkpoints")) as client:
            while True:
                args = {"group": "g", "limit": 4, **({"cursor": cursor} if cursor else {})}
                result = await Checked(client).ok("inspect_session", args)
                out.append((result["catalog"], result["total"], _without_time(result["summary"])))
                cursor = result["next_cursor"]
                if cursor is None:
                    return out

    indexed = await pages()
    store.index_path("g").unlink()
    assert await pages() == indexed
    assert [len(c) for c, _, _ in indexed] == [4, 4, 1]
