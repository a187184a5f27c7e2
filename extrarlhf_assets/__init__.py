"""ExtraRLHF as a Dagster asset graph (DESIGN section 12): a thin facade over the core.

``definitions.py`` collects the definitions; each domain lives in ``defs/<domain>/``
(collection, datasets, training) with its assets, checks and sensors.
"""
