"""Training ``v5`` policies in PyTorch: behaviour cloning, and a policy-gradient fine-tune
(DESIGN sections 11, 11.1). Imports
``engine``, ``adapters`` and extrarlhf's core, checkpoints, runtime and datasets; torch only
when a training runs (``import extrarlhf.training`` and the MCP server stay light).

- data.py     one batch of decisions as numpy arrays; which ones are imitated; soft targets
- stream.py   a dataset's splits streamed in bounded batches, a seeded bounded shuffle
- hyper.py    the hyper-parameters, the training cost cap, the torch/device checks (no torch)
- model.py    the v5 action scorer network in torch (flat rows to train, padded to export)
- bc.py       the epoch loop: losses, AdamW, metrics (torch)
- export.py   model -> v5 ONNX through torch.onnx, verified against torch in onnxruntime
- card.py     the model card written next to the checkpoint
- train.py    ``train_policy``: checks, training, export, registration, card
- acting.py   a network acting on a native battle batch (decision points, segments, the choice)
- distill.py  one network trained toward a teacher network (an ensemble) on the teacher's own battles
- ppo.py      PPO against opponents the native core plays (battles stepped by its batched API)
- finetune.py ``finetune_policy``: a registered v5 checkpoint -> a fine-tuned one + card
- commands.py the ``train`` CLI subcommand (and the option helpers the policies' commands share)
"""

from __future__ import annotations

from .card import read_card
from .hyper import HyperParams
from .train import train_policy

__all__ = ["HyperParams", "read_card", "train_policy"]
