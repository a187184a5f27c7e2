"""A battle started one by one reads only what was appended to its group's catalog since this
store's last clean reconcile (runtime/settled.py), and anything a reconcile would act on or
report makes it run the whole reconcile instead, with the same outcome as before."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from extrarlhf.core.errors import RLHFError
from extrarlhf.runtime import settled
from extrarlhf.runtime.match import start_match
from extrarlhf.runtime.sessions import SessionStore, check_sessions
from tests.trace_helpers import counting_parses

GROUP = "play"


def play(store: SessionStore, seed: int) -> Any:
    """A battle started and ended at once (its folder and final line written)."""
    match = start_match(store, GROUP, "llm", "baseline:random", seed=seed)
    match.abandon("done")
    return match


@pytest.fixture
def reconciles(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The groups the whole reconcile ran for, in order."""
    calls: list[str] = []
    original = SessionStore.reconcile

    def counted(self: SessionStore, group: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        calls.append(group)
        return original(self, group, *args, **kwargs)

    monkeypatch.setattr(SessionStore, "reconcile", counted)
    return calls


def same_summary(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return {**a, "updated_at": None} == {**b, "updated_at": None}


def catalog(root: Path) -> Path:
    return root / GROUP / "catalog.jsonl"


def test_a_start_reads_only_the_lines_appended_since_the_last(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               reconciles: list[str]) -> None:
    root = tmp_path / "s"
    store = SessionStore(root)
    for seed in range(6):
        play(store, seed)
    assert reconciles == [GROUP, GROUP]  # the first start (no catalog yet) keeps nothing; the second settles
    parses = counting_parses(monkeypatch)
    match = start_match(store, GROUP, "llm", "baseline:random", seed=99)
    # the lines appended since the last start read them: that battle's started and final lines,
    # not the 12 of the catalog
    assert (parses[0], match.index, reconciles) == (2, 6, [GROUP, GROUP])
    parses[0] = 0
    match.abandon("done")
    assert parses[0] == 2  # the summary after it: this battle's two lines folded, not the catalog
    assert same_summary(store.read_summary(GROUP), SessionStore(root).compute_summary(GROUP))

    # another process starts battles in the group meanwhile: its lines are read, its indexes not reused
    other = SessionStore(root)
    taken = [play(other, 100 + i).index for i in range(3)]
    assert taken == [7, 8, 9]
    parses[0] = 0
    mine = start_match(store, GROUP, "llm", "baseline:random", seed=200)
    assert mine.index == 10 and parses[0] == 2 + 6  # my last battle's two lines, then the other's three battles
    parses[0] = 0
    mine.abandon("done")
    assert parses[0] == 6 + 2  # the summary: the other's lines, then this battle's two
    assert same_summary(store.read_summary(GROUP), SessionStore(root).compute_summary(GROUP))
    assert reconciles.count(GROUP) == 3  # the other store's first start reconciled, and nothing since
    assert SessionStore(root).reconcile(GROUP)["next_index"] == 11  # what the whole reconcile says
    assert check_sessions(root) == []


def _edit_seed(root: Path) -> None:
    """A byte of the first line changed in place, same length: a started line's seed."""
    data = catalog(root).read_bytes()
    at = data.index(b'"seed":') + len(b'"seed":')
    digit = data[at:at + 1]
    catalog(root).write_bytes(data[:at] + (b"2" if digit != b"2" else b"3") + data[at + 1:])


def _append(raw: bytes) -> Callable[[Path], None]:
    def edit(root: Path) -> None:
        with catalog(root).open("ab") as handle:
            handle.write(raw)
    return edit


def _lose_final_line(root: Path) -> None:
    """Another store plays a battle, and its final line is lost (its folder stays)."""
    play(SessionStore(root), 77)
    lines = catalog(root).read_bytes().splitlines(keepends=True)
    catalog(root).write_bytes(b"".join(lines[:-1]))


def _second_id_for_an_index(root: Path) -> None:
    line = json.loads(catalog(root).read_bytes().splitlines()[0])
    line["battle_id"] = line["battle_id"][:-10] + "0123456789"
    _append(json.dumps(line).encode() + b"\n")(root)


def _line_after_a_final_one(root: Path) -> None:
    _append(catalog(root).read_bytes().splitlines(keepends=True)[1])(root)  # battle 0's final line again


def _repair_renames_a_new_file(root: Path) -> None:
    _append(b'{"schema_version": 1, "battle_id": 17}\n')(root)
    assert any(p["repaired"] for p in check_sessions(root, repair=True))


@pytest.mark.parametrize("edit, repaired, settles", [
    (_edit_seed, False, True),
    (_append(b'{"schema_version": 1, "battle_id": 17}\n'), True, False),  # a damaged line: the repair drops it
    (_append(b'{"schema_version": 1, "batt'), True, False),  # a torn line: nothing appends under the lock
    (_lose_final_line, True, False),  # a trace folder without a final line: its line is rebuilt
    (_second_id_for_an_index, False, False),  # a catalog the shortcut cannot describe: reconciled each time
    (_line_after_a_final_one, False, False),
    (_repair_renames_a_new_file, False, True),
], ids=["earlier-byte-edited", "damaged-line", "torn-line", "folder-without-final-line", "index-with-two-ids",
        "line-after-final", "repaired-elsewhere"])
def test_what_the_shortcut_cannot_vouch_for_runs_the_whole_reconcile(
        tmp_path: Path, reconciles: list[str], edit: Callable[[Path], None], repaired: bool, settles: bool) -> None:
    root = tmp_path / "s"
    store = SessionStore(root)
    for seed in range(3):
        play(store, seed)
    assert GROUP in store.settled
    edit(root)
    expected = SessionStore(root)  # a fresh store: what the whole reconcile gives, on a copy
    shutil.copytree(root, tmp_path / "copy")
    want = SessionStore(tmp_path / "copy").reconcile(GROUP)["next_index"]
    before = len(reconciles)
    match = play(store, 50)
    assert reconciles[before:] == [GROUP] and match.index == want
    assert (root / GROUP / "catalog-repairs.jsonl").exists() == (repaired or edit is _repair_renames_a_new_file)
    assert check_sessions(root) == []
    # kept only when that reconcile found nothing to repair and can describe the catalog
    play(store, 51)
    assert len(reconciles) - before == (1 if settles else 2)
    assert (GROUP in store.settled) == (settles or repaired)  # after a repair, the next reconcile settles
    assert expected.reconcile(GROUP)["next_index"] == match.index + 2


def test_what_a_reconcile_refuses_is_refused_the_same_and_nothing_is_written(tmp_path: Path,
                                                                             reconciles: list[str]) -> None:
    root = tmp_path / "s"
    store = SessionStore(root)
    for seed in range(3):
        play(store, seed)
    (root / GROUP / "battles" / "b000050-0123456789").mkdir()  # a folder with no trace and no line
    before = catalog(root).read_bytes()
    with pytest.raises(RLHFError) as fresh:
        SessionStore(root).reconcile(GROUP)
    with pytest.raises(RLHFError) as cached:
        start_match(store, GROUP, "llm", "baseline:random", seed=9)
    assert (cached.value.code, str(cached.value)) == (fresh.value.code, str(fresh.value)) == (
        "corrupt_record", str(fresh.value))
    assert "b000050-0123456789" in str(cached.value) and "not provably safe" in str(cached.value)
    assert catalog(root).read_bytes() == before and GROUP not in store.settled


def test_a_line_or_manifest_that_disagrees_is_a_manifest_mismatch(tmp_path: Path, reconciles: list[str]) -> None:
    root = tmp_path / "s"
    store = SessionStore(root)
    for seed in range(3):
        play(store, seed)
    final = json.loads(catalog(root).read_bytes().splitlines()[-1])
    final.update(battle_id="b000009-0123456789", index=9, battle_tag="rl-vs-bot")
    _append(json.dumps(final).encode() + b"\n")(root)
    before = catalog(root).read_bytes()
    with store.allocation_lock(GROUP), pytest.raises(RLHFError) as info:
        settled.next_index(store, GROUP)
    assert info.value.code == "manifest_mismatch" and "b000009-0123456789" in str(info.value)
    assert reconciles[-1] == GROUP and catalog(root).read_bytes() == before

    # the manifest edited instead: the shortcut compares its configuration before anything else
    catalog(root).write_bytes(before[:before.rindex(b"\n", 0, len(before) - 1) + 1])
    with store.allocation_lock(GROUP):
        settled.next_index(store, GROUP)
    known = store.settled[GROUP]
    manifest = root / GROUP / "manifest.json"
    doc = json.loads(manifest.read_text())
    doc["configuration"]["opponent"]["spec"] = "baseline:greedy"
    manifest.write_text(json.dumps(doc))
    with store.allocation_lock(GROUP):
        assert known.advance(store, GROUP) is None


def test_the_summary_after_a_battle_folds_an_edited_catalog_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  reconciles: list[str]) -> None:
    """The index the store keeps for the summary after each battle checks the bytes it folded
    before: an edit in place (same length) since is folded from the start, never kept as it was."""
    root = tmp_path / "s"
    store = SessionStore(root)
    for seed in range(3):
        play(store, seed)
    data = catalog(root).read_bytes()
    at = data.rindex(b'"decisions":0') + len(b'"decisions":')
    catalog(root).write_bytes(data[:at] + b"9" + data[at + 1:])
    parses = counting_parses(monkeypatch)
    play(store, 4)
    assert parses[0] == 6 + 8  # the whole reconcile (3 battles), then the summary folds the 8 lines again
    summary = store.read_summary(GROUP)
    assert same_summary(summary, SessionStore(root).compute_summary(GROUP))
    assert summary["decisions"] >= 9


def _play_many(root: str, seeds: list[int]) -> list[int]:
    store = SessionStore(root)
    return [play(store, seed).index for seed in seeds]


def test_stores_and_threads_starting_at_once_never_share_an_index(tmp_path: Path) -> None:
    """Two processes and, in one of them, two threads on one store start battles in one group at
    once: every index is taken once, and the summary each store writes is the catalog's."""
    import concurrent.futures
    import multiprocessing
    import threading

    root = tmp_path / "s"
    store = SessionStore(root)
    play(store, 0)
    context = multiprocessing.get_context("forkserver")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
        other = pool.submit(_play_many, str(root), list(range(100, 140)))
        deadline = time.monotonic() + 120
        while len(catalog(root).read_bytes().splitlines()) < 4 and time.monotonic() < deadline:
            time.sleep(0.01)  # the other process has started playing: the threads overlap it
        mine: list[int] = []
        threads = [threading.Thread(target=lambda k=k: mine.extend(_play_with(store, range(20 * k + 1, 20 * k + 21))))
                   for k in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        theirs = other.result(timeout=300)
    taken = sorted([0, *mine, *theirs])
    assert taken == list(range(len(taken))) and len(taken) == 1 + 40 + 40
    assert check_sessions(root) == []
    play(store, 500)  # the summary this store writes folds what the others appended too
    assert same_summary(store.read_summary(GROUP), SessionStore(root).compute_summary(GROUP))
    assert store.read_summary(GROUP)["battles"] == 82


def _play_with(store: SessionStore, seeds: range) -> list[int]:
    return [play(store, seed).index for seed in seeds]
