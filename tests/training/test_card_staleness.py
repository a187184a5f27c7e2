"""A model card describes the weights it names (issue 14, item 8).

The issue's case: a kill between the registration of the new weights and the card write
during an overwriting ``train_policy`` left the old card next to the new weights, and nothing
reported it. Reproduced with a real subprocess SIGKILLed at that point
(``RLHF_TEST_CRASH_AT=before_card``); every reader of cards now checks the card's
weights_hash against the registry and reports a stale card clearly (``stale_card``), a damaged
card names its file and field, and ``check --repair`` sets a stale card aside."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from extrarlhf.checkpoints.registry import CheckpointRegistry
from extrarlhf.core.errors import CorruptRecord, NotFound, StaleCard
from extrarlhf.maintenance.check import check_all
from extrarlhf.training import read_card
from extrarlhf.training.card import card_path, card_status, set_stale_card_aside
from tests.training_helpers import SMALL, datasets_dir, train_small

REPO = Path(__file__).resolve().parents[2]


def _train_killed_before_card(ck: Path, name: str, seed: int) -> None:
    """An overwriting train_policy in a subprocess, SIGKILLed after registration, before the card."""
    code = ("from extrarlhf.training import train_policy\n"
            f"train_policy('gg', {name!r}, {seed}, datasets_dir={str(datasets_dir())!r}, "
            f"checkpoints_dir={str(ck)!r}, overwrite=True, **{SMALL!r})\n"
            "print('survived')\n")
    env = {**os.environ, "RLHF_TEST_CRASH_AT": "before_card", "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == -signal.SIGKILL, (done.returncode, done.stdout, done.stderr[-2000:])
    assert "survived" not in done.stdout


def test_a_kill_between_registration_and_card_write_leaves_a_card_that_is_reported_stale(tmp_path: Path) -> None:
    ck = tmp_path / "ck"
    first = train_small(ck, "carded", seed=0)
    assert read_card(ck, "carded")["weights_hash"] == first["weights_hash"]
    old_card = card_path(ck, "carded").read_bytes()

    _train_killed_before_card(ck, "carded", seed=1)
    registered = CheckpointRegistry(ck).get("carded").weights_hash
    assert registered != first["weights_hash"]  # the new weights are registered...
    assert card_path(ck, "carded").read_bytes() == old_card  # ...and the old card is still there

    with pytest.raises(StaleCard) as info:  # the reader says so instead of describing the wrong weights
        read_card(ck, "carded")
    error = info.value
    assert error.code == "stale_card"
    assert error.details["card_weights_hash"] == first["weights_hash"]
    assert error.details["registered_weights_hash"] == registered
    assert str(card_path(ck, "carded").absolute()) in str(error) and first["weights_hash"][:16] in str(error)
    assert card_status(ck, "carded")["state"] == "stale"

    # check reports it (read-only), --repair sets it aside
    looked = check_all(None, None, ck)
    stale = [p for p in looked["problems"] if p["code"] == "stale_card"]
    assert len(stale) == 1 and stale[0]["repairable"] and not looked["ok"]
    assert card_path(ck, "carded").read_bytes() == old_card
    fixed = check_all(None, None, ck, repair=True)
    assert fixed["ok"] and [r["area"] for r in fixed["repaired"]] == ["checkpoints"]
    aside = ck / f"carded.card.json.stale-{first['weights_hash'][:12]}"
    assert aside.read_bytes() == old_card and not card_path(ck, "carded").exists()
    with pytest.raises(NotFound, match="has no model card"):
        read_card(ck, "carded")
    assert check_all(None, None, ck)["ok"]

    # training again writes the card of the registered weights
    again = train_small(ck, "carded", seed=2, overwrite=True)
    assert read_card(ck, "carded")["weights_hash"] == again["weights_hash"]


def test_a_card_whose_checkpoint_was_registered_again_is_stale(tmp_path: Path) -> None:
    """The same state without a crash: the checkpoint re-registered with other weights."""
    ck, other = tmp_path / "ck", tmp_path / "other"
    train_small(ck, "carded", seed=0)
    train_small(other, "x", seed=1)
    CheckpointRegistry(ck).register("carded", CheckpointRegistry(other).get("x").path, "v5", overwrite=True)
    with pytest.raises(StaleCard):
        read_card(ck, "carded")
    assert set_stale_card_aside(ck, "carded") is not None
    assert set_stale_card_aside(ck, "carded") is None  # nothing stale left: nothing done


def test_a_card_of_a_checkpoint_no_longer_registered_is_stale(tmp_path: Path) -> None:
    ck = tmp_path / "ck"
    train_small(ck, "carded", seed=0)
    train_small(ck, "other", seed=1)
    index = json.loads((ck / "index.json").read_text())
    del index["checkpoints"]["carded"]
    (ck / "index.json").write_text(json.dumps(index))
    with pytest.raises(StaleCard, match="is not registered any more"):
        read_card(ck, "carded")
    assert read_card(ck, "other")["name"] == "other"


@pytest.mark.parametrize("field,edit", [
    ("weights_hash", lambda card: card.pop("weights_hash")),
    ("weights_hash", lambda card: card.update(weights_hash=12)),
    ("name", lambda card: card.update(name="someone-else")),
    ("checkpoint", lambda card: card.update(checkpoint=None)),
    ("kind", lambda card: card.update(kind="recipe")),
])
def test_a_damaged_card_names_its_file_and_field(tmp_path: Path, field: str, edit) -> None:
    ck = tmp_path / "ck"
    train_small(ck, "carded", seed=0)
    path = card_path(ck, "carded")
    card = json.loads(path.read_text())
    edit(card)
    path.write_text(json.dumps(card))
    with pytest.raises(CorruptRecord) as info:
        read_card(ck, "carded")
    assert info.value.code == "corrupt_record" and info.value.details["field"] == field
    assert info.value.details["path"] == str(path.absolute()) and "carded.card.json" in str(info.value)
    status = card_status(ck, "carded")
    assert status["state"] == "damaged" and status["details"]["field"] == field
    report = check_all(None, None, ck, repair=True)  # never "repaired": only reported
    assert [(p["code"], p["field"]) for p in report["problems"]] == [("corrupt_record", field)]
    assert report["repaired"] == [] and path.exists()
