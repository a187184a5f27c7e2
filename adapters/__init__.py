"""Policies that play ExtraArena. Imports engine (and numpy/onnx/onnxruntime) only.

Every policy has ``act(state) -> action_id`` and ``decide(state) -> Decision``; model
policies (onnx_models.py; their IO contracts onnx_contracts.py, their time limits
inference_limits.py) fall back to a baseline with a warning instead of failing; the
search actor (search.py) searches the acting player's information set with any of them, and the
network-guided search (guided.py) searches it with a v5 network's prior and value.
Long work (a battle of search decisions, a series) is cancellable and capped through the
checkpoints of work.py.
"""

from .baselines import BASELINES, GreedyPolicy, RandomPolicy, evaluate
from .decision import AdapterError, Decision, KindMismatch, Policy
from .onnx_contracts import MODEL_KINDS, check_kind, detect_kind, signature, weights_hash
from .onnx_models import ModelPolicy, decide, decide_many
from .registry import AdapterRegistry, default_registry, load_factory
from .guided import GuidedSearchPolicy
from .search import SearchPolicy, parse_search_spec


def make_baseline(name: str, seed: int = 0):
    """A baseline policy by name (``random`` or ``greedy``); unknown names list what exists."""
    policies = {"random": RandomPolicy, "greedy": GreedyPolicy}
    if name not in policies:
        raise ValueError(f"unknown baseline {name!r}; available: {', '.join(BASELINES)}")
    return policies[name](seed)


__all__ = ["AdapterError", "AdapterRegistry", "BASELINES", "Decision", "GreedyPolicy", "GuidedSearchPolicy",
           "KindMismatch", "MODEL_KINDS", "ModelPolicy", "Policy", "RandomPolicy", "SearchPolicy",
           "check_kind", "decide", "decide_many", "default_registry", "detect_kind", "evaluate",
           "load_factory", "make_baseline", "parse_search_spec", "signature", "weights_hash"]
