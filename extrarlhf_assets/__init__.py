"""ExtraRLHF as a Dagster asset graph (DESIGN section 12): a thin facade over the core.

``definitions.py`` collects the definitions; each domain lives in ``defs/<domain>/``
(collection, datasets, preferences, training, operations, and production: the daily exports, their
datasets and the Nemesis Lite/Standard splits of each day, only when production is opted in)
with its assets, checks and sensors. ``launcher.py`` is the
deployed instance's run launcher (deploy/dagster.yaml): Dagster's local launcher plus the worker
health check run monitoring uses to fail a run whose worker died with its daemon or code server;
``envcheck.py`` its run queue, which tags each run with the variable names of the code location that
created it, so that the launcher fails a run the launching code location lacks them for.
"""
