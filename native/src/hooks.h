// What the Python engine registers with the core (engine.backend calls engine_native.register
// once): its error classes, its State class and the reference functions whose words the core
// reuses. The core never imports `engine`; until the registration every entry point that needs
// the card table or these hooks raises RuntimeError saying how to register.
#pragma once

#include <nanobind/nanobind.h>

#include "state.h"

namespace arena_binding {

struct Hooks {
  PyObject* state_format_error = nullptr;  // engine.errors.StateFormatError
  PyObject* card_pool_error = nullptr;     // engine.errors.CardPoolError
  PyObject* engine_state = nullptr;        // the class engine.State (the Python reference)
  PyObject* check_action_id = nullptr;     // engine.actions.check_action_id
  PyObject* explain_illegal = nullptr;     // (state dict, action id) -> raises the reference's IllegalActionError
  PyObject* normalize_dict = nullptr;      // (dict) -> the reference's from_dict(...).to_dict(), or its error
  PyObject* checked_dict = nullptr;        // (Python engine.State) -> the same, for a state whose fields were edited
};

Hooks& GetHooks();

// Raises RuntimeError when engine has not registered the card table and hooks yet.
void RequireRegistered();

// A native state from a dict the reference normalized (normalize_dict / checked_dict output);
// a value the core cannot hold is a StateFormatError saying so (binding.cc).
arena::State StateFromNormalizedDict(nanobind::handle normalized);

}  // namespace arena_binding
