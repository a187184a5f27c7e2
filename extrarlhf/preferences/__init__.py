"""Preference data, the feedback in RLHF (DESIGN section 17): judgment tasks over recorded
decision points, judges' answers, a versioned preference dataset, a Bradley-Terry reward
model and the TRL-shaped export. Imports engine, adapters and extrarlhf's core, runtime,
datasets and (for the reward model, the ``train`` extra) training. Modules:

- points.py      decision points of a V5 dataset, their seeded order, states replayed and checked
- candidates.py  task sources: ``search_top2`` and ``A vs B`` (two specs or ``recorded``)
- pool.py        ``create_preference_pool``, ``next_task``, ``submit_preference``, ``list_preferences``,
                 ``list_pools``
- judges.py      judge kinds, keyed judge pseudonyms, the synthetic judge's rule
- synthetic.py   ``judge_synthetically``: synthetic judges answering a pool
- dataset.py     ``materialize_preference_dataset`` (kind ``preference_pairs``), ``preference_ready``,
                 ``read_preferences``, ``export_trl_preferences``
- reward.py      ``train_reward_model``: Bradley-Terry over the policies' features, ONNX, model card
- dpo.py         ``dpo_finetune``: a DPO-style fine-tune of a v5 policy against a reference policy
- commands.py    ``python -m extrarlhf preferences ...``

The names below are imported lazily (torch and pyarrow only when used).
"""

from __future__ import annotations

from ..core.lazy import lazy_exports

_EXPORTS = {
    "create_preference_pool": "pool", "next_task": "pool", "submit_preference": "pool",
    "list_preferences": "pool", "list_pools": "pool", "judge_synthetically": "synthetic",
    "materialize_preference_dataset": "dataset", "preference_readiness": "dataset", "PreferencePolicy": "dataset",
    "read_preferences": "dataset", "export_trl_preferences": "dataset", "train_reward_model": "reward",
    "dpo_finetune": "dpo",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
