"""A custom adapter factory that writes to stdout when imported and when called. The MCP
server imports it through register_custom_model: that stray output must never reach the
JSON-RPC wire (stdout) and lands on stderr instead."""

import os
import sys

from adapters.baselines import GreedyPolicy

print("noisy_factory: print() at import")
sys.stdout.flush()
os.write(1, b"noisy_factory: raw write to fd 1 at import\n")


def make(seed: int = 0) -> GreedyPolicy:
    print("noisy_factory: print() in the factory", flush=True)
    return GreedyPolicy(seed)
