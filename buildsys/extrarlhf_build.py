"""The build backend of pyproject.toml (issue 48): scikit-build-core for wheels and sdists,
setuptools for editable installs.

A wheel (`pip install <checkout>`, `pip wheel`, `python -m build`) is scikit-build-core's: the
Python packages and the native engine core compiled from native/ (or, where it cannot be, the
Python packages alone; see [tool.scikit-build] in pyproject.toml).

An editable install (`make setup`'s `pip install -e`) is setuptools': its finder comes after
sys.path, so a PYTHONPATH entry still wins, as `make sanitize` (the ASan engine_native in
build/native-asan/site) and tests/test_architecture.py (lint-imports on a planted copy of the
packages) rely on. scikit-build-core's editable finders (redirect and inplace modes alike) go
first in sys.meta_path and would shadow both. `make setup` builds the core for its venv with
`pip install ./native`.
"""

from __future__ import annotations

import scikit_build_core.build as _wheel
from setuptools.build_meta import build_editable, get_requires_for_build_editable, prepare_metadata_for_build_editable

__all__ = ["build_editable", "build_sdist", "build_wheel", "get_requires_for_build_editable",
           "get_requires_for_build_sdist", "get_requires_for_build_wheel", "prepare_metadata_for_build_editable"]


def __getattr__(name: str):  # every other hook (wheel, sdist, metadata) is scikit-build-core's
    return getattr(_wheel, name)
