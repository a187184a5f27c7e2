"""Derived session records against what they are derived from (issue 24): a group's
``summary.json`` against its catalog, and its manifest's configuration against the actors its
traces record.

``summary.json`` is a cache of the catalog (what ``list_sessions`` shows without reading the
catalog); a summary edited by hand, or left behind by a process killed before it refreshed it,
disagrees with the catalog. The manifest is the one record of what a group's battles are; it is
only ever written by ``SessionStore.ensure_group``, which refuses another configuration, so a
manifest that disagrees with its traces was edited after they were played. Resuming such a group
would add battles of the manifest's configuration beside battles of another, and a dataset
materialized from it would publish both under one configuration: ``SessionStore.reconcile``
refuses it (:class:`~extrarlhf.core.errors.ManifestMismatch`) and ``extrarlhf check`` reports it.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

from .records import FINAL_STATUSES

# Fields of summary.json that move while a battle is in flight (an interactive battle's
# ``started`` line is in the catalog before the summary is refreshed) or depend on the
# readiness policy the writer was given: not compared. ``final_battles`` stands for them.
_VOLATILE = ("updated_at", "readiness", "battles", "by_status.unfinished")
# At most this many traces are read when a group is resumed (evenly spaced, the first and the
# last included); ``extrarlhf check`` reads them all.
RESUME_SAMPLE = 256


def _flatten(doc: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in doc.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):  # an empty one (no battle tag yet) adds nothing
            yield from _flatten(value, name + ".")
        else:
            yield name, value


def summary_differences(stored: dict[str, Any], computed: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """``(field, in summary.json, from the catalog)`` for each field of a (well-formed) stored
    summary that disagrees with the summary computed from the catalog; empty when they agree."""
    def final(doc: dict[str, Any]) -> Any:
        return doc.get("battles", 0) - doc.get("by_status", {}).get("unfinished", 0)

    mine = dict(_flatten(stored))
    theirs = dict(_flatten(computed))
    out = []
    if final(stored) != final(computed):
        out.append(("battles", stored.get("battles"), computed.get("battles")))
    for name in sorted(set(mine) | set(theirs)):
        if any(name == v or name.startswith(v + ".") for v in _VOLATILE):
            continue
        if mine.get(name, 0) != theirs.get(name, 0):  # a battle tag with no battle is 0 either way
            out.append((name, mine.get(name), theirs.get(name)))
    return out


def _expected(configuration: dict[str, Any]) -> dict[str, Any]:
    """What every trace of a group with this configuration records, by dotted field of its meta."""
    p1 = configuration.get("p1_model") or {}
    p2 = configuration.get("opponent") or {}
    return {"p1_actor_type": configuration.get("p1_actor_type"), "battle_tag": configuration.get("battle_tag"),
            "actors.p1.spec": p1.get("spec"), "actors.p1.weights_hash": p1.get("weights_hash"),
            "actors.p2.spec": p2.get("spec"), "actors.p2.weights_hash": p2.get("weights_hash")}


# the manifest field each meta field is compared with, as a message names it
MANIFEST_FIELD = {"p1_actor_type": "configuration.p1_actor_type", "battle_tag": "configuration.battle_tag",
                  "actors.p1.spec": "configuration.p1_model.spec",
                  "actors.p1.weights_hash": "configuration.p1_model.weights_hash",
                  "actors.p2.spec": "configuration.opponent.spec",
                  "actors.p2.weights_hash": "configuration.opponent.weights_hash",
                  "weights_hashes": "configuration (p1_model and opponent weights_hash)"}


def meta_mismatch(configuration: dict[str, Any], meta: dict[str, Any]) -> tuple[str, Any, Any] | None:
    """``(meta field, manifest value, trace value)`` of the first field where a trace's meta
    record disagrees with the group's configuration, or None."""
    actors = meta.get("actors") if isinstance(meta.get("actors"), dict) else {}
    for name, want in _expected(configuration).items():
        if name.endswith(".weights_hash") and meta.get("degraded"):
            continue  # a model that could not be loaded records the hash of the file it found, if any
        if name.startswith("actors."):
            _, seat, key = name.split(".")
            actor = actors.get(seat)
            got = actor.get(key) if isinstance(actor, dict) else None
        else:
            got = meta.get(name)
        if got != want:
            return name, want, got
    return None


class LineCheck:
    """Like :func:`meta_mismatch` for what a catalog line carries of its battle's actors (its
    battle tag and weights hashes), cheap enough to check every line of a resumed group: every
    final entry seen (:meth:`see`, one at a time, as a pass over a catalog reads them) is
    compared, and ``found`` maps a battle id to ``(battle_id, field, manifest value, line
    value)``, from its last line that disagrees."""

    def __init__(self, configuration: dict[str, Any]) -> None:
        expected = _expected(configuration)
        self.tag = expected["battle_tag"]
        self.hashes = sorted({h for h in (expected["actors.p1.weights_hash"], expected["actors.p2.weights_hash"])
                              if h})
        self.found: dict[str, tuple[str, str, Any, Any]] = {}

    def see(self, entry: dict[str, Any]) -> None:
        if entry["status"] not in FINAL_STATUSES:
            return
        if entry.get("battle_tag") != self.tag:
            self.found[entry["battle_id"]] = (entry["battle_id"], "battle_tag", self.tag, entry.get("battle_tag"))
        elif not entry.get("degraded") and sorted(entry.get("weights_hashes") or []) != self.hashes:
            self.found[entry["battle_id"]] = (entry["battle_id"], "weights_hashes", self.hashes,
                                              sorted(entry.get("weights_hashes") or []))


def evenly(items: list[Any], limit: int = RESUME_SAMPLE) -> list[Any]:
    """All of ``items`` when there are at most ``limit``, else ``limit`` of them evenly spaced
    (the first and the last included)."""
    if len(items) <= limit:
        return list(items)
    return [items[round(i * (len(items) - 1) / (limit - 1))] for i in range(limit)]


def describe(mismatch: tuple[str, str, Any, Any]) -> str:
    """``battle b000003-...: it records actors.p2.spec 'baseline:greedy', the manifest has
    'baseline:random' (configuration.opponent.spec)`` for ``(battle_id, field, manifest value,
    trace value)``."""
    battle_id, name, want, got = mismatch
    return (f"battle {battle_id} records {name} {got!r}, the manifest has {want!r} "
            f"({MANIFEST_FIELD.get(name, name)})")
