"""The battle runtime: playing battles and keeping their traces (DESIGN sections 5 and 6).
Imports ``engine``, ``adapters``, ``extrarlhf.core`` and ``extrarlhf.checkpoints`` (a
checkpoint name resolves through the registry, never through promotion or benchmarks).

- actors.py     actor specs (baseline:random, baseline:greedy, checkpoint names) -> actors; battle_tag
- match.py      one battle: start -> submit/advance -> finish | abandon
- trace.py      the V5 records of a battle (meta, turns, actions)
- sessions.py   the on-disk session layout: writer, reader, reconcile/repair, check_sessions; names,
                reserved names and confinement to the sessions dir
- diagnosis.py  what a group's catalog and trace folders lack, streamed (check_sessions, reconcile, repair)
- trace_check.py  the worker task of check's trace hashes (run on core/procpool.py's processes)
- catalog_lines.py  a group catalog's lines: parsed and checked as a stream, folded to offsets
- catalog_index.py  the catalog's fold and summary saved (catalog.index.npz), used while it describes the catalog
- catalog_summary.py  a group's summary as a fold over its battles' latest entries (one entry taken back as its final line arrives)
- records.py    checks of catalog lines, manifests, summaries, group leases (field named on damage)
- trace_files.py  a trace's three files on disk, plain or compact (.jsonl.zst of the same bytes)
- trace_forms.py  a group's traces from one form to the other; one trace file's plain bytes
- settled.py    a one-by-one start reads only what was appended since this process's last clean reconcile
- ownership.py  the group lease (lease.json): one series owner per group, reaped when dead
- series.py     resumable, cancellable series on bounded worker processes
- codenames.py  codename leases (agents_index.json), self-healing reap
- live.py       live matches of one process (opaque, process-local ids, per-match locks)
- replay.py     re-run a trace and report the first divergence
- consistency.py  a manifest against the actors its traces record (manifest_mismatch)
- duel.py       untraced battles between two policies, paired seeds (the demo, benchmarks' figures)
- demo.py       ``python -m extrarlhf demo``: baseline series and their summary
- commands.py   the ``demo``/``collect``/``replay``/``sessions`` CLI subcommands
"""
