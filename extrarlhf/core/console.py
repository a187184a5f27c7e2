"""What the CLI commands print besides their reports: a result as JSON, a share as a percentage."""

from __future__ import annotations

import json
from typing import Any


def print_json(result: Any) -> None:
    print(json.dumps(result, indent=2, sort_keys=True, default=str))


def percent(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"
