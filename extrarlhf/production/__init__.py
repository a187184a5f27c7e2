"""The production plane (DESIGN section 10): opt-in, read-only, pseudonymized exports from the
game backend's PostgreSQL.
Imports ``engine``, ``adapters`` and extrarlhf's core, runtime and datasets; asyncpg only here.

Every entry point checks the gate first (gate.py): off by default, it refuses with
``production_disabled`` naming each missing or invalid variable and opens no connection.
Modules:

- gate.py        the four environment variables (and two optional timeouts), ``open_gate``,
                 ``gate_status`` (names only); libpq key=value DSNs parsed
- pseudonyms.py  keyed HMAC pseudonyms of player and battle ids
- schema.py      the production schema the exports read (DDL, columns)
- reader.py      one snapshot on two connections, keyset-paged streams, the row ceiling,
                 server-side timeouts, cancellation, the one error mapping (``read_failed``)
- replay.py      production battles -> V5 rows through the engine (worker task)
- export.py      ``export_production_v5_dataset``
- versions.py    an identical re-export reuses the latest version; the ``<name>.complete``
                 pointer (``latest_complete``) names the latest complete export
- timestamp.py   ``export_timestamp_dataset`` and ``load_inputs`` (the only TimeStamp loader)
- returnclock.py ``export_returnclock_dataset``, ``split_returnclock_training_dataset``,
                 ``load_returnclock_training`` (the only ReturnClock trainer loader)
- leaks.py       raw ids of a window and a scan of written files for them (``no_raw_identifiers``)
- commands.py    ``python -m extrarlhf production ...``
- fixture.py     ``python -m extrarlhf.production.fixture``: a realistic backend database for tests

The names below are imported lazily (asyncpg and pyarrow load only when used).
"""

from __future__ import annotations

from ..core.lazy import lazy_exports

_EXPORTS = {
    "export_production_v5_dataset": "export", "export_timestamp_dataset": "timestamp", "load_inputs": "timestamp",
    "gate_status": "gate", "open_gate": "gate", "ProductionDisabled": "gate", "production_status": "status",
    "export_returnclock_dataset": "returnclock", "split_returnclock_training_dataset": "returnclock",
    "load_returnclock_training": "returnclock", "latest_complete": "versions",
}

__all__ = sorted(_EXPORTS)


__getattr__ = lazy_exports(__name__, _EXPORTS)
