// The Python-visible native battle (engine_native.State): the rules state plus what the
// binding caches. Shared by binding.cc (which registers the class) and bind_policies.cc.
#pragma once

#include <cstdint>

#include "state.h"

namespace arena_binding {

// A native battle: the rules state plus the events of the last transition (State.last_events).
struct NativeState {
  arena::State s;
  arena::Events last_events;
  bool legal_valid = false;  // `legal` is the state's legal actions (as State._legal)
  uint64_t version = 0;  // transitions applied to this object: Python caches what it read of the state under it
  arena::ActionList legal;

  const arena::ActionList& Legal() {
    if (!legal_valid) {
      arena::LegalActions(s, &legal);
      legal_valid = true;
    }
    return legal;
  }
};

}  // namespace arena_binding
