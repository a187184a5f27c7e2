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
}


class MissingExtra(RLHFError):
    """A feature needs a package of an extra that is not installed."""

    code = "missing_extra"


def missing_extra(exc: ModuleNotFoundError, feature: str) -> MissingExtra | None:
    """The error to show for ``exc`` when the module it misses is one an extra brings (``feature``
    names what needed it, e.g. ``"extrarlhf production export-v5"``); ``None`` for any other
    missing module (a broken install, a bug), which the caller re-raises."""
    module = (exc.name or "").partition(".")[0]
    extra = EXTRA_OF.get(module)
    if extra is None:
        return None
    return MissingExtra(f"{feature} needs {module}, which this install leaves out: "
                        f"pip install 'extrarlhf[{extra}]' (in a checkout: pip install -e '.[{extra}]', "
                        "or make setup for everything)")


def require(module: str, feature: str) -> ModuleType:
    """``import module``, or :class:`MissingExtra` naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        error = missing_extra(exc, feature)
        if error is None:
            raise
        raise error from None
