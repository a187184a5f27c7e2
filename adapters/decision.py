"""What a policy returns for one state, and the errors the adapters raise.

A :class:`Decision` is the action plus what the model said about it. ``warning`` is set
exactly when a fallback baseline played instead of the model (the battle is then
``degraded``); it is ``{"kind", "message", "fallback"}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # pragma: no cover
    from engine import State

WARNING_KINDS = ("missing_file", "hash_mismatch", "kind_mismatch", "runtime_error", "bad_output_shape",
                 "non_finite_output", "illegal_choice", "timeout")


class Policy(Protocol):
    """Anything that acts for the player to move: baselines, model policies, custom kinds."""

    spec: str

    def act(self, state: "State") -> int: ...


@dataclass(frozen=True)
class Decision:
    action_id: int
    probabilities: tuple[float, ...] | None = None  # over the legal actions, in legal_actions() order
    value: float | None = None  # v5 models only
    warning: dict | None = None  # set when a fallback played
    outputs: dict | None = None  # further JSON-safe outputs for the trace (the search's action values)

    @property
    def degraded(self) -> bool:
        return self.warning is not None

    def policy_record(self) -> dict | None:
        """The trace's ``policy`` field: model outputs, or None when there are none.

        Rounded to 6 decimals: a batched and an unbatched run of the same model may differ in
        the last bits of a float, and traces must not.
        """
        if self.probabilities is None and self.value is None and self.outputs is None:
            return None
        return {"probabilities": None if self.probabilities is None else [round(p, 6) for p in self.probabilities],
                "value": None if self.value is None else round(self.value, 6), **(self.outputs or {})}


class AdapterError(ValueError):
    """A refused request to the adapters (bad kind, bad factory path, kind mismatch).

    ``code`` mirrors the codes of ``extrarlhf.core.errors`` (the core library re-raises with it)."""

    code = "invalid_argument"

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class KindMismatch(AdapterError):
    """A model's IO signature does not fit the kind asked for; ``expected``/``found`` say how."""

    code = "kind_mismatch"

    def __init__(self, message: str, expected: object = None, found: object = None) -> None:
        super().__init__(message)
        self.expected = expected
        self.found = found
