"""A one-line progress display for the CLI (stderr).

On a terminal the line is redrawn in place at most ten times a second; when stderr is a
file or a pipe (CI logs), a line is written at every tenth of the work instead.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class ProgressLine:
    """``label [#####.....] done/total unit  rate unit/s  note``; call it as a progress
    callback. ``note`` (e.g. a benchmark's running SPRT) is appended to the next line drawn."""

    def __init__(self, label: str, unit: str = "battles", stream: TextIO | None = None, width: int = 24) -> None:
        self.label, self.unit, self.width = label, unit, width
        self.stream = stream if stream is not None else sys.stderr
        self.interactive = self.stream.isatty()
        self.start = time.perf_counter()
        self.last_draw = 0.0
        self.last_decile = -1
        self.note = ""

    def __call__(self, done: int, total: int) -> None:
        now = time.perf_counter()
        finished = done >= total
        if self.interactive:
            if not finished and now - self.last_draw < 0.1:
                return
        else:
            decile = 10 * done // total if total else 10
            if decile == self.last_decile and not finished:
                return
            self.last_decile = decile
        self.last_draw = now
        elapsed = max(now - self.start, 1e-9)
        filled = int(self.width * done / total) if total else self.width
        bar = "#" * filled + "." * (self.width - filled)
        line = f"{self.label} [{bar}] {done}/{total} {self.unit}  {done / elapsed:,.1f} {self.unit}/s"
        if self.note:
            line += f"  {self.note}"
        self.stream.write(f"\r{line}" + ("\n" if finished else "") if self.interactive else line + "\n")
        self.stream.flush()
