// engine_native._core bindings of the baselines and the search actor (issue 26, DESIGN 16):
// from_state (a Python engine.State to a native state, attribute by attribute), the greedy
// and random baselines and the search actor over a baseline. No rules or policy logic here.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "cards.h"
#include "hooks.h"
#include "native_state.h"
#include "policies.h"
#include "search.h"
#include "state.h"

namespace nb = nanobind;

namespace {

using arena_binding::NativeState;

// Attribute names of engine.State, engine.state.Player and engine.SplitMix64, interned once.
struct Attrs {
  PyObject *seed, *decks, *starting_player, *rng, *state, *players, *active, *turn, *next_uid, *winner,
      *end_reason, *hp, *max_mana, *mana, *fatigue, *deck, *hand, *board, *core;
};
Attrs g_attrs;

// A field of a Python engine.State that the core cannot take as it is: the state's fields were
// edited (its slots are writable) or hold an integer beyond the core. FromPythonState then asks
// the reference for its verdict (checked_dict), so the error is the Python engine's own.
struct Unusual {};

// The native core holds integers in -2**48..2**48 (as FromNormalizedDict in binding.cc).
constexpr int64_t kNativeLimit = int64_t(1) << 48;

// obj.name (a new reference), or Unusual when it is missing.
nb::object Attr(PyObject* obj, PyObject* name) {
  PyObject* value = PyObject_GetAttr(obj, name);
  if (value == nullptr) {
    PyErr_Clear();
    throw Unusual{};
  }
  return nb::steal(value);
}

// An exact int (not a bool, not a float) in lo..hi, else Unusual.
int64_t Int(PyObject* value, int64_t lo, int64_t hi) {
  if (!PyLong_CheckExact(value)) throw Unusual{};
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
  if (v == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    throw Unusual{};
  }
  if (overflow != 0 || v < lo || v > hi) throw Unusual{};
  return v;
}

int64_t IntAttr(PyObject* obj, PyObject* name, int64_t lo, int64_t hi) { return Int(Attr(obj, name).ptr(), lo, hi); }

// A list or tuple of at most N card ids of the pool into `out`; returns its length.
template <size_t N>
int Cards(PyObject* seq, std::array<int16_t, N>& out) {
  if (!PyList_Check(seq) && !PyTuple_Check(seq)) throw Unusual{};
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  if (n > static_cast<Py_ssize_t>(N)) throw Unusual{};
  PyObject** items = PySequence_Fast_ITEMS(seq);
  for (Py_ssize_t i = 0; i < n; ++i) {
    const int64_t id = Int(items[i], 1, 32767);
    if (arena::Pool().Find(static_cast<int>(id)) == nullptr) throw Unusual{};
    out[i] = static_cast<int16_t>(id);
  }
  return static_cast<int>(n);
}

bool Bool(PyObject* value) {
  if (value != Py_True && value != Py_False) throw Unusual{};
  return value == Py_True;
}

arena::EndReason EndReasonOf(PyObject* value) {
  for (int i = 1; i < 4; ++i) {
    const auto reason = static_cast<arena::EndReason>(i);
    if (PyUnicode_CheckExact(value) && PyUnicode_CompareWithASCIIString(value, arena::EndReasonName(reason)) == 0) {
      return reason;
    }
  }
  throw Unusual{};
}

// engine.State -> arena::State when every field is what engine.State.from_dict would accept
// (the same ranges or narrower: a state the rules made passes), else Unusual. Nothing is truncated.
arena::State ReadPythonState(PyObject* o) {
  const Attrs& a = g_attrs;
  arena::State s;
  nb::object seed = Attr(o, a.seed);
  if (!PyLong_CheckExact(seed.ptr())) throw Unusual{};
  s.seed = nb::cast<std::string>(nb::str(seed));
  nb::object decks = Attr(o, a.decks);
  if (!PyTuple_Check(decks.ptr()) || PyTuple_GET_SIZE(decks.ptr()) != 2) throw Unusual{};
  for (int i = 0; i < 2; ++i) {
    if (Cards(PyTuple_GET_ITEM(decks.ptr(), i), s.decks[i]) != arena::kDeckSize) throw Unusual{};
    std::array<int16_t, arena::kDeckSize> sorted = s.decks[i];
    std::sort(sorted.begin(), sorted.end());
    for (int k = arena::kMaxCopies; k < arena::kDeckSize; ++k) {
      if (sorted[k] == sorted[k - arena::kMaxCopies]) throw Unusual{};  // more copies than a deck may hold
    }
  }
  s.starting_player = static_cast<int>(IntAttr(o, a.starting_player, 1, 2));
  nb::object rng = Attr(o, a.rng);
  nb::object rng_state = Attr(rng.ptr(), a.state);
  if (!PyLong_CheckExact(rng_state.ptr())) throw Unusual{};
  s.rng.state = PyLong_AsUnsignedLongLong(rng_state.ptr());
  if (PyErr_Occurred()) {
    PyErr_Clear();
    throw Unusual{};
  }
  s.active = static_cast<int>(IntAttr(o, a.active, 0, 1));
  s.turn = static_cast<int>(IntAttr(o, a.turn, 0, arena::kMaxTurns));
  s.next_uid = IntAttr(o, a.next_uid, 1, kNativeLimit);
  nb::object winner = Attr(o, a.winner);
  nb::object end_reason = Attr(o, a.end_reason);
  if (winner.is_none() != end_reason.is_none()) throw Unusual{};
  if (!winner.is_none()) {
    s.winner = static_cast<int>(Int(winner.ptr(), 0, 2));
    s.end_reason = EndReasonOf(end_reason.ptr());
  }
  nb::object players = Attr(o, a.players);
  if (!PyList_Check(players.ptr()) || PyList_GET_SIZE(players.ptr()) != 2) throw Unusual{};
  for (int i = 0; i < 2; ++i) {
    PyObject* pp = PyList_GET_ITEM(players.ptr(), i);
    arena::Player& p = s.players[i];
    p.hp = IntAttr(pp, a.hp, -kNativeLimit, arena::kHeroHealth);
    p.max_mana = static_cast<int32_t>(IntAttr(pp, a.max_mana, 0, arena::kMaxMana));
    p.mana = static_cast<int32_t>(IntAttr(pp, a.mana, 0, p.max_mana));
    p.fatigue = IntAttr(pp, a.fatigue, 0, kNativeLimit);
    p.deck_size = Cards(Attr(pp, a.deck).ptr(), p.deck);
    p.hand_size = Cards(Attr(pp, a.hand).ptr(), p.hand);
    nb::object board = Attr(pp, a.board);
    if (!PyList_Check(board.ptr()) || PyList_GET_SIZE(board.ptr()) != arena::kBoardSlots) throw Unusual{};
    for (int slot = 0; slot < arena::kBoardSlots; ++slot) {
      PyObject* c = PyList_GET_ITEM(board.ptr(), slot);
      if (c == Py_None) continue;
      // engine.state.Creature: (uid, card_id, attack, health, max_health, keywords, sick, attacked)
      if (!PyTuple_Check(c) || PyTuple_GET_SIZE(c) != 8) throw Unusual{};
      arena::Creature& n = p.board[slot];
      n.uid = Int(PyTuple_GET_ITEM(c, 0), 1, kNativeLimit);
      const int64_t card_id = Int(PyTuple_GET_ITEM(c, 1), 1, 32767);
      const arena::Card* card = arena::Pool().Find(static_cast<int>(card_id));
      if (card == nullptr || !card->creature) throw Unusual{};
      n.card_id = static_cast<int32_t>(card_id);
      n.attack = Int(PyTuple_GET_ITEM(c, 2), 0, kNativeLimit);
      n.health = Int(PyTuple_GET_ITEM(c, 3), 1, kNativeLimit);
      n.max_health = Int(PyTuple_GET_ITEM(c, 4), 1, kNativeLimit);
      n.keywords = static_cast<uint8_t>(Int(PyTuple_GET_ITEM(c, 5), 0, (1 << arena::kNumKeywords) - 1));
      n.sick = Bool(PyTuple_GET_ITEM(c, 6));
      n.attacked = Bool(PyTuple_GET_ITEM(c, 7));
    }
  }
  return s;
}

// engine.State -> arena::State, every rules field (State.last_events is not carried over). A
// state whose fields were edited out of what the rules make gets the reference's verdict:
// its StateFormatError (the type and message of engine.State.from_dict of its to_dict), or,
// where the reference accepts it, the core's own refusal of what it cannot hold.
arena::State FromPythonState(nb::handle py) {
  try {
    return ReadPythonState(py.ptr());
  } catch (const Unusual&) {
  }
  nb::object normalized = nb::borrow(arena_binding::GetHooks().checked_dict)(py);
  return arena_binding::StateFromNormalizedDict(normalized);
}

void InitAttrs() {
  Attrs& a = g_attrs;
  auto in = [](const char* text) { return PyUnicode_InternFromString(text); };
  a.seed = in("seed"); a.decks = in("decks"); a.starting_player = in("starting_player"); a.rng = in("rng");
  a.state = in("state"); a.players = in("players"); a.active = in("active"); a.turn = in("turn");
  a.next_uid = in("next_uid"); a.winner = in("winner"); a.end_reason = in("end_reason"); a.hp = in("hp");
  a.max_mana = in("max_mana"); a.mana = in("mana"); a.fatigue = in("fatigue"); a.deck = in("deck");
  a.hand = in("hand"); a.board = in("board"); a.core = in("_core");
}

// The native state behind `h` when it is one: an engine_native.State, or an engine.State on
// the native core (engine.native_state.NativeState, whose `_core` is one). Else null.
NativeState* NativeOf(nb::handle h) {
  if (nb::isinstance<NativeState>(h)) return &nb::cast<NativeState&>(h);
  PyTypeObject* engine_state = reinterpret_cast<PyTypeObject*>(arena_binding::GetHooks().engine_state);
  if (Py_TYPE(h.ptr()) != engine_state && PyObject_TypeCheck(h.ptr(), engine_state)) {
    PyObject* core = PyObject_GetAttr(h.ptr(), g_attrs.core);
    if (core == nullptr) {
      PyErr_Clear();
      return nullptr;
    }
    nb::object held = nb::steal(core);  // the wrapper (alive in the caller's frame) keeps it alive
    if (nb::isinstance<NativeState>(held)) return &nb::cast<NativeState&>(held);
  }
  return nullptr;
}

// The rules state of an engine.State (converted, validated) or of a native one (borrowed).
class StateArg {
 public:
  explicit StateArg(nb::handle h) {
    arena_binding::RequireRegistered();
    if (NativeState* native = NativeOf(h)) {
      ptr_ = &native->s;
    } else if (Py_TYPE(h.ptr()) != reinterpret_cast<PyTypeObject*>(arena_binding::GetHooks().engine_state)) {
      throw nb::type_error(("engine_native needs an engine.State or an engine_native.State, got " +
                            std::string(Py_TYPE(h.ptr())->tp_name)).c_str());
    } else {
      own_ = FromPythonState(h);
      ptr_ = &own_;
    }
  }
  const arena::State& operator*() const { return *ptr_; }

 private:
  arena::State own_;
  const arena::State* ptr_ = nullptr;
};

arena::Rollout RolloutOf(const std::string& name) {
  if (name == "greedy") return arena::Rollout::kGreedy;
  if (name == "random") return arena::Rollout::kRandom;
  throw nb::value_error("the native search's rollout policy is 'greedy' or 'random'");
}

int CheckPlayer(int player) {
  if (player != 1 && player != 2) throw nb::value_error("player must be 1 or 2");
  return player;
}

void CheckDeciding(const arena::State& s, int sims) {
  if (s.terminal()) throw nb::value_error("the native search needs a battle that is not over");
  if (sims < 1 || sims > 4096) throw nb::value_error("the native search needs sims >= 1 and at most 4096 (adapters.search.MAX_SIMS)");
}

// (action, visits, mean values or None where unvisited, the random rollout generator's state or None)
nb::tuple SearchResult(const arena::SearchOutput& out, bool random, const arena::SplitMix64& rng) {
  nb::list visits, means;
  for (int i = 0; i < out.num_legal; ++i) {
    visits.append(out.visits[i]);
    if (out.visits[i] > 0) {
      means.append(out.mean[i]);
    } else {
      means.append(nb::none());
    }
  }
  return nb::make_tuple(out.action, visits, means, random ? nb::object(nb::int_(rng.state)) : nb::none());
}

// One search decision (SearchWithSeed or SearchAct, whose third argument is the seed each takes)
// on a copy of the state without the GIL: (action, visits, means, rollout generator state).
nb::tuple RunSearch(nb::handle state, uint64_t seed, int sims, const std::string& rollout,
                    std::optional<uint64_t> rollout_rng,
                    void (*search)(const arena::State&, uint64_t, int, arena::Rollout, arena::SplitMix64*,
                                   arena::SearchOutput*)) {
  StateArg s(state);
  CheckDeciding(*s, sims);
  const arena::Rollout kind = RolloutOf(rollout);
  arena::SplitMix64 rng{rollout_rng.value_or(0)};
  arena::SearchOutput out;
  {
    const arena::State copy = *s;  // another thread may step a borrowed native state meanwhile
    nb::gil_scoped_release release;
    search(copy, seed, sims, kind, &rng, &out);
  }
  return SearchResult(out, kind == arena::Rollout::kRandom, rng);
}

// Plays the battles without the GIL and returns their results as play_random_battles documents.
nb::dict BattleResults(const std::vector<uint64_t>& seeds, bool hashes,
                       std::vector<arena::BattleResult> (*play)(const std::vector<uint64_t>&, bool)) {
  std::vector<arena::BattleResult> results;
  {
    nb::gil_scoped_release release;
    results = play(seeds, hashes);
  }
  nb::list winner, reason, turn, steps, health, final_hash;
  for (const arena::BattleResult& r : results) {
    winner.append(r.winner);
    reason.append(arena::EndReasonName(r.end_reason));
    turn.append(r.turn);
    steps.append(r.steps);
    health.append(nb::make_tuple(r.hero_health[0], r.hero_health[1]));
    if (hashes) final_hash.append(r.final_hash);
  }
  nb::dict out;
  out["winner"] = winner;
  out["end_reason"] = reason;
  out["turn"] = turn;
  out["steps"] = steps;
  out["hero_health"] = health;
  if (hashes) out["state_hash"] = final_hash;
  return out;
}

}  // namespace

void BindPolicies(nb::module_& m) {
  InitAttrs();
  m.def("_from_state", [](nb::handle state) {
    arena_binding::RequireRegistered();
    if (Py_TYPE(state.ptr()) != reinterpret_cast<PyTypeObject*>(arena_binding::GetHooks().engine_state)) {
      throw nb::type_error(("engine_native.from_state needs a Python engine.State, got " +
                            std::string(Py_TYPE(state.ptr())->tp_name)).c_str());
    }
    NativeState out;
    out.s = FromPythonState(state);
    return out;
  }, nb::arg("state"),
        "A native copy of a Python engine.State (every rules field; last_events is not carried over).");

  m.def("_evaluate", [](nb::handle state, int player) { return arena::Evaluate(*StateArg(state), CheckPlayer(player)); },
        nb::arg("state"), nb::arg("player"), "adapters.baselines.evaluate (player 1 or 2).");
  m.def("_greedy_act", [](nb::handle state) { return arena::GreedyAct(*StateArg(state)); }, nb::arg("state"),
        "GreedyPolicy.act for an engine.State or an engine_native.State.");
  m.def("_random_act", [](nb::handle state, uint64_t rng_state) {
    StateArg s(state);
    if ((*s).terminal()) throw nb::value_error("the random policy needs a battle that is not over");
    arena::SplitMix64 rng{rng_state};
    const int action = arena::RandomAct(*s, rng);
    return std::make_pair(action, rng.state);
  }, nb::arg("state"), nb::arg("rng_state"), "RandomPolicy.act: (action, the generator's state after).");
  m.def("play_random_battles", [](const std::vector<uint64_t>& seeds, bool hashes) {
    arena_binding::RequireRegistered();
    return BattleResults(seeds, hashes, arena::PlayRandomBattles);
  }, nb::arg("seeds"), nb::arg("hashes") = false,
     "Whole random battles inside the core; see random_battles.h for the generator use.");
  m.def("play_greedy_battles", [](const std::vector<uint64_t>& seeds, bool hashes) {
    arena_binding::RequireRegistered();
    return BattleResults(seeds, hashes, arena::PlayGreedyBattles);
  }, nb::arg("seeds"), nb::arg("hashes") = false, "Whole greedy-vs-greedy battles inside the core.");

  m.def("_set_view_cards", [](const std::vector<std::tuple<int, std::string, std::string, std::string>>& rows) {
    std::vector<std::pair<int, arena::ViewCard>> cards;
    for (const auto& [id, name, before, after] : rows) cards.push_back({id, arena::ViewCard{name, before, after}});
    arena::SetViewCards(cards);
  }, "The orjson parts of each card in the player view (engine_native does it at import).");
  m.def("_information_set_json", [](nb::handle state, int player) {
    const std::string text = arena::InformationSetJson(*StateArg(state), CheckPlayer(player));
    return nb::bytes(text.data(), text.size());
  }, nb::arg("state"), nb::arg("player"));
  m.def("_information_set_digest", [](nb::handle state, int player) {
    return arena::InformationSetDigest(*StateArg(state), CheckPlayer(player));
  }, nb::arg("state"), nb::arg("player"), "adapters.search.information_set_digest.");
  m.def("_determinize", [](nb::handle state, int player, uint64_t rng_state) {
    StateArg s(state);
    arena::SplitMix64 rng{rng_state};
    NativeState world;
    arena::Determinize(*s, CheckPlayer(player), rng, &world.s);
    return std::make_pair(std::move(world), rng.state);
  }, nb::arg("state"), nb::arg("player"), nb::arg("rng_state"), "determinize: (world, the generator's state after).");
  m.def("_search", [](nb::handle state, uint64_t search_seed, int sims, const std::string& rollout,
                      std::optional<uint64_t> rollout_rng) {
    return RunSearch(state, search_seed, sims, rollout, rollout_rng, arena::SearchWithSeed);
  }, nb::arg("state"), nb::arg("search_seed"), nb::arg("sims"), nb::arg("rollout"), nb::arg("rollout_rng").none(),
     "SearchPolicy.decide's search from its generator seed: (action, visits, means, rollout generator state).");
  m.def("_search_act", [](nb::handle state, uint64_t actor_seed, int sims, const std::string& rollout,
                          std::optional<uint64_t> rollout_rng) {
    return RunSearch(state, actor_seed, sims, rollout, rollout_rng, arena::SearchAct);
  }, nb::arg("state"), nb::arg("actor_seed"), nb::arg("sims"), nb::arg("rollout"), nb::arg("rollout_rng").none(),
     "arena::SearchAct (the digest and seed in C++): as _search.");
}
