// engine_native._core bindings of the baselines and the search actor (issue 26, DESIGN 16):
// from_state (a Python engine.State to a native state, attribute by attribute), the greedy
// and random baselines and the search actor over a baseline. No rules or policy logic here.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <string>

#include "cards.h"
#include "native_state.h"
#include "policies.h"
#include "search.h"
#include "state.h"

namespace nb = nanobind;

namespace {

using arena_binding::NativeState;

PyObject* g_format_error = nullptr;  // engine.errors.StateFormatError
PyObject* g_engine_state = nullptr;  // the class engine.State

// Attribute names of engine.State, engine.state.Player and engine.SplitMix64, interned once.
struct Attrs {
  PyObject *seed, *decks, *starting_player, *rng, *state, *players, *active, *turn, *next_uid, *winner,
      *end_reason, *hp, *max_mana, *mana, *fatigue, *deck, *hand, *board;
};
Attrs g_attrs;

[[noreturn]] void Fail(const std::string& message) {
  PyErr_SetString(g_format_error, message.c_str());
  throw nb::python_error();
}

// A new reference to obj.name (the attributes exist: engine.State is valid by construction).
nb::object Attr(PyObject* obj, PyObject* name) {
  PyObject* value = PyObject_GetAttr(obj, name);
  if (value == nullptr) throw nb::python_error();
  return nb::steal(value);
}

// The native core holds integers in -2**48..2**48 (as FromNormalizedDict in binding.cc); a
// Python state can hold more only after from_dict of an extreme dict.
constexpr int64_t kNativeLimit = int64_t(1) << 48;

int64_t Int(PyObject* value, const char* what) {
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
  if (v == -1 && PyErr_Occurred()) throw nb::python_error();
  if (overflow != 0 || v < -kNativeLimit || v > kNativeLimit) {
    Fail(std::string("state field ") + what + " is outside the native engine core's range -2**48..2**48; "
         "use the Python engine for such a state");
  }
  return v;
}

int64_t IntAttr(PyObject* obj, PyObject* name, const char* what) { return Int(Attr(obj, name).ptr(), what); }

// A list or tuple of card ids (at most N) into `out`; returns its length.
template <size_t N>
int Cards(PyObject* seq, const char* what, std::array<int16_t, N>& out) {
  nb::object fast = nb::steal(PySequence_Fast(seq, what));
  if (!fast.is_valid()) throw nb::python_error();
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(fast.ptr());
  if (n > static_cast<Py_ssize_t>(N)) Fail(std::string("state field ") + what + " holds too many cards");
  PyObject** items = PySequence_Fast_ITEMS(fast.ptr());
  for (Py_ssize_t i = 0; i < n; ++i) {
    const int64_t id = Int(items[i], what);
    if (arena::Pool().Find(static_cast<int>(id)) == nullptr) Fail(std::string("state field ") + what + " holds an unknown card id");
    out[i] = static_cast<int16_t>(id);
  }
  return static_cast<int>(n);
}

arena::EndReason EndReasonOf(PyObject* value) {
  for (int i = 1; i < 4; ++i) {
    const auto reason = static_cast<arena::EndReason>(i);
    if (PyUnicode_Check(value) && PyUnicode_CompareWithASCIIString(value, arena::EndReasonName(reason)) == 0) {
      return reason;
    }
  }
  Fail("state field end_reason is not one the rules produce; the native engine core cannot hold it");
}

// engine.State -> arena::State, every rules field (State.last_events is not carried over).
arena::State FromPythonState(nb::handle py) {
  const Attrs& a = g_attrs;
  PyObject* o = py.ptr();
  arena::State s;
  nb::object seed = Attr(o, a.seed);
  int overflow = 0;
  const long long small_seed = PyLong_AsLongLongAndOverflow(seed.ptr(), &overflow);
  if (small_seed == -1 && PyErr_Occurred()) throw nb::python_error();
  s.seed = overflow == 0 ? std::to_string(small_seed) : nb::cast<std::string>(nb::str(seed));
  nb::object decks = Attr(o, a.decks);
  for (int i = 0; i < 2; ++i) {
    nb::object deck = nb::steal(PySequence_GetItem(decks.ptr(), i));
    if (!deck.is_valid()) throw nb::python_error();
    if (Cards(deck.ptr(), "decks", s.decks[i]) != arena::kDeckSize) Fail("state field decks must hold 30 cards each");
  }
  s.starting_player = static_cast<int>(IntAttr(o, a.starting_player, "starting_player"));
  nb::object rng = Attr(o, a.rng);
  nb::object rng_state = Attr(rng.ptr(), a.state);
  s.rng.state = PyLong_AsUnsignedLongLong(rng_state.ptr());
  if (PyErr_Occurred()) throw nb::python_error();
  s.active = static_cast<int>(IntAttr(o, a.active, "active"));
  s.turn = static_cast<int>(IntAttr(o, a.turn, "turn"));
  s.next_uid = IntAttr(o, a.next_uid, "next_uid");
  nb::object winner = Attr(o, a.winner);
  if (!winner.is_none()) {
    s.winner = static_cast<int>(Int(winner.ptr(), "winner"));
    s.end_reason = EndReasonOf(Attr(o, a.end_reason).ptr());
  }
  nb::object players = Attr(o, a.players);
  for (int i = 0; i < 2; ++i) {
    nb::object po = nb::steal(PySequence_GetItem(players.ptr(), i));
    if (!po.is_valid()) throw nb::python_error();
    PyObject* pp = po.ptr();
    arena::Player& p = s.players[i];
    p.hp = IntAttr(pp, a.hp, "hero_health");
    p.max_mana = static_cast<int32_t>(IntAttr(pp, a.max_mana, "max_mana"));
    p.mana = static_cast<int32_t>(IntAttr(pp, a.mana, "mana"));
    p.fatigue = IntAttr(pp, a.fatigue, "fatigue");
    p.deck_size = Cards(Attr(pp, a.deck).ptr(), "deck", p.deck);
    p.hand_size = Cards(Attr(pp, a.hand).ptr(), "hand", p.hand);
    nb::object board = nb::steal(PySequence_Fast(Attr(pp, a.board).ptr(), "board"));
    if (!board.is_valid()) throw nb::python_error();
    if (PySequence_Fast_GET_SIZE(board.ptr()) != arena::kBoardSlots) Fail("state field board must have 6 slots");
    PyObject** slots = PySequence_Fast_ITEMS(board.ptr());
    for (int slot = 0; slot < arena::kBoardSlots; ++slot) {
      PyObject* c = slots[slot];
      if (c == Py_None) continue;
      if (!PyTuple_Check(c) || PyTuple_GET_SIZE(c) != 8) Fail("state field board holds something that is not a Creature");
      // engine.state.Creature: (uid, card_id, attack, health, max_health, keywords, sick, attacked)
      arena::Creature& n = p.board[slot];
      n.uid = Int(PyTuple_GET_ITEM(c, 0), "uid");
      const int64_t card_id = Int(PyTuple_GET_ITEM(c, 1), "card_id");
      const arena::Card* card = arena::Pool().Find(static_cast<int>(card_id));
      if (card == nullptr || !card->creature) Fail("state field board holds a card that is not a creature card");
      n.card_id = static_cast<int32_t>(card_id);
      n.attack = Int(PyTuple_GET_ITEM(c, 2), "attack");
      n.health = Int(PyTuple_GET_ITEM(c, 3), "health");
      n.max_health = Int(PyTuple_GET_ITEM(c, 4), "max_health");
      n.keywords = static_cast<uint8_t>(Int(PyTuple_GET_ITEM(c, 5), "keywords") & 0x3f);
      n.sick = PyObject_IsTrue(PyTuple_GET_ITEM(c, 6)) == 1;
      n.attacked = PyObject_IsTrue(PyTuple_GET_ITEM(c, 7)) == 1;
    }
  }
  return s;
}

void InitAttrs() {
  Attrs& a = g_attrs;
  auto in = [](const char* text) { return PyUnicode_InternFromString(text); };
  a.seed = in("seed"); a.decks = in("decks"); a.starting_player = in("starting_player"); a.rng = in("rng");
  a.state = in("state"); a.players = in("players"); a.active = in("active"); a.turn = in("turn");
  a.next_uid = in("next_uid"); a.winner = in("winner"); a.end_reason = in("end_reason"); a.hp = in("hp");
  a.max_mana = in("max_mana"); a.mana = in("mana"); a.fatigue = in("fatigue"); a.deck = in("deck");
  a.hand = in("hand"); a.board = in("board");
}

// The rules state of an engine.State (converted) or of an engine_native.State (borrowed).
class StateArg {
 public:
  explicit StateArg(nb::handle h) {
    if (nb::isinstance<NativeState>(h)) {
      ptr_ = &nb::cast<NativeState&>(h).s;
    } else if (Py_TYPE(h.ptr()) != reinterpret_cast<PyTypeObject*>(g_engine_state)) {
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
  if (sims < 1) throw nb::value_error("the native search needs sims >= 1");
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
  g_format_error = nb::module_::import_("engine.errors").attr("StateFormatError").inc_ref().ptr();
  g_engine_state = nb::module_::import_("engine.state").attr("State").inc_ref().ptr();
  InitAttrs();
  m.def("_from_state", [](nb::handle state) {
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
    return BattleResults(seeds, hashes, arena::PlayRandomBattles);
  }, nb::arg("seeds"), nb::arg("hashes") = false,
     "Whole random battles inside the core; see random_battles.h for the generator use.");
  m.def("play_greedy_battles", [](const std::vector<uint64_t>& seeds, bool hashes) {
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
