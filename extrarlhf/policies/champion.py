"""The champion: the best network the improvement loop made, shipped with the project (issue 51).

The package folder ``extrarlhf/champion/`` holds three files (package data: a wheel carries them):

* ``champion.onnx``       the network (a v5 checkpoint; no search at play time)
* ``champion.card.json``  its training model card (extrarlhf.training.card), named ``champion``
* ``champion.json``       the record: what it is, the command that made it, its sha256 and
                          weights_hash, and its benchmark against ``baseline:greedy`` with the
                          command that reproduces it

:func:`ensure_champion` registers the shipped network in a checkpoint registry under the fixed
name ``champion`` (``make setup``, ``extrarlhf arena`` and ``extrarlhf benchmark champion`` call
it): a registry that already holds it is left alone (one index read, one hash of ~1 MB); an
earlier shipped champion is replaced (unless it is promoted or a rollback could restore it);
a checkpoint of the user's own named ``champion`` is never overwritten, and the answer says so.
Registration never writes a promotion record.

:func:`publish_champion` is how a better network replaces it: it copies a registered checkpoint
and its card into the folder under the name ``champion``, benchmarks the copy exactly as the
record's command does (a fresh registry, ``--pairs`` pairs, no early stop) and writes the record
last (``python -m extrarlhf champion publish NAME --checkpoints-dir DIR --made-by '...'``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from ..checkpoints.registry import CheckpointExists, CheckpointRegistry, ProtectedCheckpoint
from ..core.clock import utc_now
from ..core.errors import InvalidArgument, NotFound, UnsupportedSchema, corrupt_record
from ..core.fileio import atomic_write_bytes, atomic_write_json, read_json_document, writing
from ..runtime.actors import concrete_spec

CHAMPION_NAME = "champion"
SHIPPED_DIR = Path(__file__).resolve().parents[1] / "champion"
MODEL_FILE, CARD_FILE, RECORD_FILE = "champion.onnx", "champion.card.json", "champion.json"
RECORD_SCHEMA_VERSION = 1
OPPONENT = "baseline:greedy"
DEFAULT_PAIRS = 1000
_SHIPPED_SUFFIX = os.path.join("champion", MODEL_FILE)  # the source path of a champion registered from a shipped folder


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()  # ~1 MB: read whole


def shipped_record(shipped: str | os.PathLike[str] = SHIPPED_DIR) -> dict[str, Any]:
    """The shipped record (``champion.json``), checked against the files beside it: the model's
    sha256 and the card's weights_hash must be the record's (``corrupt_record`` otherwise)."""
    folder = Path(shipped)
    record = read_json_document(folder / RECORD_FILE, RECORD_SCHEMA_VERSION, what="champion record ")
    where = (folder / RECORD_FILE).absolute()
    for field in ("sha256", "weights_hash", "made_by", "what"):
        if not isinstance(record.get(field), str):
            raise corrupt_record("is missing or not a string", path=where, field=field)
    try:
        found = _sha256(folder / MODEL_FILE)
    except FileNotFoundError:
        raise NotFound(f"the shipped champion {folder / MODEL_FILE} is missing") from None
    if found != record["sha256"]:
        raise corrupt_record(f"is {record['sha256'][:16]}..., but {MODEL_FILE} beside it hashes to {found[:16]}...; "
                             f"publish the champion again (python -m extrarlhf champion publish)", path=where,
                             field="sha256")
    card = read_json_document(folder / CARD_FILE, 1, what="model card ")
    if card.get("weights_hash") != record["weights_hash"] or card.get("name") != CHAMPION_NAME:
        raise corrupt_record(f"{CARD_FILE} beside it is not the card of {CHAMPION_NAME!r} with this weights_hash",
                             path=where, field="weights_hash")
    return record


def _report(state: str, root: Path, record: dict[str, Any], message: str) -> dict[str, Any]:
    return {"name": CHAMPION_NAME, "state": state, "checkpoints_dir": str(root.absolute()),
            "sha256": record["sha256"], "message": message}


def ensure_champion(checkpoints_dir: str | os.PathLike[str] = "checkpoints", *,
                    shipped: str | os.PathLike[str] = SHIPPED_DIR) -> dict[str, Any]:
    """Register the shipped champion under ``champion`` in ``checkpoints_dir`` when it is not
    there; returns ``state``: ``present`` (nothing done), ``registered``, ``updated`` (an earlier
    shipped champion replaced), ``kept_yours`` (a checkpoint of the user's own has the name:
    untouched) or ``kept_protected`` (an earlier shipped champion that is promoted or restorable
    by a rollback: untouched), with a one-line ``message``."""
    folder, root = Path(shipped), Path(checkpoints_dir)
    record = shipped_record(folder)
    registry = CheckpointRegistry(root)
    try:
        held = registry.get(CHAMPION_NAME)
    except NotFound:
        held = None
    if held is not None and held.sha256 == record["sha256"]:
        _ensure_card(root, folder)
        return _report("present", root, record, f"the shipped champion is registered as {CHAMPION_NAME!r} in {root}")
    if held is not None and not held.source_path.endswith(_SHIPPED_SUFFIX):
        return _report("kept_yours", root, record,
                       f"checkpoint {CHAMPION_NAME!r} in {root} is a model of your own (registered from "
                       f"{held.source_path}), not the shipped champion: it is left as it is and the shipped one is "
                       f"not registered there; register yours under another name to have both")
    try:
        registry.register(CHAMPION_NAME, folder / MODEL_FILE, "v5", overwrite=held is not None)
    except ProtectedCheckpoint as exc:
        return _report("kept_protected", root, record, f"the earlier shipped champion in {root} is kept: {exc}")
    except CheckpointExists:  # registered by a concurrent call since the look-up above
        return ensure_champion(root, shipped=folder)
    _ensure_card(root, folder)
    if held is None:
        return _report("registered", root, record, f"registered the shipped champion as {CHAMPION_NAME!r} in {root}")
    return _report("updated", root, record, f"replaced the earlier shipped champion ({held.sha256[:12]}) with the "
                                            f"current one in {root}")


def _ensure_card(root: Path, folder: Path) -> None:
    """Write the shipped card beside the registered champion when its card is missing or stale
    (a stale one is set aside, as ``extrarlhf check --repair`` does); a damaged card is left to
    ``extrarlhf check``."""
    from ..training.card import card_path, card_status, set_stale_card_aside  # onnx: only when writing

    state = card_status(root, CHAMPION_NAME)["state"]
    if state == "stale":
        set_stale_card_aside(root, CHAMPION_NAME)
    if state in ("missing", "stale"):
        with writing(root, "writing the champion's model card"):
            atomic_write_bytes(card_path(root, CHAMPION_NAME), (folder / CARD_FILE).read_bytes())


def champion_summary(checkpoints_dir: str | os.PathLike[str], *,
                     shipped: str | os.PathLike[str] = SHIPPED_DIR) -> dict[str, Any] | None:
    """What a listing says about ``champion`` (None when nothing has the name): the shipped
    record's benchmark when the registered weights are the shipped ones, else that it is a
    model of the user's own. Reads the index and the record only (no model file is opened)."""
    try:
        held = CheckpointRegistry(checkpoints_dir).get(CHAMPION_NAME)
    except NotFound:
        return None
    try:
        record = read_json_document(Path(shipped) / RECORD_FILE, RECORD_SCHEMA_VERSION, what="champion record ")
    except (NotFound, UnsupportedSchema):
        record = {}
    if held.sha256 != record.get("sha256"):
        return {"name": CHAMPION_NAME, "shipped": False, "about": "a checkpoint of your own named champion"}
    bench = record["benchmark"]
    return {"name": CHAMPION_NAME, "shipped": True, "about": record["what"],
            "vs_greedy": f"{bench['score']:.3f} [{bench['score_ci95'][0]:.3f}, {bench['score_ci95'][1]:.3f}] over "
                         f"{bench['pairs']} pairs"}


def benchmark_command(pairs: int, seed: int) -> str:
    """The command that reproduces the record's benchmark (after ``make setup``)."""
    return (f"python -m extrarlhf benchmark {CHAMPION_NAME} {OPPONENT} --pairs {pairs} --no-early-stop"
            + (f" --seed {seed}" if seed else ""))


def _what(card: dict[str, Any]) -> str:
    model = card.get("model", {})
    kind, members = model.get("kind", "v5"), model.get("members") or 1
    shape = f"{model.get('encoder', 'flat')} encoder, hidden {model.get('hidden')}"
    network = (f"a {kind} network ({shape})" if members == 1 else
               f"an ensemble of {members} {kind} networks ({shape} each) packed into one graph, its logits the "
               f"mean of theirs,")
    return f"{network} that plays from the observation alone, no search at play time"


def publish_champion(name: str, *, checkpoints_dir: str | os.PathLike[str], made_by: str,
                     pairs: int = DEFAULT_PAIRS, seed: int = 0, workers: int = 1,
                     into: str | os.PathLike[str] = SHIPPED_DIR) -> dict[str, Any]:
    """Make checkpoint ``name`` (or ``@promoted``) of ``checkpoints_dir`` the shipped champion in ``into``: its
    ONNX and its card (renamed ``champion``) are staged, registered in a fresh registry and
    benchmarked against greedy over ``pairs`` pairs (no early stop), then the folder's three files
    are replaced, the record last. Returns the record. An error before that changes nothing in
    ``into``; one between the replacements leaves a record that does not match its files, which
    :func:`shipped_record` refuses (``corrupt_record``) until the champion is published again."""
    from ..training.card import read_card
    from .benchmarking import benchmark_models

    if not isinstance(made_by, str) or not made_by.strip():
        raise InvalidArgument("say how the network was made (--made-by: the command that trained it)")
    name = concrete_spec(name, "champion", checkpoints_dir)  # @promoted: the promoted checkpoint's name
    source = CheckpointRegistry(checkpoints_dir).get(name)
    card = read_card(checkpoints_dir, name)  # not_found / stale_card: a champion is shipped with its own card
    if source.kind != "v5":
        raise InvalidArgument(f"checkpoint {name!r} is {source.kind}; the champion is a v5 network")
    shipped = {**card, "name": CHAMPION_NAME,
               "checkpoint": {**card["checkpoint"], "name": CHAMPION_NAME,
                              "file": f"{CHAMPION_NAME}.{source.sha256[:12]}.onnx"}}
    folder = Path(into)
    with writing(folder.parent, "staging the champion"):
        folder.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix=".champion-", dir=folder.parent))
    try:
        shutil.copyfile(source.path, stage / MODEL_FILE)
        if _sha256(stage / MODEL_FILE) != source.sha256:
            raise InvalidArgument(f"checkpoint {name!r}'s file no longer matches its registration; check it "
                                  f"(extrarlhf check)")
        atomic_write_json(stage / CARD_FILE, shipped)
        record = {"schema_version": RECORD_SCHEMA_VERSION, "kind": "champion", "name": CHAMPION_NAME,
                  "what": _what(card), "trained_as": name, "made_by": made_by.strip(),
                  "sha256": source.sha256, "weights_hash": source.weights_hash, "size_bytes": source.size_bytes,
                  "published_at": utc_now()}
        atomic_write_json(stage / RECORD_FILE, {**record, "benchmark": {"score": 0.0, "score_ci95": [0, 0],
                                                                        "pairs": 0}})
        with tempfile.TemporaryDirectory(prefix="champion-bench-") as bench_dir:
            ensure_champion(bench_dir, shipped=stage)
            result = benchmark_models(CHAMPION_NAME, OPPONENT, n_pairs=pairs, seed=seed, max_workers=workers,
                                      stop_early=False, checkpoints_dir=bench_dir, write=False)
        match = result["match"]
        record["benchmark"] = {
            "opponent": OPPONENT, "pairs": match["pairs"], "seed": seed, "score": round(match["score"], 4),
            "score_ci95": [round(x, 4) for x in match["score_ci95"]], "wins": match["wins"],
            "draws": match["draws"], "losses": match["losses"], "elo": round(match["elo"], 1),
            "elo_ci95": [round(x, 1) for x in match["elo_ci95"]], "command": benchmark_command(pairs, seed),
            "quick_check": f"python -m extrarlhf benchmark {CHAMPION_NAME} {OPPONENT}",
            "seconds": round(result["seconds"], 1), "measured_at": result["finished_at"]}
        with writing(folder, "publishing the champion"):
            for file in (MODEL_FILE, CARD_FILE):
                os.replace(stage / file, folder / file)
            atomic_write_json(folder / RECORD_FILE, record)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return record
