"""Behaviour-cloning training of ``v5`` policies (DESIGN section 11). Imports ``engine``,
``adapters`` and extrarlhf's core, checkpoints, runtime and datasets.

- data.py     decisions of a V5 dataset as dense numpy arrays; which ones are imitated
- bc.py       the MLP action scorer, its forward/backward pass in numpy, Adam, the epoch loop
- blas.py     one BLAS thread while training (bit-identical weights, steady timings)
- export.py   weights -> v5 ONNX graph (onnx.helper), verified against numpy in onnxruntime
- card.py     the model card written next to the checkpoint
- train.py    ``train_policy``: checks, training, export, registration, card
- commands.py the ``train`` CLI subcommand (and the option helpers the policies' commands share)
"""

from __future__ import annotations

from .bc import HyperParams, train_bc
from .card import read_card
from .export import build_model, export_onnx, verify_export
from .train import train_policy

__all__ = ["HyperParams", "build_model", "export_onnx", "read_card", "train_bc", "train_policy", "verify_export"]
