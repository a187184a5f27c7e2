"""``production_status``: whether the production plane is enabled, by variable name only."""

from __future__ import annotations

from typing import Any, Mapping

from .gate import MAX_KEY_ID_CHARS, MIN_SALT_BYTES, MIN_SALT_DISTINCT_BYTES, MIN_SALT_ENTROPY_BITS, gate_status
from .pseudonyms import PSEUDONYM_RULE
from .reader import APPLICATION_NAME, MAX_ROWS


def production_status(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The gate's state (names of the variables set, missing or invalid; never a value) and the
    rules every export follows. Opens no connection."""
    status = gate_status(environ)
    return {**status, "rules": {
        "min_salt_bytes": MIN_SALT_BYTES, "min_salt_distinct_bytes": MIN_SALT_DISTINCT_BYTES,
        "min_salt_entropy_bits": MIN_SALT_ENTROPY_BITS,
        "key_id": f"1-{MAX_KEY_ID_CHARS} of A-Z a-z 0-9 . _ -, holding neither the salt nor the DSN's password or user",
        "max_rows_per_stream": MAX_ROWS, "pseudonym": PSEUDONYM_RULE,
        "snapshot": "one REPEATABLE READ READ ONLY snapshot for every stream of an export",
        "timeouts": "every statement runs under the server's statement_timeout and lock_timeout (the *_TIMEOUT_MS "
                    "variables, in effect above); a cancelled export cancels its statement on the server",
        "application_name": APPLICATION_NAME,
        "secrets": "the DSN and the salt live only in the environment; they are never accepted as arguments"}}
