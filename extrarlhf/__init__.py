"""ExtraRLHF's core library: ExtraArena battles to training data (DESIGN section 2).

Imports ``engine`` and ``adapters``; never ``dagster`` or ``mcp`` (the facades ``mcp_server``
and ``extrarlhf_assets`` sit on top). One subpackage per concern, each importing only the ones
listed before it (checked by the import-linter contracts in pyproject.toml,
tests/test_architecture.py):

- core/         small shared helpers: errors, echo, fileio, procs, progress, readiness, work caps, names, clock
- checkpoints/  the checkpoint registry and its promotion records
- runtime/      battles, traces, sessions, series, codenames, replay, duels
- envs/         Gymnasium and PettingZoo wrappers
- datasets/     the local dataset plane (materialize, validate, splits, publication)
- production/   the production plane (opt-in, read-only, pseudonymized)
- training/     behaviour cloning to a verified v5 ONNX checkpoint and its model card
- policies/     benchmarks, promotion, the policy ladder, the L0 pipeline, the improvement loop
- maintenance/  check (fsck) and gc
- agent_setup/  skills install and doctor
- cli.py        ``python -m extrarlhf``: a dispatcher over each concern's ``commands.py``
- schemas/      JSON Schemas of every record (data)
- ladder.py     the documented ``extrarlhf.ladder.policy_ladder`` path (see policies/)
"""
