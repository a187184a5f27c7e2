"""A package's public names imported on first use (PEP 562 module ``__getattr__``).

Why: a package's ``__init__`` that imported every module at once would pull in what only some
of them need (pyarrow for the datasets, asyncpg for the production plane, mcp for the
server), so importing one name would cost every import, and a slim install could not import
the package at all.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, Callable


def lazy_exports(package: str, exports: dict[str, str]) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``package``: ``exports`` maps a public name to the submodule that
    defines it; the first access imports that submodule and caches the name on the package."""
    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{module}", package), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
