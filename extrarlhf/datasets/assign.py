"""Deterministic, group-aware split assignment by keyed hash (DESIGN section 9, "Splits").

``bucket = HMAC-SHA256(split_key, contour + "\\0" + group_key)``, its first 8 bytes read as
an unsigned big-endian integer and divided by 2**64, gives a number in [0, 1); the split is
``train`` below ``fractions.train``, ``val`` below ``train + val``, ``test`` above. The
bucket depends only on the key, the contour and the group key, so:

- every row of a group (a battle for V5, a deck for Nemesis) lands in the same split: no
  group straddles train/val/test;
- a group's split never changes when data is added or removed, as long as the split key and
  the fractions stay the same (changing the fractions only moves groups whose bucket lies
  between the old and new boundaries).

The split key is not a secret (it is recorded in the split's manifest); it exists so that a
new, independent assignment can be drawn on purpose by choosing another key.
"""

from __future__ import annotations

import hashlib
import hmac
import math
from typing import Any, Sequence

from ..core.errors import InvalidArgument

DEFAULT_SPLIT_KEY = "extrarlhf-split-v1"
SPLITS = ("train", "val", "test")
DEFAULT_FRACTIONS = (0.8, 0.1, 0.1)

__all__ = ["DEFAULT_SPLIT_KEY", "SPLITS", "DEFAULT_FRACTIONS", "bucket", "split_of", "check_fractions",
           "check_split_key"]


def check_split_key(value: Any) -> str:
    if not isinstance(value, str) or not value or len(value) > 200:
        raise InvalidArgument(f"split_key must be a non-empty text of at most 200 characters, got {value!r}")
    return value


def check_fractions(value: Any) -> tuple[float, float, float]:
    """(train, val, test) fractions: three numbers >= 0 summing to 1 (within 1e-9); a
    mapping ``{"train": .., "val": .., "test": ..}`` is accepted too."""
    if isinstance(value, dict):
        if set(value) != set(SPLITS):
            raise InvalidArgument(f"fractions must name exactly train, val and test, got {sorted(value)}")
        value = [value[s] for s in SPLITS]
    if not isinstance(value, (list, tuple)) or len(value) != 3:
        raise InvalidArgument(f"fractions must be three numbers (train, val, test), got {value!r}")
    out = []
    for v in value:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise InvalidArgument(f"fractions must be finite numbers >= 0, got {value!r}")
        out.append(float(v))
    if abs(sum(out) - 1.0) > 1e-9:
        raise InvalidArgument(f"fractions must sum to 1, got {value!r} (sum {sum(out)})")
    if out[0] == 0:
        raise InvalidArgument("the train fraction must be above 0")
    return out[0], out[1], out[2]


def bucket(split_key: str, contour: str, group_key: str) -> float:
    """The group's keyed-hash position in [0, 1)."""
    digest = hmac.new(split_key.encode(), f"{contour}\0{group_key}".encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big") / 2.0 ** 64


def split_of(position: float, fractions: Sequence[float]) -> str:
    if position < fractions[0]:
        return "train"
    if position < fractions[0] + fractions[1]:
        return "val"
    return "test"
