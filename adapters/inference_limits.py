"""Time limits of ONNX inference: the limit per ``session.run``, the watchdog thread that
enforces it and each model file's health (timeouts in a row, disabled until when).

Inference time limit. Every ``session.run`` (one decision, or one batch of decisions
evaluated together) gets a time limit: ``ModelPolicy(..., timeout_s=...)`` (also a
keyword of the registry factories), else the environment variable
``RLHF_INFERENCE_TIMEOUT_S``, else :data:`DEFAULT_TIMEOUT_S` (2 s); ``0`` means no limit.
One watchdog thread per process (started on first use, a daemon) sets
``RunOptions.terminate`` on a run past its deadline; onnxruntime then stops at the next
graph node boundary (nodes inside Loop/Scan/If bodies included; a single kernel already
running is not interrupted) and raises ``Fail`` ("Exiting due to terminate flag being set
to true"). That decision is a fallback like any other model failure, with a warning of
kind ``timeout``. After ``max_timeouts`` timed-out runs in a row of one model file
(constructor keyword, else ``RLHF_INFERENCE_MAX_TIMEOUTS``, else
:data:`DEFAULT_MAX_TIMEOUTS` = 3; ``0`` never disables) the model is disabled: the
policies that were playing it fall back without running it for the rest of their battle,
and every policy playing that file in this process does so for ``RLHF_INFERENCE_DISABLE_S``
seconds (default :data:`DEFAULT_DISABLE_S` = 600, which covers the rest of a series), so a
model that spins costs ``max_timeouts`` x the limit, not one limit per decision. A changed
file (another sha256) is a new model and starts afresh.
"""

from __future__ import annotations

import math
import os
import threading
import time
from functools import cache
from typing import TYPE_CHECKING

from .decision import AdapterError

if TYPE_CHECKING:  # onnxruntime is imported where a run is armed (start-up cost)
    import onnxruntime as ort

TIMEOUT_ENV = "RLHF_INFERENCE_TIMEOUT_S"
MAX_TIMEOUTS_ENV = "RLHF_INFERENCE_MAX_TIMEOUTS"
DISABLE_ENV = "RLHF_INFERENCE_DISABLE_S"
DEFAULT_TIMEOUT_S = 2.0
DEFAULT_MAX_TIMEOUTS = 3
DEFAULT_DISABLE_S = 600.0
_MAX_SETTING = 86_400.0  # a day: anything longer is a typo


@cache
def _unlimited_run_options() -> ort.RunOptions:
    """The RunOptions of runs without a time limit (one per process)."""
    import onnxruntime as ort

    options = ort.RunOptions()
    options.log_severity_level = 4
    return options


def _setting(value: object, env: str, default: float, what: str, integer: bool = False) -> float:
    """A limit from the constructor, else from the environment, else the default; refused
    (AdapterError naming where it came from) unless a finite number in 0..a day."""
    source = "argument"
    if value is None:
        raw = os.environ.get(env, "").strip()
        if not raw:
            return default
        source = f"environment variable {env}"
        try:
            value = int(raw) if integer else float(raw)
        except ValueError:
            raise AdapterError(f"{what} from {source} must be {'an integer' if integer else 'a number of seconds'}"
                               f", got {raw[:40]!r}") from None
    ok = (isinstance(value, int) if integer else isinstance(value, (int, float))) and not isinstance(value, bool)
    if not ok or not 0 <= value <= _MAX_SETTING:  # NaN fails the comparison too
        raise AdapterError(f"{what} from {source} must be {'an integer' if integer else 'a number of seconds'} "
                           f"in 0..{_MAX_SETTING:g} (0: {'never' if integer else 'no limit'}), got {value!r}")
    return value


def inference_timeout(timeout_s: float | None = None) -> float | None:
    """The time limit per ``session.run`` in seconds (None: no limit); see the module docstring."""
    limit = float(_setting(timeout_s, TIMEOUT_ENV, DEFAULT_TIMEOUT_S, "inference timeout_s"))
    return limit if limit > 0 else None


def max_timeouts_in_row(max_timeouts: int | None = None) -> int:
    """Timed-out runs in a row after which a model is disabled (0: never)."""
    return int(_setting(max_timeouts, MAX_TIMEOUTS_ENV, DEFAULT_MAX_TIMEOUTS, "max_timeouts", integer=True))


def disable_seconds(strict: bool = False) -> float:
    """How long a model disabled for timeouts stays disabled in this process (env
    ``RLHF_INFERENCE_DISABLE_S``). Policies check it strictly when they are built; read again
    mid-battle, when a model gets disabled, a value broken since falls back to the default."""
    try:
        return float(_setting(None, DISABLE_ENV, DEFAULT_DISABLE_S, "disable time"))
    except AdapterError:
        if strict:
            raise
        return DEFAULT_DISABLE_S


class _Run:
    """One armed ``session.run``: its own RunOptions, deadline, and whether the watchdog fired."""

    __slots__ = ("deadline", "fired", "options")

    def __init__(self, deadline: float) -> None:
        import onnxruntime as ort

        self.options = ort.RunOptions()
        self.options.log_severity_level = 4
        self.deadline = deadline
        self.fired = False


class _Watchdog:
    """One daemon thread per process that sets ``RunOptions.terminate`` on runs past their
    deadline. Arming a run costs a lock and a dict insert: the thread is woken only when a
    run's deadline is earlier than the one it sleeps until (in practice, the first run after
    an idle spell), so a busy series wakes it about twice per time limit, an idle process never.
    """

    def __init__(self) -> None:
        self._reset()
        if hasattr(os, "register_at_fork"):  # a forked worker has no thread: start its own
            os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._runs: dict[int, _Run] = {}
        self._next_wake = math.inf
        self._thread: threading.Thread | None = None
        self.fired = 0  # runs terminated by this process's watchdog (for tests and diagnostics)

    def arm(self, limit_s: float) -> _Run:
        run = _Run(time.monotonic() + limit_s)
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="onnx-inference-watchdog", daemon=True)
                self._thread.start()
            self._runs[id(run)] = run
            if run.deadline < self._next_wake:
                self._next_wake = run.deadline
                self._wake.set()
        return run

    def disarm(self, run: _Run) -> bool:
        """Forget ``run`` (the watchdog no longer touches it); True if it was terminated."""
        with self._lock:
            self._runs.pop(id(run), None)
        return run.fired

    @property
    def thread(self) -> threading.Thread | None:
        return self._thread

    def _loop(self) -> None:
        lock, wake = self._lock, self._wake
        while True:
            with lock:
                delay = self._next_wake - time.monotonic()
            if delay > 0:
                wake.wait(None if delay == math.inf else delay)
            with lock:
                wake.clear()
                now = time.monotonic()
                upcoming = math.inf
                for run in self._runs.values():
                    if run.fired:
                        continue
                    if run.deadline <= now:
                        run.options.terminate = True
                        run.fired = True
                        self.fired += 1
                    elif run.deadline < upcoming:
                        upcoming = run.deadline
                self._next_wake = upcoming


WATCHDOG = _Watchdog()


class ModelHealth:
    """Per loaded model file and process: timed-out runs in a row and, once disabled, until when."""

    __slots__ = ("disabled_reason", "disabled_until", "timeouts_in_row")

    def __init__(self) -> None:
        self.timeouts_in_row = 0
        self.disabled_until: float | None = None  # time.monotonic()
        self.disabled_reason = ""

    def disabled(self) -> bool:
        return self.disabled_until is not None and time.monotonic() < self.disabled_until
