"""Adapter kinds -> factories that build policies.

Built-in kinds: ``baseline`` (``create("baseline", name="greedy", seed=0)``), and the ONNX
kinds ``legacy_onnx``, ``action_onnx`` (alias ``v4``) and ``v5``
(``create("v5", path=..., seed=0, expected_weights_hash=None, fallback="greedy",
sample=False, spec=None, timeout_s=None, max_timeouts=None)`` ->
:class:`~adapters.onnx_models.ModelPolicy`; ``timeout_s`` limits each inference run, default
env ``RLHF_INFERENCE_TIMEOUT_S`` else 2 s, and ``max_timeouts`` timed-out runs in a row
disable the model, default env ``RLHF_INFERENCE_MAX_TIMEOUTS`` else 3), and ``search``
(``create("search", rollout=<policy>, sims=32, seed=0, spec=None, play=None)`` ->
:class:`~adapters.search.SearchPolicy`; the spec form ``search:<rollout spec>?sims=N[&play=<spec>]``
is parsed by :func:`~adapters.search.parse_search_spec`). Custom kinds
register a callable or a ``"package.module:attr"`` path; whatever a factory returns gets
``decide``/``decide_batch`` if it only has ``act``.
"""

from __future__ import annotations

import importlib
import inspect
import re
import threading
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from engine import State

from .baselines import GreedyPolicy, RandomPolicy
from .decision import AdapterError, Decision
from .onnx_contracts import KIND_ALIASES, MODEL_KINDS
from .onnx_models import ModelPolicy
from .search import DEFAULT_SIMS, SearchPolicy

_KIND = re.compile(r"[a-z][a-z0-9_]{0,31}")
_DOTTED = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"
_FACTORY_PATH = re.compile(f"{_DOTTED}:{_DOTTED}")


def load_factory(path: str) -> Callable[..., Any]:
    """Import ``"package.module:attr"`` (attr may be dotted) and return it if callable."""
    if not isinstance(path, str) or not _FACTORY_PATH.fullmatch(path):
        raise AdapterError(f"factory path must look like 'package.module:factory', got {path!r}")
    module_name, attr_path = path.split(":", 1)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or module_name
        raise AdapterError(f"cannot import {module_name!r} for factory {path!r}: no module named {missing!r}",
                           "not_found") from None
    except Exception as exc:  # noqa: BLE001 - the module's own import error, reported as such
        raise AdapterError(f"importing {module_name!r} for factory {path!r} failed: {type(exc).__name__}: {exc}") \
            from None
    obj: Any = module
    for part in attr_path.split("."):
        if not hasattr(obj, part):
            public = sorted(n for n in dir(obj) if not n.startswith("_"))
            raise AdapterError(f"{module_name!r} has no attribute {attr_path!r} (missing {part!r}); "
                               f"public names: {', '.join(public[:40]) or '(none)'}", "not_found")
        obj = getattr(obj, part)
    if not callable(obj):
        raise AdapterError(f"factory {path!r} is a {type(obj).__name__}, not a callable")
    return obj


class DecidingPolicy:
    """Gives an ``act``-only policy the ``decide`` / ``decide_batch`` interface."""

    def __init__(self, policy: Any, kind: str) -> None:
        self.policy = policy
        self.kind = getattr(policy, "kind", kind)
        self.spec = getattr(policy, "spec", kind)
        self.weights_hash = getattr(policy, "weights_hash", None)

    def act(self, state: State) -> int:
        return int(self.policy.act(state))

    def decide(self, state: State) -> Decision:
        return Decision(self.act(state))

    def decide_batch(self, states: list[State]) -> list[Decision]:
        return [self.decide(s) for s in states]


def _baseline_factory(name: str = "greedy", seed: int = 0) -> RandomPolicy | GreedyPolicy:
    policies = {"random": RandomPolicy, "greedy": GreedyPolicy}
    if name not in policies:
        raise AdapterError(f"unknown baseline {name!r}; available: {', '.join(policies)}", "not_found")
    return policies[name](seed)


def _model_factory(kind: str) -> Callable[..., ModelPolicy]:
    def factory(path: str, seed: int = 0, expected_weights_hash: str | None = None, fallback: str = "greedy",
                sample: bool = False, spec: str | None = None, timeout_s: float | None = None,
                max_timeouts: int | None = None) -> ModelPolicy:
        return ModelPolicy(path, kind, expected_weights_hash=expected_weights_hash, seed=seed, fallback=fallback,
                           sample=sample, spec=spec, timeout_s=timeout_s, max_timeouts=max_timeouts)
    factory.__name__ = f"{kind}_factory"
    return factory


def _search_factory(rollout: Any, sims: int = DEFAULT_SIMS, seed: int = 0, spec: str | None = None,
                    play: Any = None) -> SearchPolicy:
    return SearchPolicy(rollout, sims, seed, spec, play)


class AdapterRegistry:
    """kind -> factory. Thread-safe; a kind is registered once unless ``replace=True``."""

    def __init__(self) -> None:
        self._factories: dict[str, Callable[..., Any]] = {}
        self._aliases: dict[str, str] = {}
        self._lock = threading.Lock()

    def register(self, kind: str, factory: Callable[..., Any] | str, *, replace: bool = False) -> None:
        """Add ``kind``; ``factory`` is a callable or a ``"module:attr"`` path (imported now,
        so a bad path is refused here rather than at the first battle)."""
        if not isinstance(kind, str) or not _KIND.fullmatch(kind):
            raise AdapterError(f"kind must be 1-32 lowercase letters, digits or '_' starting with a letter, "
                               f"got {kind!r}")
        if isinstance(factory, str):
            factory = load_factory(factory)
        elif not callable(factory):
            raise AdapterError(f"factory for kind {kind!r} must be callable or a 'module:attr' path, "
                               f"got {type(factory).__name__}")
        with self._lock:
            if kind in self._aliases:
                raise AdapterError(f"{kind!r} is an alias of {self._aliases[kind]!r}; choose another kind name")
            if kind in self._factories and not replace:
                raise AdapterError(f"kind {kind!r} is already registered; pass replace=True to replace it",
                                   "already_exists")
            self._factories[kind] = factory

    def add_alias(self, alias: str, kind: str) -> None:
        with self._lock:
            if kind not in self._factories:
                raise AdapterError(f"cannot alias {alias!r} to unknown kind {kind!r}", "not_found")
            if alias in self._factories:
                raise AdapterError(f"{alias!r} is already a kind")
            self._aliases[alias] = kind

    @property
    def aliases(self) -> Mapping[str, str]:
        """alias -> kind (read-only view)."""
        return MappingProxyType(dict(self._aliases))

    def kinds(self) -> list[str]:
        """Registered kinds (aliases not included), sorted."""
        return sorted(self._factories)

    def resolve(self, kind: str) -> str:
        """The canonical kind for a kind or an alias; ``not_found`` listing what exists."""
        if not isinstance(kind, str):
            raise AdapterError(f"adapter kind must be a string, got {kind!r}")
        kind = self._aliases.get(kind, kind)
        if kind not in self._factories:
            aliases = ", ".join(f"{a} -> {k}" for a, k in sorted(self._aliases.items()))
            raise AdapterError(f"unknown adapter kind {kind!r}; registered: {', '.join(self.kinds())}"
                               + (f" (aliases: {aliases})" if aliases else ""), "not_found")
        return kind

    def factory(self, kind: str) -> Callable[..., Any]:
        return self._factories[self.resolve(kind)]

    def create(self, kind: str, **kwargs: Any) -> Any:
        """Build a policy of ``kind``. Arguments the factory does not take are refused up front."""
        canonical = self.resolve(kind)
        factory = self._factories[canonical]
        try:
            inspect.signature(factory).bind(**kwargs)
        except TypeError as exc:
            raise AdapterError(f"bad arguments for kind {canonical!r}: {exc}") from None
        except ValueError:  # no signature available (some builtins): let the call decide
            pass
        policy = factory(**kwargs)
        if hasattr(policy, "decide"):
            return policy
        if not hasattr(policy, "act"):
            raise AdapterError(f"factory of kind {canonical!r} returned a {type(policy).__name__} "
                               f"without act(state) or decide(state)")
        return DecidingPolicy(policy, canonical)


_DEFAULT: AdapterRegistry | None = None
_DEFAULT_LOCK = threading.Lock()


def builtin_registry() -> AdapterRegistry:
    """A fresh registry holding only the built-in kinds."""
    registry = AdapterRegistry()
    registry.register("baseline", _baseline_factory)
    registry.register("search", _search_factory)
    for kind in MODEL_KINDS:
        registry.register(kind, _model_factory(kind))
    for alias, kind in KIND_ALIASES.items():
        registry.add_alias(alias, kind)
    return registry


def default_registry() -> AdapterRegistry:
    """The process-wide registry (built-in kinds plus whatever was registered since)."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = builtin_registry()
        return _DEFAULT
