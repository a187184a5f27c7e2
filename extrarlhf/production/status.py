"""``production_status``: whether the production plane is enabled, by variable name only."""

from __future__ import annotations

from typing import Any, Mapping

from .gate import MIN_SALT_BYTES, gate_status
from .pseudonyms import PSEUDONYM_RULE
from .reader import MAX_ROWS


def production_status(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The gate's state (names of the variables set, missing or invalid; never a value) and the
    rules every export follows. Opens no connection."""
    status = gate_status(environ)
    return {**status, "rules": {
        "min_salt_bytes": MIN_SALT_BYTES, "max_rows_per_stream": MAX_ROWS, "pseudonym": PSEUDONYM_RULE,
        "snapshot": "one REPEATABLE READ READ ONLY snapshot for every stream of an export",
        "secrets": "the DSN and the salt live only in the environment; they are never accepted as arguments"}}
