"""L1 campaigns: N auto-played (``rl``) battles into a group, on bounded worker processes.

Battle ``i`` of a series gets the seed ``series_seed(base_seed, i)`` and a deterministic
battle id, so traces are the same whatever ``max_workers`` is. A series is resumable: run it
again (or with a larger ``n_battles``) and it plays only what is missing; battles cut off by
a killed process show as ``unfinished`` in the catalog until then.
"""

from __future__ import annotations

import itertools
import os
import time
from concurrent.futures import FIRST_COMPLETED, wait
from typing import Any, Callable, Iterator

from adapters import decide_many, work
from engine import derive_seed

from ..core.errors import GroupBusy, InvalidArgument
from ..core.names import check_name
from ..core.procs import cap_workers, process_pool, stop_flag
from ..core.readiness import ReadinessPolicy
from ..core.work_caps import MAX_SEARCH_SIMS_BATTLES, check_search_work, search_sims
from . import codenames, ownership
from .actors import DEFAULT_CHECKPOINTS, resolve_actor
from .catalog_index import LiveIndex
from .match import Match, check_seed, configuration, resolve_players
from .sessions import FINAL_STATUSES, SessionStore, iter_catalog

MAX_BATTLES = 1_000_000
MAX_WORKERS = 64
SUMMARY_EVERY_S = 5.0
# at most this share of the parent's time goes to writing the summary and the catalog index: the
# index's arrays are O(battles) however the fold is kept (about 0.4 s at 10^6 battles with the save)
SUMMARY_SHARE = 0.05
CANCEL_POLL_S = 0.25

Progress = Callable[[int, int], None]
Cancel = Callable[[], bool]


def series_seed(base_seed: int, index: int) -> int:
    """Seed of battle ``index`` of a series (63-bit, fits a PostgreSQL bigint)."""
    return derive_seed(base_seed, f"series:{index}") >> 1


CHUNK = 16  # battles a worker plays side by side, so model decisions are batched across them


def play_series_chunk(plan: dict[str, Any], battles: list[tuple[int, int]],
                      on_finish: Callable[[], None] | None = None) -> list[dict[str, Any]]:
    """Play and publish (index, seed) battles of a series side by side; returns their catalog
    entries. Runs in a worker. Every step, the pending model decisions of all the chunk's
    battles are evaluated together (one ``session.run`` per model file)."""
    store = SessionStore(plan["sessions_dir"])
    opponent = resolve_actor(plan["opponent"], "opponent", plan["checkpoints_dir"])
    p1_model = resolve_actor(plan["p1_model"], "p1_model", plan["checkpoints_dir"])
    live = []
    for index, seed in battles:
        match = Match(store, plan["group"], index, seed, "rl", opponent, p1_model, plan["codename"],
                      compact=plan["compact_traces"])
        store.append_catalog(plan["group"], match.catalog_entry("started"))
        live.append(match)
    entries = []
    while live:
        t0 = time.perf_counter()
        try:
            work.check()
            decisions = decide_many([(m.pending_policy(), m.state) for m in live])
        except work.WorkCancelled:  # the battles still playing stay unfinished; a resume plays them
            break
        except Exception as exc:  # an adapter bug: every battle of the step is affected
            decisions = [exc] * len(live)
        latency = (time.perf_counter() - t0) / len(live)
        still = []
        for match, decision in zip(live, decisions):
            try:
                if isinstance(decision, Exception):
                    raise decision
                match.play_decision(decision, latency)
                if not match.done:
                    still.append(match)
                    continue
                match.finish()
                entries.append(match.catalog_entry("finished"))
            except Exception as exc:  # a bug in a policy or the engine: keep the evidence, mark the battle
                match.crash(exc)
                entries.append(match.catalog_entry("crashed"))
            if on_finish is not None:
                on_finish()
        live = still
    return entries


def _check_int(value: Any, name: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise InvalidArgument(f"{name} must be an integer in {lo}..{hi}, got {value!r}")
    return value


def check_series_work(specs: list[str], n_battles: int, finished: int) -> None:
    """Refuse a call whose battles still to play (``n_battles`` - ``finished``) ask for more
    search work than one call may (:mod:`extrarlhf.core.work_caps`)."""
    per_battle = sum(search_sims(spec) for spec in specs)
    todo = n_battles - finished
    check_search_work(per_battle * todo, f"this series ({todo:,} battles to play at {per_battle:,} sims per decision)",
                      f"pass n_battles of at most {finished + MAX_SEARCH_SIMS_BATTLES // max(per_battle, 1):,} now and "
                      f"raise it call by call (a series resumes where it stopped), or use fewer sims")


def run_series(sessions_dir: str | os.PathLike[str], group: str, n_battles: int, *,
               p1_model: str = "baseline:greedy", opponent: str = "baseline:greedy", seed: int = 0,
               max_workers: int = 1, codename: str | None = None, progress: Progress | None = None,
               readiness: ReadinessPolicy | None = None,
               checkpoints_dir: str | os.PathLike[str] | None = None,
               cancel: Cancel | None = None, compact_traces: bool = True) -> dict[str, Any]:
    """Run (or resume) a series; returns ``{"ran", "skipped", "summary", "cancelled", "repaired", ...}``.

    The series owns its group while it runs (a lease in ``<group>/lease.json``, see
    ownership.py): a second series (or a repair, or an interactive battle) on the same group is
    refused at once with ``group_busy`` naming the owner; a dead owner's lease is reaped.
    Before playing, the catalog is reconciled with the traces on disk
    (:meth:`SessionStore.reconcile`): a battle whose trace is intact but whose catalog line is
    damaged or missing gets its line rebuilt from the trace (``repaired`` counts them) and is
    never played again; when that is not provably safe the series stops with the reason
    (``corrupt_record``) before playing anything.

    ``max_workers`` 1 plays in this process; more uses that many worker processes, capped to
    the machine's cores (``workers`` in the result says how many ran); they exit when this
    process dies. The codename, if given, is claimed for the whole series and released at the
    end. ``compact_traces`` (default) stores each trace's ``turns`` and ``actions`` as zstd
    (trace_files.py: the same bytes to every reader, about 17x smaller, see
    docs/data-format.md 1.1); False writes plain ``.jsonl`` files. ``cancel()`` true (or the caller's :mod:`adapters.work` scope
    cancelled) stops the series within a decision, in worker processes too: the battles it
    finished are published, the ones it was playing stay unfinished, the lease is released,
    the summary written, and a later call resumes with what is missing. One call may ask for
    at most :data:`MAX_SEARCH_SIMS_BATTLES` search sims x battles (``work_cap_exceeded``).
    """
    check_name(group, "group")
    n_battles = _check_int(n_battles, "n_battles", 1, MAX_BATTLES)
    max_workers = _check_int(max_workers, "max_workers", 1, MAX_WORKERS)
    if not isinstance(compact_traces, bool):
        raise InvalidArgument(f"compact_traces must be true or false, got {compact_traces!r}")
    seed = check_seed(seed)
    checkpoints_dir = os.path.abspath(checkpoints_dir or DEFAULT_CHECKPOINTS)
    _, opponent_actor, p1_actor = resolve_players("rl", opponent, p1_model, checkpoints_dir)
    store = SessionStore(sessions_dir)
    store.root.mkdir(parents=True, exist_ok=True)
    store.confine_group(group)  # a group (or a file of it) symlinked out of the sessions dir is refused
    owner = ownership.current_owner(store, group)  # refuse at once, before claiming or creating anything
    if owner is not None:
        raise ownership.busy_error(group, owner, "this series was refused")
    _precheck_search_work(store, group, [p1_actor.spec, opponent_actor.spec], n_battles)
    lease = codenames.claim(store.root, codename, group) if codename else None
    try:
        with ownership.acquire(store, group, purpose="series", codename=codename) as group_lease:
            store.ensure_group(group, configuration("rl", opponent_actor, p1_actor),
                               {"mode": "series", "base_seed": seed, "n_battles": n_battles}, codename)
            store.remove_stale_temp(group)
            # a trace on disk without a valid final line gets its line back from the trace (or the
            # series stops with the reason): a battle with a trace is never played again
            live = store.live_index(group)  # the reconcile's pass over the catalog folds it
            repair = store.reconcile(group, live)
            done = repair["finished"][:n_battles].ljust(n_battles, b"\0")
            todo = n_battles - sum(done)
            started = time.perf_counter()
            plan = {"sessions_dir": str(store.root), "checkpoints_dir": checkpoints_dir, "group": group,
                    "p1_model": p1_actor.spec, "opponent": opponent_actor.spec, "codename": codename,
                    "compact_traces": compact_traces}
            n_chunks = -(-todo // CHUNK)
            workers = cap_workers(max_workers)
            user_cancel = cancel or (lambda: False)
            stop = lambda: group_lease.lost or user_cancel()  # noqa: E731
            with work.also_cancelled_by(stop):  # checked at every decision and search rollout
                ran = _execute(plan, _chunks(seed, n_battles, done), todo, n_chunks, workers, store, lease, live,
                               progress, work.cancelled)
            summary = store.write_summary(group, readiness, live)
            elapsed = time.perf_counter() - started
            if group_lease.lost:
                raise GroupBusy(f"this series lost its lease on group {group!r} (it was reaped: its heartbeat went "
                                f"stale) and stopped after {ran} battle(s); run it again to resume",
                                ownership.current_owner(store, group))
    finally:
        if lease:
            codenames.release(store.root, codename)
    return {"group": group, "ran": ran, "skipped": n_battles - todo, "n_battles": n_battles,
            "cancelled": ran < todo, "remaining": todo - ran,
            "repaired": len(repair["rebuilt"]), "dropped_lines": len(repair["dropped_lines"]),
            "workers": workers if n_chunks > 1 else 1, "max_workers": max_workers,
            "seconds": round(elapsed, 3), "battles_per_s": round(ran / elapsed, 2) if elapsed and ran else None,
            "codename": codename, "summary": summary}


def _precheck_search_work(store: SessionStore, group: str, specs: list[str], n_battles: int) -> None:
    """:func:`check_series_work` before anything is written or repaired: the catalog is read
    (leniently: a damaged line is the resume's to repair) only when the cap could be exceeded."""
    if sum(search_sims(spec) for spec in specs) * n_battles <= MAX_SEARCH_SIMS_BATTLES:
        return
    finished = {line.entry["index"] for line in iter_catalog(store.catalog_path(group))
                if line.error is None and line.entry["status"] in FINAL_STATUSES and line.entry["index"] < n_battles}
    check_series_work(specs, n_battles, len(finished))


def _chunks(seed: int, n_battles: int, done: bytearray) -> Iterator[list[tuple[int, int]]]:
    """The (index, seed) battles still to play, CHUNK at a time, made as they are taken (a
    million-battle series holds no million-entry list)."""
    todo = (i for i in range(n_battles) if not done[i])
    while chunk := [(i, series_seed(seed, i)) for i in itertools.islice(todo, CHUNK)]:
        yield chunk


def _execute(plan: dict[str, Any], chunks: Iterator[list[tuple[int, int]]], total: int, n_chunks: int,
             max_workers: int, store: SessionStore, lease: dict | None, live: LiveIndex,
             progress: Progress | None, cancel: Cancel | None) -> int:
    """Play the chunks; returns the battles played. ``cancel()`` is checked at every chunk
    boundary and, through :mod:`adapters.work`, at every decision: once it is true no chunk
    starts, queued chunks are dropped, and the running ones stop at their next decision (the
    battles they finished are published, the others stay unfinished for a resume). The summary
    and the catalog index are written every ``SUMMARY_EVERY_S``, or less often when writing them
    took more than ``SUMMARY_SHARE`` of that time."""
    finished = 0
    last_summary = last_beat = time.monotonic()
    every = SUMMARY_EVERY_S

    def tick(n: int = 1) -> None:
        nonlocal finished, last_summary, last_beat, every
        finished += n
        if progress is not None:
            progress(finished, total)
        now = time.monotonic()
        if lease and now - last_beat >= SUMMARY_EVERY_S:
            codenames.heartbeat(store.root, lease["codename"])
            last_beat = now
        if now - last_summary >= every:
            store.write_summary(plan["group"], live=live)
            last_summary = time.monotonic()
            every = max(SUMMARY_EVERY_S, (last_summary - now) / SUMMARY_SHARE)

    cancelled = cancel or (lambda: False)
    if max_workers == 1 or n_chunks <= 1:
        for chunk in chunks:
            if cancelled():
                break
            play_series_chunk(plan, chunk, on_finish=tick)
        return finished
    queue = chunks
    stop = stop_flag("extrarlhf.runtime.series")
    with process_pool(min(max_workers, n_chunks), "extrarlhf.runtime.series", stop=stop) as pool:
        # two chunks per worker in flight: enough to keep them busy, few to drop on cancel
        pending = {pool.submit(play_series_chunk, plan, chunk)
                   for chunk in itertools.islice(queue, 2 * max_workers)}
        while pending:
            ready, pending = wait(pending, timeout=min(SUMMARY_EVERY_S, CANCEL_POLL_S), return_when=FIRST_COMPLETED)
            for future in ready:
                if not future.cancelled():
                    tick(len(future.result()))
            if cancelled():
                stop.set()  # the running chunks stop at their next decision
                for future in pending:
                    future.cancel()
                continue
            for chunk in itertools.islice(queue, len(ready)):
                pending.add(pool.submit(play_series_chunk, plan, chunk))
            if not ready:
                tick(0)
    return finished
