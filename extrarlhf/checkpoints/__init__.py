"""The checkpoint registry and its promotion records (DESIGN section 7 and 11).

Owns ``checkpoints/``: ``index.json`` and the copied ``.onnx`` files (registry.py), and the
records of which checkpoint is *the* policy: ``promoted.json``, ``promoted_history.jsonl`` and
the promotion intent (promoted.py), which also say which checkpoints may never be overwritten.
Deciding *whether* a checkpoint may be promoted (a benchmark that passed) is the policies'
business (``extrarlhf.policies.promotion``). Imports ``adapters`` and ``extrarlhf.core`` only,
so the runtime can resolve a checkpoint name without depending on benchmarks or promotion.
"""

from .registry import Checkpoint, CheckpointRegistry, ProtectedCheckpoint

__all__ = ["Checkpoint", "CheckpointRegistry", "ProtectedCheckpoint"]
