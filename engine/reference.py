"""The pure-Python engine, whatever ``EXTRAARENA_ENGINE`` says: the readable reference that the
native core is tested against (tests/engine/test_native_*.py, benchmarks/engine_native.py).

    from engine import reference
    state = reference.new_battle(7)          # always a plain Python engine.State
    state = reference.from_dict(data)        # likewise

Everywhere else use ``engine.new_battle`` and ``engine.State.from_dict``, which follow the backend.
"""

from .state import State, new_battle
from .state import state_from_dict as from_dict

__all__ = ["State", "from_dict", "new_battle"]
