"""The promotion records: which checkpoint is *the* policy, its history, and which checkpoints
may never be overwritten (DESIGN section 11). Deciding whether a checkpoint may be promoted
is ``extrarlhf.policies.promotion``; this module only reads, repairs and writes the records.

Files under the checkpoints dir::

    promoted.json            the promoted pointer (atomic replace): name, kind, weights_hash,
                             sha256, the benchmark that justified it, the previous pointer's name
    promoted.json.lock       serializes promotions, rollbacks, repairs and registry overwrites (flock)
    promoted_history.jsonl   one line per event ("promote" or "rollback"), each with the
                             pointer document it installed
    promoted.intent.json     present only while a promotion or rollback is being written (or
                             after a crash in the middle of one): the new pointer document, the
                             pointer it replaces and the history line

Protection
----------
The promoted checkpoint and every checkpoint a rollback could restore (the history's stack)
are never overwritten: ``CheckpointRegistry.register(..., overwrite=True)`` asks
:func:`promotion_guard` under this module's lock and refuses them (``checkpoint_protected``);
``train_policy`` uses the same registry check.

Crash consistency
-----------------
A promotion or rollback writes, under the lock: (1) the intent record, (2) the pointer
(atomic replace), (3) the history line, then (4) removes the intent. A crash at any point
leaves a state that every reader (:func:`read_promoted`, :func:`promotion_status`,
:func:`promote_checkpoint`, :func:`rollback_promotion`, the registry's protection check)
repairs first, under the lock: an intent whose pointer was never written is discarded (the
promotion did not happen); an intent whose pointer was written completes the history and is
removed (the promotion happened). A pointer ahead of its history by one event without an
intent (left by versions before the intent record) is completed from the pointer document
itself. What cannot be repaired is reported by :func:`promotion_status` (``consistent:
false`` and ``torn``, each problem in words) and refuses promotion and rollback with the
check ``history_consistent``. On a read-only directory readers report instead of repairing.

Damaged records
---------------
A record that is not what a crash can leave -- ``promoted.json`` that is not JSON or lacks a
field (``name``, ``weights_hash``...), a history line that is not JSON, not an event or lacks
a field, anywhere in the file -- is *damaged*: every reader reports it as
``corrupt_record`` naming the file, the line and the field (:func:`read_promoted` and
:func:`current_incumbent` raise it; :func:`promotion_status` lists it in ``damaged`` with
``consistent`` and ``history_consistent`` false; :func:`promotion_history` reports the lines
it leaves out), and nothing acts on it: it is never repaired (a person fixes the line, see
``extrarlhf check``), promotion and rollback refuse (``history_consistent``; a rollback must
never pop a stack it cannot read: it would restore the wrong checkpoint), and no checkpoint
may be overwritten (nobody can tell which ones a rollback could restore). The one torn line
that is *not* damage is the one a crash leaves mid-write: half of a line, completed by the
repair on the next line (or about to be, while its intent is pending).

Test hook: when the environment variable ``RLHF_TEST_CRASH_AT`` names one of
:data:`CRASH_POINTS`, the process SIGKILLs itself at that point of a promotion or rollback
(``mid_history`` first writes half of the history line). It is read only here and is inert
when unset; the crash tests (tests/policies/test_promotion_crash.py) use it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.clock import utc_now
from ..core.errors import CorruptRecord, ResourceError, UnsupportedSchema, corrupt_record, record_problem
from ..core.fileio import append_line_locked, atomic_write_json, fsync_dir, locked

POINTER_SCHEMA_VERSION = 1
INTENT_SCHEMA_VERSION = 1
POINTER = "promoted.json"
HISTORY = "promoted_history.jsonl"
INTENT = "promoted.intent.json"
# The first-promotion rule: with nothing promoted, the incumbent is baseline:random -- a first
# policy shows that it beats random play (SPRT); every later one must beat the promoted one.
# baseline:greedy stays a reference on the ladder (ladder.py), not a bar a first policy trained
# in minutes could clear (DESIGN section 14, docs/training.md "The improvement loop").
DEFAULT_INCUMBENT = "baseline:random"
CRASH_ENV = "RLHF_TEST_CRASH_AT"
CRASH_POINTS = ("after_intent", "after_pointer", "mid_history", "after_history", "before_intent_removal")


# ---------------------------------------------------------------------------- reading
_HEX64 = re.compile(r"[0-9a-f]{64}")
_FIX_POINTER = (f"restore it from the pointer of the last line of {HISTORY} (or move it aside when nothing should "
                f"be promoted); until then promotion, rollback and checkpoint overwrites are refused")
_FIX_HISTORY = ("repair that line by hand (one JSON event per line: event, at, name, weights_hash, from, pointer) or "
                "restore the file from a backup; until then promotion, rollback and checkpoint overwrites are "
                "refused")


def _pointer_problem(doc: Any, prefix: str = "") -> tuple[str | None, str] | None:
    """(field, why) for the first thing wrong with a pointer document, or None when it is well
    formed (``prefix`` qualifies the field, e.g. ``pointer.`` inside a history line)."""
    if not isinstance(doc, dict):
        return (prefix.rstrip(".") or None), "is not a JSON object"
    name = doc.get("name")
    if not isinstance(name, str) or not name:
        return f"{prefix}name", f"is missing or not a text (got {name!r})"
    if not isinstance(doc.get("weights_hash"), str) or not _HEX64.fullmatch(doc["weights_hash"]):
        return f"{prefix}weights_hash", f"is missing or not a sha256 hex digest (got {doc.get('weights_hash')!r})"
    if not isinstance(doc.get("promoted_at"), str):
        return f"{prefix}promoted_at", f"is missing or not a text (got {doc.get('promoted_at')!r})"
    for key in ("previous", "rolled_back"):
        ref = doc.get(key)
        if ref is not None and not (isinstance(ref, dict) and isinstance(ref.get("name"), str)
                                    and isinstance(ref.get("weights_hash"), str)):
            return f"{prefix}{key}", f"must be null or an object with name and weights_hash (got {ref!r})"
    if "restored_by" in doc and not isinstance(doc.get("restored_at"), str):
        return f"{prefix}restored_at", f"is missing or not a text in a restored pointer (got {doc.get('restored_at')!r})"
    return None


def _read_pointer(root: Path) -> dict[str, Any] | None:
    """The pointer document, None when there is none; a damaged one is
    :class:`~extrarlhf.core.errors.CorruptRecord` (naming the file and field), another
    schema_version :class:`UnsupportedSchema`."""
    path = root / POINTER
    where = path.absolute()
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise corrupt_record(f"not valid JSON ({exc})", path=where, hint=_FIX_POINTER) from None
    if not isinstance(doc, dict):
        raise corrupt_record("not a JSON object", path=where, hint=_FIX_POINTER)
    version = doc.get("schema_version")
    if version is None or isinstance(version, bool) or not isinstance(version, int):
        raise corrupt_record(f"is missing or not an integer (got {version!r})", path=where, field="schema_version",
                            hint=_FIX_POINTER)
    if version != POINTER_SCHEMA_VERSION:
        raise UnsupportedSchema(f"{path}: schema_version {version!r} is not supported (this version reads "
                                f"{POINTER_SCHEMA_VERSION})")
    problem = _pointer_problem(doc)
    if problem is not None:
        raise corrupt_record(problem[1], path=where, field=problem[0], hint=_FIX_POINTER)
    return doc


def read_intent(root: Path) -> tuple[dict[str, Any] | None, str | None]:
    """(intent, None), (None, None) when there is none, or (None, why it is unreadable)."""
    path = root / INTENT
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, None
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        return None, f"{path} cannot be read ({type(exc).__name__}: {exc})"
    if not (isinstance(doc, dict) and doc.get("schema_version") == INTENT_SCHEMA_VERSION
            and doc.get("kind") == "promotion_intent" and doc.get("event") in ("promote", "rollback")
            and isinstance(doc.get("pointer"), dict) and isinstance(doc.get("history_line"), dict)
            and (doc.get("replaces") is None or isinstance(doc.get("replaces"), dict))
            and _pointer_problem(doc["pointer"]) is None
            and (doc["replaces"] is None or _pointer_problem(doc["replaces"]) is None)
            and _line_problem(doc["history_line"]) is None):
        return None, f"{path} is not a promotion intent this version reads (schema_version {INTENT_SCHEMA_VERSION})"
    return doc, None


def _line_problem(event: Any) -> tuple[str | None, str] | None:
    """(field, why) for the first thing wrong with a parsed history line, or None."""
    if not isinstance(event, dict):
        return None, f"is not a JSON object (got {type(event).__name__})"
    if event.get("event") not in ("promote", "rollback"):
        return "event", f"must be 'promote' or 'rollback' (got {event.get('event')!r})"
    if not isinstance(event.get("at"), str):
        return "at", f"is missing or not a text (got {event.get('at')!r})"
    problem = _pointer_problem(event.get("pointer"), "pointer.")
    if problem is not None:
        return problem if problem[0] else ("pointer", "is missing or not a JSON object")
    ref = event.get("from")
    if ref is not None and not (isinstance(ref, dict) and isinstance(ref.get("name"), str)
                                and isinstance(ref.get("weights_hash"), str)):
        return "from", f"must be null or an object with name and weights_hash (got {ref!r})"
    for key in ("name", "weights_hash"):
        if event.get(key) != event["pointer"][key]:
            return key, f"is {event.get(key)!r}, not the {key} of the pointer it installed ({event['pointer'][key]!r})"
    return None


@dataclass
class _History:
    """``promoted_history.jsonl`` as read: the well-formed events, the damaged lines
    (:class:`~extrarlhf.core.errors.CorruptRecord`, each naming its line and field) and a torn last
    line (a write interrupted before its newline: ``(line number, text, damage)``), which is
    damage only when no pending repair completes it."""

    events: list[dict[str, Any]]
    damaged: list[CorruptRecord]
    tail: tuple[int, str, CorruptRecord] | None


def _completes(torn: str, whole: str) -> bool:
    """True when ``torn`` is the interrupted first part of the history line ``whole``: a strict
    prefix reaching into its pointer document (so the timestamp, event, name and previous
    pointer all agree: the same event, written again whole)."""
    start = whole.find('"pointer": ')
    return start >= 0 and len(whole) > len(torn) >= start + len('"pointer": ') and whole.startswith(torn)


def _read_history(root: Path) -> _History:
    path = root / HISTORY
    where = path.absolute()
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return _History([], [], None)
    raw = data.split(b"\n")
    torn_end = not data.endswith(b"\n")
    if not torn_end:
        raw = raw[:-1]  # the empty piece after the final newline
    parsed: list[tuple[int, str, dict[str, Any] | None, CorruptRecord | None]] = []
    for number, chunk in enumerate(raw, 1):
        if not chunk.strip():
            continue
        try:
            text = chunk.decode("utf-8")
        except UnicodeDecodeError as exc:
            parsed.append((number, "", None, corrupt_record(f"is not UTF-8 text ({exc})", path=where, line=number,
                                                           hint=_FIX_HISTORY)))
            continue
        try:
            event = json.loads(text)
        except json.JSONDecodeError as exc:
            parsed.append((number, text, None, corrupt_record(f"is not valid JSON ({exc})", path=where, line=number,
                                                             hint=_FIX_HISTORY)))
            continue
        problem = _line_problem(event)
        if problem is not None:
            parsed.append((number, text, None, corrupt_record(problem[1], path=where, line=number, field=problem[0],
                                                             hint=_FIX_HISTORY)))
        else:
            parsed.append((number, text, event, None))
    events: list[dict[str, Any]] = []
    damaged: list[CorruptRecord] = []
    tail = None
    for i, (number, text, event, problem) in enumerate(parsed):
        if problem is None:
            events.append(event)  # type: ignore[arg-type]
            continue
        following = parsed[i + 1] if i + 1 < len(parsed) else None
        if following is not None and following[3] is None and following[0] == number + 1 and \
                _completes(text, following[1]):
            continue  # a torn write the repair completed on the next line: not damage
        if following is None and torn_end:
            tail = (number, text, problem)
        else:
            damaged.append(problem)
    return _History(events, damaged, tail)


def promotion_history(checkpoints_dir: str | os.PathLike[str] = "checkpoints",
                      problems: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Every well-formed promotion event, oldest first. A damaged line is never guessed at:
    it is left out and, when ``problems`` is given, reported there (``code``, ``path``,
    ``line``, ``field``, ``problem``, ``message``), a torn last line included; :func:`promotion_status`
    reports the same, and promotion and rollback refuse while any line is damaged. A torn line
    that a crash repair completed on the next line is not damage and is skipped."""
    history = _read_history(Path(checkpoints_dir))
    if problems is not None:
        problems.extend(record_problem(d) for d in history.damaged)
        if history.tail is not None:
            problems.append(record_problem(history.tail[2]))
    return history.events


def _stack(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    stack: list[dict[str, Any]] = []
    for event in events:
        if event["event"] == "promote":
            stack.append(event["pointer"])
        elif stack:
            stack.pop()
    return stack


def same_pointer(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return a.get("name") == b.get("name") and a.get("weights_hash") == b.get("weights_hash")


def _label(doc: dict[str, Any] | None) -> str:
    if doc is None:
        return "nothing"
    return f"{doc.get('name')!r} (weights_hash {str(doc.get('weights_hash'))[:16]}...)"


def promote_line(pointer: dict[str, Any]) -> dict[str, Any]:
    return {"event": "promote", "at": pointer["promoted_at"], "name": pointer["name"],
            "weights_hash": pointer["weights_hash"], "from": pointer["previous"], "pointer": pointer}


def rollback_line(pointer: dict[str, Any]) -> dict[str, Any]:
    return {"event": "rollback", "at": pointer["restored_at"], "name": pointer["name"],
            "weights_hash": pointer["weights_hash"], "from": pointer["rolled_back"], "pointer": pointer}


# ---------------------------------------------------------------------------- repair
def reconcile(root: Path, *, write: bool) -> dict[str, Any]:
    """The promotion state of ``root`` after repairing what a crash left (``write=True``;
    the caller holds the lock) or as found (``write=False``): ``pointer``, ``events``,
    ``stack``, ``torn`` (each problem found, in words), ``repaired`` (what was done),
    ``consistent`` (nothing left torn) and ``damaged`` (damaged records, each naming its file,
    line and field; ``pointer_error`` is the pointer's own damage). A damaged record is never
    repaired or acted on: the state is reported as it is, and inconsistent."""
    pointer_error: CorruptRecord | None = None
    try:
        pointer = _read_pointer(root)
    except CorruptRecord as exc:
        pointer, pointer_error = None, exc
    history = _read_history(root)
    intent, intent_problem = read_intent(root)
    damaged = ([pointer_error] if pointer_error else []) + history.damaged
    if not damaged and history.tail is not None:
        number, text, problem = history.tail
        planned = _reconcile_core(root, pointer, list(history.events), intent, intent_problem, write=False)
        if not any(_completes(text, line) for line in planned["appended"]):
            why = getattr(problem, "why", str(problem))
            damaged.append(corrupt_record(f"{why}: a torn last line that no unfinished promotion explains",
                                          path=problem.path, line=number, field=problem.field, hint=_FIX_HISTORY))
    if damaged:
        torn = [str(d) for d in damaged]
        if intent is not None or intent_problem is not None:
            torn.append(f"{INTENT} records an unfinished promotion; it is repaired once the damaged record is fixed")
        return {"pointer": pointer, "events": history.events, "stack": _stack(history.events), "torn": torn,
                "repaired": [], "unresolved": list(torn), "consistent": False, "unrepairable": list(torn),
                "damaged": [record_problem(d) for d in damaged], "pointer_error": pointer_error}
    state = _reconcile_core(root, pointer, list(history.events), intent, intent_problem, write=write)
    del state["appended"]
    return {**state, "damaged": [], "pointer_error": None}


def _reconcile_core(root: Path, pointer: dict[str, Any] | None, events: list[dict[str, Any]],
                    intent: dict[str, Any] | None, intent_problem: str | None, *, write: bool) -> dict[str, Any]:
    """:func:`reconcile` for well-formed records; ``appended`` lists the history lines the
    repair writes (or would write)."""
    torn: list[str] = []
    repaired: list[str] = []
    unresolved: list[str] = []
    appended: list[str] = []

    pending: list[dict[str, Any]] = []  # history lines a repair adds (in memory only when not writing)

    def append(line: dict[str, Any]) -> None:
        text = json.dumps(line, sort_keys=True)
        appended.append(text)
        if write:
            append_line_locked(root / HISTORY, text)
            events.append(json.loads(text))
        else:
            pending.append(json.loads(text))

    if intent is not None:
        what = f"{intent['event']} of {_label(intent['pointer'])}"
        if pointer == intent["pointer"]:  # the pointer was written: the event happened
            if not events or events[-1]["pointer"] != intent["pointer"]:
                torn.append(f"{POINTER} was replaced by the {what} but {HISTORY} does not record it yet")
                append(intent["history_line"])
                if write:
                    repaired.append(f"completed {HISTORY} with the {what} (from {INTENT})")
            torn.append(f"{INTENT} of the finished {what} was left behind")
            if write:
                (root / INTENT).unlink(missing_ok=True)
                repaired.append(f"removed {INTENT} of the finished {what}")
        elif pointer == intent["replaces"]:  # the pointer was never written: the event did not happen
            torn.append(f"{INTENT} records a {what} that was interrupted before {POINTER} was written")
            if write:
                (root / INTENT).unlink(missing_ok=True)
                repaired.append(f"discarded the interrupted {what} (its pointer was never written; {POINTER} "
                                f"still names {_label(pointer)})")
        else:
            problem = (f"{INTENT} records a {what} replacing {_label(intent['replaces'])}, but {POINTER} names "
                       f"{_label(pointer)}: neither the state before nor after it; compare {POINTER} with the last "
                       f"lines of {HISTORY}, fix {POINTER} and move {INTENT} aside")
            torn.append(problem)
            unresolved.append(problem)
        if write and not unresolved:
            fsync_dir(root)

    stack = _stack(events + pending)
    top = stack[-1] if stack else None
    if not same_pointer(top, pointer) and not unresolved:
        line = None
        if pointer is not None and "restored_by" not in pointer and "promoted_at" in pointer and \
                "previous" in pointer and same_pointer(pointer["previous"], top):
            line = promote_line(pointer)
        elif pointer is not None and pointer.get("restored_by") == "rollback" and "restored_at" in pointer and \
                len(stack) >= 2 and same_pointer(pointer.get("rolled_back"), top) and same_pointer(stack[-2], pointer):
            line = rollback_line(pointer)
        if line is not None:
            torn.append(f"{POINTER} names {_label(pointer)} but {HISTORY} does not record that {line['event']} "
                        f"(a crash between the pointer and the history)")
            append(line)
            if write:
                repaired.append(f"completed {HISTORY} with the {line['event']} of {_label(pointer)} (rebuilt from "
                                f"{POINTER})")
        else:
            problem = (f"{POINTER} names {_label(pointer)} but {HISTORY} ends with {_label(top)} promoted; restore "
                       f"{POINTER} from the pointer of the last line of {HISTORY}, or edit the history")
            torn.append(problem)
            unresolved.append(problem)
    if intent_problem is not None:
        if not unresolved:
            torn.append(intent_problem)
            if write:
                aside = root / f"{INTENT}.unreadable-{os.getpid()}"
                os.replace(root / INTENT, aside)
                fsync_dir(root)
                repaired.append(f"moved the unreadable {INTENT} aside to {aside.name} ({POINTER} and {HISTORY} "
                                f"agree, so it recorded nothing pending)")
        else:
            problem = f"{intent_problem}; cannot tell whether its promotion happened"
            torn.append(problem)
            unresolved.append(problem)
    unrepairable = list(unresolved)  # what a repair could not do (the rest it does)
    if not write:
        unresolved = list(torn)
    stack = _stack(events)  # what is on disk now
    return {"pointer": pointer, "events": events, "stack": stack, "torn": torn, "repaired": repaired,
            "unresolved": unresolved, "consistent": not unresolved, "appended": appended,
            "unrepairable": unrepairable}


def read_state(root: Path, *, repair: bool = True) -> dict[str, Any]:
    """The reconciled state, taking the lock to repair when something needs it. On a
    read-only (or otherwise unwritable) directory the state is reported unrepaired."""
    found = reconcile(root, write=False)
    if found["consistent"] or not repair or found["damaged"]:  # damage is never repaired here
        return found
    try:
        with locked(root / POINTER):
            return reconcile(root, write=True)
    except (OSError, ResourceError) as exc:  # read-only, full or forbidden: report instead
        found = reconcile(root, write=False)
        found["repair_error"] = f"could not repair ({getattr(exc, 'code', type(exc).__name__)}: {exc})"
        return found


def read_promoted(checkpoints_dir: str | os.PathLike[str] = "checkpoints") -> dict[str, Any] | None:
    """The promoted pointer document, or None when nothing is promoted (after repairing a
    state a crash left, see the module docstring). ``promoted.json`` is replaced atomically,
    so the document read is always one that was fully written. A damaged pointer is
    :class:`~extrarlhf.core.errors.CorruptRecord` (naming the file and field): nobody reads
    "nothing promoted" out of it."""
    state = read_state(Path(checkpoints_dir))
    if state["pointer_error"] is not None:
        raise state["pointer_error"]
    return state["pointer"]


def current_incumbent(checkpoints_dir: str | os.PathLike[str] = "checkpoints") -> str:
    """The spec new candidates are benchmarked against: the promoted checkpoint, else
    ``baseline:random`` (the first-promotion rule, :data:`DEFAULT_INCUMBENT`)."""
    doc = read_promoted(checkpoints_dir)
    return doc["name"] if doc else DEFAULT_INCUMBENT


class _EveryName(dict):
    """The protection mapping while the promotion records are damaged: every name is in it."""

    unknowable = True

    def __init__(self, why: str) -> None:
        super().__init__()
        self.why = why

    def __contains__(self, name: object) -> bool:
        return True

    def __missing__(self, name: str) -> str:
        return self.why


@contextlib.contextmanager
def promotion_guard(checkpoints_dir: str | os.PathLike[str]) -> Iterator[dict[str, str]]:
    """Hold the promotion lock and yield ``{name: why}`` for the checkpoints that must never be
    overwritten: the promoted one, every one a rollback could restore, and any named by an
    unfinished promotion. The registry holds it while it replaces a checkpoint, so a promotion
    never interleaves with an overwrite. While a promotion record is damaged nobody can tell
    which checkpoints a rollback could restore, so every name is protected (the mapping
    contains every name; ``unknowable`` is true and each reason names the damaged record)."""
    root = Path(checkpoints_dir)
    root.mkdir(parents=True, exist_ok=True)
    with locked(root / POINTER):
        try:
            state = reconcile(root, write=True)
        except (OSError, ResourceError):
            state = reconcile(root, write=False)
        protected: dict[str, str] = {} if not state["damaged"] else _EveryName(
            "cannot be checked for protection: " + "; ".join(d["message"] for d in state["damaged"])
            + " (the promotion records cannot tell whether a rollback could restore it; fix them first, "
              "`extrarlhf check` lists every damaged record)")
        for doc in reversed(state["stack"][:-1]):
            protected.setdefault(doc["name"], f"can be restored by rollback_promotion (it was promoted before, "
                                              f"see {(root / HISTORY).absolute()})")
        intent, _ = read_intent(root)
        if intent is not None:
            for doc in (intent["pointer"], intent["replaces"]):
                if doc is not None:
                    protected[doc["name"]] = f"is named by an unfinished promotion ({(root / INTENT).absolute()})"
        pointer = state["pointer"]
        if pointer is not None:
            protected[pointer["name"]] = (f"is the promoted checkpoint ({(root / POINTER).absolute()} names it, "
                                          f"weights_hash {pointer['weights_hash'][:16]}...)")
        yield protected


# ---------------------------------------------------------------------------- writing
def _crash_point(point: str, root: Path | None = None, line: str | None = None) -> None:
    """Test hook (module docstring): SIGKILL this process at ``point`` when
    ``RLHF_TEST_CRASH_AT`` names it."""
    if os.environ.get(CRASH_ENV) != point:
        return
    if point == "mid_history" and root is not None and line is not None:
        with open(root / HISTORY, "ab") as fh:  # a torn, half-written history line
            fh.write(line.encode("utf-8")[: len(line) // 2])
            fh.flush()
            os.fsync(fh.fileno())
    os.kill(os.getpid(), signal.SIGKILL)


def commit(root: Path, event: str, pointer: dict[str, Any], replaces: dict[str, Any] | None,
            line: dict[str, Any]) -> None:
    """Intent, pointer, history, intent removal (the caller holds the lock)."""
    atomic_write_json(root / INTENT, {"schema_version": INTENT_SCHEMA_VERSION, "kind": "promotion_intent",
                                      "event": event, "pointer": pointer, "replaces": replaces,
                                      "history_line": line, "written_at": utc_now(), "pid": os.getpid()})
    _crash_point("after_intent")
    atomic_write_json(root / POINTER, pointer)
    _crash_point("after_pointer")
    text = json.dumps(line, sort_keys=True)
    _crash_point("mid_history", root, text)
    append_line_locked(root / HISTORY, text)
    _crash_point("after_history")
    fsync_dir(root)  # the pointer's rename and the history are durable before the intent goes
    _crash_point("before_intent_removal")
    (root / INTENT).unlink()
    fsync_dir(root)
