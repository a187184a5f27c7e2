"""The champion shipped with the project (issue 51): its files agree with each other, it is
registered as ``champion`` once (a model of the user's own with that name, or a promoted earlier
champion, is never overwritten), it is offered first by MCP ``list_models`` and the arena, it
can be benchmarked by name on the command line, and ``publish_champion`` replaces it with a
record whose command reproduces its figure. Nothing here depends on the shipped weights."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from mcp import Client

from adapters.onnx_contracts import weights_hash
from extrarlhf.checkpoints.promoted import read_promoted
from extrarlhf.checkpoints.registry import CheckpointRegistry
from extrarlhf.core.errors import NotFound
from extrarlhf.policies.benchmarking import benchmark_models
from extrarlhf.policies.champion import (CARD_FILE, CHAMPION_NAME, MODEL_FILE, RECORD_FILE, SHIPPED_DIR,
                                         benchmark_command, champion_summary, ensure_champion, publish_champion,
                                         shipped_record)
from extrarlhf.policies.promotion import promote_checkpoint
from extrarlhf.training.card import read_card
from mcp_server import build_server
from tests import onnx_factory
from tests.mcp_helpers import Checked
from tests.web.arena_helpers import client

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def anyio_backend():
    return "asyncio"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _minimal_card(name: str, model: Path) -> dict:
    """The fields a card reader checks, for a model the tests make (not trained)."""
    weights = weights_hash(onnx.load(str(model)))
    return {"schema_version": 1, "kind": "model_card", "name": name, "weights_hash": weights,
            "model": {"kind": "v5", "encoder": "flat", "hidden": 0},
            "checkpoint": {"name": name, "weights_hash": weights, "file": model.name}}


def _other_shipped(folder: Path) -> Path:
    """A shipped folder whose network is another (scripted) v5 model: an 'earlier' champion."""
    folder.mkdir(parents=True)
    model = Path(onnx_factory.save(onnx_factory.v5_model(), folder / MODEL_FILE))
    card = _minimal_card(CHAMPION_NAME, model)
    (folder / CARD_FILE).write_text(json.dumps(card))
    (folder / RECORD_FILE).write_text(json.dumps({
        "schema_version": 1, "kind": "champion", "name": CHAMPION_NAME, "what": "a scripted model",
        "made_by": "tests", "sha256": _sha(model), "weights_hash": card["weights_hash"],
        "benchmark": {"score": 0.5, "score_ci95": [0.4, 0.6], "pairs": 1}}))
    return folder


def test_the_shipped_files_agree_and_the_record_names_its_command() -> None:
    record = shipped_record()
    card = json.loads((SHIPPED_DIR / CARD_FILE).read_text())
    onnx_bytes = (SHIPPED_DIR / MODEL_FILE).read_bytes()
    assert hashlib.sha256(onnx_bytes).hexdigest() == record["sha256"] == card["checkpoint"]["sha256"]
    assert weights_hash(onnx.load_from_string(onnx_bytes)) == record["weights_hash"] == card["weights_hash"]
    assert card["name"] == card["checkpoint"]["name"] == CHAMPION_NAME and card["model"]["kind"] == "v5"
    # small enough to live in the repository (the loop's ensemble of six sets networks is 4.3 MB)
    assert len(onnx_bytes) == record["size_bytes"] < 8 * 1024 * 1024
    assert ("ensemble of" in record["what"]) == (card["model"].get("members", 1) > 1)
    bench = record["benchmark"]
    assert bench["opponent"] == "baseline:greedy"
    assert bench["wins"] + bench["draws"] + bench["losses"] == 2 * bench["pairs"]
    assert bench["score_ci95"][0] <= bench["score"] <= bench["score_ci95"][1]
    assert bench["command"] == benchmark_command(bench["pairs"], bench["seed"])
    assert record["made_by"].strip() and record["what"].strip() and record["trained_as"]
    for ignored in (ROOT / ".gitignore").read_text().splitlines():  # git keeps the folder
        assert ignored.strip() not in ("*.onnx", "/extrarlhf/champion/", "extrarlhf/champion")


def test_ensure_registers_once_with_its_card_and_then_does_nothing(tmp_path: Path) -> None:
    ck = tmp_path / "checkpoints"
    first = ensure_champion(ck)
    assert first["state"] == "registered" and CHAMPION_NAME in first["message"]
    entry = CheckpointRegistry(ck).get(CHAMPION_NAME)
    assert entry.sha256 == shipped_record()["sha256"] == _sha(entry.path) and entry.kind == "v5"
    assert read_card(ck, CHAMPION_NAME)["weights_hash"] == entry.weights_hash  # not stale: the registered weights
    index = (ck / "index.json").read_bytes()
    again = ensure_champion(ck)
    assert again["state"] == "present"
    assert (ck / "index.json").read_bytes() == index  # nothing rewritten
    assert read_promoted(ck) is None


def test_a_model_of_your_own_named_champion_is_never_overwritten(tmp_path: Path) -> None:
    ck = tmp_path / "checkpoints"
    mine = CheckpointRegistry(ck).register(
        CHAMPION_NAME, onnx_factory.save(onnx_factory.v5_model(), tmp_path / "mine.onnx"))
    report = ensure_champion(ck)
    assert report["state"] == "kept_yours"
    assert "of your own" in report["message"] and "left as it is" in report["message"]
    assert CheckpointRegistry(ck).get(CHAMPION_NAME) == mine and not (ck / "champion.card.json").exists()
    assert champion_summary(ck) == {"name": CHAMPION_NAME, "shipped": False,
                                    "about": "a checkpoint of your own named champion"}


def test_an_earlier_shipped_champion_is_replaced_unless_it_is_promoted(tmp_path: Path) -> None:
    earlier = _other_shipped(tmp_path / "earlier" / "champion")
    ck = tmp_path / "ck"
    assert ensure_champion(ck, shipped=earlier)["state"] == "registered"
    updated = ensure_champion(ck)
    assert updated["state"] == "updated" and CheckpointRegistry(ck).get(CHAMPION_NAME).sha256 == updated["sha256"]
    assert read_card(ck, CHAMPION_NAME)["weights_hash"] == shipped_record()["weights_hash"]  # the card follows
    # the current champion promoted (it beats random), then a newer shipped one arrives: kept
    report = benchmark_models(CHAMPION_NAME, "baseline:random", n_pairs=150, baseline_pairs=0, checkpoints_dir=ck)
    assert report["passed"], report["verdict"]
    promote_checkpoint(CHAMPION_NAME, checkpoints_dir=ck)
    promoted = (ck / "promoted.json").read_bytes()
    kept = ensure_champion(ck, shipped=earlier)
    assert kept["state"] == "kept_protected" and "promoted" in kept["message"]
    assert CheckpointRegistry(ck).get(CHAMPION_NAME).sha256 == shipped_record()["sha256"]
    assert (ck / "promoted.json").read_bytes() == promoted
    # publish takes @promoted: the promoted checkpoint of a registry (a make improve run's)
    record = publish_champion("@promoted", checkpoints_dir=ck, made_by="tests", pairs=2, into=tmp_path / "re" / "champion")
    assert record["trained_as"] == CHAMPION_NAME and record["sha256"] == shipped_record()["sha256"]


def test_publish_copies_a_checkpoint_and_records_a_benchmark_its_command_reproduces(tmp_path: Path) -> None:
    source = tmp_path / "source"
    model = Path(onnx_factory.save(onnx_factory.v5_model(), tmp_path / "scripted.onnx"))
    entry = CheckpointRegistry(source).register("scripted", model)
    (source / "scripted.card.json").write_text(json.dumps(_minimal_card("scripted", model)))
    into = tmp_path / "shipped" / "champion"
    with pytest.raises(NotFound):  # a checkpoint without its card is not published; nothing is written
        publish_champion("nameless", checkpoints_dir=source, made_by="tests", pairs=3, into=into)
    assert not into.exists() or list(into.iterdir()) == []
    record = publish_champion("scripted", checkpoints_dir=source, made_by="make improve (tests)", pairs=3, into=into)
    assert sorted(p.name for p in into.iterdir()) == sorted([MODEL_FILE, CARD_FILE, RECORD_FILE])
    assert shipped_record(into) == record and record["trained_as"] == "scripted"
    assert record["sha256"] == entry.sha256 == _sha(into / MODEL_FILE) and record["made_by"] == "make improve (tests)"
    assert record["what"].startswith("a v5 network (flat encoder, hidden 0)")  # one network, not an ensemble
    card = json.loads((into / CARD_FILE).read_text())
    assert card["name"] == card["checkpoint"]["name"] == CHAMPION_NAME
    bench = record["benchmark"]
    assert bench["pairs"] == 3 and bench["command"] == benchmark_command(3, 0) and "--no-early-stop" in bench["command"]
    # the command on the record, against a registry the published folder was registered in
    ck = tmp_path / "ck"
    ensure_champion(ck, shipped=into)
    again = benchmark_models(CHAMPION_NAME, "baseline:greedy", n_pairs=3, stop_early=False, checkpoints_dir=ck)
    assert (again["match"]["wins"], again["match"]["losses"]) == (bench["wins"], bench["losses"])
    assert round(again["match"]["score"], 4) == bench["score"]


@pytest.mark.anyio
async def test_list_models_offers_the_champion_first(tmp_path: Path) -> None:
    ck = tmp_path / "c"
    CheckpointRegistry(ck).register("aaa", onnx_factory.save(onnx_factory.v5_model(), tmp_path / "aaa.onnx"))
    server = build_server(tmp_path / "s", tmp_path / "d", ck)
    async with Client(server) as mcp:
        c = Checked(mcp)
        before = await c.ok("list_models")
        assert before["specs"] == ["baseline:random", "baseline:greedy", "aaa"] and before["champion"] is None
        ensure_champion(ck)
        models = await c.ok("list_models")
        assert models["specs"] == [CHAMPION_NAME, "baseline:random", "baseline:greedy", "aaa"]
        assert [cp["name"] for cp in models["checkpoints"]] == [CHAMPION_NAME, "aaa"]
        bench = shipped_record()["benchmark"]
        champion = models["champion"]
        assert champion["name"] == CHAMPION_NAME and champion["shipped"] is True
        assert champion["vs_greedy"].startswith(f"{bench['score']:.3f} [")
        assert champion["vs_greedy"].endswith(f"over {bench['pairs']} pairs")
        page = await c.ok("list_models", {"limit": 1})  # paged: champion is the first page
        assert page["specs"][0] == CHAMPION_NAME and page["next_cursor"]
        second = await c.ok("list_models", {"limit": 1, "cursor": page["next_cursor"]})
        assert [cp["name"] for cp in second["checkpoints"]] == ["aaa"] and second["champion"] is None


def test_the_arena_lists_the_champion_first_and_preselects_it(tmp_path: Path) -> None:
    plain = client(tmp_path / "plain").get("/").text
    assert '<option value="baseline:greedy" selected>' in plain and "champion-note" not in plain
    ensure_champion(tmp_path / "with" / "checkpoints")
    lobby = client(tmp_path / "with").get("/").text
    select = lobby.split('id="opponent"')[1].split("</select>")[0]
    assert select.index('<option value="champion" selected>') < select.index('value="baseline:random"')
    assert select.count(" selected") == 1 and 'id="champion-note"' in lobby
    assert f"{shipped_record()['benchmark']['score']:.3f}" in lobby


def test_the_cli_benchmarks_the_champion_by_name_in_a_fresh_registry(tmp_path: Path) -> None:
    ck = tmp_path / "checkpoints"
    proc = subprocess.run([sys.executable, "-m", "extrarlhf", "benchmark", CHAMPION_NAME, "baseline:greedy", "--pairs",
                           "3", "--baseline-pairs", "0", "--checkpoints-dir", str(ck)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode in (0, 1), proc.stderr  # 1: three pairs cannot pass the SPRT
    assert "champion: registered the shipped champion" in proc.stderr
    assert "| champion vs baseline:greedy | 3 |" in proc.stdout
    assert CheckpointRegistry(ck).get(CHAMPION_NAME).sha256 == shipped_record()["sha256"]
    ensured = subprocess.run([sys.executable, "-m", "extrarlhf", "champion", "ensure", "--checkpoints-dir", str(ck),
                              "--json"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert ensured.returncode == 0 and json.loads(ensured.stdout)["state"] == "present"
    shutil.rmtree(ck)
