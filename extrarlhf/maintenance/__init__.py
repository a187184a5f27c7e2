"""Keeping the on-disk state sound. Imports every ``extrarlhf`` concern it checks (core,
checkpoints, runtime, datasets, training, policies); nothing but the CLI and the facades
imports it.

- check.py    ``python -m extrarlhf check [--repair]``: the fsck of sessions, datasets and checkpoints
- cleanup.py  ``python -m extrarlhf gc``: what dead processes left behind (temp files, locks)
"""
