"""UTC timestamps as every record writes them (ISO 8601, milliseconds, ``Z``)."""

from __future__ import annotations

from datetime import datetime, timezone


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
