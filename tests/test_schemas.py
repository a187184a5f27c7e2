"""The on-disk session layout (DESIGN section 6) against its JSON Schemas (extrarlhf/schemas/).

Real output is generated into a temp dir (a series with a codename, an LLM battle with
rationales, an abandoned, a crashed and an unfinished battle, a live codename lease) and
EVERY record of EVERY file is validated. Negative tests prove the schemas reject what they
must; a drift test keeps docs/data-format.md in step with the fields the writers produce.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import re
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

import engine
from extrarlhf.runtime import codenames
from extrarlhf.runtime.match import start_match
from extrarlhf.runtime.series import run_series
from extrarlhf.runtime.sessions import SessionStore
from tests.trace_helpers import read_records, read_trace

ROOT = Path(__file__).resolve().parents[1]
SCHEMA_DIR = ROOT / "extrarlhf" / "schemas"
DOC = ROOT / "docs" / "data-format.md"
RECORD_SCHEMAS = ("manifest", "summary", "catalog_entry", "meta", "turn", "action", "agents_index", "state")
# the dataset plane and the checkpoints dir (validated on real output by tests/maintenance/test_check_jsonschema.py)
OTHER_SCHEMAS = ("dataset_manifest", "dataset_pointer", "promoted")


# --------------------------------------------------------------------------- loading helper


def load_schemas() -> dict[str, dict[str, Any]]:
    """Every ``*.schema.json`` keyed by its short name (``meta``, ``state``, ...)."""
    return {p.name.removesuffix(".schema.json"): json.loads(p.read_text(encoding="utf-8"))
            for p in sorted(SCHEMA_DIR.glob("*.schema.json"))}


SCHEMAS = load_schemas()
# the $ids are relative (the file names), so the registry is keyed by them and every $ref resolves
# offline, here as in any tool that resolves against the schema file's own location
REGISTRY = Registry().with_resources(
    (schema["$id"], Resource.from_contents(schema)) for schema in SCHEMAS.values())
VALIDATORS = {name: Draft202012Validator(schema, registry=REGISTRY) for name, schema in SCHEMAS.items()}


def errors(name: str, record: Any) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message[:300]}"
            for e in VALIDATORS[name].iter_errors(record)]


def is_valid(name: str, record: Any) -> bool:
    return VALIDATORS[name].is_valid(record)


# --------------------------------------------------------------------------- real output


def _play_llm(match, *, limit: int = 1000) -> int:
    """Play player 1 of a human/llm match: the first non-END_TURN legal action, else END_TURN."""
    n = 0
    while not match.done and n < limit:
        legal = match.legal_actions()
        choice = next((a for a in legal if a["action_id"] != engine.END_TURN), legal[0])
        match.submit(choice["action_id"], rationale=f"decision {n}: {choice['description']}")
        n += 1
    return n


@pytest.fixture(scope="module")
def sessions(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("sessions")
    store = SessionStore(root)
    # An rl series of 2 battles; its codename is claimed (and released) by run_series.
    run_series(root, "series-g", 2, p1_model="baseline:greedy", opponent="baseline:random", seed=11,
               codename="Falcon")
    # An LLM battle with a rationale on every move, finished.
    llm = start_match(store, "llm-g", "llm", "baseline:random", seed=5, codename="Owl")
    assert _play_llm(llm) > 0 and llm.done
    llm.finish()
    # An LLM battle abandoned after one move.
    gone = start_match(store, "llm-g", "llm", "baseline:random", seed=6)
    gone.submit(gone.legal_actions()[-1]["action_id"], rationale="one move, then stop")
    gone.abandon("stopped by the test")
    # A human battle left open: a lone `started` catalog line (unfinished), no trace.
    start_match(store, "human-g", "human", "baseline:greedy", seed=7)
    # An rl battle that crashed (recorded through the real crash path: degraded, one warning).
    crashed = start_match(store, "crash-g", "rl", "baseline:random", p1_model="baseline:greedy", seed=9)
    crashed.crash(RuntimeError("boom for the schema test"))
    # A live lease, so agents_index.json holds one.
    codenames.claim(root, "Heron", "llm-g")
    yield root
    codenames.release(root, "Heron")


def _jsonl(path: Path) -> Iterator[dict[str, Any]]:
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            yield json.loads(line)


def iter_records(root: Path) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(schema name, where, record) for every record of every file of the layout."""
    yield "agents_index", "agents_index.json", json.loads((root / "agents_index.json").read_text())
    for group in sorted(p for p in root.iterdir() if p.is_dir()):
        yield "manifest", f"{group.name}/manifest.json", json.loads((group / "manifest.json").read_text())
        if (group / "summary.json").exists():
            yield "summary", f"{group.name}/summary.json", json.loads((group / "summary.json").read_text())
        for i, entry in enumerate(_jsonl(group / "catalog.jsonl")):
            yield "catalog_entry", f"{group.name}/catalog.jsonl:{i + 1}", entry
        for battle in sorted((group / "battles").iterdir()):
            for file_name, schema in (("meta.jsonl", "meta"), ("turns.jsonl", "turn"), ("actions.jsonl", "action")):
                for i, record in enumerate(read_records(battle, file_name)):
                    yield schema, f"{group.name}/{battle.name}/v5/{file_name}:{i + 1}", record


@pytest.fixture(scope="module")
def records(sessions) -> list[tuple[str, str, dict[str, Any]]]:
    return list(iter_records(sessions))


def first(records, schema: str, pred: Callable[[dict], bool] = lambda r: True) -> dict[str, Any]:
    for name, _, record in records:
        if name == schema and pred(record):
            return copy.deepcopy(record)
    raise AssertionError(f"no {schema} record matches")


# --------------------------------------------------------------------------- the schemas themselves


def test_every_schema_is_valid_draft_2020_12_with_a_matching_id():
    assert set(RECORD_SCHEMAS) | set(OTHER_SCHEMAS) | {"common"} == set(SCHEMAS)
    for name, schema in SCHEMAS.items():
        Draft202012Validator.check_schema(schema)
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert schema["$id"] == f"{name}.schema.json"  # relative: resolved against the file, never a URL
        assert schema.get("description"), name


def test_no_schema_names_a_network_location():
    """Only the metaschema is a URL (every validator ships it); every $id and $ref is relative, so
    resolving them never needs the network."""
    for name, schema in SCHEMAS.items():
        text = json.dumps(schema)
        urls = set(re.findall(r'"(?:\$id|\$ref)": "([a-z+.-]+:[^"]*)"', text))
        assert not urls, (name, urls)


def test_the_observation_pins_match_the_engine():
    """The trace observation's length and its base64 length are pinned to the engine's layout."""
    obs = SCHEMAS["action"]["properties"]["observation"]["properties"]
    size = 4 * engine.OBS_DIM
    encoded = len(base64.b64encode(bytes(size)))
    assert obs["shape"]["const"] == [engine.OBS_DIM] and obs["obs_version"]["const"] == engine.OBS_VERSION
    assert obs["data"]["minLength"] == obs["data"]["maxLength"] == encoded
    manifest = SCHEMAS["dataset_manifest"]["properties"]
    assert manifest["obs_dim"]["const"] == engine.OBS_DIM
    assert manifest["action_feature_dim"]["const"] == engine.ACTION_FEATURE_DIM
    assert manifest["obs_version"]["const"] == engine.OBS_VERSION


def _walk(node: Any, path: str = "") -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(path, property name, property schema) for every property declared anywhere."""
    if isinstance(node, dict):
        for key, value in node.get("properties", {}).items():
            yield path, key, value
        for key, value in node.items():
            yield from _walk(value, f"{path}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _walk(value, f"{path}/{i}")


def _is_conditional(path: str) -> bool:
    """Properties inside if/then/else/not/allOf only restate (narrow) a property declared elsewhere."""
    return bool(re.search(r"/(if|then|else|not|allOf)(/|$)", path))


def test_every_declared_property_has_a_description():
    missing = [f"{name}{path}/{key}" for name, schema in SCHEMAS.items()
               for path, key, prop in _walk(schema)
               if not _is_conditional(path) and not prop.get("description")]
    assert not missing, missing


def test_records_we_own_are_closed():
    """Every object schema that declares properties forbids unknown ones (except `policy`, reserved)."""
    open_objects = [f"{name}{path}" for name, schema in SCHEMAS.items() for path, node in _objects(schema)
                    if "properties" in node and node.get("additionalProperties") is not False
                    and not _is_conditional(path)]
    # the event dispatcher only routes on `type`; each event shape it routes to is closed
    assert open_objects == ["common/$defs/event"], open_objects


def _objects(node: Any, path: str = "") -> Iterator[tuple[str, dict]]:
    if isinstance(node, dict):
        yield path, node
        for key, value in node.items():
            if key != "properties":
                yield from _objects(value, f"{path}/{key}")
            else:
                for prop, sub in value.items():
                    yield from _objects(sub, f"{path}/properties/{prop}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _objects(value, f"{path}/{i}")


# --------------------------------------------------------------------------- real output validates


def test_every_record_of_every_file_validates(sessions, records):
    failures = [f"{where} ({name}): {err}" for name, where, record in records for err in errors(name, record)[:3]]
    assert not failures, "\n".join(failures[:30])
    counts: dict[str, int] = {}
    for name, _, _ in records:
        counts[name] = counts.get(name, 0) + 1
    # Everything the fixture produced was seen: nothing was validated vacuously.
    assert counts["agents_index"] == 1
    assert counts["manifest"] == 4 and counts["summary"] == 3  # human-g has only an unfinished battle
    assert counts["meta"] == 5 and counts["turn"] >= 5 and counts["action"] > 50
    statuses = {r["status"] for n, _, r in records if n == "catalog_entry"}
    assert statuses == {"started", "finished", "abandoned", "crashed"}
    assert {r["actor"]["type"] for n, _, r in records if n == "action"} == {"rl", "llm", "bot"}
    assert any(r["rationale"] for n, _, r in records if n == "action")
    index = next(r for n, _, r in records if n == "agents_index")
    assert list(index["leases"]) == ["Heron"]


def test_computed_summaries_and_embedded_states_validate(sessions, records):
    store = SessionStore(sessions)
    for group in store.list_groups():  # summary.json may be absent; readers compute it
        assert not errors("summary", store.read_summary(group)), group
    turn = first(records, "turn")
    for state in (turn["state_start"], turn["state_end"], first(records, "action")["state_before"]):
        assert not errors("state", state)
    assert not errors("state", engine.new_battle(3).to_dict())


def test_trace_facts_the_document_states(sessions, records):
    """Hashes, observation encoding and catalog file digests are what docs/data-format.md says."""
    for name, where, r in records:
        if name == "action":
            before = json.dumps(r["state_before"], sort_keys=True, separators=(",", ":")).encode()
            assert hashlib.sha256(before).hexdigest() == r["state_hash_before"], where
            assert r["action_id"] in [a["action_id"] for a in r["legal_actions"]], where
            assert r["action"]["action_id"] == r["action_id"], where
            obs = r["observation"]
            assert obs["obs_version"] == engine.OBS_VERSION and obs["shape"] == [engine.OBS_DIM], where
            vector = np.frombuffer(base64.b64decode(obs["data"]), dtype="<f4")
            assert vector.shape == (engine.OBS_DIM,), where
            state = engine.State.from_dict(r["state_before"])
            assert np.array_equal(vector, state.observation(r["player"])), where
        if name == "turn":
            for key in ("start", "end"):
                raw = json.dumps(r[f"state_{key}"], sort_keys=True, separators=(",", ":")).encode()
                assert hashlib.sha256(raw).hexdigest() == r[f"state_{key}_hash"], where
        if name == "catalog_entry" and r["files"]:
            group = where.split("/")[0]
            for file_name, digest in r["files"].items():
                data = read_trace(sessions / group / "battles" / r["battle_id"], file_name)
                assert hashlib.sha256(data).hexdigest() == digest, (where, file_name)
        if name == "meta":
            assert r["audit"]["not_a_label"] is True


# --------------------------------------------------------------------------- the schemas bite


def _drop(*path: str):
    def mutate(record):
        node = record
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]
    return mutate


def _set(value: Any, *path: str | int):
    def mutate(record):
        node = record
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return mutate


def _lease(mutate):
    def inner(record):
        mutate(record["leases"]["Heron"])
    return inner


FINISHED = ("status", "finished")
NEGATIVE = [
    # missing required fields
    ("manifest", None, _drop("group")),
    ("manifest", None, _drop("configuration", "battle_tag")),
    ("summary", None, _drop("readiness", "training_ready")),
    ("catalog_entry", FINISHED, _drop("files")),
    ("meta", None, _drop("result")),
    ("meta", None, _drop("result", "final_state_hash")),
    ("turn", None, _drop("state_end")),
    ("action", None, _drop("action_id")),
    ("action", None, _drop("state_before", "rng_state")),
    ("agents_index", None, _lease(_drop("owner_pid"))),
    # unknown status / enum values
    ("catalog_entry", None, _set("paused", "status")),
    ("catalog_entry", None, _set("unfinished", "status")),  # a folded status, never written
    ("meta", None, _set("paused", "result", "status")),
    ("meta", FINISHED, _set("timeout", "result", "reason")),
    ("manifest", None, _set("bot", "configuration", "p1_actor_type")),
    ("meta", None, _set("llm-vs-human", "battle_tag")),
    ("meta", None, _set("robot", "actors", "p1", "type")),
    # schema_version 2 on every record type
    *[(name, None, _set(2, "schema_version")) for name in RECORD_SCHEMAS if name != "state"],
    ("action", None, _set(2, "state_before", "schema_version")),
    ("turn", None, _set(2, "state_start", "schema_version")),
    # the audit block must say not_a_label: true
    ("meta", None, _drop("audit", "not_a_label")),
    ("meta", None, _set(False, "audit", "not_a_label")),
    # types and ranges
    ("action", None, _set(163, "action_id")),
    ("action", None, _set(-1, "legal_actions", 0, "action_id")),
    ("action", None, _set(3, "player")),
    ("action", None, _set("3", "turn")),
    ("action", None, _set("float64", "observation", "dtype")),
    # the observation's length and encoding are pinned (OBS_DIM floats, exactly that much base64)
    ("action", None, lambda r: r["observation"].update(data=r["observation"]["data"][:-4])),  # truncated
    ("action", None, lambda r: r["observation"].update(data=r["observation"]["data"] + "AAAA")),
    ("action", None, lambda r: r["observation"].update(
        data=base64.b64encode(bytes(4 * (engine.OBS_DIM - 1))).decode())),  # one float short, valid base64
    ("action", None, lambda r: r["observation"].update(data=r["observation"]["data"][:-2] + "B=")),  # non-canonical
    ("action", None, _set([engine.OBS_DIM - 1], "observation", "shape")),
    ("action", None, _set(engine.OBS_VERSION + 1, "observation", "obs_version")),
    ("action", None, _set("x" * 4001, "rationale")),
    ("action", None, _set({"type": "teleport"}, "events", 0)),
    ("action", None, _set([None] * 5, "state_before", "players", 0, "board")),
    ("catalog_entry", None, _set(3, "winner")),
    ("catalog_entry", ("status", "started"), _set(1, "winner")),  # a started line has no result yet
    ("catalog_entry", FINISHED, _set(None, "winner")),  # a finished battle has a result
    ("catalog_entry", FINISHED, _set("A" * 64, "files", "meta.jsonl")),  # sha256 is lowercase hex
    ("catalog_entry", FINISHED, _set("abc", "files", "actions.jsonl")),
    ("meta", None, _set("1b88", "result", "final_state_hash")),
    ("meta", FINISHED, _set(True, "degraded")),  # degraded without a policy warning
    ("meta", None, _set("1.0.0", "seed")),
    ("summary", None, _set(True, "readiness", "metronome_ready")),  # headless data never trains Metronome
    ("agents_index", None, _lease(_set(0, "stale_after_s"))),
    ("agents_index", None, lambda r: r["leases"].update({"9 Heron": r["leases"]["Heron"]})),  # bad codename key
    # anchored patterns: Python's `$` also matches before a final newline; the schemas must not
    ("manifest", None, lambda r: r.update(group=r["group"] + "\n")),
    ("catalog_entry", None, lambda r: r.update(battle_id=r["battle_id"] + "\n")),
    ("meta", None, _set("Falcon\n", "codename")),
    ("action", None, lambda r: r.update(state_hash_after=r["state_hash_after"] + "\n")),
    # additionalProperties: false on records we own
    ("meta", None, _set(1, "wall_clock_label")),
    ("action", None, _set(0.5, "decision_time_s")),
    ("catalog_entry", None, _set("x", "note")),
]


@pytest.mark.parametrize("case", NEGATIVE, ids=[f"{i}-{c[0]}" for i, c in enumerate(NEGATIVE)])
def test_schemas_reject_broken_records(records, case):
    name, pred, mutate = case

    def wanted(r: dict) -> bool:  # pred ("status", value) looks at the record's or its result's status
        return pred is None or pred[1] in (r.get(pred[0]), r.get("result", {}).get(pred[0]))

    record = first(records, name, wanted)
    assert is_valid(name, record)  # the untouched record passes: the rejection is the mutation's doing
    mutate(record)
    assert not is_valid(name, record)


def test_crashed_and_abandoned_battles_are_marked(records):
    crashed = first(records, "meta", lambda r: r["result"]["status"] == "crashed")
    assert crashed["degraded"] is True and crashed["policy_warnings"][0]["kind"] == "crash"
    crashed["degraded"] = False
    crashed["policy_warnings"] = []
    assert not is_valid("meta", crashed)  # a crash is always degraded
    abandoned = first(records, "meta", lambda r: r["result"]["status"] == "abandoned")
    assert abandoned["result"]["reason"] == "stopped by the test" and is_valid("meta", abandoned)


# --------------------------------------------------------------------------- the document keeps up


def _doc_names() -> set[str]:
    return set(re.findall(r"`([^`\s]+)`", DOC.read_text(encoding="utf-8")))


def test_document_names_every_field_the_writers_produce(records):
    names = _doc_names()
    missing = set()
    for schema, _, record in records:
        if schema in ("meta", "action", "turn", "catalog_entry", "manifest", "summary"):
            missing.update(f"{schema}.{key}" for key in record if key not in names)
    assert not missing, f"fields missing from docs/data-format.md: {sorted(missing)}"


def test_document_names_every_schema_property_and_file():
    names = _doc_names()
    missing = {f"{name}:{key}" for name, schema in SCHEMAS.items() for _, key, _ in _walk(schema)
               if key not in names}
    assert not missing, f"schema properties missing from docs/data-format.md: {sorted(missing)}"
    text = DOC.read_text(encoding="utf-8")
    for name in SCHEMAS:
        assert f"{name}.schema.json" in text, name
    for needle in ("OBS_VERSION", "not_a_label", "little-endian", "last line", "schema_version"):
        assert needle in text, needle
