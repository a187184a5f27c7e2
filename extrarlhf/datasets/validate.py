"""``validate_dataset``: re-check a dataset version against its manifest and its invariants.

Every failed check becomes one entry ``{"code", "message", ...context}`` (at most
``MAX_PER_CODE`` per code, then one entry saying how many more), so a report says exactly
what is wrong, not merely that something is. Checks, in order:

- manifest: present, valid JSON, a known ``schema_version`` and ``kind``, the expected
  ``dataset_id`` (``manifest_unreadable``, ``unknown_kind``, ``dataset_id_mismatch``);
- files: every listed file exists and hashes to its sha256; no unlisted file
  (``file_missing``, ``file_hash_mismatch``, ``unexpected_file``);
- tables: readable Parquet whose columns equal both the code's schema for the table and the
  manifest's description; row counts equal the manifest's (``parquet_unreadable``,
  ``schema_mismatch``, ``row_count_mismatch``);
- V5 decisions datasets: every chosen action is legal and sits at ``action_index``, one
  feature row per legal action, the observation layout is the manifest's, decision indexes
  run 0..n-1 contiguously per battle, every battle's decision and turn rows match its
  ``battles`` row, no battle twice, and no degraded, unfinished or excluded battle in a
  training table (``chosen_action_not_legal``, ``action_index_mismatch``,
  ``legal_features_mismatch``, ``obs_version_mismatch``, ``decision_index_not_contiguous``,
  ``battle_rows_mismatch``, ``orphan_rows``, ``duplicate_battle``,
  ``degraded_battle_in_training_table``, ``peeked_battle_in_training_table``,
  ``unfinished_battle_in_training_table``,
  ``excluded_battle_in_training_table``, ``exclusions_mismatch``);
- splits: every group key is assigned to exactly one split, its recorded bucket and split
  equal the keyed hash recomputed from the manifest, every row sits in its group's split
  and the per-group row counts add up (``group_straddles_splits``, ``assignment_mismatch``,
  ``row_in_wrong_split``, ``split_rows_mismatch``); Nemesis Standard holds
  human-vs-human rows only (``non_human_row_in_standard``); ReturnClock splits hold
  survival-ready rows only (``returnclock_row_invalid``);
- TimeStamp datasets: the rows carry the dataset's own keys (one written before they did is
  refused: its keys join the source export, labels included); inputs, labels and audit hold
  the same battles in the same order; every duration is > 0; the decks are legal and the
  starting player 1 or 2; every deck-derived input (deck ids and the prebattle features,
  datasets/prebattle.py) is what the decks give, so a label written under an approved
  feature's name is refused even with the manifest's hashes redone, naming the feature and
  its first row (``timestamp_rows_not_keyed``, ``timestamp_rows_mismatch``,
  ``timestamp_label_invalid``, ``timestamp_input_invalid``, ``timestamp_feature_mismatch``);
- ReturnClock exports: every row is survival-ready, ``event`` agrees with ``next_start``,
  ``duration_seconds`` is ``next_start - ended_at`` (event) or ``end_at - ended_at``
  (censored), ``treated`` agrees with ``treatments``, ``treatment`` and ``exposed``, no
  ``session_seconds`` is negative (``returnclock_row_invalid``), and the manifest's counts are the rows'
  (``returnclock_counts_mismatch``).
"""

from __future__ import annotations

import os
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import engine

from ..core.errors import InvalidArgument, RLHFError, ValidationFailed
from .assign import bucket, split_of
from .manifest import KINDS, MANIFEST, read_manifest
from .paths import DatasetsDir
from .pointers import resolve
from .prebattle import DERIVED_INPUTS, derived_inputs
from .row_batches import numpy_values
from .tables import SCHEMAS, TABLES, describe_columns, iter_batches, schema_types, sha256_file

MAX_PER_CODE = 20

__all__ = ["validate_dataset", "validate_dir", "validated_source", "DecisionChecks", "MAX_PER_CODE"]


class _Report:
    def __init__(self) -> None:
        self.failures: list[dict[str, Any]] = []
        self.counts: Counter = Counter()

    def add(self, code: str, message: str, **context: Any) -> None:
        self.counts[code] += 1
        if self.counts[code] <= MAX_PER_CODE:
            self.failures.append({"code": code, "message": message, **context})

    def finish(self) -> list[dict[str, Any]]:
        for code, n in sorted(self.counts.items()):
            if n > MAX_PER_CODE:
                self.failures.append({"code": code, "message": f"{n - MAX_PER_CODE} more {code} failures not listed",
                                      "more": n - MAX_PER_CODE})
        return self.failures


class DecisionChecks:
    """The row checks of a ``decisions`` table, fed one record batch at a time: from the file
    (``validate_dir``), or from the very batches a materialization writes, so publication
    need not read the table back (its bytes are still checked against the manifest's sha256)."""

    COLUMNS = ["battle_id", "decision_index", "legal_action_ids", "legal_action_features", "action_id",
               "action_index", "obs_version"]

    def __init__(self, obs_version: Any) -> None:
        self.obs_version = obs_version
        self.report = _Report()
        self.rows_per_battle: dict[str, int] = {}
        self._current: str | None = None
        self._next_index = 0

    def report_into(self, report: _Report) -> None:
        for failure in self.report.failures:
            report.add(**failure)
        for code, n in self.report.counts.items():
            report.counts[code] += max(0, n - MAX_PER_CODE)  # the ones not listed still count

    def feed(self, batch: Any) -> None:
        report = self.report
        legal = batch.column("legal_action_ids")
        offsets = numpy_values(legal.offsets)  # (numpy_values: to_numpy imports pandas on a first call)
        # the list's own values (``flatten()`` would do, but imports pyarrow.compute: slow on a first call)
        values = numpy_values(legal.values)[offsets[0]:offsets[-1]].astype(np.int64)
        offsets = offsets - offsets[0]
        lengths = np.diff(offsets)
        n = batch.num_rows
        action = numpy_values(batch.column("action_id")).astype(np.int64)
        index = numpy_values(batch.column("action_index")).astype(np.int64)
        segment = np.repeat(np.arange(n), lengths)
        member = np.bincount(segment, weights=(values == np.repeat(action, lengths)), minlength=n) > 0
        in_range = (index >= 0) & (index < lengths)
        if len(values):
            at = np.minimum(offsets[:-1] + np.clip(index, 0, None), len(values) - 1)
            index_ok = in_range & (values[at] == action)
        else:
            index_ok = np.zeros(n, dtype=bool)
        feature_lengths = np.diff(numpy_values(batch.column("legal_action_features").offsets))
        obs_ok = numpy_values(batch.column("obs_version")) == self.obs_version
        ids = batch.column("battle_id").to_pylist()
        dec_index = batch.column("decision_index").to_pylist()
        bad_rows = np.flatnonzero(~member | ~index_ok | (feature_lengths != lengths) | ~obs_ok | (lengths == 0))
        for row in bad_rows.tolist():
            where = {"battle_id": ids[row], "decision_index": dec_index[row], "table": "decisions"}
            if lengths[row] == 0:
                report.add("chosen_action_not_legal", f"battle {ids[row]} decision {dec_index[row]}: no legal "
                                                      f"actions recorded", **where)
            elif not member[row]:
                report.add("chosen_action_not_legal", f"battle {ids[row]} decision {dec_index[row]}: chosen action "
                                                      f"{int(action[row])} is not among the legal actions "
                                                      f"{values[offsets[row]:offsets[row + 1]].tolist()}", **where)
            elif not index_ok[row]:
                report.add("action_index_mismatch", f"battle {ids[row]} decision {dec_index[row]}: action_index "
                                                    f"{int(index[row])} does not point at action {int(action[row])}",
                           **where)
            if feature_lengths[row] != lengths[row]:
                report.add("legal_features_mismatch", f"battle {ids[row]} decision {dec_index[row]}: "
                                                      f"{int(feature_lengths[row])} feature rows for "
                                                      f"{int(lengths[row])} legal actions", **where)
            if not obs_ok[row]:
                report.add("obs_version_mismatch", f"battle {ids[row]} decision {dec_index[row]}: obs_version "
                                                   f"differs from the manifest's {self.obs_version}", **where)
        rows = self.rows_per_battle
        for bid, di in zip(ids, dec_index):
            if bid != self._current:
                if bid in rows:  # seen before, and not the battle just read: it reappears
                    report.add("decision_index_not_contiguous", f"battle {bid}: its decisions are not in one run "
                                                                f"(the battle reappears after others)", battle_id=bid)
                self._current, self._next_index = bid, 0
            if di != self._next_index:
                report.add("decision_index_not_contiguous", f"battle {bid}: decision_index {di} where "
                                                            f"{self._next_index} was expected (0..n-1 in order)",
                           battle_id=bid, decision_index=di)
            self._next_index = di + 1
            rows[bid] = rows.get(bid, 0) + 1


def validate_dir(folder: Path, *, expected_id: str | None = None,
                 decisions: DecisionChecks | None = None) -> list[dict[str, Any]]:
    """Every failed check of the dataset in ``folder`` (empty: valid). ``decisions``: the row
    checks of the decisions table already run on the batches written (else read from the file)."""
    report = _Report()
    try:
        manifest = read_manifest(folder)
    except RLHFError as exc:
        report.add("manifest_unreadable", str(exc), file=MANIFEST)
        return report.finish()
    if manifest.get("kind") not in KINDS:
        report.add("unknown_kind", f"manifest kind {manifest.get('kind')!r} is not one of {list(KINDS)}")
        return report.finish()
    if expected_id is not None and manifest.get("dataset_id") != expected_id:
        report.add("dataset_id_mismatch", f"manifest names {manifest.get('dataset_id')!r} but the folder is "
                                          f"{expected_id!r} (a version copied or renamed by hand)")
    healthy = _check_files(folder, manifest, report)
    tables = {logical: info for logical, info in manifest.get("tables", {}).items() if logical in healthy}
    if manifest["kind"] == "v5_decisions":
        if {"decisions", "battles", "turns", "excluded"} <= set(tables):
            _check_v5(folder, manifest, report, decisions)
    elif manifest["kind"] == "timestamp":
        if {"inputs", "labels", "audit"} <= set(tables):
            _check_timestamp(folder, manifest, report)
    elif manifest["kind"] == "returnclock_export":
        if {"returnclock", "excluded"} <= set(tables):
            _check_returnclock(folder, manifest, report)
    elif manifest["kind"] == "preference_pairs":
        if {"train", "val", "test"} <= set(tables):
            _check_preferences(folder, report)
    else:
        if {"train", "val", "test", "assignments"} <= set(tables):
            _check_split(folder, manifest, report)
    return report.finish()


def _check_preferences(folder: Path, report: _Report) -> None:
    """Each judgment is A, B or tie between two different actions, once per task and judge, with
    finite features; a battle's decision points are in one split only."""
    split_of_battle: dict[str, str] = {}
    judged: set[tuple[str, str]] = set()
    for split in ("train", "val", "test"):
        table = _read(folder / f"{split}.parquet", ["battle_id", "task_id", "judge", "choice", "a_action_id",
                                                    "b_action_id", "observation", "a_features", "b_features"])
        for column in ("observation", "a_features", "b_features"):
            values = table.column(column).combine_chunks().flatten().to_numpy(zero_copy_only=False)
            if values.size and not np.isfinite(values).all():
                report.add("preference_features_not_finite", f"{split}: {column} holds NaN or infinite values",
                           file=f"{split}.parquet")
        rows = zip(*(table.column(c).to_pylist() for c in ("battle_id", "task_id", "judge", "choice", "a_action_id",
                                                           "b_action_id")))
        for bid, task, judge, choice, a, b in rows:
            if choice not in ("A", "B", "tie"):
                report.add("preference_choice_invalid", f"{split}: task {task} has choice {choice!r} (A, B or tie)")
            if a == b:
                report.add("preference_candidates_equal", f"{split}: task {task} compares action {a} with itself")
            if (task, judge) in judged:
                report.add("preference_judged_twice", f"{split}: task {task} has two judgments by one judge")
            judged.add((task, judge))
            if split_of_battle.setdefault(bid, split) != split:
                report.add("battle_straddles_splits", f"battle {bid} has decision points in "
                                                      f"{split_of_battle[bid]} and {split}")


def _check_timestamp(folder: Path, manifest: dict[str, Any], report: _Report) -> None:
    """Keyed rows; inputs, labels and audit hold the same battles in the same order; durations
    are > 0; the deck-derived inputs are what the decks give."""
    if not isinstance((manifest.get("timestamp") or {}).get("row_key"), dict):
        report.add("timestamp_rows_not_keyed", "this TimeStamp dataset was written before its rows had keys of their "
                                               "own: its battle_id is the source export's battle key, and the source "
                                               "holds the labels (one join gives them back); re-export it with "
                                               "export_timestamp_dataset")
    keys = {t: _read(folder / f"{t}.parquet", ["battle_id"]).column("battle_id").to_pylist()
            for t in ("inputs", "labels", "audit")}
    for table in ("labels", "audit"):
        if keys[table] != keys["inputs"]:
            report.add("timestamp_rows_mismatch", f"{table}.parquet does not hold the battles of inputs.parquet in "
                                                  f"the same order", table=table)
    durations = _read(folder / "labels.parquet", ["duration_seconds"]).column("duration_seconds").to_pylist()
    bad = sum(1 for d in durations if d is None or d <= 0)
    if bad:
        report.add("timestamp_label_invalid", f"{bad} labels have a duration_seconds that is not > 0", table="labels")
    _check_timestamp_inputs(folder, report)


def _legal_deck(deck: tuple[int, ...], seen: dict[tuple[int, ...], bool]) -> bool:
    if deck not in seen:
        try:
            engine.validate_deck(list(deck))
            seen[deck] = True
        except engine.DeckError:
            seen[deck] = False
    return seen[deck]


def _check_timestamp_inputs(folder: Path, report: _Report) -> None:
    """Recompute every deck-derived input from the decks (prebattle.derived_inputs) and refuse
    any other value, with the feature and its first mismatching row."""
    first: dict[str, tuple[int, Any, Any, Any]] = {}
    wrong: Counter = Counter()
    legal: dict[tuple[int, ...], bool] = {}
    offset = 0
    columns = ["battle_id", "p1_deck", "p2_deck", "starting_player", *DERIVED_INPUTS]
    for batch in iter_batches(folder / "inputs.parquet", columns, 65536):
        data = batch.to_pydict()
        ok = []
        for i, (key, p1, p2, starting) in enumerate(zip(data["battle_id"], data["p1_deck"], data["p2_deck"],
                                                        data["starting_player"])):
            if _legal_deck(tuple(p1), legal) and _legal_deck(tuple(p2), legal) and starting in (1, 2):
                ok.append(i)
            else:
                report.add("timestamp_input_invalid", f"inputs.parquet row {offset + i} (battle_id {key}): its decks "
                                                      f"are not legal {engine.RULESET} decks or its starting_player "
                                                      f"{starting!r} is not 1 or 2", table="inputs", row=offset + i)
        want = derived_inputs([data["p1_deck"][i] for i in ok], [data["p2_deck"][i] for i in ok])
        for name in DERIVED_INPUTS:
            got = np.asarray([data[name][i] for i in ok], dtype=object)
            for j in np.flatnonzero(got != np.asarray(want[name], dtype=object)).tolist():
                wrong[name] += 1
                if name not in first:
                    i = ok[j]
                    first[name] = (offset + i, data["battle_id"][i], data[name][i], want[name][j])
        offset += batch.num_rows
    for name, (row, key, got, want) in first.items():
        report.add("timestamp_feature_mismatch", f"inputs.parquet: {name} is not what the decks give in "
                                                 f"{wrong[name]} row(s), first row {row} (battle_id {key}): {got!r} "
                                                 f"where its decks give {want!r}. An approved input must be what its "
                                                 f"definition computes from the decks (a label under a feature's "
                                                 f"name?); re-export the dataset with export_timestamp_dataset",
                   table="inputs", feature=name, row=row)


def _survival_failures(batch: Any) -> int:
    """Rows a survival fitter would refuse: ``duration_seconds`` not > 0 or ``event`` not 0/1."""
    bad = pc.or_kleene(pc.invert(pc.greater(batch.column("duration_seconds"), 0)),
                       pc.invert(pc.is_in(batch.column("event"), value_set=pa.array([0, 1], pa.int8()))))
    return pc.sum(pc.fill_null(bad, True).cast(pa.int64())).as_py() or 0


def _check_returnclock(folder: Path, manifest: dict[str, Any], report: _Report) -> None:
    """Every row obeys the ReturnClock definition (production/returnclock.py) as far as the row
    itself can tell, and the counts in the manifest are the rows' counts."""
    window = ((manifest.get("production") or {}).get("window") or {})
    try:
        end_us = int(datetime.fromisoformat(window["end_at"].replace("Z", "+00:00")).timestamp() * 1_000_000)
    except (KeyError, AttributeError, TypeError, ValueError):
        report.add("manifest_unreadable", "the manifest's production.window.end_at is missing or not an instant")
        return
    checks = {
        "survival": "duration_seconds is not > 0 or event is not 0/1",
        "event": "event = 1 without a next_start, or a next_start with event = 0",
        "duration": "duration_seconds is not next_start - ended_at (event) or end_at - ended_at (censored)",
        "treated": "treated disagrees with treatments > 0, treatment or exposed",
        "session": "session_seconds < 0 (a session that ended before it started gives no row)",
    }
    bad = dict.fromkeys(checks, 0)
    counts = dict.fromkeys(("rows", "events", "treated_rows", "exposed_rows"), 0)
    for batch in iter_batches(folder / "returnclock.parquet", None, 65536):
        bad["survival"] += _survival_failures(batch)
        bad["session"] += _true(pc.less(batch.column("session_seconds"), 0))
        event = pc.equal(batch.column("event"), 1)
        has_next = pc.is_valid(batch.column("next_start"))
        bad["event"] += _true(pc.not_equal(event, has_next))
        ended = batch.column("ended_at").cast(pa.int64())
        stop = pc.if_else(has_next, batch.column("next_start").cast(pa.int64()), end_us)
        want = pc.divide(pc.subtract(stop, ended), 1e6)
        bad["duration"] += _true(pc.greater(pc.abs(pc.subtract(batch.column("duration_seconds"), want)), 1e-6))
        treated = batch.column("treated")
        bad["treated"] += _true(pc.or_(pc.or_(pc.not_equal(treated, pc.greater(batch.column("treatments"), 0)),
                                              pc.not_equal(treated, pc.is_valid(batch.column("treatment")))),
                                       pc.and_(batch.column("exposed"), pc.invert(treated))))
        counts["rows"] += batch.num_rows
        counts["events"] += _true(event)
        counts["treated_rows"] += _true(treated)
        counts["exposed_rows"] += _true(batch.column("exposed"))
    for check, rows in bad.items():
        if rows:
            report.add("returnclock_row_invalid", f"{rows} returnclock rows: {checks[check]}", table="returnclock",
                       check=check)
    recorded = (manifest.get("returnclock") or {}).get("counts") or {}
    for name, value in counts.items():
        if recorded.get(name) != value:
            report.add("returnclock_counts_mismatch", f"the manifest counts {recorded.get(name)} {name}, the rows "
                                                      f"hold {value}", field=name)


def _true(mask: Any) -> int:
    return pc.sum(pc.fill_null(mask, True).cast(pa.int64())).as_py() or 0


def _check_files(folder: Path, manifest: dict[str, Any], report: _Report) -> set[str]:
    files = manifest.get("files") or {}
    for name, sha in sorted(files.items()):
        path = folder / name
        if not path.is_file():
            report.add("file_missing", f"{name} is listed in the manifest but missing", file=name)
        elif (actual := sha256_file(path)) != sha:
            report.add("file_hash_mismatch", f"{name}: sha256 {actual} does not match the manifest's {sha}",
                       file=name, expected=sha, actual=actual)
    for entry in sorted(os.listdir(folder)):
        if entry != MANIFEST and entry not in files:
            report.add("unexpected_file", f"{entry} is not listed in the manifest", file=entry)
    healthy = set()
    for logical, info in sorted((manifest.get("tables") or {}).items()):
        path = folder / info["file"]
        if not path.is_file():
            continue
        try:
            meta = pq.ParquetFile(path)
            schema = meta.schema_arrow
        except Exception as exc:  # noqa: BLE001 - any reader error is the finding
            report.add("parquet_unreadable", f"{info['file']}: {type(exc).__name__}: {exc}", file=info["file"])
            continue
        expected = SCHEMAS.get(info.get("table"))
        ok = True
        if expected is None:
            report.add("schema_mismatch", f"{info['file']}: unknown table layout {info.get('table')!r}",
                       file=info["file"])
            continue
        actual_cols = schema_types(schema)
        if actual_cols != schema_types(expected):
            report.add("schema_mismatch", f"{info['file']}: columns {_diff(actual_cols, schema_types(expected))} "
                                          f"differ from the {info['table']} layout of this ExtraRLHF",
                       file=info["file"])
            ok = False
        if info.get("columns") != describe_columns(TABLES[info["table"]]):
            report.add("schema_mismatch", f"{info['file']}: the manifest's column description differs from the "
                                          f"{info['table']} layout", file=info["file"])
            ok = False
        rows = meta.metadata.num_rows
        if rows != info.get("rows") or rows != (manifest.get("row_counts") or {}).get(logical):
            report.add("row_count_mismatch", f"{info['file']} holds {rows} rows; the manifest records "
                                             f"{info.get('rows')} (row_counts: {(manifest.get('row_counts') or {}).get(logical)})",
                       file=info["file"], table=logical, expected=info.get("rows"), actual=rows)
        if ok:
            healthy.add(logical)
    return healthy


def _read(path: Path, columns: list[str] | None = None):
    """A whole (small) table: ``ParquetFile.read`` rather than ``pq.read_table``, which goes
    through pyarrow.dataset (a fifth of a second to import on a first call)."""
    return pq.ParquetFile(path).read(columns=columns, use_threads=False)


def _diff(actual: list[dict], expected: list[dict]) -> str:
    a = {c["name"]: c for c in actual}
    e = {c["name"]: c for c in expected}
    parts = [f"missing {n}" for n in e if n not in a] + [f"extra {n}" for n in a if n not in e]
    parts += [f"{n}: {a[n]['type']}{'' if a[n]['nullable'] else ' not null'} instead of "
              f"{e[n]['type']}{'' if e[n]['nullable'] else ' not null'}" for n in e if n in a and a[n] != e[n]]
    if not parts and [c["name"] for c in actual] != [c["name"] for c in expected]:
        parts.append("column order")
    return ", ".join(parts) or "(none)"


def _check_v5(folder: Path, manifest: dict[str, Any], report: _Report, scan: DecisionChecks | None) -> None:
    battles = _read(folder / "battles.parquet", columns=["battle_id", "status", "degraded", "omniscient_peeks",
                                                                 "decisions", "turns"]).to_pydict()
    expected: dict[str, list[int]] = {}
    for bid, status, degraded, peeks, decisions, turns in zip(
            battles["battle_id"], battles["status"], battles["degraded"], battles["omniscient_peeks"],
            battles["decisions"], battles["turns"]):
        if bid in expected:
            report.add("duplicate_battle", f"battle {bid} appears more than once in battles", battle_id=bid)
        expected[bid] = [decisions, turns, 0, 0]  # expected decisions, turns; seen decisions, turns
        if degraded:
            report.add("degraded_battle_in_training_table", f"battle {bid} is degraded but sits in the training "
                                                            f"tables", battle_id=bid, table="battles")
        if peeks:
            report.add("peeked_battle_in_training_table", f"battle {bid} had the omniscient view shown mid-battle "
                                                           f"but sits in the training tables", battle_id=bid)
        if status != "finished":
            report.add("unfinished_battle_in_training_table", f"battle {bid} has status {status!r}; training "
                                                              f"tables hold finished battles only", battle_id=bid)
    excluded = _read(folder / "excluded.parquet", columns=["battle_id", "reason"]).to_pydict()
    for bid in excluded["battle_id"]:
        if bid in expected:
            report.add("excluded_battle_in_training_table", f"battle {bid} is listed as excluded but sits in the "
                                                            f"training tables", battle_id=bid)
    by_reason = dict(sorted(Counter(excluded["reason"]).items()))
    recorded = (manifest.get("exclusions") or {}).get("by_reason")
    if recorded is not None and recorded != by_reason:
        report.add("exclusions_mismatch", f"excluded.parquet counts {by_reason} but the manifest records {recorded}")
    del excluded

    if scan is None:
        scan = DecisionChecks(manifest.get("obs_version"))
        for batch in iter_batches(folder / "decisions.parquet", DecisionChecks.COLUMNS):
            scan.feed(batch)
    scan.report_into(report)
    orphans = 0
    for bid, rows in scan.rows_per_battle.items():
        slot = expected.get(bid)
        if slot is None:
            orphans += rows
        else:
            slot[2] += rows
    if orphans:
        report.add("orphan_rows", f"{orphans} decision rows belong to battles missing from battles", table="decisions")

    turn_orphans = 0
    for batch in iter_batches(folder / "turns.parquet", ["battle_id"], 65536):
        for bid in batch.column("battle_id").to_pylist():
            slot = expected.get(bid)
            if slot is None:
                turn_orphans += 1
            else:
                slot[3] += 1
    if turn_orphans:
        report.add("orphan_rows", f"{turn_orphans} turn rows belong to battles missing from battles", table="turns")
    for bid, (want_d, want_t, got_d, got_t) in expected.items():
        if want_d != got_d or want_t != got_t:
            report.add("battle_rows_mismatch", f"battle {bid}: {got_d} decision rows and {got_t} turn rows; its "
                                               f"battles row records {want_d} and {want_t}", battle_id=bid)


def _check_split(folder: Path, manifest: dict[str, Any], report: _Report) -> None:
    spec = manifest.get("split") or {}
    key, contour, fractions = spec.get("split_key"), spec.get("contour"), spec.get("fractions")
    column = spec.get("group_key_column")
    if not (isinstance(key, str) and isinstance(contour, str) and isinstance(column, str)
            and isinstance(fractions, dict)):
        report.add("manifest_unreadable", "the manifest's split block is incomplete "
                                          "(split_key, contour, group_key_column, fractions)")
        return
    fr = [fractions.get("train", 0), fractions.get("val", 0), fractions.get("test", 0)]
    assigned: dict[str, list] = {}
    table = _read(folder / "assignments.parquet").to_pydict()
    for group_key, split, position, rows in zip(table["group_key"], table["split"], table["bucket"], table["rows"]):
        if group_key in assigned:
            report.add("group_straddles_splits", f"group {group_key} is assigned more than once "
                                                 f"({assigned[group_key][0]} and {split})", group_key=group_key)
            continue
        assigned[group_key] = [split, rows, 0]
        want = bucket(key, contour, group_key)
        if abs(want - position) > 1e-12 or split_of(want, fr) != split:
            report.add("assignment_mismatch", f"group {group_key}: recorded {split} (bucket {position}) but the keyed "
                                              f"hash gives {split_of(want, fr)} (bucket {want})", group_key=group_key)
    standard = manifest.get("kind") == "nemesis_standard_split"
    survival = manifest.get("kind") == "returnclock_split"
    for split in ("train", "val", "test"):
        if survival:
            bad = sum(_survival_failures(b) for b in iter_batches(folder / f"{split}.parquet",
                                                                  ["duration_seconds", "event"], 65536))
            if bad:
                report.add("returnclock_row_invalid", f"{bad} {split} rows are not survival-ready "
                                                      f"(duration_seconds <= 0 or event not in {{0, 1}})", split=split)
        cols = [column] + (["viewer_type", "opponent_type"] if standard else [])
        for batch in iter_batches(folder / f"{split}.parquet", cols, 65536):
            keys = batch.column(column).to_pylist()
            for group_key in keys:
                slot = assigned.get(group_key)
                if slot is None or slot[0] != split:
                    report.add("row_in_wrong_split", f"a {split} row has group key {group_key}, assigned to "
                                                     f"{slot[0] if slot else 'no split'}", group_key=group_key,
                               split=split)
                if slot is not None:
                    slot[2] += 1
            if standard:
                for viewer, opponent in zip(batch.column("viewer_type").to_pylist(),
                                            batch.column("opponent_type").to_pylist()):
                    if viewer != "human" or opponent != "human":
                        report.add("non_human_row_in_standard", f"a {split} row of Nemesis Standard has a "
                                                                f"{viewer}-vs-{opponent} pair; Standard holds "
                                                                f"human-vs-human rows only", split=split)
    for group_key, (split, rows, seen) in assigned.items():
        if rows != seen:
            report.add("split_rows_mismatch", f"group {group_key}: assignments record {rows} rows, {split} holds "
                                              f"{seen}", group_key=group_key)


def validated_source(dirs: DatasetsDir, dataset: str, refuse: Callable[[dict[str, Any]], str | None],
                     fix: str) -> tuple[Any, dict[str, Any]]:
    """(resolved reference, manifest) of a dataset another step reads: ``refuse(manifest)`` says
    why it is the wrong kind of dataset (raised as ``invalid_argument``, prefixed with its id), a
    failed validation is ``validation_failed`` ending with ``fix`` (what to do)."""
    resolved = resolve(dirs, dataset)
    manifest = read_manifest(resolved.path)
    why = refuse(manifest)
    if why:
        raise InvalidArgument(f"{resolved.dataset_id} {why}")
    failures = validate_dir(resolved.path, expected_id=resolved.dataset_id)
    if failures:
        raise ValidationFailed(f"{resolved.dataset_id} fails validation; {fix}: "
                               + "; ".join(f"[{f['code']}] {f['message']}" for f in failures[:3]), failures)
    return resolved, manifest


def validate_dataset(dataset: str, *, datasets_dir: str | Path | DatasetsDir = "datasets") -> dict[str, Any]:
    """Validate one published version (``NAME``, ``NAME/vN`` or ``@POINTER``); returns
    ``{"dataset_id", "path", "kind", "valid", "failures": [...], "failure_codes": {...}, "row_counts",
    "pointer"}`` (``ok`` repeats ``valid`` for callers written against an earlier draft)."""
    dirs = datasets_dir if isinstance(datasets_dir, DatasetsDir) else DatasetsDir(datasets_dir)
    resolved = resolve(dirs, dataset, allow_stale=True)
    failures = validate_dir(resolved.path, expected_id=resolved.dataset_id)
    if resolved.stale:
        failures.insert(0, {"code": "stale_pointer", "message": f"pointer {resolved.pointer['pointer']!r} was "
                                                                f"promoted for another manifest of "
                                                                f"{resolved.dataset_id} (overwritten since)"})
    manifest = None
    try:
        manifest = read_manifest(resolved.path)
    except RLHFError:
        pass
    return {"dataset_id": resolved.dataset_id, "path": str(resolved.path),
            "kind": manifest.get("kind") if manifest else None,
            "valid": not failures, "failures": failures,
            "failure_codes": _codes(failures),
            "row_counts": manifest.get("row_counts") if manifest else None,
            "pointer": resolved.pointer["pointer"] if resolved.pointer else None}


def _codes(failures: list[dict[str, Any]]) -> dict[str, int]:
    counts: Counter = Counter()
    for f in failures:
        counts[f["code"]] += f.get("more", 1)
    return dict(sorted(counts.items()))
