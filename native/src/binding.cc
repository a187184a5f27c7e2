// engine_native._core: the nanobind layer over the C++ rules (no rules here, only conversion).
// Errors: bad input raises the engine.errors classes. Where a message must describe the state
// (an illegal action, a malformed dict), the Python engine -- the reference -- is asked to
// raise it, so the two engines never word an error differently.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "cards.h"
#include "hooks.h"
#include "native_state.h"
#include "policies.h"
#include "random_battles.h"
#include "state.h"

namespace nb = nanobind;

void BindPolicies(nb::module_& m);  // bind_policies.cc
void BindBatch(nb::module_& m);  // bind_batch.cc: features and the batched API
void BindViews(nb::module_& m);  // bind_views.cc: action lines and JSON, the snapshot
void BindTraces(nb::module_& m);  // bind_traces.cc: the trace reader of materialize

namespace {

using arena::Creature;
using arena::EndReason;
using arena::Event;
using arena::EventType;
using arena::Events;
using arena::Player;

// A C++ exception carrying the Python exception class to raise.
struct PyRaise : std::runtime_error {
  PyObject* type;
  PyRaise(PyObject* t, const std::string& message) : std::runtime_error(message), type(t) {}
};

[[noreturn]] void FormatError(const std::string& message) {
  throw PyRaise(arena_binding::GetHooks().state_format_error, message);
}

using arena_binding::NativeState;

// ----------------------------------------------------------------- Python object helpers
// Interned dict keys and constant strings, created once.
struct Names {
  PyObject* type; PyObject* player; PyObject* card_id; PyObject* damage; PyObject* hero_health;
  PyObject* turn; PyObject* max_mana; PyObject* winner; PyObject* reason; PyObject* target;
  PyObject* amount; PyObject* kind; PyObject* slot; PyObject* uid; PyObject* health; PyObject* lethal;
  PyObject* absorbed; PyObject* hand_slot; PyObject* attack; PyObject* keyword; PyObject* hero;
  PyObject* creature;
  PyObject* event_names[16];
  PyObject* keyword_names[arena::kNumKeywords];
  PyObject* reasons[4];
};
Names* g_names = nullptr;

PyObject* Intern(const char* text) { return PyUnicode_InternFromString(text); }

void InitNames() {
  Names* n = new Names;  // lives as long as the interpreter
  n->type = Intern("type"); n->player = Intern("player"); n->card_id = Intern("card_id");
  n->damage = Intern("damage"); n->hero_health = Intern("hero_health"); n->turn = Intern("turn");
  n->max_mana = Intern("max_mana"); n->winner = Intern("winner"); n->reason = Intern("reason");
  n->target = Intern("target"); n->amount = Intern("amount"); n->kind = Intern("kind");
  n->slot = Intern("slot"); n->uid = Intern("uid"); n->health = Intern("health");
  n->lethal = Intern("lethal"); n->absorbed = Intern("absorbed"); n->hand_slot = Intern("hand_slot");
  n->attack = Intern("attack"); n->keyword = Intern("keyword"); n->hero = Intern("hero");
  n->creature = Intern("creature");
  const char* events[16] = {"fatigue", "burn", "draw", "turn_start", "end_turn", "game_over", "damage", "heal",
                            "ward_broken", "death", "play", "summon", "buff", "keyword_granted",
                            "keyword_removed", "attack"};
  for (int i = 0; i < 16; ++i) n->event_names[i] = Intern(events[i]);
  for (int i = 0; i < arena::kNumKeywords; ++i) n->keyword_names[i] = Intern(arena::kKeywordNames[i]);
  n->reasons[0] = nullptr;
  for (int i = 1; i < 4; ++i) n->reasons[i] = Intern(arena::EndReasonName(static_cast<EndReason>(i)));
  g_names = n;
}

// Steals the reference to `value`.
void Set(PyObject* dict, PyObject* key, PyObject* value) {
  PyDict_SetItem(dict, key, value);
  Py_DECREF(value);
}
void SetInt(PyObject* dict, PyObject* key, int64_t value) { Set(dict, key, PyLong_FromLongLong(value)); }
void SetConst(PyObject* dict, PyObject* key, PyObject* value) { PyDict_SetItem(dict, key, value); }
// By key text (to_dict is not on the stepping path); SetS steals `value`, SetSConst borrows it.
void SetS(PyObject* dict, const char* key, PyObject* value) {
  PyDict_SetItemString(dict, key, value);
  Py_DECREF(value);
}
void SetSConst(PyObject* dict, const char* key, PyObject* value) { PyDict_SetItemString(dict, key, value); }

PyObject* KeywordBitName(uint8_t bit) {
  for (int i = 0; i < arena::kNumKeywords; ++i) {
    if (bit == (1 << i)) return g_names->keyword_names[i];
  }
  return Py_None;
}

PyObject* TargetDict(const arena::EventTarget& t) {
  const Names& n = *g_names;
  PyObject* d = PyDict_New();
  SetConst(d, n.kind, t.creature ? n.creature : n.hero);
  SetInt(d, n.player, t.player);
  if (t.creature) {
    SetInt(d, n.slot, t.slot);
    SetInt(d, n.uid, t.uid);
  }
  return d;
}

// One event as the dict engine/state.py appends (same keys, same order).
PyObject* EventDict(const Event& e) {
  const Names& n = *g_names;
  PyObject* d = PyDict_New();
  SetConst(d, n.type, n.event_names[static_cast<int>(e.type)]);
  switch (e.type) {
    case EventType::kFatigue:
      SetInt(d, n.player, e.player); SetInt(d, n.damage, e.a); SetInt(d, n.hero_health, e.b);
      break;
    case EventType::kBurn:
    case EventType::kDraw:
      SetInt(d, n.player, e.player); SetInt(d, n.card_id, e.a);
      break;
    case EventType::kTurnStart:
      SetInt(d, n.player, e.player); SetInt(d, n.turn, e.a); SetInt(d, n.max_mana, e.b);
      break;
    case EventType::kEndTurn:
      SetInt(d, n.player, e.player); SetInt(d, n.turn, e.a);
      break;
    case EventType::kGameOver:
      SetInt(d, n.winner, e.a); SetConst(d, n.reason, n.reasons[static_cast<int>(e.reason)]);
      break;
    case EventType::kDamage:
    case EventType::kHeal:
      Set(d, n.target, TargetDict(e.target)); SetInt(d, n.amount, e.a);
      SetInt(d, e.target.creature ? n.health : n.hero_health, e.b);
      if (e.type == EventType::kDamage && e.target.creature) SetConst(d, n.lethal, e.flag ? Py_True : Py_False);
      break;
    case EventType::kWardBroken:
      Set(d, n.target, TargetDict(e.target)); SetInt(d, n.absorbed, e.a);
      break;
    case EventType::kDeath:
    case EventType::kSummon:
      SetInt(d, n.player, e.player); SetInt(d, n.slot, e.a); SetInt(d, n.uid, e.b); SetInt(d, n.card_id, e.c);
      break;
    case EventType::kPlay:
      SetInt(d, n.player, e.player); SetInt(d, n.hand_slot, e.a); SetInt(d, n.card_id, e.b);
      SetInt(d, n.target, e.c);
      break;
    case EventType::kBuff:
      Set(d, n.target, TargetDict(e.target)); SetInt(d, n.attack, e.a); SetInt(d, n.health, e.b);
      break;
    case EventType::kKeywordGranted:
    case EventType::kKeywordRemoved:
      Set(d, n.target, TargetDict(e.target)); SetConst(d, n.keyword, KeywordBitName(e.keyword));
      break;
    case EventType::kAttack:
      SetInt(d, n.player, e.player); SetInt(d, n.slot, e.a); SetInt(d, n.uid, e.b);
      Set(d, n.target, TargetDict(e.target));
      break;
  }
  return d;
}

nb::list EventsList(const Events& events) {
  PyObject* list = PyList_New(static_cast<Py_ssize_t>(events.size()));
  for (size_t i = 0; i < events.size(); ++i) PyList_SET_ITEM(list, i, EventDict(events[i]));
  return nb::steal<nb::list>(list);
}

PyObject* IntList(const int16_t* items, int n) {
  PyObject* list = PyList_New(n);
  for (int i = 0; i < n; ++i) PyList_SET_ITEM(list, i, PyLong_FromLong(items[i]));
  return list;
}

PyObject* KeywordList(uint8_t mask) {
  PyObject* list = PyList_New(0);
  for (int i = 0; i < arena::kNumKeywords; ++i) {
    if (mask & (1 << i)) PyList_Append(list, g_names->keyword_names[i]);
  }
  return list;
}

PyObject* SeedInt(const std::string& seed) { return PyLong_FromString(seed.c_str(), nullptr, 10); }

PyObject* PlayerDict(const Player& p) {
  PyObject* d = PyDict_New();
  SetInt(d, g_names->hero_health, p.hp);
  SetInt(d, g_names->max_mana, p.max_mana);
  SetS(d, "mana", PyLong_FromLong(p.mana));
  SetS(d, "fatigue", PyLong_FromLongLong(p.fatigue));
  SetS(d, "deck", IntList(p.deck.data(), p.deck_size));
  SetS(d, "hand", IntList(p.hand.data(), p.hand_size));
  PyObject* board = PyList_New(arena::kBoardSlots);
  for (int slot = 0; slot < arena::kBoardSlots; ++slot) {
    const Creature& c = p.board[slot];
    if (!c.present()) {
      Py_INCREF(Py_None);
      PyList_SET_ITEM(board, slot, Py_None);
      continue;
    }
    PyObject* cd = PyDict_New();
    SetInt(cd, g_names->uid, c.uid);
    SetInt(cd, g_names->card_id, c.card_id);
    SetInt(cd, g_names->attack, c.attack);
    SetInt(cd, g_names->health, c.health);
    SetS(cd, "max_health", PyLong_FromLongLong(c.max_health));
    SetS(cd, "keywords", KeywordList(c.keywords));
    SetSConst(cd, "sick", c.sick ? Py_True : Py_False);
    SetSConst(cd, "attacked", c.attacked ? Py_True : Py_False);
    PyList_SET_ITEM(board, slot, cd);
  }
  SetS(d, "board", board);
  return d;
}

// State.to_dict
nb::dict ToDict(const arena::State& s) {
  PyObject* d = PyDict_New();
  SetS(d, "schema_version", PyLong_FromLong(arena::kStateSchemaVersion));
  SetS(d, "ruleset", PyUnicode_FromString("arena-1"));
  SetS(d, "seed", SeedInt(s.seed));
  PyObject* decks = PyList_New(2);
  for (int i = 0; i < 2; ++i) PyList_SET_ITEM(decks, i, IntList(s.decks[i].data(), arena::kDeckSize));
  SetS(d, "decks", decks);
  SetS(d, "starting_player", PyLong_FromLong(s.starting_player));
  char rng[17];
  std::snprintf(rng, sizeof rng, "%016llx", static_cast<unsigned long long>(s.rng.state));
  SetS(d, "rng_state", PyUnicode_FromString(rng));
  SetInt(d, g_names->turn, s.turn);
  SetS(d, "active_player", PyLong_FromLong(s.active + 1));
  SetS(d, "next_uid", PyLong_FromLongLong(s.next_uid));
  if (s.terminal()) {
    SetInt(d, g_names->winner, s.winner);
    SetSConst(d, "end_reason", g_names->reasons[static_cast<int>(s.end_reason)]);
  } else {
    SetConst(d, g_names->winner, Py_None);
    SetSConst(d, "end_reason", Py_None);
  }
  PyObject* players = PyList_New(2);
  for (int i = 0; i < 2; ++i) PyList_SET_ITEM(players, i, PlayerDict(s.players[i]));
  SetS(d, "players", players);
  return nb::steal<nb::dict>(d);
}

// ----------------------------------------------------------------- from a dict
// Reads a dict the Python engine produced by State.from_dict(data).to_dict(): well formed by
// construction, so a failure here means a value the native core cannot hold (its own message).
constexpr int64_t kNativeLimit = int64_t(1) << 48;

nb::handle Item(nb::handle dict, const char* key) {
  PyObject* value = PyDict_Check(dict.ptr()) ? PyDict_GetItemString(dict.ptr(), key) : nullptr;
  if (value == nullptr) FormatError(std::string("malformed arena-1 state: missing field ") + key);
  return value;
}

int64_t ReadInt(nb::handle value, const std::string& what) {
  if (!PyLong_CheckExact(value.ptr())) FormatError("state field " + what + " must be an integer");
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
  if (overflow != 0 || v < -kNativeLimit || v > kNativeLimit) {
    FormatError("state field " + what + " = " + nb::cast<std::string>(nb::str(value)) +
                " is outside the native engine core's range -2**48..2**48; use the Python engine for such a state");
  }
  return v;
}

template <size_t N>
int ReadCards(nb::handle value, const std::string& what, std::array<int16_t, N>& out) {
  if (!PyList_Check(value.ptr()) || PyList_GET_SIZE(value.ptr()) > static_cast<Py_ssize_t>(N)) {
    FormatError("state field " + what + " must be a list of at most " + std::to_string(N) + " card ids");
  }
  const int n = static_cast<int>(PyList_GET_SIZE(value.ptr()));
  for (int i = 0; i < n; ++i) {
    const int64_t id = ReadInt(PyList_GET_ITEM(value.ptr(), i), what);
    if (arena::Pool().Find(static_cast<int>(id)) == nullptr || id > 32767) {
      FormatError("state field " + what + " holds unknown card id " + std::to_string(id));
    }
    out[i] = static_cast<int16_t>(id);
  }
  return n;
}

uint8_t ReadKeywords(nb::handle value, const std::string& what) {
  if (!PyList_Check(value.ptr())) FormatError("state field " + what + " must be a list of keywords");
  uint8_t mask = 0;
  for (nb::handle name : nb::borrow<nb::list>(value)) {
    bool found = false;
    for (int i = 0; i < arena::kNumKeywords; ++i) {
      if (PyUnicode_Check(name.ptr()) && PyUnicode_CompareWithASCIIString(name.ptr(), arena::kKeywordNames[i]) == 0) {
        mask |= static_cast<uint8_t>(1 << i);
        found = true;
      }
    }
    if (!found) FormatError("state field " + what + " holds an unknown keyword");
  }
  return mask;
}

EndReason ReadEndReason(nb::handle value) {
  for (int i = 1; i < 4; ++i) {
    if (PyUnicode_Check(value.ptr()) &&
        PyUnicode_CompareWithASCIIString(value.ptr(), arena::EndReasonName(static_cast<EndReason>(i))) == 0) {
      return static_cast<EndReason>(i);
    }
  }
  FormatError("state field end_reason = " + nb::cast<std::string>(nb::repr(value)) +
              " is not one the rules produce (hero_defeated, simultaneous_death, turn_limit); "
              "the native engine core cannot hold it");
}

arena::State FromNormalizedDict(nb::handle d) {
  arena::State s;
  nb::handle seed = Item(d, "seed");
  if (!PyLong_CheckExact(seed.ptr())) FormatError("state field seed must be an integer");
  s.seed = nb::cast<std::string>(nb::str(seed));
  nb::handle decks = Item(d, "decks");
  if (!PyList_Check(decks.ptr()) || PyList_GET_SIZE(decks.ptr()) != 2) FormatError("state field decks must hold two decks");
  for (int i = 0; i < 2; ++i) {
    const std::string what = "decks[" + std::to_string(i) + "]";
    if (ReadCards(PyList_GET_ITEM(decks.ptr(), i), what, s.decks[i]) != arena::kDeckSize) {
      FormatError("state field " + what + " must hold " + std::to_string(arena::kDeckSize) + " cards");
    }
  }
  s.starting_player = static_cast<int>(ReadInt(Item(d, "starting_player"), "starting_player"));
  nb::handle rng = Item(d, "rng_state");
  const std::string hex = PyUnicode_Check(rng.ptr()) ? nb::cast<std::string>(rng) : std::string();
  if (hex.size() != 16 || hex.find_first_not_of("0123456789abcdef") != std::string::npos) {
    FormatError("state field rng_state must be 16 hex digits");
  }
  s.rng.state = std::strtoull(hex.c_str(), nullptr, 16);
  s.turn = static_cast<int>(ReadInt(Item(d, "turn"), "turn"));
  s.active = static_cast<int>(ReadInt(Item(d, "active_player"), "active_player")) - 1;
  s.next_uid = ReadInt(Item(d, "next_uid"), "next_uid");
  nb::handle winner = Item(d, "winner");
  if (!winner.is_none()) {
    s.winner = static_cast<int>(ReadInt(winner, "winner"));
    s.end_reason = ReadEndReason(Item(d, "end_reason"));
  }
  nb::handle players = Item(d, "players");
  if (!PyList_Check(players.ptr()) || PyList_GET_SIZE(players.ptr()) != 2) FormatError("state field players must hold two players");
  for (int i = 0; i < 2; ++i) {
    nb::handle pd = PyList_GET_ITEM(players.ptr(), i);
    const std::string where = "players[" + std::to_string(i) + "]";
    Player& p = s.players[i];
    p.deck_size = ReadCards(Item(pd, "deck"), where + ".deck", p.deck);
    p.hp = ReadInt(Item(pd, "hero_health"), where + ".hero_health");
    p.max_mana = static_cast<int32_t>(ReadInt(Item(pd, "max_mana"), where + ".max_mana"));
    p.mana = static_cast<int32_t>(ReadInt(Item(pd, "mana"), where + ".mana"));
    p.fatigue = ReadInt(Item(pd, "fatigue"), where + ".fatigue");
    p.hand_size = ReadCards(Item(pd, "hand"), where + ".hand", p.hand);
    nb::handle board = Item(pd, "board");
    if (!PyList_Check(board.ptr()) || PyList_GET_SIZE(board.ptr()) != arena::kBoardSlots) {
      FormatError("state field " + where + ".board must have 6 slots");
    }
    for (int slot = 0; slot < arena::kBoardSlots; ++slot) {
      nb::handle cd = PyList_GET_ITEM(board.ptr(), slot);
      if (cd.is_none()) continue;
      const std::string at = where + ".board[" + std::to_string(slot) + "]";
      Creature& c = p.board[slot];
      const int64_t card_id = ReadInt(Item(cd, "card_id"), at + ".card_id");
      const arena::Card* card = arena::Pool().Find(static_cast<int>(card_id));
      if (card == nullptr || !card->creature) FormatError("state field " + at + ".card_id is not a creature card");
      c.card_id = static_cast<int32_t>(card_id);
      c.uid = ReadInt(Item(cd, "uid"), at + ".uid");
      c.attack = ReadInt(Item(cd, "attack"), at + ".attack");
      c.health = ReadInt(Item(cd, "health"), at + ".health");
      c.max_health = ReadInt(Item(cd, "max_health"), at + ".max_health");
      c.keywords = ReadKeywords(Item(cd, "keywords"), at + ".keywords");
      c.sick = Item(cd, "sick").is(Py_True);
      c.attacked = Item(cd, "attacked").is(Py_True);
    }
  }
  return s;
}

// ----------------------------------------------------------------- the Python engine's word
// The action id as an int 0..162; anything else is refused with engine.actions.check_action_id's error.
int CheckActionId(nb::handle action) {
  if (PyLong_CheckExact(action.ptr())) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(action.ptr(), &overflow);
    if (overflow == 0 && v >= 0 && v < arena::kActionSpaceSize) return static_cast<int>(v);
  }
  nb::object checked = nb::borrow(arena_binding::GetHooks().check_action_id)(action);
  const int v = nb::cast<int>(checked);
  if (v < 0 || v >= arena::kActionSpaceSize) throw std::logic_error("engine_native: check_action_id passed " + std::to_string(v));
  return v;
}

[[noreturn]] void RaiseIllegal(const NativeState& self, int action_id) {
  // The reference raises IllegalActionError with its explanation of why and the legal ids.
  nb::borrow(arena_binding::GetHooks().explain_illegal)(ToDict(self.s), action_id);
  throw std::logic_error("engine_native: action " + std::to_string(action_id) +
                         " is illegal in the native core but legal in the Python engine (a native bug)");
}

arena::Card CardFromTuple(nb::handle t) {
  // (id, is_creature, cost, attack, health, keywords, effect, target, amount, buff_attack,
  //  buff_health, keyword bit, scope), as engine_native._pool_rows builds it from engine.CARDS.
  nb::tuple row = nb::borrow<nb::tuple>(t);
  arena::Card c;
  c.id = nb::cast<int>(row[0]);
  c.creature = nb::cast<bool>(row[1]);
  c.cost = nb::cast<int>(row[2]);
  c.attack = nb::cast<int>(row[3]);
  c.health = nb::cast<int>(row[4]);
  c.keywords = static_cast<uint8_t>(nb::cast<int>(row[5]));
  c.effect = static_cast<arena::Effect>(nb::cast<int>(row[6]));
  c.target = static_cast<arena::TargetRule>(nb::cast<int>(row[7]));
  c.amount = nb::cast<int>(row[8]);
  c.buff_attack = nb::cast<int>(row[9]);
  c.buff_health = nb::cast<int>(row[10]);
  c.keyword = static_cast<uint8_t>(nb::cast<int>(row[11]));
  c.scope = static_cast<arena::Scope>(nb::cast<int>(row[12]));
  if (c.id <= 0 || c.id > 32767) throw PyRaise(arena_binding::GetHooks().card_pool_error, "card id " + std::to_string(c.id) + " is outside 1..32767");
  return c;
}

std::array<int16_t, arena::kDeckSize> DeckArray(nb::handle deck) {
  std::array<int16_t, arena::kDeckSize> out{};
  const int n = ReadCards(deck, "deck", out);
  if (n != arena::kDeckSize) throw std::logic_error("engine_native: a validated deck does not hold 30 cards");
  return out;
}

nb::tuple PlayerTuple(const arena::State& s, int index) {
  if (index != 0 && index != 1) throw std::out_of_range("player index must be 0 or 1");
  const Player& p = s.players[index];
  PyObject* deck = PyTuple_New(p.deck_size);
  for (int i = 0; i < p.deck_size; ++i) PyTuple_SET_ITEM(deck, i, PyLong_FromLong(p.deck[i]));
  PyObject* hand = PyTuple_New(p.hand_size);
  for (int i = 0; i < p.hand_size; ++i) PyTuple_SET_ITEM(hand, i, PyLong_FromLong(p.hand[i]));
  PyObject* board = PyTuple_New(arena::kBoardSlots);
  for (int slot = 0; slot < arena::kBoardSlots; ++slot) {
    const Creature& c = p.board[slot];
    if (!c.present()) {
      Py_INCREF(Py_None);
      PyTuple_SET_ITEM(board, slot, Py_None);
      continue;
    }
    PyObject* sick = c.sick ? Py_True : Py_False;
    PyObject* attacked = c.attacked ? Py_True : Py_False;
    Py_INCREF(sick);
    Py_INCREF(attacked);
    PyTuple_SET_ITEM(board, slot, PyTuple_Pack(8, nb::int_(c.uid).ptr(), nb::int_(c.card_id).ptr(),
                                               nb::int_(c.attack).ptr(), nb::int_(c.health).ptr(),
                                               nb::int_(c.max_health).ptr(), nb::int_(c.keywords).ptr(), sick, attacked));
    Py_DECREF(sick);
    Py_DECREF(attacked);
  }
  return nb::make_tuple(p.hp, p.max_mana, p.mana, p.fatigue, nb::steal<nb::tuple>(deck), nb::steal<nb::tuple>(hand),
                        nb::steal<nb::tuple>(board));
}

nb::list LegalList(NativeState& self) {
  const arena::ActionList& legal = self.Legal();
  PyObject* list = PyList_New(legal.size);
  for (int i = 0; i < legal.size; ++i) PyList_SET_ITEM(list, i, PyLong_FromLong(legal.ids[i]));
  return nb::steal<nb::list>(list);
}

}  // namespace

namespace arena_binding {

Hooks& GetHooks() {
  static Hooks hooks;
  return hooks;
}

arena::State StateFromNormalizedDict(nb::handle normalized) { return FromNormalizedDict(normalized); }

void RequireRegistered() {
  const Hooks& h = GetHooks();
  if (h.checked_dict == nullptr || arena::Pool().Empty()) {
    throw std::runtime_error("engine_native is not registered with the Python engine: get it through "
                             "engine.backend.native() or engine.backend.load_native(), which register the card table");
  }
}

}  // namespace arena_binding

NB_MODULE(_core, m) {
  m.doc() = "ExtraArena arena-1 rules in C++ (phase 1 of issue 26); use the engine_native package.";
  InitNames();
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const PyRaise& e) {
      PyErr_SetString(e.type, e.what());
    }
  });

  m.attr("ACTION_SPACE_SIZE") = arena::kActionSpaceSize;

  m.def("_register", [](nb::handle hooks) {
    // Every hook is read (and checked callable) before any is kept: a bad call changes nothing.
    const char* names[] = {"StateFormatError", "CardPoolError", "State", "check_action_id", "explain_illegal",
                           "normalize_dict", "checked_dict"};
    PyObject* values[7];
    for (int i = 0; i < 7; ++i) {
      nb::object value = hooks.attr(names[i]);
      if (!PyCallable_Check(value.ptr())) throw nb::type_error((std::string("engine_native hook ") + names[i] + " is not callable").c_str());
      values[i] = value.ptr();
    }
    arena_binding::Hooks& h = arena_binding::GetHooks();
    PyObject** slots[] = {&h.state_format_error, &h.card_pool_error, &h.engine_state, &h.check_action_id,
                          &h.explain_illegal, &h.normalize_dict, &h.checked_dict};
    for (int i = 0; i < 7; ++i) {
      Py_INCREF(values[i]);
      Py_XDECREF(*slots[i]);
      *slots[i] = values[i];
    }
  }, nb::arg("hooks"), "Engine's registration (engine_native.register calls it): error classes, State, reference hooks.");

  m.def("set_card_pool", [](nb::list rows) {
    if (arena_binding::GetHooks().card_pool_error == nullptr) {
      throw std::runtime_error("engine_native is not registered with the Python engine: use engine.backend.load_native()");
    }
    std::vector<arena::Card> cards;
    for (nb::handle row : rows) cards.push_back(CardFromTuple(row));
    std::vector<int> ids;
    for (const arena::Card& card : cards) ids.push_back(card.id);
    std::sort(ids.begin(), ids.end());
    if (std::adjacent_find(ids.begin(), ids.end()) != ids.end() || 2 * ids.size() < arena::kDeckSize) {
      throw PyRaise(arena_binding::GetHooks().card_pool_error,
                    "a card pool needs unique ids and at least " + std::to_string(arena::kDeckSize / 2) + " cards");
    }
    arena::Pool().Set(cards);
  }, "Load the card table (engine_native.register does it with engine.CARDS).");

  nb::class_<NativeState>(m, "State", "A battle on the native core; the engine.State API for rules and serialization.")
      .def("legal_actions", [](NativeState& self) { return LegalList(self); },
           "Legal action ids for the player to move, ascending; empty once terminal.")
      .def("apply", [](NativeState& self, nb::handle action) {
             const int a = CheckActionId(action);
             const arena::ActionList& legal = self.Legal();
             if (std::find(legal.ids.begin(), legal.ids.begin() + legal.size, a) == legal.ids.begin() + legal.size) {
               RaiseIllegal(self, a);
             }
             self.last_events.clear();
             self.legal_valid = false;
             ++self.version;
             arena::ApplyAction(self.s, a, &self.last_events);
             return EventsList(self.last_events);
           }, nb::arg("action_id").none(),
           "Apply a legal action and return its events; an illegal one raises IllegalActionError and changes nothing.")
      .def("greedy_until", [](NativeState& self, int horizon) {
             // The guided search's rollout (adapters/guided.py): greedy plays until the battle ends
             // or turn `horizon` starts, as `while not is_terminal and turn < horizon:
             // apply(greedy_act(state))` does, without building the events.
             int steps = 0;
             {
               nb::gil_scoped_release release;
               while (!self.s.terminal() && self.s.turn < horizon) {
                 arena::ApplyAction(self.s, arena::GreedyAct(self.s), nullptr);
                 ++steps;
               }
             }
             if (steps > 0) {
               self.last_events.clear();
               self.legal_valid = false;
               ++self.version;
             }
             return steps;
           }, nb::arg("horizon"),
           "Greedy plays until the battle ends or turn `horizon` starts; returns the actions applied (no events).")
      .def("clone", [](const NativeState& self) { return NativeState(self); })
      .def("to_dict", [](const NativeState& self) { return ToDict(self.s); })
      .def("canonical_json", [](const NativeState& self) { return arena::CanonicalJson(self.s); })
      .def("state_hash", [](const NativeState& self) { return arena::StateHash(self.s); })
      .def_static("from_dict", [](nb::handle data) {
             // The reference validates (same errors, same messages) and normalizes the dict.
             arena_binding::RequireRegistered();
             nb::object checked = nb::borrow(arena_binding::GetHooks().normalize_dict)(data);
             NativeState out;
             out.s = FromNormalizedDict(checked);
             return out;
           }, nb::arg("data").none(), "Rebuild a state from a to_dict() of either engine.")
      .def_prop_ro("last_events", [](const NativeState& self) { return EventsList(self.last_events); })
      .def_prop_ro("is_terminal", [](const NativeState& self) { return self.s.terminal(); })
      .def_prop_ro("to_move", [](const NativeState& self) -> nb::object {
             if (self.s.terminal()) return nb::none();
             return nb::int_(self.s.active + 1);
           })
      .def_prop_ro("winner", [](const NativeState& self) -> nb::object {
             if (!self.s.terminal()) return nb::none();
             return nb::int_(self.s.winner);
           })
      .def_prop_ro("end_reason", [](const NativeState& self) -> nb::object {
             if (!self.s.terminal()) return nb::none();
             return nb::str(arena::EndReasonName(self.s.end_reason));
           })
      .def_prop_ro("turn", [](const NativeState& self) { return self.s.turn; })
      .def_prop_ro("active", [](const NativeState& self) { return self.s.active; })
      .def_prop_ro("player_turn", [](const NativeState& self) { return (self.s.turn + 1) / 2; })
      .def_prop_ro("starting_player", [](const NativeState& self) { return self.s.starting_player; })
      .def_prop_ro("seed", [](const NativeState& self) { return nb::steal<nb::int_>(SeedInt(self.s.seed)); })
      .def_prop_ro("next_uid", [](const NativeState& self) { return self.s.next_uid; })
      .def_prop_ro("version", [](const NativeState& self) { return self.version; },
                   "Transitions applied to this object (a cache key for what was read of it).")
      .def_prop_ro("rng_state", [](const NativeState& self) { return self.s.rng.state; },
                   "The battle generator's state (engine.State.rng.state).")
      .def("player_fields", [](const NativeState& self, int index) { return PlayerTuple(self.s, index); },
           nb::arg("index"),
           "Player index (0 or 1) as (hp, max_mana, mana, fatigue, deck, hand, board): tuples, a board slot "
           "None or (uid, card_id, attack, health, max_health, keywords mask, sick, attacked).")
      .def_prop_ro("decks", [](const NativeState& self) {
             nb::list one = nb::steal<nb::list>(IntList(self.s.decks[0].data(), arena::kDeckSize));
             nb::list two = nb::steal<nb::list>(IntList(self.s.decks[1].data(), arena::kDeckSize));
             return nb::make_tuple(nb::tuple(one), nb::tuple(two));
           })
      .def("__repr__", [](const NativeState& self) {
             const arena::State& s = self.s;
             std::string status = s.terminal()
                 ? "winner=" + std::to_string(s.winner) + " (" + arena::EndReasonName(s.end_reason) + ")"
                 : "to_move=" + std::to_string(s.active + 1);
             return "<arena-1 native State seed=" + s.seed + " turn=" + std::to_string(s.turn) + " hp=" +
                    std::to_string(s.players[0].hp) + "/" + std::to_string(s.players[1].hp) + " " + status + ">";
           });

  m.def("_new_battle", [](const std::string& seed, nb::handle p1_deck, nb::handle p2_deck, int starting_player) {
    arena_binding::RequireRegistered();
    if (starting_player < 0 || starting_player > 2) throw std::invalid_argument("starting_player must be 0 (seeded), 1 or 2");
    if (seed.empty() || seed.find_first_not_of("-0123456789") != std::string::npos || seed.find('-', 1) != std::string::npos) {
      throw std::invalid_argument("seed must be the decimal text of an integer");
    }
    std::array<int16_t, arena::kDeckSize> decks[2];
    const std::array<int16_t, arena::kDeckSize>* given[2] = {nullptr, nullptr};
    nb::handle args[2] = {p1_deck, p2_deck};
    for (int i = 0; i < 2; ++i) {
      if (!args[i].is_none()) {
        decks[i] = DeckArray(args[i]);
        given[i] = &decks[i];
      }
    }
    NativeState out;
    out.s = arena::NewBattle(seed, given[0], given[1], starting_player, &out.last_events);
    return out;
  }, nb::arg("seed"), nb::arg("p1_deck").none(), nb::arg("p2_deck").none(), nb::arg("starting_player"),
     "new_battle on checked arguments (decimal seed text, validated decks as lists or None, start 0/1/2).");

  BindPolicies(m);
  BindBatch(m);
  BindViews(m);
  BindTraces(m);
}
