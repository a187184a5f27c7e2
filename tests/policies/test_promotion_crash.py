"""Crash consistency of promotion and rollback: a real subprocess is SIGKILLed at each point of
the write sequence (intent, pointer, half a history line, history, before the intent removal;
``RLHF_TEST_CRASH_AT``), then the state is reported precisely without repairing, repaired by
whichever reader comes first, and rollback and re-promotion work. Also the torn state older
versions left (a pointer ahead of its history, no intent), a state that cannot be repaired, and
a torn state on a read-only filesystem (reported, not repaired)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from extrarlhf.checkpoints.registry import CheckpointRegistry, ProtectedCheckpoint
from extrarlhf.core.errors import RLHFError
from extrarlhf.checkpoints.promoted import CRASH_POINTS, INTENT
from extrarlhf.policies.promotion import (
    HISTORY,
    POINTER,
    PromotionRefused,
    current_incumbent,
    promote_checkpoint,
    promotion_history,
    promotion_status,
    read_promoted,
    rollback_promotion,
)
from tests.policies.test_promotion import _pass_vs_random, _refused
from tests.core.test_resources import Mounts
from tests.training_helpers import train_small

REPO = Path(__file__).resolve().parents[2]
FILES = (POINTER, HISTORY, INTENT)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Checkpoints "first" and "second", each with an eligible benchmark; "first" promoted."""
    ck = tmp_path_factory.mktemp("crash") / "ck"
    for name, seed in (("first", 0), ("second", 1)):
        train_small(ck, name, seed=seed)
        _pass_vs_random(ck, name)
    promote_checkpoint("first", checkpoints_dir=ck, require_current_incumbent=False)
    return ck


@pytest.fixture
def tmpfs(tmp_path: Path):
    """Real tmpfs mounts (skipped where this sandbox cannot mount one), unmounted at teardown."""
    m = Mounts(tmp_path / "mnt")
    try:
        yield m
    finally:
        m.unmount_all()


def _copy(template: Path, tmp_path: Path) -> Path:
    ck = tmp_path / "ck"
    shutil.copytree(template, ck)
    return ck


def _crash(ck: Path, call: str, point: str) -> None:
    """Run ``call`` (promote "second" or rollback) in a subprocess killed at ``point``."""
    code = ("import sys\nfrom extrarlhf.policies.promotion import promote_checkpoint, rollback_promotion\n"
            + {"promote": f"promote_checkpoint('second', checkpoints_dir={str(ck)!r}, require_current_incumbent=False)",
               "rollback": f"rollback_promotion(checkpoints_dir={str(ck)!r})"}[call]
            + "\nprint('survived')\n")
    env = {**os.environ, "RLHF_TEST_CRASH_AT": point, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == -signal.SIGKILL, (done.returncode, done.stdout, done.stderr)
    assert "survived" not in done.stdout


def _snapshot(ck: Path) -> dict[str, bytes | None]:
    return {name: (ck / name).read_bytes() if (ck / name).exists() else None for name in FILES}


def _events(ck: Path) -> list[tuple[str, str]]:
    return [(e["event"], e["name"]) for e in promotion_history(ck)]


def _check_torn_report(ck: Path, point: str, happened: str, before: str) -> None:
    """promotion_status(repair=False) says precisely what is torn and changes nothing."""
    files = _snapshot(ck)
    assert files[INTENT] is not None  # every crash point comes before the intent's removal
    status = promotion_status(ck, repair=False)
    assert _snapshot(ck) == files  # a look, not a repair
    assert not status["consistent"] and status["repaired"] == [] and status["pending_intent"] is not None
    text = " | ".join(status["torn"])
    if point == "after_intent":
        assert status["promoted"]["name"] == before
        assert len(status["torn"]) == 1 and "interrupted before promoted.json was written" in text
    elif point in ("after_pointer", "mid_history"):
        assert status["promoted"]["name"] == happened
        assert "does not record it yet" in text and "was left behind" in text
        if point == "mid_history":  # a half line is on disk
            assert not files[HISTORY].endswith(b"\n")
    else:
        assert status["promoted"]["name"] == happened
        assert len(status["torn"]) == 1 and "was left behind" in text


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_a_promotion_killed_at_any_point_is_repaired_and_rolls_back(template: Path, tmp_path: Path,
                                                                    point: str) -> None:
    ck = _copy(template, tmp_path)
    _crash(ck, "promote", point)
    _check_torn_report(ck, point, happened="second", before="first")

    status = promotion_status(ck)  # the first reader repairs, and says what it did
    took_effect = point != "after_intent"
    assert status["consistent"] and status["torn"] == [] and status["history_consistent"]
    assert status["repaired"] and status["pending_intent"] is None and not (ck / INTENT).exists()
    assert status["promoted"]["name"] == ("second" if took_effect else "first") and status["promoted_intact"]
    if point == "after_intent":
        assert "discarded the interrupted promote" in status["repaired"][0]
        assert _events(ck) == [("promote", "first")]
    else:
        assert _events(ck) == [("promote", "first"), ("promote", "second")]
        assert any(("completed" in r) == (point in ("after_pointer", "mid_history")) for r in status["repaired"])
        assert status["can_roll_back_to"] == "first"
    assert promotion_status(ck)["repaired"] == []  # repaired once, for good

    if took_effect:  # rollback, then re-promotion
        assert rollback_promotion(checkpoints_dir=ck)["promoted"]["name"] == "first"
        assert promote_checkpoint("second", checkpoints_dir=ck, require_current_incumbent=False)
        assert _events(ck) == [("promote", "first"), ("promote", "second"), ("rollback", "first"),
                               ("promote", "second")]
    else:  # the promotion never happened: nothing to roll back; it can be done again
        assert _refused(rollback_promotion, checkpoints_dir=ck) == ["previous_promotion"]
        assert promote_checkpoint("second", checkpoints_dir=ck, require_current_incumbent=False)
        assert rollback_promotion(checkpoints_dir=ck)["promoted"]["name"] == "first"
        assert _events(ck) == [("promote", "first"), ("promote", "second"), ("rollback", "first")]
    final = promotion_status(ck)
    assert final["consistent"] and final["history_consistent"] and final["promoted_intact"]
    assert not [p for p in ck.iterdir() if p.name.endswith(".tmp")]


# The first reader after a killed rollback: each point is repaired by another entry point.
FIRST_READER = dict(zip(CRASH_POINTS, ("read_promoted", "rollback", "promote", "check_replaceable",
                                       "current_incumbent")))


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_a_rollback_killed_at_any_point_is_repaired_by_whichever_reader_comes_first(template: Path,
                                                                                   tmp_path: Path,
                                                                                   point: str) -> None:
    ck = _copy(template, tmp_path)
    promote_checkpoint("second", checkpoints_dir=ck, require_current_incumbent=False)
    _crash(ck, "rollback", point)
    _check_torn_report(ck, point, happened="first", before="second")
    took_effect = point != "after_intent"
    expected = "first" if took_effect else "second"

    reader = FIRST_READER[point]
    if reader == "read_promoted":
        assert read_promoted(ck)["name"] == expected
    elif reader == "current_incumbent":
        assert current_incumbent(ck) == expected
    elif reader == "rollback":
        if took_effect:  # "first" is the only promotion left on the stack
            assert _refused(rollback_promotion, checkpoints_dir=ck) == ["previous_promotion"]
        else:
            assert rollback_promotion(checkpoints_dir=ck)["rolled_back"]["name"] == "second"
    elif reader == "promote":
        if took_effect:
            result = promote_checkpoint("second", checkpoints_dir=ck, require_current_incumbent=False)
            assert result["previous"]["name"] == "first" and result["repaired"]
        else:
            assert _refused(promote_checkpoint, "second", checkpoints_dir=ck,
                            require_current_incumbent=False) == ["not_already_promoted"]
    elif reader == "check_replaceable":
        registry = CheckpointRegistry(ck)
        with pytest.raises(ProtectedCheckpoint):
            registry.check_replaceable("first")  # promoted, or restorable
        if took_effect:
            registry.check_replaceable("second")  # rolled back: no longer restorable
        else:
            with pytest.raises(ProtectedCheckpoint, match="is the promoted checkpoint"):
                registry.check_replaceable("second")
    assert not (ck / INTENT).exists(), reader  # that reader repaired the state
    status = promotion_status(ck)
    assert status["consistent"] and status["history_consistent"] and status["repaired"] == []

    # from wherever that left it: rollback and re-promotion both work
    if status["promoted"]["name"] == "second":
        assert rollback_promotion(checkpoints_dir=ck)["promoted"]["name"] == "first"
        assert promote_checkpoint("second", checkpoints_dir=ck, require_current_incumbent=False)
    else:
        assert promote_checkpoint("second", checkpoints_dir=ck, require_current_incumbent=False)
        assert rollback_promotion(checkpoints_dir=ck)["promoted"]["name"] == "first"
    final = promotion_status(ck)
    assert final["consistent"] and final["history_consistent"] and final["promoted_intact"]
    events = _events(ck)
    assert events[0] == ("promote", "first") and events[1] == ("promote", "second")
    assert events.count(("rollback", "first")) >= 1


def test_the_torn_state_of_older_versions_is_completed_from_the_pointer(template: Path, tmp_path: Path) -> None:
    """The issue's case: the pointer was written, the history line never was, and no intent
    exists (versions before the intent record). Rollback and re-promotion were both refused."""
    ck = _copy(template, tmp_path)
    promote_checkpoint("second", checkpoints_dir=ck, require_current_incumbent=False)
    lines = (ck / HISTORY).read_text().splitlines()
    (ck / HISTORY).write_text(lines[0] + "\n")  # drop the line of "second"
    looked = promotion_status(ck, repair=False)
    assert not looked["consistent"] and looked["pending_intent"] is None
    assert "does not record that promote" in looked["torn"][0]
    # rollback repairs it first, then rolls back
    assert rollback_promotion(checkpoints_dir=ck)["promoted"]["name"] == "first"
    assert _events(ck) == [("promote", "first"), ("promote", "second"), ("rollback", "first")]
    restored = json.loads((ck / HISTORY).read_text().splitlines()[1])["pointer"]
    assert restored == json.loads(json.dumps(restored)) and restored["name"] == "second"
    # the same for a rollback whose history line was lost: re-promotion repairs it first
    lines = (ck / HISTORY).read_text().splitlines()
    (ck / HISTORY).write_text("\n".join(lines[:2]) + "\n")
    assert not promotion_status(ck, repair=False)["consistent"]
    result = promote_checkpoint("second", checkpoints_dir=ck, require_current_incumbent=False)
    assert result["repaired"] and "rebuilt from promoted.json" in result["repaired"][0]
    assert _events(ck) == [("promote", "first"), ("promote", "second"), ("rollback", "first"),
                           ("promote", "second")]
    assert promotion_status(ck)["consistent"]


def test_a_state_that_cannot_be_repaired_is_reported_and_refuses(template: Path, tmp_path: Path) -> None:
    ck = _copy(template, tmp_path)
    promote_checkpoint("second", checkpoints_dir=ck, require_current_incumbent=False)
    # hand-edited: the pointer names "first" as if newly promoted from nothing
    pointer = json.loads((ck / POINTER).read_text())
    history_line = json.loads((ck / HISTORY).read_text().splitlines()[0])
    edited = {**history_line["pointer"], "previous": None}
    (ck / POINTER).write_text(json.dumps(edited))
    files = _snapshot(ck)
    status = promotion_status(ck)
    assert not status["consistent"] and status["repaired"] == []
    assert "promoted.json names 'first'" in status["torn"][0] and "ends with 'second'" in status["torn"][0]
    assert _snapshot(ck) == files  # nothing guessed
    assert read_promoted(ck)["name"] == "first"  # the pointer is still what readers use
    assert _refused(rollback_promotion, checkpoints_dir=ck) == ["history_consistent"]
    with pytest.raises(PromotionRefused) as info:
        promote_checkpoint("second", checkpoints_dir=ck, require_current_incumbent=False)
    assert [r["check"] for r in info.value.reasons] == ["history_consistent"]
    # putting the pointer back makes everything work again
    (ck / POINTER).write_text(json.dumps(pointer))
    assert promotion_status(ck)["consistent"]
    assert rollback_promotion(checkpoints_dir=ck)["promoted"]["name"] == "first"


def test_an_unreadable_intent_is_set_aside_when_the_rest_agrees(template: Path, tmp_path: Path) -> None:
    ck = _copy(template, tmp_path)
    (ck / INTENT).write_text("{torn")
    assert not promotion_status(ck, repair=False)["consistent"]
    status = promotion_status(ck)
    assert status["consistent"] and "moved the unreadable" in status["repaired"][0]
    assert not (ck / INTENT).exists() and [p.name for p in ck.glob(INTENT + ".unreadable-*")]
    assert promote_checkpoint("second", checkpoints_dir=ck, require_current_incumbent=False)


def test_on_a_read_only_dir_a_torn_state_is_reported_not_repaired(template: Path, tmpfs: Mounts) -> None:
    """Readers never fail on a torn state they cannot repair: the pointer (replaced atomically)
    is still read, promotion_status says what is torn and why it was not repaired."""
    ck = tmpfs.tmpfs("ck", "16m")
    shutil.copytree(template, ck, dirs_exist_ok=True)
    _crash(ck, "promote", "after_pointer")
    tmpfs.read_only(ck)
    files = _snapshot(ck)
    assert read_promoted(ck)["name"] == "second" and current_incumbent(ck) == "second"
    status = promotion_status(ck)
    assert not status["consistent"] and status["repaired"] == [] and "read_only" in status["repair_error"]
    assert any("does not record it yet" in t for t in status["torn"])
    assert _snapshot(ck) == files
    with pytest.raises(RLHFError) as info:
        rollback_promotion(checkpoints_dir=ck)
    assert info.value.code == "read_only" and str(ck) in str(info.value)
    # writable again: the next reader repairs, and rollback works
    subprocess.run(["mount", "-o", "remount,rw", str(ck)], check=True)
    assert promotion_status(ck)["consistent"]
    assert rollback_promotion(checkpoints_dir=ck)["promoted"]["name"] == "first"
