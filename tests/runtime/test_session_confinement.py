"""Sessions are confined like datasets (issue 14, item 10): a group folder, file or battles folder
symlinked out of the sessions dir is refused for reads and writes; a live match whose group
folder or sessions dir vanished answers finish/abandon with a clear error before writing
anything, and can be finished once the folder is back."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from extrarlhf.core.errors import RLHFError
from extrarlhf.runtime.match import Match, start_match
from extrarlhf.runtime.series import run_series
from extrarlhf.runtime.sessions import SessionStore, check_sessions

SPECS = {"p1_model": "baseline:random", "opponent": "baseline:random"}


def expect_error(code: str, fn, *args: Any, **kwargs: Any) -> RLHFError:
    with pytest.raises(RLHFError) as info:
        fn(*args, **kwargs)
    assert info.value.code == code, f"code {info.value.code!r} != {code!r}: {info.value}"
    return info.value


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def play_out(match: Match) -> None:
    while not match.done:
        match.submit(match.legal_actions()[-1]["action_id"])


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A real group in another sessions dir (the target of the links)."""
    other = tmp_path / "outside"
    run_series(other, "g", 2, **SPECS)
    return other


def test_a_group_symlinked_out_of_the_sessions_dir_is_refused_for_reads_and_writes(tmp_path: Path,
                                                                                   outside: Path) -> None:
    root = tmp_path / "s"
    root.mkdir()
    (root / "g").symlink_to(outside / "g", target_is_directory=True)
    before = snapshot(outside)
    store = SessionStore(root)
    assert store.list_groups() == ["g"]  # listed, so that its error can be shown
    for reader in (store.read_manifest, store.read_catalog, store.read_summary, store.compute_summary):
        error = expect_error("path_outside_sessions_dir", reader, "g")
        assert "session group 'g'" in str(error) and str(outside / "g") in str(error)
        assert "remove the link" in str(error)
    expect_error("path_outside_sessions_dir", run_series, root, "g", 4, **SPECS)
    expect_error("path_outside_sessions_dir", start_match, store, "g", "rl", "baseline:random",
                 p1_model="baseline:random")
    assert snapshot(outside) == before  # nothing was written through the link
    [problem] = check_sessions(root, repair=True)
    assert (problem["code"], problem["group"], problem["repairable"]) == ("path_outside_sessions_dir", "g", False)


@pytest.mark.parametrize("inner", ["catalog.jsonl", "battles", "manifest.json", "summary.json"])
def test_a_file_or_folder_of_a_group_symlinked_out_is_refused(tmp_path: Path, outside: Path, inner: str) -> None:
    root = tmp_path / "s"
    run_series(root, "g", 1, **SPECS)
    target = outside / "g" / inner
    moved = root / "g" / inner
    if moved.is_dir():
        shutil.rmtree(moved)
    else:
        moved.unlink()
    moved.symlink_to(target, target_is_directory=target.is_dir())
    before, mine = snapshot(outside), snapshot(root)
    error = expect_error("path_outside_sessions_dir", run_series, root, "g", 3, **SPECS)
    assert inner in str(error)
    assert snapshot(outside) == before
    assert snapshot(root) == mine  # refused before anything was played or written
    assert any(p["code"] == "path_outside_sessions_dir" for p in check_sessions(root))


def test_links_that_stay_inside_and_a_symlinked_sessions_dir_are_followed(tmp_path: Path) -> None:
    real = tmp_path / "real"
    run_series(real, "g", 2, **SPECS)
    (real / "alias").symlink_to(real / "g", target_is_directory=True)
    link = tmp_path / "link"
    link.symlink_to(real, target_is_directory=True)
    store = SessionStore(link)
    assert [e["status"] for e in store.read_catalog("alias")] == ["finished", "finished"]
    assert run_series(link, "g", 3, **SPECS)["ran"] == 1
    assert [e["status"] for e in SessionStore(real).read_catalog("g")] == ["finished"] * 3


@pytest.mark.parametrize("end", ["finish", "abandon"])
def test_a_match_whose_group_folder_vanished_writes_nothing_and_can_finish_once_it_is_back(tmp_path: Path,
                                                                                        end: str) -> None:
    root = tmp_path / "s"
    store = SessionStore(root)
    match = start_match(store, "live", "llm", "baseline:random", seed=11)
    play_out(match)
    aside = tmp_path / "aside"
    (root / "live").rename(aside)
    call = match.finish if end == "finish" else match.abandon
    error = expect_error("group_missing", call)
    assert "nothing was written" in str(error) and str(root / "live") in str(error)
    assert not (root / "live").exists()  # not re-created: a trace there would be invisible
    assert match.status == "active"
    aside.rename(root / "live")  # restored: the same call now records the battle
    result = call()
    assert result["status"] == ("finished" if end == "finish" else "abandoned")
    assert [e["status"] for e in store.read_catalog("live")] == [result["status"]]
    assert check_sessions(root) == []


def test_a_match_whose_sessions_dir_vanished_writes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "s"
    store = SessionStore(root)
    match = start_match(store, "live", "llm", "baseline:random", seed=12)
    shutil.rmtree(root)
    error = expect_error("group_missing", match.abandon, "client left")
    assert f"the sessions dir {root} no longer exists" in str(error)
    assert not root.exists()


def test_a_group_deleted_in_the_middle_of_a_series_stops_it_with_a_clear_error(tmp_path: Path) -> None:
    root = tmp_path / "s"
    seen: list[int] = []

    def delete_on_first(done: int, total: int) -> None:
        seen.append(done)
        if len(seen) == 1:
            shutil.rmtree(root / "g")

    error = expect_error("group_missing", run_series, root, "g", 5, progress=delete_on_first, **SPECS)
    assert "nothing was" in str(error)
    assert not (root / "g").exists()


def test_battle_dirs_confines_each_battle_folder_as_battle_dir_does(tmp_path: Path, outside: Path) -> None:
    """The many-battles lookup (materialize) checks a plain folder with one lstat and resolves
    anything else: a battle folder linked out is refused, a link that stays inside is followed,
    and a battles folder linked out is refused for every battle."""
    from extrarlhf.datasets.materialize import materialize_v5_dataset

    root = tmp_path / "s"
    run_series(root, "g", 3, **SPECS)
    store = SessionStore(root)
    ids = [e["battle_id"] for e in store.read_catalog("g")]
    lookup = store.battle_dirs("g")
    assert [lookup(b) for b in ids] == [store.battle_dir("g", b) for b in ids]
    inside = root / "g" / "battles" / ids[1]
    inside.rename(root / "g" / "kept")
    inside.symlink_to(root / "g" / "kept", target_is_directory=True)
    assert store.battle_dirs("g")(ids[1]) == inside  # a link inside the sessions dir is followed
    victim = root / "g" / "battles" / ids[0]
    shutil.rmtree(victim)
    [linked_out] = [e["battle_id"] for e in SessionStore(outside).read_catalog("g")][:1]
    victim.symlink_to(outside / "g" / "battles" / linked_out, target_is_directory=True)
    for lookup in (store.battle_dirs("g"), lambda b: store.battle_dir("g", b)):
        error = expect_error("path_outside_sessions_dir", lookup, ids[0])
        assert f"battles/{ids[0]}" in str(error) and "remove the link" in str(error)
    expect_error("path_outside_sessions_dir", materialize_v5_dataset, "g", name="d", sessions_dir=root,
                 datasets_dir=tmp_path / "ds")
    battles = root / "g" / "battles"
    battles.rename(root / "g" / "moved")
    battles.symlink_to(outside / "g" / "battles", target_is_directory=True)
    lookup = store.battle_dirs("g")
    for battle_id in ids:
        expect_error("path_outside_sessions_dir", lookup, battle_id)
