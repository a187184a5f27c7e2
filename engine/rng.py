"""The engine's only source of randomness: a tiny, portable, serializable generator.

SplitMix64 is used instead of :mod:`random` so that the stream is fixed by this file
alone (not by a Python version) and its whole state is one 64-bit integer, which makes
``State.to_dict`` lossless and small.
"""

from __future__ import annotations

import hashlib

_MASK64 = (1 << 64) - 1


def derive_seed(seed: int, label: str) -> int:
    """A 64-bit sub-seed for an independent stream named ``label`` of ``seed``."""
    digest = hashlib.sha256(f"arena-1:{seed}:{label}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


class SplitMix64:
    """SplitMix64 (Steele, Lea, Flood 2014). ``state`` is the full generator state."""

    __slots__ = ("state",)

    def __init__(self, state: int) -> None:
        self.state = state & _MASK64

    def next_u64(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & _MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
        return z ^ (z >> 31)

    def below(self, n: int) -> int:
        """Uniform integer in ``[0, n)`` by rejection sampling (no modulo bias)."""
        if n <= 0:
            raise ValueError(f"below() needs a positive bound, got {n}")
        limit = (1 << 64) - ((1 << 64) % n)
        while True:
            x = self.next_u64()
            if x < limit:
                return x % n

    def shuffle(self, items: list) -> None:
        """Fisher-Yates shuffle in place."""
        for i in range(len(items) - 1, 0, -1):
            j = self.below(i + 1)
            items[i], items[j] = items[j], items[i]

    def choice(self, items):
        return items[self.below(len(items))]
