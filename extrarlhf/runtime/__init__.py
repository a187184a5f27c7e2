"""The battle runtime: playing battles and keeping their traces (DESIGN sections 5 and 6).

- actors.py     actor specs (baseline:random, baseline:greedy, checkpoint names) -> actors; battle_tag
- match.py      one battle: start -> submit/advance -> finish | abandon
- trace.py      the V5 records of a battle (meta, turns, actions)
- sessions.py   the on-disk session layout: writer and reader; names and reserved names
- series.py     resumable, cancellable series on bounded worker processes
- codenames.py  codename leases (agents_index.json), self-healing reap
- live.py       live matches of one process (opaque, process-local ids, per-match locks)
- replay.py     re-run a trace and report the first divergence
"""
