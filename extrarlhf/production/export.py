"""``export_production_v5_dataset``: production battles of a window -> a pseudonymized V5 dataset.

1. The gate (gate.py) is checked first: closed, nothing else happens (no connection).
2. The window is checked: timezone-aware instants, ``start_at < end_at``, and a cut-off
   ``ingested_before`` not before ``end_at`` (rows ingested later are invisible to the export,
   so a status or action that arrives late never changes what an export saw).
3. One snapshot, two keyset-paged streams (reader.py), merged per battle; each battle is
   replayed by the engine into V5 rows on worker processes (replay.py); ids become keyed
   pseudonyms before anything is written.
4. Tables: ``decisions``, ``turns``, ``battles`` (the local V5 layout, so every reader and
   trainer of local datasets reads them), ``excluded`` (reason per battle),
   ``production_battles`` (kinds, pseudonyms, audit times and the TimeStamp labels of every
   battle read), ``metronome`` (one row per human decision with a plausible observed think
   time: ``policy.min_decision_ms <= decision_ms <= policy.max_decision_ms``, default 50 ms to
   15 min) and ``metronome_excluded`` (the other observed think times, kept for audit with
   their reason, counted in the manifest's ``labels``, never labels).
5. The row ceiling (``max_rows`` per raw stream, at most 1,000,000) stops the export: the
   result says ``complete: false, stop_reason: "row_ceiling"`` and the stream, and nothing is
   published unless ``publish_incomplete=true`` (then for inspection only: never ready).
6. Publication as for local datasets: a fresh version built in a temp folder, validated,
   renamed into place (publish.py); a killed export leaves no half version. A build identical
   to the latest version is not published: that version is reused (``reused: true``), and a
   complete export, published or reused, moves the ``<name>.complete`` pointer (versions.py).

Memory holds a page per stream, a bounded queue of battles, the chunks in flight on the
workers and one row group per table: it does not grow with the window.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

import orjson

import engine

from ..core.errors import Cancelled, InvalidArgument
from ..core.readiness import ReadinessPolicy, contour_readiness
from ..datasets.manifest import write_manifest
from ..datasets.materialize import TASK_BATTLES, TableBuilder, auto_workers, short_readiness
from ..datasets.paths import DatasetsDir, check_dataset_name, check_pointer_name, check_positive_int
from ..datasets.pointers import PointerStep
from ..core.procpool import map_chunks
from ..datasets.publish import publish_version
from ..datasets.validate import DecisionChecks, validate_dir
from .gate import ProductionAccess, open_gate
from .pseudonyms import PSEUDONYM_RULE, battle_key, player_pseudonym
from .reader import MAX_ROWS, SETTLE_S, SnapshotReader, Window
from .replay import BattleRecord, plausible_labels
from .versions import Reused, complete_step, identical_version, latest_complete

__all__ = ["export_production_v5_dataset", "parse_instant", "check_window"]

DEFAULT_ROW_GROUP_ROWS = 4096
DETAIL = {
    "unfinished": "unfinished in the snapshot", "unknown_ruleset": "a ruleset this engine does not play",
    "invalid_record": "a setup the engine refuses", "missing_actions": "action rows missing",
    "illegal_action": "an action the rules do not allow", "winner_mismatch": "replayed winner differs",
    "turns_mismatch": "replayed turn count differs",
}


def parse_instant(value: Any, what: str) -> datetime:
    """A timezone-aware instant from a datetime or an ISO 8601 string; naive ones are refused."""
    if isinstance(value, str):
        text = value.strip()
        try:
            value = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
        except ValueError:
            raise InvalidArgument(f"{what} must be an ISO 8601 instant with a timezone, e.g. "
                                  f"2026-11-01T00:00:00Z; got {text[:40]!r}") from None
    if not isinstance(value, datetime):
        raise InvalidArgument(f"{what} must be an ISO 8601 instant with a timezone, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidArgument(f"{what} has no timezone; give one (e.g. 2026-11-01T00:00:00Z or +01:00) so the "
                              f"window means the same everywhere")
    return value.astimezone(timezone.utc)


def check_window(start_at: Any, end_at: Any, ingested_before: Any) -> Window:
    """The export window, checked (see the module docstring)."""
    end = parse_instant(end_at, "end_at")
    start = None if start_at is None else parse_instant(start_at, "start_at")
    if start is not None and end <= start:
        raise InvalidArgument(f"the window is empty: end_at {_iso(end)} is not after start_at {_iso(start)}")
    cut = None if ingested_before is None else parse_instant(ingested_before, "ingested_before")
    if cut is not None and cut < end:
        raise InvalidArgument(f"ingested_before {_iso(cut)} is before end_at {_iso(end)}: battles that finished "
                              f"after it could not have been ingested, so the end of the window would be silently "
                              f"empty; use an ingested_before at or after end_at (or omit it: 60 s before the snapshot, recorded in the manifest)")
    return Window(start, end, cut)


def check_max_rows(max_rows: Any) -> int:
    if max_rows is None:
        return MAX_ROWS
    check_positive_int(max_rows, "max_rows")
    if max_rows > MAX_ROWS:
        raise InvalidArgument(f"max_rows {max_rows} is above the ceiling of {MAX_ROWS:,} rows per raw stream; "
                              f"export a shorter window instead")
    return max_rows


def _iso(t: datetime | None) -> str | None:
    return None if t is None else t.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def _records(reader: SnapshotReader, access: ProductionAccess) -> Iterator[BattleRecord]:
    """Battle records with keyed ids: raw player and battle ids stop here."""
    salt = access.salt
    for index, (b, actions) in enumerate(reader.battles()):
        decks = tuple(orjson.loads(d) if isinstance(d, (str, bytes)) else d for d in (b["p1_deck"], b["p2_deck"]))
        finished = b["finished_at"] is not None
        yield BattleRecord(
            index=index, key=battle_key(salt, b["battle_id"]), ruleset=b["ruleset"], seed=b["seed"],
            decks=decks, deck_ids=(b["p1_deck_id"], b["p2_deck_id"]), starting_player=b["starting_player"],
            kinds=(b["p1_kind"], b["p2_kind"]),
            players=(player_pseudonym(salt, b["p1_player_id"]), player_pseudonym(salt, b["p2_player_id"])),
            finished=finished, winner=b["winner"], turns=b["turns"],
            actions=[tuple(a)[1:] for a in actions],  # reader.ACTION_COLUMNS after battle_id
            audit=(b["started_at"], b["finished_at"], b["ingested_at"], b["duration_seconds"]))


def _battle_row(record: BattleRecord, included: bool) -> dict[str, Any]:
    started, finished, ingested, duration = record.audit
    return {"battle_id": record.key, "included": included, "p1_kind": record.kinds[0], "p2_kind": record.kinds[1],
            "p1_player": record.players[0], "p2_player": record.players[1], "p1_deck_id": record.deck_ids[0],
            "p2_deck_id": record.deck_ids[1], "starting_player": record.starting_player, "started_at": started,
            "finished_at": finished, "ingested_at": ingested, "duration_seconds": duration,
            "recorded_winner": record.winner, "recorded_turns": record.turns, "actions": len(record.actions)}


class _Stopped(Exception):
    """The row ceiling was hit and an incomplete export is not to be published."""


def export_production_v5_dataset(end_at: Any, *, name: str, start_at: Any = None, ingested_before: Any = None,
                                 datasets_dir: str | Path | DatasetsDir = "datasets", max_rows: int | None = None,
                                 overwrite: bool = False, promote: str | None = None,
                                 publish_incomplete: bool = False, policy: ReadinessPolicy | dict | None = None,
                                 workers: int | None = None, row_group_rows: int = DEFAULT_ROW_GROUP_ROWS,
                                 page_rows: int | None = None, environ: dict[str, str] | None = None,
                                 progress: Callable[[int, int], None] | None = None,
                                 cancel: Callable[[], bool] | None = None) -> dict[str, Any]:
    """Export the production battles of a window as a new pseudonymized V5 dataset version
    ``<name>/v<N>`` (see the module docstring). Returns the dataset id, path, row counts,
    exclusions, readiness, completeness and per-stream row counts, ``reused`` (the latest
    version held exactly this: it is the result, no version was written) and
    ``latest_complete`` (the ``<name>.complete`` pointer's version after the export, or None);
    an export stopped by the row ceiling returns ``published: false`` with the reason unless
    ``publish_incomplete``."""
    access = open_gate(environ)
    window = check_window(start_at, end_at, ingested_before)
    name = check_dataset_name(name)
    ceiling = check_max_rows(max_rows)
    if promote is not None:
        check_pointer_name(promote)
    if not isinstance(publish_incomplete, bool):
        raise InvalidArgument(f"publish_incomplete must be true or false, got {publish_incomplete!r}")
    if workers is not None:
        auto_workers(workers, 0)
    check_positive_int(row_group_rows, "row_group_rows")
    pages = {} if page_rows is None else {"battle_page_rows": check_positive_int(page_rows, "page_rows"),
                                          "action_page_rows": page_rows}
    policy = ReadinessPolicy.coerce(policy)
    if policy.min_decision_ms > policy.max_decision_ms:
        raise InvalidArgument(f"readiness policy min_decision_ms ({policy.min_decision_ms}) is above max_decision_ms "
                              f"({policy.max_decision_ms}): no think time would be a plausible Metronome label")
    dirs = datasets_dir if isinstance(datasets_dir, DatasetsDir) else DatasetsDir(datasets_dir)
    checks = DecisionChecks(engine.OBS_VERSION)
    facts: dict[str, Any] = {}

    # the pointers' places are checked before any work; they are written for a complete export only
    pointer = PointerStep(dirs, promote, name, when=lambda built: built["complete"]) if promote else None
    complete = complete_step(dirs, name)
    reader = SnapshotReader(access, window, max_rows=ceiling, cancel=cancel, **pages)  # it cancels its statements

    def build(folder: Path, dataset_id: str, version: int) -> dict[str, Any]:
        builder = TableBuilder(folder, row_group_rows, checks,
                               layouts={"decisions": "decisions", "turns": "turns", "battles": "battles",
                                        "metronome": "metronome", "metronome_excluded": "metronome_excluded",
                                        "excluded": "production_excluded",
                                        "production_battles": "production_battles"},
                               row_tables=("excluded", "production_battles"))
        with builder:  # any error (or an export stopped by the row ceiling) aborts the writers
            with reader:
                labels = {"metronome": 0, "timestamp": 0}
                implausible: Counter[str] = Counter()
                done = 0
                records = _records(reader, access)
                total = snapshot["battles"]
                for chunk, (outcomes, batches) in map_chunks(records, auto_workers(workers, total), TASK_BATTLES,
                                                              task="extrarlhf.production.replay:replay_chunk"):
                    for record, excluded in zip(chunk, outcomes):
                        builder.add_row("production_battles", _battle_row(record, excluded is None))
                        if excluded is None:
                            labels["timestamp"] += record.audit[3] is not None
                        else:
                            builder.exclude({"battle_id": record.key, "reason": excluded[0], "detail": excluded[1],
                                             "p1_kind": record.kinds[0], "p2_kind": record.kinds[1],
                                             "actions": len(record.actions)})
                    batches["metronome"], batches["metronome_excluded"] = plausible_labels(
                        batches["metronome"], policy.min_decision_ms, policy.max_decision_ms)
                    labels["metronome"] += batches["metronome"].num_rows
                    implausible.update(batches["metronome_excluded"].column("reason").to_pylist())
                    builder.add(batches)
                    done += len(chunk)
                    if progress:
                        progress(done, max(total, done))
                    if cancel is not None and cancel():
                        raise Cancelled(f"production export {name} cancelled after {done} battles; nothing was "
                                        f"published")
                    if reader.ceiling and not publish_incomplete:
                        break
                streams = reader.stream_report()
                stopped_on = reader.ceiling
            facts["streams"] = streams
            if stopped_on and not publish_incomplete:
                facts["stopped_on"] = stopped_on
                raise _Stopped()
            tables = builder.close()
        complete = stopped_on is None
        evidence = {"source_kind": "production", "eligible_battles": builder.included,
                    "eligible_decisions": builder.decisions_total, "distinct_decks": len(builder.decks),
                    "human_vs_human_battles": builder.hvh, "human_vs_human_decks": len(builder.hvh_decks),
                    "metronome_labels": labels["metronome"], "timestamp_labels": labels["timestamp"],
                    "integrity_failures": [] if complete else [
                        f"incomplete export: the row ceiling ({ceiling:,} rows) was hit on stream {stopped_on}; an "
                        f"incomplete export is never training-ready (export a shorter window)"]}
        readiness = contour_readiness(evidence, policy)
        label_counts = {"metronome_decisions": labels["metronome"], "timestamp_durations": labels["timestamp"],
                        "metronome_excluded": {"count": sum(implausible.values()),
                                               "by_reason": dict(sorted(implausible.items())),
                                               "table": "metronome_excluded",
                                               "min_decision_ms": policy.min_decision_ms,
                                               "max_decision_ms": policy.max_decision_ms}}
        exclusions = {"count": sum(builder.excluded_reasons.values()),
                      "by_reason": dict(sorted(builder.excluded_reasons.items())), "table": "excluded",
                      "replay_verified": builder.included}
        production = {"window": {"start_at": _iso(window.start_at), "end_at": _iso(window.end_at),
                                 "ingested_before": facts["ingested_before"],
                                 "ingested_before_is_default": window.ingested_before is None,
                                 "settle_seconds": SETTLE_S if window.ingested_before is None else None},
                      "snapshot_at": facts["snapshot_at"], "streams": streams, "complete": complete,
                      "stop_reason": None if complete else "row_ceiling", "stopped_stream": stopped_on,
                      "max_rows": ceiling,
                      "memory": "streamed: a page per stream, a bounded queue of battles, the chunks on the "
                                "workers and one row group per table (nothing holds the window)"}
        manifest = write_manifest(
            folder, dataset_id=dataset_id, name=name, version=version, kind="v5_decisions", tables=tables,
            sources={"kind": "production", "database": "production (read-only snapshot; DSN not recorded)",
                     "window": production["window"], "snapshot_at": facts["snapshot_at"]},
            readiness=readiness,
            extra={"exclusions": exclusions, "battle_tags": dict(sorted(builder.tags.items())),
                   "replay_unverified_battles": builder.replay_failures, "production": production,
                   "pseudonymized": True, "anonymous": False, "pseudonym_key_id": access.key_id,
                   "pseudonym_rule": PSEUDONYM_RULE, "complete": complete,
                   "stop_reason": production["stop_reason"],
                   "labels": label_counts,
                   "options": {"row_group_rows": row_group_rows, "max_rows": ceiling}})
        built = {"kind": "v5_decisions", "row_counts": manifest["row_counts"], "exclusions": exclusions,
                 "labels": label_counts,
                 "readiness": short_readiness(readiness), "complete": complete,
                 "stop_reason": production["stop_reason"], "stopped_stream": stopped_on, "streams": streams,
                 "window": production["window"], "snapshot_at": facts["snapshot_at"],
                 "pseudonym_key_id": access.key_id, "pseudonymized": True, "anonymous": False}
        same = identical_version(dirs, name, manifest, lambda path: validate_dir(path, decisions=checks))
        if same:
            raise Reused(*same, built)
        return built

    def pointers(path: Path, built: dict[str, Any], version: int) -> None:
        if pointer:
            pointer(path, built, version)
        complete(path, built, version)

    try:  # connect, check the schema and take the snapshot before anything is written
        snapshot = reader.start()
        facts["snapshot_at"] = _iso(snapshot["snapshot_at"])
        facts["ingested_before"] = _iso(snapshot["ingested_before"])
        result = {**publish_version(dirs, name, build, overwrite=overwrite,
                                    validate=lambda folder: validate_dir(folder, decisions=checks),
                                    before_commit=pointers), "reused": False}
    except Reused as same:
        pointers(same.path, same.result, same.version)
        result = same.publication(name)
    except _Stopped:
        stream = facts["stopped_on"]
        return {"published": False, "complete": False, "stop_reason": "row_ceiling", "stopped_stream": stream,
                "streams": facts["streams"], "snapshot_at": facts.get("snapshot_at"), "max_rows": ceiling,
                "window": {"start_at": _iso(window.start_at), "end_at": _iso(window.end_at),
                           "ingested_before": facts.get("ingested_before") or _iso(window.ingested_before)},
                "message": f"stopped: stream {stream} has more than {ceiling:,} rows in this window (the row "
                           f"ceiling); nothing was published. Export a shorter window, or pass "
                           f"publish_incomplete=true to keep an incomplete, never-ready export for inspection",
                "latest_complete": latest_complete(dirs, name)}
    finally:
        reader.close()
    result["published"] = True
    result["pointer"] = pointer.doc if pointer else None
    result["latest_complete"] = latest_complete(dirs, name)
    return result
