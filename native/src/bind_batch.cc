// engine_native._core: observation/action features on State and the batched API (Batch).
// Conversion only; the features are features.cc, the batch is batch.cc. Arrays handed to
// Python are fresh numpy arrays (a caller may keep them across steps).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "batch.h"
#include "features.h"
#include "hooks.h"
#include "native_state.h"

namespace nb = nanobind;

namespace {

using arena_binding::NativeState;

template <typename T>
using Array = nb::ndarray<nb::numpy, T>;

// A fresh numpy array of `n` items of T (zeroed), shaped `shape`, owning its buffer.
template <typename T>
Array<T> NewArray(std::initializer_list<size_t> shape) {
  size_t n = 1;
  for (size_t d : shape) n *= d;
  T* data = new T[n > 0 ? n : 1]();
  nb::capsule owner(data, [](void* p) noexcept { delete[] static_cast<T*>(p); });
  return Array<T>(data, shape, owner);
}

int CheckPlayer(nb::handle player) {
  // features.observation: `player != 1 and player != 2` refuses (so True and 1.0 pass, as there)
  for (int p : {1, 2}) {
    nb::int_ value(p);
    const int eq = PyObject_RichCompareBool(player.ptr(), value.ptr(), Py_EQ);
    if (eq < 0) throw nb::python_error();
    if (eq == 1) return p;
  }
  throw std::invalid_argument("player must be 1 or 2, got " + nb::cast<std::string>(nb::repr(player)));
}

Array<float> ObservationArray(const NativeState& self, nb::handle player) {
  const int p = CheckPlayer(player);
  Array<float> out = NewArray<float>({static_cast<size_t>(arena::kObsDim)});
  arena::Observation(self.s, p, out.data());
  return out;
}

Array<float> ActionFeaturesArray(NativeState& self, nb::handle action_ids) {
  std::vector<int> ids;
  if (action_ids.is_none()) {
    const arena::ActionList& legal = self.Legal();
    ids.assign(legal.ids.begin(), legal.ids.begin() + legal.size);
  } else {
    for (nb::handle item : nb::iter(action_ids)) {
      PyObject* index = PyNumber_Index(item.ptr());  // ints and numpy integers, not floats or bools' strangers
      long long v = -1;
      if (index != nullptr) {
        int overflow = 0;
        v = PyLong_AsLongLongAndOverflow(index, &overflow);
        Py_DECREF(index);
        if (overflow != 0) v = -1;
      } else {
        PyErr_Clear();
      }
      if (index == nullptr || v < 0 || v >= arena::kActionSpaceSize) {
        throw std::invalid_argument("action_features: " + nb::cast<std::string>(nb::repr(item)) +
                                    " is not an action id (an integer 0.." +
                                    std::to_string(arena::kActionSpaceSize - 1) + ")");
      }
      ids.push_back(static_cast<int>(v));
    }
  }
  Array<float> out = NewArray<float>({ids.size(), static_cast<size_t>(arena::kActionFeatureDim)});
  for (size_t k = 0; k < ids.size(); ++k) {
    arena::ActionFeatures(self.s, ids[k], out.data() + k * arena::kActionFeatureDim);
  }
  return out;
}

// datasets.battles._features: a recorded battle replayed from this state (left unchanged) with
// every step's legal set and its action features, in one call: (features: bytes of float32 rows,
// ACTION_FEATURE_DIM values each, every step's legal actions in order; the legal ids of every
// step as int32 offsets (steps + 1) into int16 ids, the columns the trace reader gives; the
// state after the last action applied). The replay stops before the
// first action that is not legal there (or not an action id at all): the caller compares how
// far it got, and the legal sets, with what the trace records.
nb::tuple ReplayFeatures(const NativeState& self, nb::handle actions) {
  if (!PyList_Check(actions.ptr())) throw nb::type_error("actions must be a list of action ids");
  NativeState work(self);
  work.last_events.clear();
  const Py_ssize_t n = PyList_GET_SIZE(actions.ptr());
  // scratch reused by the thread's calls: no reallocation while a battle's rows accumulate
  static thread_local std::vector<float> features;
  static thread_local std::vector<int32_t> offsets;
  static thread_local std::vector<int16_t> legal;
  features.clear();
  offsets.assign(1, 0);
  legal.clear();
  for (Py_ssize_t k = 0; k < n; ++k) {
    PyObject* item = PyList_GET_ITEM(actions.ptr(), k);
    if (!PyLong_CheckExact(item)) break;  // what is not a plain int is not a recorded action id
    int overflow = 0;
    const long long a = PyLong_AsLongLongAndOverflow(item, &overflow);
    if (overflow != 0 || a < 0 || a >= arena::kActionSpaceSize) break;
    const arena::ActionList& ids = work.Legal();
    if (std::find(ids.ids.begin(), ids.ids.begin() + ids.size, static_cast<int>(a)) == ids.ids.begin() + ids.size) break;
    legal.insert(legal.end(), ids.ids.begin(), ids.ids.begin() + ids.size);
    offsets.push_back(static_cast<int32_t>(legal.size()));
    const size_t at = features.size();
    features.resize(at + static_cast<size_t>(ids.size) * arena::kActionFeatureDim);
    for (int i = 0; i < ids.size; ++i) {
      arena::ActionFeatures(work.s, ids.ids[i], features.data() + at + static_cast<size_t>(i) * arena::kActionFeatureDim);
    }
    arena::ApplyAction(work.s, static_cast<int>(a), nullptr);
    work.legal_valid = false;
    ++work.version;
  }
  const auto bytes = [](const auto& v) {
    return nb::bytes(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(v[0]));
  };
  return nb::make_tuple(bytes(features), bytes(offsets), bytes(legal), nb::cast(std::move(work)));
}

// adapters.onnx_models.build_inputs for engine_native.State objects: one pass, no per-state
// Python calls (the vector env's checkpoint opponents, the model policies' batches).
nb::tuple ModelInputs(nb::handle states) {
  if (!PyList_Check(states.ptr())) throw nb::type_error("states must be a list of engine_native.State");
  const size_t n = static_cast<size_t>(PyList_GET_SIZE(states.ptr()));
  if (n == 0) throw std::invalid_argument("states must not be empty");
  std::vector<NativeState*> items(n);
  size_t width = 0;
  for (size_t i = 0; i < n; ++i) {
    NativeState* state = nullptr;
    if (!nb::try_cast<NativeState*>(nb::handle(PyList_GET_ITEM(states.ptr(), i)), state) || state == nullptr) {
      throw nb::type_error(("states[" + std::to_string(i) + "] is not an engine_native.State").c_str());
    }
    if (state->s.terminal()) throw std::invalid_argument("cannot decide in a finished battle (states[" + std::to_string(i) + "])");
    items[i] = state;
    width = std::max(width, static_cast<size_t>(state->Legal().size));
  }
  const size_t obs_dim = arena::kObsDim, feat_dim = arena::kActionFeatureDim;
  Array<float> obs = NewArray<float>({n, obs_dim});
  Array<float> feats = NewArray<float>({n, width, feat_dim});
  Array<int32_t> counts = NewArray<int32_t>({n});
  PyObject* legal = PyList_New(static_cast<Py_ssize_t>(n));
  if (legal == nullptr) throw nb::python_error();
  nb::list legal_list = nb::steal<nb::list>(legal);
  for (size_t i = 0; i < n; ++i) {
    NativeState& state = *items[i];
    const arena::ActionList& ids = state.Legal();
    arena::Observation(state.s, state.s.active + 1, obs.data() + i * obs_dim);
    float* row = feats.data() + i * width * feat_dim;
    PyObject* ids_list = PyList_New(ids.size);
    if (ids_list == nullptr) throw nb::python_error();
    for (int k = 0; k < ids.size; ++k) {
      arena::ActionFeatures(state.s, ids.ids[k], row + static_cast<size_t>(k) * feat_dim);
      PyList_SET_ITEM(ids_list, k, PyLong_FromLong(ids.ids[k]));
    }
    PyList_SET_ITEM(legal, static_cast<Py_ssize_t>(i), ids_list);
    counts.data()[i] = ids.size;
  }
  return nb::make_tuple(obs, feats, counts, legal_list);
}

// The outputs of one Batch call: numpy arrays carved out of one block of memory, which goes
// back to its batch's free list when the last of them is released (a step reuses it instead of
// asking the kernel for fresh, faulting pages for half a megabyte each time).
struct BlockPool {
  size_t bytes = 0;
  std::vector<char*> free;
  ~BlockPool() {
    for (char* p : free) delete[] p;
  }
};

struct Block {
  std::shared_ptr<BlockPool> pool;
  char* data;
};

constexpr size_t kAlign = 64;
size_t Aligned(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

struct StepArrays {
  Array<float> obs, reward;
  Array<int8_t> mask, seat, winner;
  Array<bool> terminated, illegal;
  Array<uint64_t> seed, final_seed;
  arena::BatchOut out;

  static size_t Bytes(size_t n) {
    return Aligned(n * arena::kObsDim * 4) + Aligned(n * 4) + Aligned(n * arena::kActionSpaceSize) +
           Aligned(n) * 4 + Aligned(n * 8) * 2;
  }

  StepArrays(size_t n, const std::shared_ptr<BlockPool>& pool, float* final_scratch, int* num_final) {
    if (pool->bytes != Bytes(n)) throw std::logic_error("engine_native: a batch's block size changed");
    Block* block = new Block{pool, nullptr};
    if (!pool->free.empty()) {
      block->data = pool->free.back();
      pool->free.pop_back();
    } else {
      block->data = new char[pool->bytes];
    }
    nb::capsule owner(block, [](void* p) noexcept {
      Block* b = static_cast<Block*>(p);
      if (b->pool->free.size() < 4) {
        b->pool->free.push_back(b->data);
      } else {
        delete[] b->data;
      }
      delete b;
    });
    char* at = block->data;
    auto take = [&at](size_t bytes) {
      char* here = at;
      at += Aligned(bytes);
      return here;
    };
    const size_t obs_dim = arena::kObsDim, actions = arena::kActionSpaceSize;
    obs = Array<float>(take(n * obs_dim * 4), {n, obs_dim}, owner);
    reward = Array<float>(take(n * 4), {n}, owner);
    mask = Array<int8_t>(take(n * actions), {n, actions}, owner);
    seat = Array<int8_t>(take(n), {n}, owner);
    winner = Array<int8_t>(take(n), {n}, owner);
    terminated = Array<bool>(take(n), {n}, owner);
    illegal = Array<bool>(take(n), {n}, owner);
    seed = Array<uint64_t>(take(n * 8), {n}, owner);
    final_seed = Array<uint64_t>(take(n * 8), {n}, owner);
    out = {obs.data(), mask.data(), reward.data(), terminated.data(), seed.data(), seat.data(),
           final_scratch, num_final, winner.data(), illegal.data(), final_seed.data()};
  }

  // `final_obs`: the scratch's first num_final rows, copied (few: only the battles that ended).
  nb::dict Dict(bool with_step) const {
    nb::dict d;
    d["obs"] = obs;
    d["mask"] = mask;
    d["seed"] = seed;
    d["seat"] = seat;
    if (with_step) {
      d["reward"] = reward;
      d["terminated"] = terminated;
      const size_t k = static_cast<size_t>(*out.num_final);
      Array<float> final_obs = NewArray<float>({k, static_cast<size_t>(arena::kObsDim)});
      if (k > 0) std::memcpy(final_obs.data(), out.final_obs, k * arena::kObsDim * sizeof(float));
      d["final_obs"] = final_obs;
      d["winner"] = winner;
      d["illegal"] = illegal;
      d["final_seed"] = final_seed;
    }
    return d;
  }
};

// arena::Batch plus the pool its outputs come from.
struct PyBatch {
  arena::Batch batch;
  std::shared_ptr<BlockPool> pool;
  std::vector<float> final_scratch;
  int num_final = 0;
  PyBatch(const arena::BatchOptions& options)
      : batch(options), pool(std::make_shared<BlockPool>()),
        final_scratch(static_cast<size_t>(options.num_battles) * arena::kObsDim) {
    pool->bytes = StepArrays::Bytes(static_cast<size_t>(options.num_battles));
  }
};

using Actions = nb::ndarray<const int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

void CheckActions(const arena::Batch& batch, const Actions& actions) {  // the Python side checked; defensive
  if (actions.shape(0) != static_cast<size_t>(batch.size())) {
    throw std::invalid_argument("actions must have shape (" + std::to_string(batch.size()) + ",), got (" +
                                std::to_string(actions.shape(0)) + ",)");
  }
}

}  // namespace

void BindBatch(nb::module_& m) {
  m.attr("OBS_DIM") = arena::kObsDim;
  m.attr("ACTION_FEATURE_DIM") = arena::kActionFeatureDim;

  nb::handle state_type = nb::type<NativeState>();
  state_type.attr("observation") = nb::cpp_function(
      [](const NativeState& self, nb::handle player) { return ObservationArray(self, player); },
      nb::is_method(), nb::scope(state_type), nb::name("observation"), nb::arg("player").none(),
      "features.observation(state, player): float32 [OBS_DIM], the same bytes.");
  state_type.attr("legal_action_mask") = nb::cpp_function(
      [](NativeState& self) {
        Array<bool> out = NewArray<bool>({static_cast<size_t>(arena::kActionSpaceSize)});
        const arena::ActionList& legal = self.Legal();
        for (int i = 0; i < legal.size; ++i) out.data()[legal.ids[i]] = true;
        return out;
      },
      nb::is_method(), nb::scope(state_type), nb::name("legal_action_mask"),
      "Boolean mask of length 163; True where the action is legal (as engine.State.legal_action_mask).");
  state_type.attr("action_features") = nb::cpp_function(
      [](NativeState& self, nb::handle ids) { return ActionFeaturesArray(self, ids); },
      nb::is_method(), nb::scope(state_type), nb::name("action_features"), nb::arg("action_ids").none() = nb::none(),
      "features.action_features(state, ids or the legal actions): float32 [len(ids), ACTION_FEATURE_DIM].");

  state_type.attr("replay_features") = nb::cpp_function(
      [](const NativeState& self, nb::handle actions) { return ReplayFeatures(self, actions); },
      nb::is_method(), nb::scope(state_type), nb::name("replay_features"), nb::arg("actions"),
      "(features bytes, legal offsets bytes, legal ids bytes, state after): a recorded battle replayed from "
      "this state (left unchanged), every step's legal actions' features as float32 rows and its legal ids (int16, "
      "step k's at int32 offsets k..k+1); stops before the first action that is not legal.");

  m.def("_model_inputs", [](nb::handle states) { return ModelInputs(states); }, nb::arg("states"),
        "The feed of a v5 model for native states, each seen by its player to move: (obs float32 [n, OBS_DIM], "
        "action_features float32 [n, W, ACTION_FEATURE_DIM] zero-padded to the widest legal set W, counts int32 [n], "
        "legal: a list of each state's legal ids). What adapters.onnx_models.build_inputs computes, in one call.");

  nb::class_<PyBatch>(m, "Batch", "N single-seat battles stepped at once; see batch.h (use engine_native.batch).")
      .def("__init__", [](PyBatch* self, int num_battles, const std::vector<int>& seats, bool penalize, int opponent,
                          int sims, int rollout) {
             arena_binding::RequireRegistered();
             if (num_battles < 1) throw std::invalid_argument("num_battles must be at least 1");
             if (static_cast<int>(seats.size()) != num_battles) throw std::invalid_argument("seats must hold one seat per battle");
             for (int seat : seats) {
               if (seat < 0 || seat > 2) throw std::invalid_argument("a seat must be 0 (random), 1 or 2");
             }
             if (opponent < 0 || opponent > 2) throw std::invalid_argument("unknown opponent kind " + std::to_string(opponent));
             if (sims < 1 || sims > 4096) throw std::invalid_argument("sims must be in 1..4096");
             if (rollout < 0 || rollout > 1) throw std::invalid_argument("unknown rollout kind " + std::to_string(rollout));
             arena::BatchOptions options;
             options.num_battles = num_battles;
             options.seats.assign(seats.begin(), seats.end());
             options.penalize = penalize;
             options.opponent = static_cast<arena::OpponentKind>(opponent);
             options.search_sims = sims;
             options.search_rollout = static_cast<arena::Rollout>(rollout);
             new (self) PyBatch(options);
           }, nb::arg("num_battles"), nb::arg("seats"), nb::arg("penalize"), nb::arg("opponent"), nb::arg("sims"),
           nb::arg("rollout"), "opponent 0 random, 1 greedy, 2 search (sims, rollout 0 greedy / 1 random).")
      .def_prop_ro("size", [](const PyBatch& self) { return self.batch.size(); })
      .def_prop_ro("actions_applied", [](const PyBatch& self) { return self.batch.actions_applied(); },
                   "Engine actions applied so far (learners' and opponents').")
      .def("reset", [](PyBatch& self, const std::string& base_seed) {
             StepArrays a(static_cast<size_t>(self.batch.size()), self.pool, self.final_scratch.data(), &self.num_final);
             self.batch.Reset(base_seed, a.out);
             return a.Dict(false);
           }, nb::arg("base_seed"), "Episode 0 of every battle from base_seed (decimal text of an int >= 0).")
      .def("first_illegal", [](const PyBatch& self, const Actions& actions) {
             CheckActions(self.batch, actions);
             return self.batch.FirstIllegal(actions.data());
           }, nb::arg("actions"))
      .def("step", [](PyBatch& self, const Actions& actions) {
             CheckActions(self.batch, actions);
             StepArrays a(static_cast<size_t>(self.batch.size()), self.pool, self.final_scratch.data(), &self.num_final);
             self.batch.Step(actions.data(), a.out);
             return a.Dict(true);
           }, nb::arg("actions"))
      .def("battle", [](const PyBatch& self, int i) {
             const int n = self.batch.size();
             if (i < 0 || i >= n) throw std::out_of_range("battle index " + std::to_string(i) + " is outside 0.." + std::to_string(n - 1));
             NativeState out;
             out.s = self.batch.battle(i);
             return out;
           }, nb::arg("index"), "A copy of battle i's current state (an engine_native.State).");
}
