"""Preference data, the feedback in RLHF (DESIGN section 17): judgment tasks over recorded
decision points, judges' answers, a versioned preference dataset, a Bradley-Terry reward
model and the TRL-shaped export. Imports engine, adapters and extrarlhf's core, runtime,
datasets and (for the reward model, the ``train`` extra) training. Modules:

- points.py      decision points of a V5 dataset, their seeded order, states replayed and checked
- candidates.py  task sources: ``search_top2`` and ``A vs B`` (two specs or ``recorded``)
- pool.py        ``create_preference_pool`` (gold and overlap shares, the serving order), ``next_task``,
                 ``submit_preference``, ``list_preferences``, ``list_pools``
- gold.py        gold tasks whose better move the engine proves (``wins_at_once``), ``gold.json``
- judges.py      judge kinds, keyed judge pseudonyms, the synthetic judge's rule
- synthetic.py   ``judge_synthetically``: synthetic judges (``search``, ``random``, ``prefers:SPEC``)
- policy.py      ``PreferencePolicy``: readiness thresholds, flag rules, the share cap; ``wilson``
- quality.py     ``assess``: per judge gold accuracy, agreement, flags; Krippendorff's alpha (pure)
- selection.py   ``judge_quality``; which judgments a dataset keeps (no gold, no flagged judge, the
                 share cap), the consensus columns
- consensus.py   ``majority`` and ``dawid_skene``: consensus of several judges on a task (numpy only)
- leaderboard.py ``preference_leaderboard``: Bradley-Terry over specs, bootstrap intervals, engine order
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
    "materialize_preference_dataset": "dataset", "preference_readiness": "policy", "PreferencePolicy": "policy",
    "read_preferences": "dataset", "export_trl_preferences": "dataset", "train_reward_model": "reward",
    "dpo_finetune": "dpo", "judge_quality": "selection", "preference_leaderboard": "leaderboard",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
