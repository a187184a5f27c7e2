"""Preference pools: a fixed, seeded set of judgment tasks, and the judgments they collect.

A pool ``<preferences dir>/<name>/`` holds ``pool.json`` (written once, atomically: the
source dataset and its manifest hash, the seed, the sources and every task) and two
append-only logs, ``served.jsonl`` (a task shown to a judge) and ``judgments.jsonl`` (the
judge's answer), each line appended whole under a lock.

Tasks are sampled deterministically for a seed: each source's eligible decision points in
the seeded order of points.rank, as many from each source as the others (round-robin; a
source that runs out is reported, not padded), and which candidate is shown as A is a keyed
coin. A task shows the acting player's view only (``State.render``) and the two actions'
descriptions; never which player proposed which (judging is blind).

Gold tasks (gold.py) and overlap tasks (``overlap_share`` of the tasks, offered to
``overlap_judges`` judges) are mixed in; ``pool.json`` lists the tasks in their serving order
(:func:`serving_order`: gold and overlap tasks early). Nothing a judge is shown or listed
(:func:`task_view`, :func:`list_preferences` without ``sources``) tells a gold task apart, and
what a judge may list (:func:`list_preferences` with ``judge``) holds its own answers only, so
it cannot copy another judge's.

A judge is only ever stored as a keyed pseudonym (judges.py). :func:`next_task` never shows a
judge the same task twice: a task given and not yet answered is given again (the same
showing, resumed). Every judge meets every gold task: ``GOLD_PER_BLOCK`` of each
``SHUFFLE_BLOCK`` tasks it is given are gold while its gold lasts, at places drawn by an HMAC
under the judges' key (:func:`_gold_turn`), so the place of a task in a judge's sequence says
nothing a judge can compute. Otherwise the next one is the first task in serving order that
this judge has not seen and that still wants showings (``overlap_judges`` for an overlap task,
one for the others; within each block of ``SHUFFLE_BLOCK`` tasks in an order of the judge's
own), and when none does, the one with the fewest showings. Showings to a judge flagged now
(quality.py, the default policy; :func:`flagged_now`) do not count, so what a judge at chance
answered is offered to others again; the flagged judge is served as before and told nothing.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import time
from pathlib import Path
from typing import Any

import orjson

from ..core.clock import utc_now
from ..core.errors import InvalidArgument, NotFound, RLHFError
from ..core.fileio import append_line_locked, atomic_write_bytes, check_version, locked, read_json_document, writing
from ..core.names import check_name
from ..datasets.paths import DatasetsDir
from ..datasets.pointers import manifest_sha256, resolve
from .candidates import Source, parse_sources
from .judges import JUDGE_KINDS, judge_key, judge_pseudonym
from .gold import GOLD, GOLD_FILE, gold_document, gold_tasks, read_gold
from .points import DecisionPoint, check_count, check_number, first_points, rank, states_at
from .policy import PreferencePolicy
from .quality import assess

POOL_SCHEMA_VERSION = 1
POOL_FILE = "pool.json"
SERVED = "served.jsonl"
JUDGMENTS = "judgments.jsonl"
JUDGING_LOCK = "judging"  # held while a task is given or answered (the logs have their own append locks)
CHOICES = ("A", "B", "tie", "skip")
MAX_POOL_TASKS = 5000
MAX_REASON_CHARS = 2000
# 10%: enough that a judge meets a gold task in every few of its first tasks (serving_order) and
# is measured after a few dozen answers, while nine in ten judgments still go to the dataset
DEFAULT_GOLD_SHARE = 0.1
MAX_GOLD_SHARE = 0.5
DEFAULT_OVERLAP_JUDGES = 3
# each judge meets the tasks of a block of this many (in serving order) in an order of its own,
# so no position in a judge's sequence is always a gold task
SHUFFLE_BLOCK = 8
GOLD_PER_BLOCK = 2  # gold tasks per block of a judge's sequence while its gold lasts
MAX_OVERLAP_JUDGES = 10
DEFAULT_PREFERENCES_DIR = "preferences"
# points looked at per task wanted: a pair source skips points where both sides agree
_OVERSAMPLE = 4


def pool_dir(preferences_dir: str | os.PathLike[str], pool: Any, *, create: bool = False) -> Path:
    name = check_name(pool, "preference pool")
    folder = Path(preferences_dir).resolve() / name
    if not create and not (folder / POOL_FILE).is_file():
        root = Path(preferences_dir).resolve()
        known = sorted(p.name for p in root.iterdir() if (p / POOL_FILE).is_file()) if root.is_dir() else []
        raise NotFound(f"preference pool {name!r} does not exist under {root} (pools: {', '.join(known) or 'none'}); "
                       f"create it with create_preference_pool")
    return folder


def _task_id(dataset_id: str, point_key: tuple[str, int], source: str, pair: tuple[int, int]) -> str:
    text = f"{dataset_id}\0{point_key[0]}\0{point_key[1]}\0{source}\0{min(pair)}\0{max(pair)}"
    return "t-" + hashlib.sha256(text.encode()).hexdigest()[:16]


def _make_task(dataset_id: str, source: str, point: DecisionPoint, state: Any, first: tuple[int, str],
               second: tuple[int, str]) -> dict[str, Any]:
    descriptions = state.describe_actions([first[0], second[0]])
    return {
        "task_id": _task_id(dataset_id, point.key, source, (first[0], second[0])),
        "source": source, "battle_id": point.battle_id, "group": point.group,
        "decision_index": point.decision_index, "turn": point.turn, "player": point.player,
        "state_hash": point.state_hash, "board": state.render(point.player),
        "candidates": {"A": {"action_id": first[0], "description": descriptions[0], "origin": first[1]},
                       "B": {"action_id": second[0], "description": descriptions[1], "origin": second[1]}},
    }


def _source_tasks(source: Source, folder: Path, dataset_id: str, seed: int, wanted: int) -> list[dict[str, Any]]:
    points = first_points(folder / "decisions.parquet", seed, wanted * _OVERSAMPLE, source.eligible)
    states = states_at(folder, [(p.battle_id, p.decision_index, p.state_hash) for p in points])
    tasks = []
    for point in points:
        if len(tasks) == wanted:
            break
        state = states[point.key]
        found = source.candidates(point, state, seed)
        if found is None:
            continue
        swap = rank(seed, point.battle_id, point.decision_index, f"swap:{source.name}") % 2 == 1
        first, second = (found[1], found[0]) if swap else found
        tasks.append(_make_task(dataset_id, source.name, point, state, first, second))
    return tasks


def serving_order(gold: list[dict[str, Any]], overlap: list[dict[str, Any]],
                  ordinary: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The order tasks are offered in: rounds of one gold, one overlap and two ordinary tasks
    while gold or overlap tasks last (so a judge's quality is measured from its first dozens
    of answers, and the early tasks are a mix), then the other ordinary tasks."""
    streams = [list(gold), list(overlap), list(ordinary)]
    order: list[dict[str, Any]] = []
    while streams[0] or streams[1]:
        for stream, take in zip(streams, (1, 1, 2)):
            order += stream[:take]
            del stream[:take]
    return order + streams[2]


def check_shares(gold_share: Any, overlap_share: Any, overlap_judges: Any) -> tuple[float, float, int]:
    """The gold share (0 to MAX_GOLD_SHARE), overlap share (0 to 1) and overlap judges (2 to
    MAX_OVERLAP_JUDGES), or a clear error."""
    gold_share = float(check_number(gold_share, "gold_share (the share of gold tasks)", 0, MAX_GOLD_SHARE))
    overlap_share = float(check_number(overlap_share, "overlap_share (the share of tasks shown to several judges)",
                                       0, 1))
    if isinstance(overlap_judges, bool) or not isinstance(overlap_judges, int) \
            or not 2 <= overlap_judges <= MAX_OVERLAP_JUDGES:
        raise InvalidArgument(f"overlap_judges (the judges an overlap task is offered to) must be an integer from 2 "
                              f"to {MAX_OVERLAP_JUDGES}, got {overlap_judges!r}: one judge gives no agreement to "
                              f"measure, and a task is never offered to more than {MAX_OVERLAP_JUDGES} judges")
    if gold_share + overlap_share > 1:
        raise InvalidArgument(f"gold_share + overlap_share must be at most 1 (got {gold_share} + {overlap_share}): "
                              f"overlap tasks are chosen among the tasks that are not gold")
    return gold_share, overlap_share, overlap_judges


def create_preference_pool(name: str, dataset: str, *, sources: Any = ("search_top2",), n_tasks: int = 200,
                           seed: int = 0, gold_share: float = DEFAULT_GOLD_SHARE, overlap_share: float = 0.0,
                           overlap_judges: int = DEFAULT_OVERLAP_JUDGES,
                           datasets_dir: str | os.PathLike[str] = "datasets",
                           preferences_dir: str | os.PathLike[str] = DEFAULT_PREFERENCES_DIR,
                           checkpoints_dir: str | os.PathLike[str] = "checkpoints") -> dict[str, Any]:
    """Sample ``n_tasks`` judgment tasks from the V5 dataset ``dataset`` into a new pool:
    ``gold_share`` of them gold (gold.py; a shortfall is reported, never padded), and
    ``overlap_share`` of them offered to ``overlap_judges`` judges before they count as done."""
    n_tasks = check_count(n_tasks, "n_tasks", MAX_POOL_TASKS)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InvalidArgument(f"seed must be a non-negative integer, got {seed!r}")
    gold_share, overlap_share, overlap_judges = check_shares(gold_share, overlap_share, overlap_judges)
    parsed = parse_sources(list(sources) if isinstance(sources, tuple) else sources, checkpoints_dir)
    resolved = resolve(DatasetsDir(datasets_dir), dataset)
    manifest = read_json_document(resolved.path / "manifest.json", 2, what="dataset manifest")
    if manifest.get("kind") != "v5_decisions":
        raise InvalidArgument(f"{resolved.dataset_id} is a {manifest.get('kind')!r} dataset; preference tasks are "
                              f"sampled from a V5 decisions dataset (materialize_v5_dataset)")
    folder = pool_dir(preferences_dir, name, create=True)
    if (folder / POOL_FILE).exists():
        raise RLHFError(f"preference pool {name!r} exists already (its tasks never change once judged); "
                        f"choose another name", "pool_exists")
    gold_wanted = round(gold_share * n_tasks)
    regular = n_tasks - gold_wanted
    quota = [regular // len(parsed) + (i < regular % len(parsed)) for i in range(len(parsed))]
    per_source = [_source_tasks(s, resolved.path, resolved.dataset_id, seed, q) for s, q in zip(parsed, quota)]
    tasks, seen = [], set()
    for i in range(max(quota)):
        for source_tasks in per_source:
            if i < len(source_tasks) and source_tasks[i]["task_id"] not in seen:
                seen.add(source_tasks[i]["task_id"])
                tasks.append(source_tasks[i])
    if not tasks:
        raise RLHFError(f"no judgment task could be made from {resolved.dataset_id} with sources "
                        f"{[s.name for s in parsed]}: search_top2 needs decisions of a search actor, 'A vs B' "
                        f"points where A and B choose differently", "no_tasks")
    used = {(t["battle_id"], t["decision_index"]) for t in tasks}
    gold, answers = gold_tasks(resolved.path, seed, gold_wanted, used,
                               lambda *a: _make_task(resolved.dataset_id, GOLD, *a))
    n_overlap = min(round(overlap_share * n_tasks), len(tasks))
    order = serving_order(gold, tasks[:n_overlap], tasks[n_overlap:])
    counts = {s.name: len(t) for s, t in zip(parsed, per_source)}
    doc = {"schema_version": POOL_SCHEMA_VERSION, "pool": folder.name, "dataset_id": resolved.dataset_id,
           "dataset_manifest_sha256": manifest_sha256(resolved.path), "seed": seed,
           "sources": [s.name for s in parsed], "created_at": utc_now(), "gold_share": gold_share,
           "overlap": {"share": overlap_share, "judges": overlap_judges,
                       "tasks": [t["task_id"] for t in tasks[:n_overlap]]},
           "tasks": order}
    with writing(folder.parent, f"creating preference pool {folder.name!r}"):
        folder.mkdir(parents=True, exist_ok=True)
        with locked(folder / POOL_FILE):
            if (folder / POOL_FILE).exists():
                raise RLHFError(f"preference pool {name!r} exists already; choose another name", "pool_exists")
            if answers:  # first: a pool.json is never seen without its gold answers
                atomic_write_bytes(folder / GOLD_FILE, gold_document(folder.name, answers))
            atomic_write_bytes(folder / POOL_FILE, orjson.dumps(doc, option=orjson.OPT_SORT_KEYS))
    shortfall = {s.name: q - counts[s.name] for s, q in zip(parsed, quota) if counts[s.name] < q}
    if len(gold) < gold_wanted:
        shortfall[GOLD] = gold_wanted - len(gold)
    return {"pool": folder.name, "path": str(folder), "dataset_id": resolved.dataset_id, "seed": seed,
            "tasks": len(order), "by_source": counts, "gold": len(gold), "overlap_tasks": n_overlap,
            "overlap_judges": overlap_judges, "shortfall": shortfall}


_POOLS: dict[tuple[str, int, int], dict[str, Any]] = {}  # pool.json never changes once written: read it once


def list_pools(preferences_dir: str | os.PathLike[str] = DEFAULT_PREFERENCES_DIR) -> list[dict[str, Any]]:
    """Every pool under ``preferences_dir``: name, source dataset, tasks and sources."""
    root = Path(preferences_dir).resolve()
    if not root.is_dir():
        return []
    out = []
    for folder in sorted(p for p in root.iterdir() if (p / POOL_FILE).is_file()):
        doc = read_pool(folder)
        out.append({"pool": doc["pool"], "dataset_id": doc["dataset_id"], "tasks": len(doc["tasks"]),
                    "sources": doc["sources"]})
    return out


def read_pool(folder: Path) -> dict[str, Any]:
    path = folder / POOL_FILE
    stat = path.stat()
    key = (str(path), stat.st_mtime_ns, stat.st_size)
    if key not in _POOLS:
        _POOLS.clear()
        _POOLS[key] = check_version(orjson.loads(path.read_bytes()), path, POOL_SCHEMA_VERSION, what="preference pool ")
    return _POOLS[key]


_LOGS: dict[str, tuple[int, int, list[dict[str, Any]]]] = {}  # path -> (inode, bytes parsed, records)


def _lines(path: Path) -> list[dict[str, Any]]:
    """The records of an append-only log (read incrementally: only what was appended since the
    last call in this process is parsed; the caller must not change the list)."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return []
    inode, done, records = _LOGS.get(str(path), (stat.st_ino, 0, []))
    if inode != stat.st_ino or stat.st_size < done:
        done, records = 0, []
    if stat.st_size > done:
        with open(path, "rb") as f:
            f.seek(done)
            data = f.read()
        end = data.rfind(b"\n") + 1  # a line still being written is left for the next call
        for line in data[:end].splitlines():
            if line.strip():
                try:
                    records.append(orjson.loads(line))
                except orjson.JSONDecodeError:
                    continue  # a line cut by a killed writer: append_line_locked starts the next one afresh
        done += end
    _LOGS[str(path)] = (stat.st_ino, done, records)
    return records


def task_view(task: dict[str, Any]) -> dict[str, Any]:
    """What a judge is shown: the acting player's board and the two actions, not their origins."""
    return {"task_id": task["task_id"], "turn": task["turn"], "player": task["player"], "board": task["board"],
            "A": task["candidates"]["A"]["description"], "B": task["candidates"]["B"]["description"],
            "choices": list(CHOICES)}


def _shuffle(judge: str, task_id: str) -> bytes:
    return hashlib.sha256(f"serve\0{judge}\0{task_id}".encode()).digest()


_FLAGS: dict[str, tuple[int, frozenset[str]]] = {}  # pool folder -> (judgments seen, judges flagged then)
FLAG_REFRESH = 25  # the flags are computed again after this many new judgments (or 5% more)


def flagged_now(folder: Path, judgments: list[dict[str, Any]]) -> frozenset[str]:
    """The judges flagged under the default policy (quality.py), computed again as judgments
    come in; their showings do not count towards a task's wanted showings."""
    n = len(judgments)
    done, flagged = _FLAGS.get(str(folder), (-1, frozenset()))
    if done < 0 or n < done or n - done >= max(FLAG_REFRESH, done // 20):
        report = assess(judgments, read_gold(folder), PreferencePolicy())
        flagged = frozenset(r["judge"] for r in report["judges"] if r["flagged"])
        _FLAGS[str(folder)] = (n, flagged)
    return flagged


def _gold_turn(key: bytes, judge: str, k: int) -> bool:
    """Whether a judge's ``k``-th task (from 0) is a gold one while gold lasts: ``GOLD_PER_BLOCK``
    places of each block of ``SHUFFLE_BLOCK``, drawn by an HMAC under the judges' key, so no
    judge can tell (even knowing its pseudonym) which places of its sequence are gold."""
    block, place = divmod(k, SHUFFLE_BLOCK)
    digest = hmac.new(key, f"gold-places\0{judge}\0{block}".encode(), hashlib.sha256).digest()
    places = sorted(range(SHUFFLE_BLOCK), key=lambda p: digest[p])[:GOLD_PER_BLOCK]
    return place in places


def showings_wanted(doc: dict[str, Any]) -> Any:
    """``wanted(task)``: how many judges a task that is not gold is offered to before it counts
    as done: ``overlap_judges`` for an overlap task, else one (gold goes to every judge)."""
    overlap = doc.get("overlap") or {}
    ids, k = set(overlap.get("tasks", ())), overlap.get("judges", 1)
    return lambda t: k if t["task_id"] in ids else 1


def next_task(pool: str, judge: Any, judge_kind: str, *, preferences_dir: str | os.PathLike[str] = DEFAULT_PREFERENCES_DIR,
              serve: bool = True) -> dict[str, Any]:
    """The judge's next task (module docstring), or ``{"task": None, "done": true}`` when they saw them all.
    ``serve=False`` writes nothing (a page shown on GET): the judge's pending task, else
    ``{"task": None, "done": false}`` when a new one could be served."""
    kind = _check_kind(judge_kind)
    folder = pool_dir(preferences_dir, pool)
    pseudonym = judge_pseudonym(preferences_dir, judge)
    doc = read_pool(folder)
    with locked(folder / JUDGING_LOCK):
        served = _lines(folder / SERVED)
        judgments = _lines(folder / JUDGMENTS)
        answered = {(j["judge"], j["task_id"]) for j in judgments}
        mine = [s["task_id"] for s in served if s["judge"] == pseudonym]
        pending = [t for t in mine if (pseudonym, t) not in answered]
        by_id = {t["task_id"]: t for t in doc["tasks"]}
        if pending:
            return {"pool": doc["pool"], "judge": pseudonym, "resumed": True, "task": task_view(by_id[pending[0]]),
                    "remaining": len(doc["tasks"]) - len(mine)}
        shown: dict[str, int] = {}
        flagged = flagged_now(folder, judgments)
        for s in served:  # a flagged judge's showing does not count: its tasks are offered again
            if s["judge"] not in flagged:
                shown[s["task_id"]] = shown.get(s["task_id"], 0) + 1
        seen = set(mine)
        wanted = showings_wanted(doc)
        fresh, gold = [], []
        for i, t in enumerate(doc["tasks"]):
            if t["task_id"] in seen:
                continue
            if t["source"] == GOLD:
                gold.append(t)
                continue
            n, want = shown.get(t["task_id"], 0), wanted(t)
            done = n >= want
            fresh.append((done, n if done else 0, i // SHUFFLE_BLOCK, _shuffle(pseudonym, t["task_id"]), t))
        if not fresh and not gold:
            return {"pool": doc["pool"], "judge": pseudonym, "task": None, "done": True, "remaining": 0}
        if not serve:
            return {"pool": doc["pool"], "judge": pseudonym, "task": None, "done": False,
                    "remaining": len(fresh) + len(gold)}
        if gold and (not fresh or _gold_turn(judge_key(preferences_dir), pseudonym, len(mine))):
            task = gold[0]
        else:
            task = min(fresh, key=lambda x: x[:4])[4]
        record = {"task_id": task["task_id"], "judge": pseudonym, "judge_kind": kind, "served_at": utc_now(),
                  "served_ns": time.monotonic_ns()}
        # not fsynced: a showing lost to a power cut only means the task may be shown again
        append_line_locked(folder / SERVED, orjson.dumps(record).decode(), fsync=False)
    return {"pool": doc["pool"], "judge": pseudonym, "resumed": False, "task": task_view(task),
            "remaining": len(fresh) + len(gold) - 1}


def submit_preference(pool: str, task_id: str, judge: str, judge_kind: str, choice: str, reason: str | None = None, *,
                      preferences_dir: str | os.PathLike[str] = DEFAULT_PREFERENCES_DIR) -> dict[str, Any]:
    """Record the judge's answer to a task they were given (once; a second answer is refused)."""
    kind = _check_kind(judge_kind)
    if choice not in CHOICES:
        raise InvalidArgument(f"choice must be one of {', '.join(CHOICES)}, got {choice!r}")
    if reason is not None and (not isinstance(reason, str) or len(reason) > MAX_REASON_CHARS):
        raise InvalidArgument(f"reason must be text of at most {MAX_REASON_CHARS} characters")
    folder = pool_dir(preferences_dir, pool)
    pseudonym = judge_pseudonym(preferences_dir, judge)
    with locked(folder / JUDGING_LOCK):
        given = [s for s in _lines(folder / SERVED) if s["judge"] == pseudonym and s["task_id"] == task_id]
        if not given:
            raise InvalidArgument(f"task {task_id!r} was not given to this judge in pool {pool!r}; ask for a task "
                                  f"first (preference_task) and answer the one you were shown")
        if any(j["judge"] == pseudonym and j["task_id"] == task_id for j in _lines(folder / JUDGMENTS)):
            raise RLHFError(f"task {task_id!r} is answered already by this judge; a judgment is never changed",
                            "already_judged")
        think_ms = max(0, (time.monotonic_ns() - given[0]["served_ns"]) // 1_000_000) \
            if given[0].get("served_ns") is not None else None
        record = {"task_id": task_id, "judge": pseudonym, "judge_kind": kind, "choice": choice,
                  "reason": reason or None, "served_at": given[0]["served_at"], "judged_at": utc_now(),
                  "think_ms": think_ms}
        append_line_locked(folder / JUDGMENTS, orjson.dumps(record).decode())
    return {"pool": folder.name, "task_id": task_id, "judge": pseudonym, "choice": choice, "recorded": True}


def list_preferences(pool: str, *, limit: int = 50, offset: int = 0, sources: bool = True, judge: Any = None,
                     preferences_dir: str | os.PathLike[str] = DEFAULT_PREFERENCES_DIR) -> dict[str, Any]:
    """A page of the pool's judgments (newest last) and its totals by choice, source and judge
    kind. ``sources=False`` leaves every task's source out, so no judgment's source says that
    its task was gold. With ``judge`` (what a judge may call: MCP) the page and the totals hold
    that judge's own judgments only, sources left out: every judge can be served every task in
    time, so another judge's answer shown to it could be copied (the gold and the agreement
    would then vouch for a judge that only copies); the pool's counts of tasks, judgments and
    judges stay."""
    limit = check_count(limit, "limit", 500)
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise InvalidArgument(f"offset must be a non-negative integer, got {offset!r}")
    folder = pool_dir(preferences_dir, pool)
    pseudonym = None if judge is None else judge_pseudonym(preferences_dir, judge)
    doc = read_pool(folder)
    source_of = {t["task_id"]: t["source"] for t in doc["tasks"]}
    every = _lines(folder / JUDGMENTS)
    judgments = every if pseudonym is None else [j for j in every if j["judge"] == pseudonym]
    sources = sources and pseudonym is None
    totals: dict[str, dict[str, int]] = {"choice": {}, "source": {}, "judge_kind": {}}
    for j in judgments:
        for key, value in (("choice", j["choice"]), ("source", source_of.get(j["task_id"], "?")),
                           ("judge_kind", j["judge_kind"])):
            totals[key][value] = totals[key].get(value, 0) + 1
    page = [{**j, "source": source_of.get(j["task_id"])} for j in judgments[offset:offset + limit]]
    if not sources:
        del totals["source"]
        page = [{k: v for k, v in j.items() if k != "source"} for j in page]
    out = {"pool": doc["pool"], "dataset_id": doc["dataset_id"], "tasks": len(doc["tasks"]),
           "judgments": len(every), "judges": len({j["judge"] for j in every}), "totals": totals,
           "offset": offset, "items": page,
           "next_offset": offset + limit if offset + limit < len(judgments) else None}
    if pseudonym is not None:
        out.update({"judge": pseudonym, "yours": len(judgments)})
    return out


def _check_kind(kind: Any) -> str:
    if kind not in JUDGE_KINDS:
        raise InvalidArgument(f"judge_kind must be one of {', '.join(JUDGE_KINDS)}, got {kind!r}")
    return kind
