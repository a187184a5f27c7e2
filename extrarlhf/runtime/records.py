"""Checks of the session records (DESIGN section 6): catalog lines, group manifests,
``summary.json``, group leases and the fields of a trace that a catalog line is rebuilt from.

Each ``check_*`` function takes a parsed JSON value and raises :class:`Bad` naming the first
field that is wrong (missing, wrong type, unknown value) and why; the callers in sessions.py
turn that into :class:`extrarlhf.core.errors.CorruptRecord` with the file and line. These checks
cover what readers rely on (types, ranges, enumerations, shapes); the JSON Schemas in
``extrarlhf/schemas/`` are the complete description and are checked by the tests.

A record with a ``schema_version`` other than the one this code reads raises
:class:`OtherVersion` instead: it is not damaged, it is newer (or older) than this code, and
is never repaired or dropped.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from .trace_files import TRACE_FILES

CATALOG_STATUSES = ("started", "finished", "abandoned", "crashed")
FINAL_STATUSES = ("finished", "abandoned", "crashed")
P1_ACTOR_TYPES = ("human", "llm", "rl")
SEED_MODES = ("series", "explicit")
MAX_SEED = (1 << 63) - 1
BATTLE_ID = re.compile(r"b([0-9]{6,})-[0-9a-f]{10}")
SHA256 = re.compile(r"[0-9a-f]{64}")
BATTLE_TAG = re.compile(r"(human|llm|rl)-vs-(bot|rl)")


class Bad(Exception):
    """A record's ``field`` (dotted; None: the record as a whole) is wrong: ``why``."""

    def __init__(self, field: str | None, why: str) -> None:
        super().__init__(f"{field}: {why}" if field else why)
        self.field = field
        self.why = why


class OtherVersion(Exception):
    """The record's ``schema_version`` is a valid integer this code does not read."""

    def __init__(self, version: int, expected: int) -> None:
        super().__init__(f"schema_version {version} is not supported (this version of ExtraRLHF reads {expected})")
        self.version = version
        self.expected = expected


def kind(value: Any) -> str:
    """How a JSON value reads in a message: ``'3' (text)``, ``true (a boolean)``..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"{str(value).lower()} (a boolean)"
    if isinstance(value, (int, float)):
        return f"{value!r} (a number)"
    if isinstance(value, str):
        shown = value if len(value) <= 80 else value[:77] + "..."
        return f"{shown!r} (text)"
    if isinstance(value, list):
        return f"a list of {len(value)} item(s)"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _name(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def need(doc: dict[str, Any], key: str, prefix: str = "") -> Any:
    if key not in doc:
        raise Bad(_name(prefix, key), "is missing")
    return doc[key]


def need_int(doc: dict[str, Any], key: str, lo: int | None = 0, hi: int | None = None, *, nullable: bool = False,
             prefix: str = "") -> int | None:
    value = need(doc, key, prefix)
    if value is None and nullable:
        return None
    bounds = ("" if lo is None else f" >= {lo}") + ("" if hi is None else f" and <= {hi}")
    if isinstance(value, bool) or not isinstance(value, int) or (lo is not None and value < lo) \
            or (hi is not None and value > hi):
        raise Bad(_name(prefix, key), f"must be an integer{bounds}{' or null' if nullable else ''}, got {kind(value)}")
    return value


def need_str(doc: dict[str, Any], key: str, pattern: re.Pattern[str] | None = None, shape: str = "",
             *, nullable: bool = False, prefix: str = "") -> str | None:
    value = need(doc, key, prefix)
    if value is None and nullable:
        return None
    if not isinstance(value, str) or (pattern is not None and not pattern.fullmatch(value)):
        what = shape or "text"
        raise Bad(_name(prefix, key), f"must be {what}{' or null' if nullable else ''}, got {kind(value)}")
    return value


def need_bool(doc: dict[str, Any], key: str, prefix: str = "") -> bool:
    value = need(doc, key, prefix)
    if not isinstance(value, bool):
        raise Bad(_name(prefix, key), f"must be true or false, got {kind(value)}")
    return value


def need_dict(doc: dict[str, Any], key: str, *, nullable: bool = False, prefix: str = "") -> dict[str, Any] | None:
    value = need(doc, key, prefix)
    if value is None and nullable:
        return None
    if not isinstance(value, dict):
        raise Bad(_name(prefix, key), f"must be an object{' or null' if nullable else ''}, got {kind(value)}")
    return value


def need_list(doc: dict[str, Any], key: str, prefix: str = "") -> list[Any]:
    value = need(doc, key, prefix)
    if not isinstance(value, list):
        raise Bad(_name(prefix, key), f"must be a list, got {kind(value)}")
    return value


def need_enum(doc: dict[str, Any], key: str, allowed: tuple[str, ...], prefix: str = "") -> str:
    value = need(doc, key, prefix)
    if not isinstance(value, str) or value not in allowed:
        raise Bad(_name(prefix, key), f"is {kind(value)}, not one of {', '.join(allowed)}")
    return value


def check_object(doc: Any, expected_version: int) -> dict[str, Any]:
    """``doc`` is a JSON object carrying ``schema_version`` ``expected_version``."""
    if not isinstance(doc, dict):
        raise Bad(None, f"is {kind(doc)}, not a JSON object")
    version = need(doc, "schema_version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise Bad("schema_version", f"must be an integer, got {kind(version)}")
    if version != expected_version:
        raise OtherVersion(version, expected_version)
    return doc


class _ActionFields(msgspec.Struct):
    schema_version: int
    battle_id: Any = None
    decision_index: Any = None
    state_hash_after: Any = None


class _TurnFields(msgspec.Struct):
    schema_version: int
    battle_id: Any = None
    state_end_hash: Any = None


_LINE_FIELDS = {"actions.jsonl": msgspec.json.Decoder(_ActionFields), "turns.jsonl": msgspec.json.Decoder(_TurnFields)}


def line_fields(name: str, data: bytes, expected_version: int) -> list[dict[str, Any]] | None:
    """The fields a catalog line is rebuilt from of each record of trace file ``name`` (actions:
    battle id, decision index, state hash after; turns: battle id, state end hash; a missing
    one None), decoded without building the rest (about a fifth of the time of parsing each
    record whole); None when a record is not a JSON object of ``expected_version`` with
    well-formed JSON around those fields: parse them whole then, for the error. It takes a few
    malformed values orjson refuses (a number out of float range, invalid UTF-8 in a string
    it skips): for bytes known to be the writer's only (their sha256 is the catalog line's)."""
    try:
        found = _LINE_FIELDS[name].decode_lines(data)
    except (msgspec.DecodeError, RecursionError):
        return None
    if any(record.schema_version != expected_version for record in found):
        return None
    return [msgspec.structs.asdict(record) for record in found]


# --------------------------------------------------------------------------- catalog lines
_FINAL = frozenset(FINAL_STATUSES)
_HASH_NAMES = frozenset(TRACE_FILES)


def _plain_int(value: Any, lo: int) -> bool:
    return type(value) is int and value >= lo


def _catalog_entry_ok(e: Any, expected_version: int) -> bool:
    """The common case in one pass without building messages (a catalog can hold millions
    of lines): True when :func:`check_catalog_entry` would accept ``e``."""
    try:
        if type(e) is not dict or type(e["schema_version"]) is not int or e["schema_version"] != expected_version:
            return False
        battle_id, index, status = e["battle_id"], e["index"], e["status"]
        if type(battle_id) is not str or type(index) is not int or index < 0:
            return False
        if BATTLE_ID.fullmatch(battle_id) is None or type(status) is not str:
            return False
        seed = e["seed"]
        if type(seed) is not int or not 0 <= seed <= MAX_SEED or type(e["battle_tag"]) is not str \
                or not BATTLE_TAG.fullmatch(e["battle_tag"]):
            return False
        codename, hashes, decks = e["codename"], e["weights_hashes"], e["deck_ids"]
        if (codename is not None and type(codename) is not str) or type(hashes) is not list \
                or type(decks) is not list or len(decks) != 2 or type(decks[0]) is not str \
                or type(decks[1]) is not str:
            return False
        for value in hashes:
            if type(value) is not str or not SHA256.fullmatch(value):
                return False
        if status == "started":
            return True
        if status not in _FINAL:
            return False
        winner = e["winner"]
        if (winner is None and status == "finished") or (winner is not None and (type(winner) is not int
                                                                                  or winner not in (0, 1, 2))):
            return False
        if not (_plain_int(e["turns"], 0) and _plain_int(e["decisions"], 0) and type(e["degraded"]) is bool
                and _plain_int(e["policy_warnings"], 0)):
            return False
        peeks = e.get("omniscient_peeks")
        if peeks is not None and not _plain_int(peeks, 0):
            return False
        if "compact_sha256" in e and (type(e["compact_sha256"]) is not str
                                      or not SHA256.fullmatch(e["compact_sha256"])):
            return False
        files = e["files"]
        if type(files) is not dict:
            return False
        for name in _HASH_NAMES:
            value = files[name]
            if type(value) is not str or not SHA256.fullmatch(value):
                return False
        return True
    except (KeyError, TypeError):
        return False


def check_catalog_entry(entry: Any, expected_version: int = 1) -> dict[str, Any]:
    """One catalog line: every field readers use, with its type; final lines (finished,
    abandoned, crashed) also their result fields and the sha256 of each trace file."""
    if _catalog_entry_ok(entry, expected_version):
        return entry
    entry = check_object(entry, expected_version)
    need_str(entry, "battle_id", BATTLE_ID, "a battle id like b000012-0123456789")
    need_int(entry, "index", 0)
    status = need_enum(entry, "status", CATALOG_STATUSES)
    need_int(entry, "seed", 0, MAX_SEED)
    need_str(entry, "battle_tag", BATTLE_TAG, "a battle tag like rl-vs-bot")
    need_str(entry, "codename", nullable=True)
    for i, value in enumerate(need_list(entry, "weights_hashes")):
        if not isinstance(value, str) or not SHA256.fullmatch(value):
            raise Bad(f"weights_hashes[{i}]", f"must be a sha256 hex digest, got {kind(value)}")
    decks = need_list(entry, "deck_ids")
    if len(decks) != 2:
        raise Bad("deck_ids", f"must list 2 deck ids (player 1, player 2), got {len(decks)}")
    for i, value in enumerate(decks):
        if not isinstance(value, str):
            raise Bad(f"deck_ids[{i}]", f"must be a deck id (text), got {kind(value)}")
    if status == "started":
        return entry
    winner = need(entry, "winner")
    allowed = (0, 1, 2) if status == "finished" else (None, 0, 1, 2)
    if isinstance(winner, bool) or winner not in allowed:
        raise Bad("winner", f"must be one of {', '.join('null' if a is None else str(a) for a in allowed)} "
                            f"for a {status} battle, got {kind(winner)}")
    need_int(entry, "turns", 0)
    need_int(entry, "decisions", 0)
    need_bool(entry, "degraded")
    need_int(entry, "policy_warnings", 0)
    if "omniscient_peeks" in entry:
        need_int(entry, "omniscient_peeks", 0, nullable=True)
    files = need_dict(entry, "files")
    for name in TRACE_FILES:
        need_str(files, name, SHA256, "a sha256 hex digest", prefix="files")  # type: ignore[arg-type]
    if "compact_sha256" in entry:
        need_str(entry, "compact_sha256", SHA256, "a sha256 hex digest")
    return entry


# --------------------------------------------------------------------------- manifest
def _check_actor(doc: dict[str, Any], key: str, *, nullable: bool) -> None:
    actor = need_dict(doc, key, nullable=nullable, prefix="configuration")
    if actor is not None:
        need_str(actor, "spec", prefix=f"configuration.{key}")


def check_manifest(doc: Any, expected_version: int = 1) -> dict[str, Any]:
    """A group's ``manifest.json``: identity, versions, configuration and seeds."""
    doc = check_object(doc, expected_version)
    need_str(doc, "group")
    need_str(doc, "created_at")
    need_str(doc, "engine_version")
    need_str(doc, "ruleset")
    need_int(doc, "obs_version", 1)
    need_int(doc, "state_schema_version", 1)
    need_int(doc, "trace_schema_version", 1)
    conf = need_dict(doc, "configuration")
    p1 = need_enum(conf, "p1_actor_type", P1_ACTOR_TYPES, prefix="configuration")  # type: ignore[arg-type]
    _check_actor(conf, "p1_model", nullable=p1 != "rl")  # type: ignore[arg-type]
    _check_actor(conf, "opponent", nullable=False)  # type: ignore[arg-type]
    need_str(conf, "battle_tag", BATTLE_TAG, "a battle tag like rl-vs-bot", prefix="configuration")  # type: ignore
    seeds = need_dict(doc, "seeds")
    mode = need_enum(seeds, "mode", SEED_MODES, prefix="seeds")  # type: ignore[arg-type]
    if mode == "series":
        need_int(seeds, "base_seed", 0, MAX_SEED, prefix="seeds")  # type: ignore[arg-type]
        need_int(seeds, "n_battles", 1, prefix="seeds")  # type: ignore[arg-type]
    need_str(doc, "codename", nullable=True)
    return doc


# --------------------------------------------------------------------------- summary
def check_summary(doc: Any, expected_version: int = 1) -> dict[str, Any]:
    """A group's ``summary.json``: the counts and the readiness block readers show."""
    doc = check_object(doc, expected_version)
    need_str(doc, "group")
    need_str(doc, "updated_at")
    need_int(doc, "battles", 0)
    by_status = need_dict(doc, "by_status")
    for status in (*FINAL_STATUSES, "unfinished"):
        need_int(by_status, status, 0, prefix="by_status")  # type: ignore[arg-type]
    results = need_dict(doc, "results")
    for key in ("p1_wins", "draws", "p2_wins"):
        need_int(results, key, 0, prefix="results")  # type: ignore[arg-type]
    tags = need_dict(doc, "battle_tags")
    for tag in tags:  # type: ignore[union-attr]
        need_int(tags, tag, 0, prefix="battle_tags")  # type: ignore[arg-type]
    for key in ("decisions", "degraded", "policy_warnings", "eligible_battles", "eligible_decisions",
                "distinct_decks"):
        need_int(doc, key, 0)
    for i, value in enumerate(need_list(doc, "weights_hashes")):
        if not isinstance(value, str):
            raise Bad(f"weights_hashes[{i}]", f"must be a sha256 hex digest, got {kind(value)}")
    readiness = need_dict(doc, "readiness")
    need_bool(readiness, "v5_policy_training_ready", prefix="readiness")  # type: ignore[arg-type]
    blockers = need_list(readiness, "v5_policy_blockers", prefix="readiness")  # type: ignore[arg-type]
    for i, value in enumerate(blockers):
        if not isinstance(value, str):
            raise Bad(f"readiness.v5_policy_blockers[{i}]", f"must be text, got {kind(value)}")
    _check_summary_sums(doc)
    return doc


def _check_summary_sums(doc: dict[str, Any]) -> None:
    """The counts of a summary add up (every writer computes them so from the catalog): a
    count edited alone is caught by any reader, without reading the catalog."""
    by_status, finished = doc["by_status"], doc["by_status"]["finished"]
    wins = sum(doc["results"][k] for k in ("p1_wins", "draws", "p2_wins"))
    if wins != finished:
        raise Bad("by_status.finished", f"is {finished}, but results (p1_wins + draws + p2_wins) add up to {wins}")
    tagged = sum(doc["battle_tags"].values())
    if tagged != finished:
        raise Bad("battle_tags", f"add up to {tagged}, but by_status.finished is {finished}")
    total = sum(by_status[s] for s in (*FINAL_STATUSES, "unfinished"))
    if doc["battles"] != total:
        raise Bad("battles", f"is {doc['battles']}, but by_status adds up to {total}")
    if doc["eligible_battles"] > finished:
        raise Bad("eligible_battles", f"is {doc['eligible_battles']}, more than the {finished} finished battles")


# --------------------------------------------------------------------------- group lease
def check_lease(doc: Any, expected_version: int = 1) -> dict[str, Any]:
    """A group's ``lease.json`` (see ownership.py)."""
    doc = check_object(doc, expected_version)
    need_str(doc, "group")
    need_str(doc, "purpose")
    need_int(doc, "owner_pid", 1)
    need_int(doc, "owner_start_time", 0, nullable=True)
    need_str(doc, "owner_host")
    need_str(doc, "codename", nullable=True)
    need_str(doc, "token")
    need_str(doc, "claimed_at")
    need_str(doc, "heartbeat_at")
    stale = need(doc, "stale_after_s")
    if isinstance(stale, bool) or not isinstance(stale, (int, float)) or not stale > 0:
        raise Bad("stale_after_s", f"must be a positive number of seconds, got {kind(stale)}")
    return doc


# --------------------------------------------------------------------------- trace meta
def check_meta(meta: Any, expected_version: int = 1) -> dict[str, Any]:
    """The fields of a trace's ``meta.jsonl`` record that its catalog line is made of."""
    meta = check_object(meta, expected_version)
    need_str(meta, "battle_id", BATTLE_ID, "a battle id like b000012-0123456789")
    need_str(meta, "group")
    need_int(meta, "index", 0)
    need_int(meta, "seed", 0, MAX_SEED)
    need_str(meta, "battle_tag", BATTLE_TAG, "a battle tag like rl-vs-bot")
    need_str(meta, "codename", nullable=True)
    actors = need_dict(meta, "actors")
    for seat in ("p1", "p2"):
        actor = need_dict(actors, seat, prefix="actors")  # type: ignore[arg-type]
        need_str(actor, "weights_hash", SHA256, "a sha256 hex digest", nullable=True,  # type: ignore[arg-type]
                 prefix=f"actors.{seat}")
    decks = need_dict(meta, "deck_ids")
    for seat in ("p1", "p2"):
        need_str(decks, seat, prefix="deck_ids")  # type: ignore[arg-type]
    result = need_dict(meta, "result")
    status = need_enum(result, "status", FINAL_STATUSES, prefix="result")  # type: ignore[arg-type]
    winner = need(result, "winner", "result")  # type: ignore[arg-type]
    allowed = (0, 1, 2) if status == "finished" else (None, 0, 1, 2)
    if isinstance(winner, bool) or winner not in allowed:
        raise Bad("result.winner", f"must be one of {', '.join('null' if a is None else str(a) for a in allowed)} "
                                   f"for a {status} battle, got {kind(winner)}")
    need_int(result, "turns", 0, prefix="result")  # type: ignore[arg-type]
    need_int(result, "decisions", 0, prefix="result")  # type: ignore[arg-type]
    need_str(result, "final_state_hash", SHA256, "a sha256 hex digest", prefix="result")  # type: ignore[arg-type]
    need_bool(meta, "degraded")
    need_list(meta, "policy_warnings")
    need_list(meta, "omniscient_peeks")
    return meta
