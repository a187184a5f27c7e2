"""Damaged promotion records (issue 14, items 2 and 3): a damaged line of
``promoted_history.jsonl`` or a ``promoted.json`` missing a key is reported with its file,
line and field by every reader, and nothing acts on it: rollback and promotion refuse (they
used to restore the wrong checkpoint), ``promotion_status`` says the history is not consistent
(it used to say ``history_consistent: true``), and no checkpoint can be overwritten while the
records cannot tell which ones a rollback could restore. Fixing the record by hand makes
everything work again. A torn line that a crash left and the repair completed is not damage."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from extrarlhf.checkpoints.registry import CheckpointRegistry, ProtectedCheckpoint
from extrarlhf.core.errors import CorruptRecord
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
from tests.policies.test_promotion import _pass_vs_random
from tests.training_helpers import train_small


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """bc1 -> bc2 -> bc3 promoted in turn (the issue's sequence); "spare" registered, never promoted."""
    ck = tmp_path_factory.mktemp("records") / "ck"
    for name, seed in (("bc1", 0), ("bc2", 1), ("bc3", 2)):
        train_small(ck, name, seed=seed)
        _pass_vs_random(ck, name)
        promote_checkpoint(name, checkpoints_dir=ck, require_current_incumbent=False)
    train_small(ck, "spare", seed=3)
    return ck


@pytest.fixture
def ck(chain: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "ck"
    shutil.copytree(chain, dest)
    return dest


def _files(ck: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(ck.iterdir()) if p.is_file() and not p.name.endswith(".lock")}


def _history_lines(ck: Path) -> list[str]:
    return (ck / HISTORY).read_text(encoding="utf-8").splitlines()


def _write_lines(ck: Path, lines: list[str]) -> None:
    (ck / HISTORY).write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def _refusal(fn, *args, **kwargs) -> PromotionRefused:
    with pytest.raises(PromotionRefused) as info:
        fn(*args, **kwargs)
    return info.value


def _without_pointer_name(line: str) -> str:
    doc = json.loads(line)
    del doc["pointer"]["name"]
    return json.dumps(doc, sort_keys=True)


DAMAGES = {
    # how line 2 (the promotion of bc2) is damaged -> the field the report names (None: not JSON)
    "not_json": (lambda line: "{this is not json", None),
    "truncated": (lambda line: line[: len(line) // 3], None),
    "pointer_without_name": (_without_pointer_name, "pointer.name"),
    "unknown_event": (lambda line: line.replace('"event": "promote"', '"event": "demote"'), "event"),
    "not_an_object": (lambda line: "[1, 2, 3]", None),
}


def test_the_chain_is_consistent_before_any_damage(ck: Path) -> None:
    status = promotion_status(ck)
    assert status["consistent"] and status["history_consistent"] and status["damaged"] == []
    assert status["promoted"]["name"] == "bc3" and status["can_roll_back_to"] == "bc2"


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_damaged_middle_history_line_is_reported_and_never_acted_on(ck: Path, damage: str) -> None:
    """The issue's case: rollback restored bc1 instead of bc2 and status said history_consistent."""
    transform, field = DAMAGES[damage]
    lines = _history_lines(ck)
    assert [json.loads(line)["name"] for line in lines] == ["bc1", "bc2", "bc3"]
    original = list(lines)
    lines[1] = transform(lines[1])
    _write_lines(ck, lines)
    files = _files(ck)

    # status reports it: file, line, field
    status = promotion_status(ck)
    assert not status["consistent"] and not status["history_consistent"]
    assert status["can_roll_back_to"] is None and status["repaired"] == []
    assert len(status["damaged"]) == 1
    problem = status["damaged"][0]
    assert problem["path"] == str((ck / HISTORY).absolute()) and problem["line"] == 2 and problem["field"] == field
    assert f"{HISTORY} line 2" in " | ".join(status["torn"])
    assert _files(ck) == files  # the status did not "repair" anything

    # rollback refuses (it used to restore bc1) and so does a promotion
    refused = _refusal(rollback_promotion, checkpoints_dir=ck)
    assert [r["check"] for r in refused.reasons] == ["history_consistent"]
    assert f"{HISTORY} line 2" in str(refused)
    refused = _refusal(promote_checkpoint, "bc2", checkpoints_dir=ck, require_current_incumbent=False)
    assert [r["check"] for r in refused.reasons] == ["history_consistent"]
    assert read_promoted(ck)["name"] == "bc3"  # the pointer itself is intact and still read

    # no overwrite while nobody can tell what a rollback could restore
    registry = CheckpointRegistry(ck)
    with pytest.raises(ProtectedCheckpoint, match="can be restored by rollback_promotion"):
        registry.check_replaceable("bc1")  # a readable line says so
    for name in ("bc2", "spare"):  # nobody can tell: the damaged line might name it
        with pytest.raises(ProtectedCheckpoint, match=f"{HISTORY} line 2"):
            registry.check_replaceable(name)
    assert _files(ck) == files

    # the history function says what it skipped instead of hiding it
    problems: list = []
    events = promotion_history(ck, problems)
    assert [e["name"] for e in events] == ["bc1", "bc3"] and [p["line"] for p in problems] == [2]

    # fixing the line by hand: the rollback restores bc2, as it should
    _write_lines(ck, original)
    assert promotion_status(ck)["history_consistent"]
    assert rollback_promotion(checkpoints_dir=ck)["promoted"]["name"] == "bc2"
    registry.check_replaceable("spare")


def test_a_damaged_last_history_line_is_reported(ck: Path) -> None:
    lines = _history_lines(ck)
    lines[2] = lines[2].replace('"weights_hash": "', '"weights_hash": 7, "x": "', 1)
    _write_lines(ck, lines)
    status = promotion_status(ck)
    assert not status["history_consistent"] and status["damaged"][0]["line"] == 3
    assert _refusal(rollback_promotion, checkpoints_dir=ck).reasons[0]["check"] == "history_consistent"


def test_a_torn_line_completed_by_the_repair_is_not_damage(ck: Path) -> None:
    """What a crash mid-history leaves after the repair: half a line, then the whole line."""
    lines = _history_lines(ck)
    lines.insert(2, lines[2][: len(lines[2]) // 2])
    _write_lines(ck, lines)
    status = promotion_status(ck)
    assert status["consistent"] and status["history_consistent"] and status["damaged"] == []
    assert rollback_promotion(checkpoints_dir=ck)["promoted"]["name"] == "bc2"


@pytest.mark.parametrize("field,edit", [
    ("name", lambda doc: doc.pop("name")),
    ("weights_hash", lambda doc: doc.update(weights_hash=None)),
    ("name", lambda doc: doc.update(name=["bc3"])),
])
def test_a_promoted_pointer_missing_a_key_is_named(ck: Path, field: str, edit) -> None:
    """promoted.json without name gave internal_error with nothing named."""
    doc = json.loads((ck / POINTER).read_text())
    edit(doc)
    (ck / POINTER).write_text(json.dumps(doc))
    files = _files(ck)
    for reader in (read_promoted, current_incumbent):
        with pytest.raises(CorruptRecord) as info:
            reader(ck)
        error = info.value
        assert error.code == "corrupt_record" and error.details["field"] == field
        assert error.details["path"] == str((ck / POINTER).absolute()) and POINTER in str(error)
    status = promotion_status(ck)  # reports, does not raise
    assert not status["consistent"] and not status["history_consistent"] and status["promoted"] is None
    assert status["incumbent"] is None  # not "baseline:greedy": nobody can tell what is promoted
    assert status["damaged"][0]["field"] == field and status["damaged"][0]["line"] is None
    assert _refusal(rollback_promotion, checkpoints_dir=ck).reasons[0]["check"] == "history_consistent"
    assert _refusal(promote_checkpoint, "bc2", checkpoints_dir=ck,
                    require_current_incumbent=False).reasons[0]["check"] == "history_consistent"
    with pytest.raises(ProtectedCheckpoint, match=POINTER):
        CheckpointRegistry(ck).check_replaceable("spare")
    assert _files(ck) == files


def test_a_promoted_pointer_that_is_not_json_is_reported_by_the_status(ck: Path) -> None:
    (ck / POINTER).write_text('{"schema_version": 1, "name": "bc')
    status = promotion_status(ck)
    assert not status["consistent"] and status["damaged"][0]["field"] is None
    assert "not valid JSON" in status["damaged"][0]["problem"]
    with pytest.raises(CorruptRecord):
        read_promoted(ck)
