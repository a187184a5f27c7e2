"""Promotion of a checkpoint to *the* policy, with history and rollback (DESIGN section 11).

Files under the checkpoints dir::

    promoted.json            the promoted pointer (atomic replace): name, kind, weights_hash,
                             sha256, the benchmark that justified it, the previous pointer's name
    promoted.json.lock       serializes promotions, rollbacks, repairs and registry overwrites (flock)
    promoted_history.jsonl   one line per event ("promote" or "rollback"), each with the
                             pointer document it installed
    promoted.intent.json     present only while a promotion or rollback is being written (or
                             after a crash in the middle of one): the new pointer document, the
                             pointer it replaces and the history line

The promotion policy
--------------------
A benchmark counts for promotion only when it passed *and* its settings meet the
:class:`PromotionPolicy`: the SPRT's ``elo0 >= min_elo0`` (0: H1 must mean "stronger than the
incumbent", never "at most 400 Elo weaker"), ``alpha <= max_alpha`` and ``beta <= max_beta``
(0.05 each), and at least ``min_pairs`` pairs played (50: 100 battles over 50 deals, both
seats each; below that the GSPRT's regularized empty cells and Wald's approximate bounds
decide more than the games do, and the Elo interval is wider than about +-70). The defaults
apply everywhere; only a core caller can change them, by passing ``policy=PromotionPolicy(...)``
to :func:`promote_checkpoint` (and to ``benchmark_models`` / ``run_pipeline``). No MCP tool
argument and no CLI flag reaches it.

:func:`promote_checkpoint` first repairs what a crash left (see below; a state it cannot repair
refuses with the check ``history_consistent``), then promotes only a candidate that (every
refusal names each failed check):

1. is registered, with its model file present and intact (``registered``, ``file_intact``);
2. has a benchmark report (``benchmarked``); its *latest* one (highest sequence) is valid (no
   degraded or crashed battle: ``benchmark_valid``), its SPRT accepted H1
   (``benchmark_passed``) and its settings meet the policy (``promotion_policy``, one reason
   per setting that falls short); an unreadable report file of the candidate refuses too
   (``benchmark_reports_readable``: it might be the latest);
3. played with the weights it is registered with now (``weights_hash``: the report's played
   weights_hash equals the registry's, so weights replaced after the benchmark are never
   promoted);
4. was benchmarked against the current incumbent (``current_incumbent``) -- the promoted
   checkpoint, with the weights it was promoted with, or ``baseline:random`` when nothing is
   promoted (``require_current_incumbent=False`` waives this one, e.g. for a first promotion
   decided against another reference);
5. is not already the promoted one (``not_already_promoted``).

:func:`rollback_promotion` re-installs the pointer that was current before the last
promotion (the history is a stack: promote pushes, rollback pops), after checking that the
checkpoint it names is still registered with the same weights.

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
when unset; the crash tests (tests/test_promotion_crash.py) use it.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import signal
from collections.abc import Iterator
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from .checkpoints import CheckpointRegistry
from .errors import (CorruptRecord, InvalidArgument, NotFound, ResourceError, RLHFError, UnsupportedSchema,
                     corrupt_record, record_problem)
from .fileio import append_line_locked, atomic_write_json, fsync_dir, locked
from .runtime.trace import utc_now

POINTER_SCHEMA_VERSION = 1
INTENT_SCHEMA_VERSION = 1
POINTER = "promoted.json"
HISTORY = "promoted_history.jsonl"
INTENT = "promoted.intent.json"
# The first-promotion rule: with nothing promoted, the incumbent is baseline:random -- a first
# policy shows that it beats random play (SPRT); every later one must beat the promoted one.
# baseline:greedy stays a reference on the ladder (ladder.py), not a bar a first policy trained
# in minutes could clear (DESIGN section 14, README "The improvement loop").
DEFAULT_INCUMBENT = "baseline:random"
CRASH_ENV = "RLHF_TEST_CRASH_AT"
CRASH_POINTS = ("after_intent", "after_pointer", "mid_history", "after_history", "before_intent_removal")
MAX_POLICY_PAIRS = 100_000


class PromotionRefused(RLHFError):
    """A promotion or rollback that the rules forbid; ``details["reasons"]`` lists each
    failed check as ``{"check", "message"}``."""

    code = "promotion_refused"

    def __init__(self, message: str, reasons: list[dict[str, str]], **details: Any) -> None:
        super().__init__(message)
        self.reasons = reasons
        self.details = {"reasons": reasons, **details}


# ---------------------------------------------------------------------------- the policy
@dataclass(frozen=True)
class PromotionPolicy:
    """What a benchmark's settings must satisfy to count for promotion (module docstring).

    - ``min_elo0``: lowest SPRT ``elo0`` (H0: the candidate is at most elo0 Elo stronger).
      With ``elo0 >= 0`` an accepted H1 means the candidate is stronger than the incumbent;
      with ``elo0 = -400`` it would "pass" while losing 5-29.
    - ``max_alpha`` / ``max_beta``: highest SPRT false-positive / false-negative rates.
    - ``min_pairs``: fewest pairs (each deal played from both seats) counted. The benchmark
      never stops on H1 before this many pairs, so a decided SPRT is eligible when
      ``n_pairs >= min_pairs``.

    Only core callers override it (``policy=PromotionPolicy(min_pairs=100)``); facades never
    pass one through from their clients.
    """

    min_elo0: float = 0.0
    max_alpha: float = 0.05
    max_beta: float = 0.05
    min_pairs: int = 50

    def __post_init__(self) -> None:
        def number(value: Any) -> bool:
            return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)

        if not number(self.min_elo0) or not -1000.0 <= self.min_elo0 <= 1000.0:
            raise InvalidArgument(f"promotion policy min_elo0 must be a number in [-1000, 1000], got "
                                  f"{self.min_elo0!r}")
        for name in ("max_alpha", "max_beta"):
            value = getattr(self, name)
            if not number(value) or not 0.0 < value < 0.5:
                raise InvalidArgument(f"promotion policy {name} must be a number in (0, 0.5), got {value!r}")
        if isinstance(self.min_pairs, bool) or not isinstance(self.min_pairs, int) or \
                not 1 <= self.min_pairs <= MAX_POLICY_PAIRS:
            raise InvalidArgument(f"promotion policy min_pairs must be an integer in 1..{MAX_POLICY_PAIRS}, got "
                                  f"{self.min_pairs!r}")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def coerce(cls, value: "PromotionPolicy | None") -> "PromotionPolicy":
        """The policy itself, or the defaults for None. Anything else (a mapping from a client,
        say) is refused: the policy is changed in code, with a ``PromotionPolicy`` object."""
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        raise InvalidArgument(f"a promotion policy is a PromotionPolicy object ({', '.join(f.name for f in fields(cls))}"
                              f"), got {type(value).__name__}")

    def settings_blockers(self, *, elo0: float, elo1: float, alpha: float, beta: float,
                          pairs: int) -> list[dict[str, str]]:
        """Each way these SPRT settings and pair count fall short of the policy, as
        ``{"check": "promotion_policy", "message"}``."""
        out = []
        if elo0 < self.min_elo0:
            out.append(f"elo0={elo0:g} is below the policy's min_elo0={self.min_elo0:g}: accepting H1 (elo >= "
                       f"{elo1:g}) {'would not show the candidate is stronger than the incumbent' if elo1 <= 0 else 'can happen for a candidate weaker than the incumbent'}"
                       f"; benchmark again with elo0 >= {self.min_elo0:g}")
        if alpha > self.max_alpha:
            out.append(f"alpha={alpha:g} is above the policy's max_alpha={self.max_alpha:g}")
        if beta > self.max_beta:
            out.append(f"beta={beta:g} is above the policy's max_beta={self.max_beta:g}")
        if pairs < self.min_pairs:
            out.append(f"{pairs} pair(s) counted; promotion needs at least min_pairs={self.min_pairs} (raise n_pairs)")
        return [{"check": "promotion_policy", "message": m} for m in out]


def benchmark_blockers(report: dict[str, Any], policy: PromotionPolicy | None = None) -> list[dict[str, str]]:
    """Why a benchmark report does not count for promotion under ``policy`` (empty when it
    does): ``benchmark_valid``, ``benchmark_passed`` (the SPRT did not accept H1) and
    ``promotion_policy`` reasons, in that order. Judged from the report's own settings and
    counts, so a report written by an older version (or under a looser policy) is re-judged."""
    policy = PromotionPolicy.coerce(policy)
    reasons = []
    if not report["valid"]:
        reasons.append({"check": "benchmark_valid",
                        "message": "the benchmark is invalid: " + "; ".join(report["invalid_reasons"])})
    sprt = report["match"]["sprt"]
    if sprt["decision"] != "H1":
        verdict = report.get("verdict")
        reasons.append({"check": "benchmark_passed", "message": f"the SPRT did not accept H1 (decision "
                        f"{sprt['decision']}, LLR {sprt['llr']:.3f}, bounds [{sprt['lower']:.3f}, "
                        f"{sprt['upper']:.3f}])" + (f": {verdict}" if verdict else "")})
    reasons += policy.settings_blockers(elo0=sprt["elo0"], elo1=sprt["elo1"], alpha=sprt["alpha"], beta=sprt["beta"],
                                        pairs=report["match"]["pairs"])
    return reasons


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
    :class:`~extrarlhf.errors.CorruptRecord` (naming the file and field), another
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


def _read_intent(root: Path) -> tuple[dict[str, Any] | None, str | None]:
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
    (:class:`~extrarlhf.errors.CorruptRecord`, each naming its line and field) and a torn last
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


def _same(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return a.get("name") == b.get("name") and a.get("weights_hash") == b.get("weights_hash")


def _label(doc: dict[str, Any] | None) -> str:
    if doc is None:
        return "nothing"
    return f"{doc.get('name')!r} (weights_hash {str(doc.get('weights_hash'))[:16]}...)"


def _promote_line(pointer: dict[str, Any]) -> dict[str, Any]:
    return {"event": "promote", "at": pointer["promoted_at"], "name": pointer["name"],
            "weights_hash": pointer["weights_hash"], "from": pointer["previous"], "pointer": pointer}


def _rollback_line(pointer: dict[str, Any]) -> dict[str, Any]:
    return {"event": "rollback", "at": pointer["restored_at"], "name": pointer["name"],
            "weights_hash": pointer["weights_hash"], "from": pointer["rolled_back"], "pointer": pointer}


# ---------------------------------------------------------------------------- repair
def _reconcile(root: Path, *, write: bool) -> dict[str, Any]:
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
    intent, intent_problem = _read_intent(root)
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
    """:func:`_reconcile` for well-formed records; ``appended`` lists the history lines the
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
    if not _same(top, pointer) and not unresolved:
        line = None
        if pointer is not None and "restored_by" not in pointer and "promoted_at" in pointer and \
                "previous" in pointer and _same(pointer["previous"], top):
            line = _promote_line(pointer)
        elif pointer is not None and pointer.get("restored_by") == "rollback" and "restored_at" in pointer and \
                len(stack) >= 2 and _same(pointer.get("rolled_back"), top) and _same(stack[-2], pointer):
            line = _rollback_line(pointer)
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


def _state(root: Path, *, repair: bool = True) -> dict[str, Any]:
    """The reconciled state, taking the lock to repair when something needs it. On a
    read-only (or otherwise unwritable) directory the state is reported unrepaired."""
    found = _reconcile(root, write=False)
    if found["consistent"] or not repair or found["damaged"]:  # damage is never repaired here
        return found
    try:
        with locked(root / POINTER):
            return _reconcile(root, write=True)
    except (OSError, ResourceError) as exc:  # read-only, full or forbidden: report instead
        found = _reconcile(root, write=False)
        found["repair_error"] = f"could not repair ({getattr(exc, 'code', type(exc).__name__)}: {exc})"
        return found


def read_promoted(checkpoints_dir: str | os.PathLike[str] = "checkpoints") -> dict[str, Any] | None:
    """The promoted pointer document, or None when nothing is promoted (after repairing a
    state a crash left, see the module docstring). ``promoted.json`` is replaced atomically,
    so the document read is always one that was fully written. A damaged pointer is
    :class:`~extrarlhf.errors.CorruptRecord` (naming the file and field): nobody reads
    "nothing promoted" out of it."""
    state = _state(Path(checkpoints_dir))
    if state["pointer_error"] is not None:
        raise state["pointer_error"]
    return state["pointer"]


def current_incumbent(checkpoints_dir: str | os.PathLike[str] = "checkpoints") -> str:
    """The spec new candidates are benchmarked against: the promoted checkpoint, else
    ``baseline:random`` (the first-promotion rule, :data:`DEFAULT_INCUMBENT`)."""
    doc = read_promoted(checkpoints_dir)
    return doc["name"] if doc else DEFAULT_INCUMBENT


def promotion_status(checkpoints_dir: str | os.PathLike[str] = "checkpoints", *,
                     repair: bool = True) -> dict[str, Any]:
    """The promoted pointer (checked against the registry), the incumbent spec, the history
    and the consistency of the three files: ``consistent`` (nothing torn is left), ``torn``
    (each problem found, in words), ``repaired`` (what this call repaired), ``damaged``
    (each damaged record: ``code``, ``path``, ``line``, ``field``, ``problem``, ``message``;
    never repaired; ``history_consistent`` is false while there is one, and ``incumbent`` is
    null while ``promoted.json`` itself is damaged). ``repair=False`` only looks."""
    root = Path(checkpoints_dir)
    state = _state(root, repair=repair)
    doc = state["pointer"]
    check = None
    if doc is not None:
        check = _registered_problems(CheckpointRegistry(root), doc["name"], doc["weights_hash"])
    stack = state["stack"]
    intent, _ = _read_intent(root)
    out = {"checkpoints_dir": str(root.absolute()), "promoted": doc,
           "incumbent": doc["name"] if doc else (None if state["pointer_error"] else DEFAULT_INCUMBENT),
           "promoted_intact": None if doc is None else not check,
           "promoted_problems": check or [],
           "consistent": state["consistent"], "torn": state["unresolved"],
           "repaired": state["repaired"], "pending_intent": intent,
           "history_consistent": not state["damaged"] and (
               (not stack and doc is None) or (bool(stack) and doc is not None and _same(stack[-1], doc))),
           "can_roll_back_to": stack[-2]["name"] if len(stack) >= 2 and not state["damaged"] else None,
           "damaged": state["damaged"], "history": state["events"]}
    if "repair_error" in state:
        out["repair_error"] = state["repair_error"]
    return out


def check_promotion(checkpoints_dir: str | os.PathLike[str] = "checkpoints", *,
                    repair: bool = False) -> dict[str, Any]:
    """The promotion records' problems for ``extrarlhf check``: ``problems`` (each ``code``,
    ``severity``, ``path``, ``line``, ``field``, ``message`` and ``repairable``: whether the
    crash repair every reader runs would fix it) and ``repaired`` (what ``repair=True`` fixed:
    only the states a crash left, as :func:`promotion_status` repairs them; a damaged record is
    never repaired). ``repair=False`` writes nothing."""
    root = Path(checkpoints_dir)
    problems: list[dict[str, Any]] = []
    try:
        state = _state(root, repair=repair)
    except UnsupportedSchema as exc:
        return {"problems": [{"code": exc.code, "severity": "error", "path": str((root / POINTER).absolute()),
                              "line": None, "field": "schema_version", "message": str(exc), "repairable": False}],
                "repaired": []}
    for damage in state["damaged"]:
        problems.append({**damage, "severity": "error", "repairable": False})
    damaged_text = {d["message"] for d in state["damaged"]}
    for text in state["unresolved"]:
        if text in damaged_text:
            continue
        problems.append({"code": "promotion_torn", "severity": "error", "path": str(root.absolute()), "line": None,
                         "field": None, "message": text, "repairable": text not in state["unrepairable"]})
    if "repair_error" in state:
        problems.append({"code": "promotion_not_repaired", "severity": "error", "path": str(root.absolute()),
                         "line": None, "field": None, "message": state["repair_error"], "repairable": False})
    pointer = state["pointer"]
    if pointer is not None:
        try:
            found = _registered_problems(CheckpointRegistry(root), pointer["name"], pointer["weights_hash"])
        except RLHFError as exc:  # the registry's index itself: reported by the registry check
            found = [f"the promoted checkpoint cannot be checked ({exc.code}: {exc})"]
        for text in found:
            problems.append({"code": "promoted_checkpoint_unusable", "severity": "error",
                             "path": str((root / POINTER).absolute()), "line": None, "field": None,
                             "message": f"the promoted checkpoint ({POINTER}): {text}", "repairable": False})
    return {"problems": problems, "repaired": list(state["repaired"])}


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
            state = _reconcile(root, write=True)
        except (OSError, ResourceError):
            state = _reconcile(root, write=False)
        protected: dict[str, str] = {} if not state["damaged"] else _EveryName(
            "cannot be checked for protection: " + "; ".join(d["message"] for d in state["damaged"])
            + " (the promotion records cannot tell whether a rollback could restore it; fix them first, "
              "`extrarlhf check` lists every damaged record)")
        for doc in reversed(state["stack"][:-1]):
            protected.setdefault(doc["name"], f"can be restored by rollback_promotion (it was promoted before, "
                                              f"see {(root / HISTORY).absolute()})")
        intent, _ = _read_intent(root)
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


def _commit(root: Path, event: str, pointer: dict[str, Any], replaces: dict[str, Any] | None,
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


def _registered_problems(registry: CheckpointRegistry, name: str, weights_hash: str | None) -> list[str]:
    """Why ``name`` with ``weights_hash`` is not usable now (empty when it is)."""
    try:
        info = registry.inspect(name)
    except NotFound:
        return [f"{name!r} is no longer registered"]
    problems = []
    if weights_hash is not None and info["weights_hash"] != weights_hash:
        problems.append(f"{name!r} is now registered with weights_hash {info['weights_hash'][:16]}..., not "
                        f"{weights_hash[:16]}...")
    if not info["file_present"]:
        problems.append(f"the model file of {name!r} is missing ({info['path']})")
    elif not info["file_intact"]:
        problems.append(f"the model file of {name!r} changed since registration ({info['path']})")
    return problems


def _refuse(what: str, reasons: list[dict[str, str]], **details: Any) -> PromotionRefused:
    text = "; ".join(f"[{r['check']}] {r['message']}" for r in reasons)
    return PromotionRefused(f"{what} refused: {text}", reasons, **details)


def _inconsistent(what: str, state: dict[str, Any]) -> PromotionRefused:
    return _refuse(what, [{"check": "history_consistent", "message": m} for m in state["unresolved"]])


def promote_checkpoint(name: str, *, checkpoints_dir: str | os.PathLike[str] = "checkpoints",
                       require_current_incumbent: bool = True,
                       policy: PromotionPolicy | None = None) -> dict[str, Any]:
    """Promote checkpoint ``name`` (see the module docstring for the rules; ``policy``
    overrides the default :class:`PromotionPolicy`); returns ``{"promoted": pointer,
    "previous": pointer or None, "pointer_path", "history_path", "repaired"}``."""
    from .benchmarking import list_benchmarks

    policy = PromotionPolicy.coerce(policy)
    if not isinstance(require_current_incumbent, bool):
        raise InvalidArgument(f"require_current_incumbent must be true or false, got {require_current_incumbent!r}")
    root = Path(checkpoints_dir)
    registry = CheckpointRegistry(root)
    root.mkdir(parents=True, exist_ok=True)
    with locked(root / POINTER):
        state = _reconcile(root, write=True)
        if not state["consistent"]:
            raise _inconsistent(f"promotion of {name!r}", state)
        reasons: list[dict[str, str]] = []
        try:
            cp = registry.get(name)
        except NotFound as exc:
            raise _refuse(f"promotion of {name!r}", [{"check": "registered", "message": str(exc)}]) from None
        for problem in _registered_problems(registry, name, cp.weights_hash):
            reasons.append({"check": "file_intact", "message": problem})
        unreadable: list[str] = []
        reports = list_benchmarks(root, name, unreadable)
        report = reports[-1] if reports else None
        for problem in unreadable:  # a damaged report might be the latest one: never guess
            reasons.append({"check": "benchmark_reports_readable", "message": problem})
        current = state["pointer"]
        incumbent = current["name"] if current else DEFAULT_INCUMBENT
        if report is None:
            reasons.append({"check": "benchmarked", "message": f"{name!r} has no benchmark report in "
                                                               f"{root / 'benchmarks'}; run benchmark_models "
                                                               f"({name!r} vs {incumbent!r}) first"})
        else:
            where = f"latest benchmark #{report['sequence']} ({report['report_path']})"
            for reason in benchmark_blockers(report, policy):
                reasons.append({"check": reason["check"], "message": f"{where}: {reason['message']}"})
            played = report["candidate"]["played_weights_hashes"]
            if played != [cp.weights_hash]:
                reasons.append({"check": "weights_hash", "message": f"{where} played weights_hash "
                                f"{', '.join(h[:16] + '...' for h in played) or 'none'} but {name!r} is registered "
                                f"with {cp.weights_hash[:16]}...; benchmark the registered weights again"})
            if require_current_incumbent:
                bench_inc = report["incumbent"]
                if bench_inc["spec"] != incumbent:
                    reasons.append({"check": "current_incumbent", "message": f"{where} was played against "
                                    f"{bench_inc['spec']!r} but the current incumbent is {incumbent!r}; benchmark "
                                    f"{name!r} against {incumbent!r}"})
                elif current is not None and bench_inc["played_weights_hashes"] != [current["weights_hash"]]:
                    reasons.append({"check": "current_incumbent", "message": f"{where} was played against other "
                                    f"weights of {incumbent!r} than the promoted ones "
                                    f"({current['weights_hash'][:16]}...)"})
        if current is not None and _same(current, {"name": name, "weights_hash": cp.weights_hash}):
            reasons.append({"check": "not_already_promoted", "message": f"{name!r} with these weights is already "
                                                                        f"the promoted checkpoint (since "
                                                                        f"{current.get('restored_at') or current['promoted_at']})"})
        if reasons:
            raise _refuse(f"promotion of {name!r}", reasons, candidate=name, incumbent=incumbent,
                          policy=policy.as_dict())
        assert report is not None
        sprt = report["match"]["sprt"]
        pointer = {"schema_version": POINTER_SCHEMA_VERSION, "name": name, "kind": cp.kind,
                   "weights_hash": cp.weights_hash, "sha256": cp.sha256, "file": cp.path.name,
                   "promoted_at": utc_now(),
                   "previous": {"name": current["name"], "weights_hash": current["weights_hash"]} if current else None,
                   "benchmark": {"report": report["report_path"], "sequence": report["sequence"],
                                 "incumbent": report["incumbent"]["spec"], "score": report["match"]["score"],
                                 "elo": report["match"]["elo"], "elo_ci95": report["match"]["elo_ci95"],
                                 "llr": sprt["llr"], "decision": sprt["decision"],
                                 "pairs": report["match"]["pairs"],
                                 "sprt": {k: sprt[k] for k in ("elo0", "elo1", "alpha", "beta")}},
                   "policy": policy.as_dict()}
        _commit(root, "promote", pointer, current, _promote_line(pointer))
    return {"promoted": pointer, "previous": current, "pointer_path": str((root / POINTER).absolute()),
            "history_path": str((root / HISTORY).absolute()), "repaired": state["repaired"]}


def rollback_promotion(*, checkpoints_dir: str | os.PathLike[str] = "checkpoints") -> dict[str, Any]:
    """Re-install the pointer that was promoted before the current one; returns
    ``{"promoted": restored pointer, "rolled_back": the pointer it replaced, "repaired"}``."""
    root = Path(checkpoints_dir)
    root.mkdir(parents=True, exist_ok=True)
    with locked(root / POINTER):
        state = _reconcile(root, write=True)
        if not state["consistent"]:
            raise _inconsistent("rollback", state)
        current, stack = state["pointer"], state["stack"]
        if current is None:
            raise _refuse("rollback", [{"check": "promoted", "message": "nothing is promoted, so there is nothing "
                                                                        "to roll back"}])
        if len(stack) < 2:
            raise _refuse("rollback", [{"check": "previous_promotion", "message": f"{current['name']!r} is the "
                                        f"first promotion in {HISTORY}; there is no earlier one to roll back to"}])
        target = stack[-2]
        problems = _registered_problems(CheckpointRegistry(root), target["name"], target["weights_hash"])
        if problems:
            raise _refuse("rollback", [{"check": "previous_usable", "message": p} for p in problems],
                          target=target["name"])
        restored = {**target, "restored_at": utc_now(), "restored_by": "rollback",
                    "rolled_back": {"name": current["name"], "weights_hash": current["weights_hash"]}}
        _commit(root, "rollback", restored, current, _rollback_line(restored))
    return {"promoted": restored, "rolled_back": current, "pointer_path": str((root / POINTER).absolute()),
            "repaired": state["repaired"]}
