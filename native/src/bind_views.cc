// engine_native._core bindings of the readable views (describe.h): the action lines and the
// action JSON of engine/views.py. No view logic here.
#include <nanobind/nanobind.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <string>
#include <vector>

#include "cards.h"
#include "describe.h"
#include "native_state.h"
#include "state.h"

namespace nb = nanobind;

namespace {

using arena_binding::NativeState;

// Action ids for the fast path: a Python list of ints 0..162; anything else is None (the
// caller then uses the Python reference, which checks and words the error).
bool ActionIds(nb::handle ids, std::vector<int>* out) {
  if (!PyList_Check(ids.ptr())) return false;
  const Py_ssize_t n = PyList_GET_SIZE(ids.ptr());
  out->resize(n);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = PyList_GET_ITEM(ids.ptr(), i);
    if (!PyLong_CheckExact(item)) return false;
    int overflow = 0;
    const long v = PyLong_AsLongAndOverflow(item, &overflow);
    if (overflow || v < 0 || v >= arena::kActionSpaceSize) return false;
    (*out)[i] = static_cast<int>(v);
  }
  return true;
}

nb::dict Kind(const char* kind) {
  nb::dict d;
  d["kind"] = kind;
  return d;
}

// views._target_json of the decoded play/attack target `t` (a play target 1..14).
nb::dict TargetJson(const arena::State& s, int t) {
  if (t == arena::kTargetOwnHero || t == arena::kTargetEnemyHero) {
    nb::dict d = Kind(t == arena::kTargetOwnHero ? "own_hero" : "enemy_hero");
    d["hero_health"] = s.players[t == arena::kTargetOwnHero ? s.active : 1 - s.active].hp;
    return d;
  }
  const bool own = t < arena::kTargetEnemySlot;
  const int slot = t - (own ? arena::kTargetOwnSlot : arena::kTargetEnemySlot);
  nb::dict d = Kind(own ? "own_creature" : "enemy_creature");
  d["slot"] = slot;
  const arena::Creature& c = s.players[own ? s.active : 1 - s.active].board[slot];
  if (c.present()) {
    d["uid"] = c.uid;
    d["card_id"] = c.card_id;
    d["name"] = arena::DescribeCardOf(c.card_id).name;
  }
  return d;
}

// views.action_json(state, a, description): keys in the reference's insertion order.
nb::dict ActionJson(const arena::State& s, int a, nb::handle description) {
  const arena::Player& me = s.players[s.active];
  nb::dict out;
  out["action_id"] = a;
  if (a == arena::kEndTurn) {
    out["kind"] = "end_turn";
  } else if (a < arena::kAttackBase) {
    const int h = (a - arena::kPlayBase) / arena::kPlayTargets, t = (a - arena::kPlayBase) % arena::kPlayTargets;
    out["kind"] = "play";
    out["hand_slot"] = h;
    out["target"] = t == arena::kTargetNone ? Kind("none") : TargetJson(s, t);
    if (h < me.hand_size) {
      const int card_id = me.hand[h];
      out["card_id"] = card_id;
      out["card_name"] = arena::DescribeCardOf(card_id).name;
      out["cost"] = arena::Pool().Get(card_id).cost;
    }
  } else {
    const int slot = (a - arena::kAttackBase) / arena::kAttackTargets, t = (a - arena::kAttackBase) % arena::kAttackTargets;
    out["kind"] = "attack";
    out["attacker_slot"] = slot;
    out["target"] = TargetJson(s, t == 0 ? arena::kTargetEnemyHero : arena::kTargetEnemySlot + t - 1);
    const arena::Creature& c = me.board[slot];
    if (c.present()) {
      out["attacker_uid"] = c.uid;
      out["card_id"] = c.card_id;
      out["card_name"] = arena::DescribeCardOf(c.card_id).name;
    }
  }
  if (description.is_none()) {
    std::vector<std::string> lines;
    arena::DescribeActions(s, &a, 1, &lines);
    out["description"] = lines[0];
  } else {
    out["description"] = description;
  }
  return out;
}

}  // namespace

void BindViews(nb::module_& m) {
  m.def("_set_describe_cards", [](const std::vector<std::tuple<int, std::string, std::string, bool>>& rows) {
    std::vector<std::pair<int, arena::DescribeCard>> cards;
    for (const auto& [id, name, text, creature] : rows) cards.push_back({id, arena::DescribeCard{name, text, creature}});
    arena::SetDescribeCards(cards);
  }, "Each card's (id, name, views._CARD_TEXT, is a creature) (engine_native.register does it).");
  m.def("_describe_actions", [](const NativeState& state, nb::handle ids) -> nb::object {
    std::vector<int> checked;
    if (!ActionIds(ids, &checked) || !arena::DescribeCardsKnown(state.s)) return nb::none();
    std::vector<std::string> lines;
    arena::DescribeActions(state.s, checked.data(), static_cast<int>(checked.size()), &lines);
    return nb::cast(lines);
  }, nb::arg("state"), nb::arg("action_ids"),
     "views.describe_actions for a list of ints 0..162; None for anything else (use the reference).");
  m.def("_action_json", [](const NativeState& state, nb::handle action, nb::handle description) -> nb::object {
    if (!PyLong_CheckExact(action.ptr()) || !(description.is_none() || PyUnicode_CheckExact(description.ptr())) ||
        !arena::DescribeCardsKnown(state.s)) {
      return nb::none();
    }
    int overflow = 0;
    const long a = PyLong_AsLongAndOverflow(action.ptr(), &overflow);
    if (overflow || a < 0 || a >= arena::kActionSpaceSize) return nb::none();
    return ActionJson(state.s, static_cast<int>(a), description);
  }, nb::arg("state"), nb::arg("action_id").none(), nb::arg("description").none(),
     "views.action_json for an int 0..162 and a str or None description; None otherwise (use the reference).");
}
