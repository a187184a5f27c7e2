"""The local dataset plane (DESIGN section 9): session groups -> validated, versioned Parquet
datasets, readiness per training contour, group-aware splits, and safe publication.
Imports ``engine``, ``adapters`` and extrarlhf's core, runtime and envs (the offline-RL export).

Every function returns a plain JSON-able dict (a facade only shapes arguments) and raises
:class:`extrarlhf.core.errors.RLHFError` subclasses with stable codes. Every dataset path is
confined to the datasets dir (paths.py). Modules:

- paths.py        confinement, names, references (``NAME``, ``NAME/vN``, ``@POINTER``)
- publish.py      temp dir -> fsync -> validate -> rename; overwrite with rollback; recovery
- pointers.py     promoted pointers (atomic replace) and reference resolution
- tables.py       column layouts of every table, streaming Parquet writer
- row_batches.py  trace rows -> Arrow record batches (from the core's buffers; no pandas)
- battles.py      one battle's trace -> rows (checked), run in worker processes (core/procpool.py)
- materialize.py  ``materialize_v5_dataset``
- validate.py     ``validate_dataset``
- prebattle.py    TimeStamp's deck-derived inputs, one definition for the export and the validator
- contours.py     ``dataset_readiness`` (judged by extrarlhf/core/readiness.py)
- assign.py       keyed-hash split assignment
- splits.py       ``split_v5_training_dataset``, ``split_nemesis_training_dataset``
- catalog.py      ``list_datasets``, ``inspect_dataset``, ``promote_dataset``
- offline_rl.py   ``offline_rl_episodes`` (per battle and seat) and ``export_minari``
- card.py         ``write_dataset_card``: the Hugging Face dataset card ``<name>/README.md``
- retention.py    ``prune_traces``: compact or delete the raw traces a valid published version holds

The names below are imported lazily, so that a worker process (which needs battles.py only)
does not pay for importing pyarrow.
"""

from __future__ import annotations

from ..core.lazy import lazy_exports

_EXPORTS = {
    "DEFAULT_FRACTIONS": "assign", "DEFAULT_SPLIT_KEY": "assign", "bucket": "assign", "split_of": "assign",
    "inspect_dataset": "catalog", "list_datasets": "catalog", "promote_dataset": "catalog",
    "dataset_readiness": "contours", "materialize_v5_dataset": "materialize",
    "DEFAULT_DATASETS_DIR": "paths", "DatasetsDir": "paths",
    "split_nemesis_training_dataset": "splits", "split_v5_training_dataset": "splits",
    "validate_dataset": "validate", "offline_rl_episodes": "offline_rl", "export_minari": "offline_rl",
    "write_dataset_card": "card",
}

__all__ = sorted(_EXPORTS)


__getattr__ = lazy_exports(__name__, _EXPORTS)


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
