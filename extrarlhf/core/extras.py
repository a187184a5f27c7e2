"""The optional extras of ``pyproject.toml`` (DESIGN 11.1): the base install is slim (engine,
envs' core, adapters, runtime, dataset readers), and a feature that needs a framework the base
leaves out says which extra brings it, in one line, instead of a ``ModuleNotFoundError``
traceback."""

from __future__ import annotations

import importlib
from types import ModuleType

from .errors import RLHFError

# The top-level module a feature imports -> the extra of pyproject.toml that installs it.
EXTRA_OF = {
    "asyncpg": "production",
    "torch": "train",
    "dagster": "pipeline",
    "dagster_webserver": "pipeline",
    "mcp": "mcp",
    "gymnasium": "rl",
    "pettingzoo": "rl",
    "stable_baselines3": "sb3",
    "sb3_contrib": "sb3",
    "minari": "minari",
    "starlette": "arena",
    "uvicorn": "arena",
    "jinja2": "arena",
    "multipart": "arena",
    "python_multipart": "arena",
    "itsdangerous": "arena",
}


class MissingExtra(RLHFError):
    """A feature needs a package of an extra that is not installed."""

    code = "missing_extra"


def require(module: str, feature: str) -> ModuleType:
    """``import module``, or :class:`MissingExtra` naming the extra that installs it (``feature``
    names what needs it, e.g. ``"reading the production database"``). A missing module that no
    extra brings (a broken install: one of the framework's own dependencies) is re-raised."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").partition(".")[0]
        extra = EXTRA_OF.get(missing)
        if extra is None:
            raise
        raise MissingExtra(f"{feature} needs {missing}, which this install leaves out: "
                           f"pip install 'extrarlhf[{extra}]' (in a checkout: pip install -e '.[{extra}]', "
                           "or make setup for everything)") from None
