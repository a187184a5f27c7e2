"""The forms of an action id a single-seat or AEC env's ``step`` takes (both envs share this).

Accepted, each stepping exactly as the plain ``int``:

* a Python ``int`` (or any object with ``__index__``, such as an ``IntEnum``), not a ``bool``;
* a numpy integer scalar of any width, signed or unsigned (``np.int64(5)``, ``np.uint8(5)``);
* a numpy integer array with exactly one element, of any shape: 0-d (``np.array(5)``, what
  Gymnasium's ``Discrete.contains`` also accepts), ``(1,)`` or ``(1, 1)`` (what
  ``model.predict`` and batched agents often return for a single env).

Refused, with an :class:`engine.IllegalActionError` saying what was got (type, and dtype and
shape for an array) and what is accepted:

* ``bool`` / ``np.bool_`` values and boolean arrays: a mask or a flag passed by mistake;
* floats, even integral ones (``3.0``, ``np.float32(3)``, ``np.array([3.0])``): an action that
  is a float comes from a continuous head or a wrong action space, and rounding it silently
  would hide that bug (``Discrete.contains`` refuses floats too); cast with ``int()`` if the
  float is meant as an id;
* strings, ``None`` (except where PettingZoo's API wants it: a done agent steps with ``None``),
  lists and tuples, and arrays of more than one element or of no element.

A form that is accepted still has to be an id 0..162 (:func:`engine.actions.check_action_id`,
which this delegates to) and legal now: an out-of-range or illegal id is handled by each env's
illegal-action rules as for a plain ``int``. The vector env takes one id per battle (an integer
array of shape (N,)) and refuses other shapes and dtypes the same way
(:func:`engine.actions.check_action_batch`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from engine import ACTION_SPACE_SIZE, IllegalActionError
from engine.actions import check_action_id

ACCEPTED = (f"an action id 0..{ACTION_SPACE_SIZE - 1} as a Python int, a numpy integer scalar or a numpy "
            f"integer array of exactly one element (any shape: (), (1,), (1, 1), ...)")


def _described(action: Any) -> str:
    """What ``action`` is, for an error message: its type, and an array's dtype and shape (never its contents)."""
    if isinstance(action, np.ndarray):
        count = "1 element" if action.size == 1 else f"{action.size} elements"
        return f"a numpy array of dtype {action.dtype} and shape {action.shape} ({count})"
    if isinstance(action, np.generic):
        return f"a numpy {type(action).__name__} scalar ({action!r})"
    text = repr(action)
    return f"{type(action).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


def _refused(action: Any) -> IllegalActionError:
    hint = ""
    if isinstance(action, (float, np.floating)) or (isinstance(action, np.ndarray) and action.dtype.kind == "f"):
        hint = "; floats are refused even when integral: cast with int() if it is meant as an id"
    elif isinstance(action, (list, tuple)):
        hint = "; pass the id itself (or a numpy array of one element), not a list or tuple"
    elif action is None:
        hint = "; None is only for PettingZoo's done agents (they step with None and leave)"
    return IllegalActionError(f"action must be {ACCEPTED}; got {_described(action)}{hint}")


def env_action_id(action: Any) -> int:
    """``action`` as an int action id 0..162 (see the module doc for the accepted forms).

    Raises :class:`engine.IllegalActionError` naming what was got for a refused form, and
    :func:`~engine.actions.check_action_id`'s error for an id outside 0..162."""
    if type(action) is int:
        return check_action_id(action)
    if isinstance(action, np.ndarray):
        if action.size != 1 or action.dtype.kind not in "iu":
            raise _refused(action)
        action = action.reshape(()).item()  # a Python int of the array's one element
    elif isinstance(action, (bool, np.bool_, float, np.floating)) or not hasattr(type(action), "__index__"):
        raise _refused(action)
    return check_action_id(action)
