// engine_native._core bindings of the trace reader (trace_reader.h): each column as the buffers
// of an Arrow array (datasets/tables.py wraps them without a Python object per row), or None
// where the fast path does not take the file. No reading here.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <climits>
#include <cstring>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "rng.h"
#include "trace_reader.h"

namespace nb = nanobind;

namespace {

using arena::traces::Text;

nb::bytes Data(nb::handle data) {
  if (!PyBytes_Check(data.ptr())) throw nb::type_error("data must be bytes");
  return nb::borrow<nb::bytes>(data);
}

std::string_view View(const nb::bytes& b) { return std::string_view(b.c_str(), b.size()); }

template <typename T>
nb::bytes Buffer(const std::vector<T>& values) {
  return nb::bytes(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

// An Arrow validity bitmap (bit i of byte i / 8, least significant first) and its nulls.
struct Validity {
  std::string bits;
  size_t nulls = 0;

  void Add(size_t i, bool present) {
    if (i % 8 == 0) bits.push_back(0);
    if (present) {
      bits.back() = static_cast<char>(bits.back() | (1 << (i % 8)));
    } else {
      ++nulls;
    }
  }
  nb::object Bitmap() const { return nulls ? nb::object(nb::bytes(bits.data(), bits.size())) : nb::none(); }
};

// A column as the buffers of an Arrow array: (length, null count, validity bitmap or None,
// int32 offsets or None, values), what datasets.battles.Packed holds.
nb::tuple Column(size_t n, const Validity* valid, nb::object offsets, nb::object values) {
  return nb::make_tuple(n, valid ? valid->nulls : 0, valid ? valid->Bitmap() : nb::none(), offsets, values);
}

template <typename T>
nb::tuple Fixed(const std::vector<T>& values) { return Column(values.size(), nullptr, nb::none(), Buffer(values)); }

// A string column from get(i) -> Text (null where .null).
template <typename Get>
nb::tuple Strings(size_t n, Get&& get) {
  std::vector<int32_t> offsets(n + 1, 0);
  std::string data;
  Validity valid;
  for (size_t i = 0; i < n; ++i) {
    const Text t = get(i);
    valid.Add(i, !t.null);
    if (!t.null) data.append(t.value);
    offsets[i + 1] = static_cast<int32_t>(data.size());
  }
  return Column(n, &valid, Buffer(offsets), nb::bytes(data.data(), data.size()));
}

nb::tuple Strings(const std::vector<Text>& values) {
  return Strings(values.size(), [&](size_t i) { return values[i]; });
}

nb::tuple Strings(const std::vector<std::string_view>& values) {
  return Strings(values.size(), [&](size_t i) { return Text{values[i], false}; });
}

// float32 values as Arrow (and numpy) convert a Python float: the nearest float32.
std::vector<float> Float32(const std::vector<double>& values) { return std::vector<float>(values.begin(), values.end()); }

// Offsets and lengths are int32 in the columns: a larger file is left to the reference reader.
bool Fits(const nb::bytes& data) { return data.size() <= static_cast<size_t>(INT32_MAX); }

nb::object Decisions(nb::handle data_obj, const std::string& battle_id, int64_t schema_version, int64_t obs_version,
                     size_t obs_bytes) {
  const nb::bytes data = Data(data_obj);
  arena::traces::DecisionColumns c;
  const arena::traces::DecisionExpect expect{battle_id, schema_version, obs_version, obs_bytes};
  if (!Fits(data) || !arena::traces::ReadDecisions(View(data), expect, &c)) return nb::none();
  const size_t n = c.count;
  Validity has_probabilities, has_value;
  for (size_t i = 0; i < n; ++i) {
    has_probabilities.Add(i, c.has_probabilities[i] != 0);
    has_value.Add(i, c.has_value[i] != 0);
  }
  nb::dict columns;
  columns["turn"] = Fixed(c.turn);
  columns["player"] = Fixed(c.player);
  columns["actor_type"] = Strings(c.actor_type);
  columns["actor_spec"] = Strings(c.actor_spec);
  columns["actor_kind"] = Strings(c.actor_kind);
  columns["actor_weights_hash"] = Strings(c.actor_weights_hash);
  columns["actor_codename"] = Strings(c.actor_codename);
  columns["state_hash_before"] = Strings(c.state_hash);
  columns["legal_action_ids"] = Column(n, nullptr, Buffer(c.legal_offsets), Buffer(c.legal_ids));
  columns["action_id"] = Fixed(c.action_id);
  columns["action_index"] = Fixed(c.action_index);
  columns["rationale"] = Strings(c.rationale);
  columns["policy_probabilities"] =
      Column(n, &has_probabilities, Buffer(c.probability_offsets), Buffer(Float32(c.probabilities)));
  columns["policy_value"] = Column(n, &has_value, nb::none(), Buffer(Float32(c.value)));
  columns["policy_json"] = Strings(c.policy_json);
  return nb::make_tuple(columns, nb::bytes(c.observations.data(), c.observations.size()),
                        nb::bytes(c.first_state.data(), c.first_state.size()));
}

nb::object Turns(nb::handle data_obj, int64_t schema_version) {
  const nb::bytes data = Data(data_obj);
  arena::traces::TurnColumns c;
  if (!Fits(data) || !arena::traces::ReadTurns(View(data), schema_version, &c)) return nb::none();
  nb::dict columns;
  columns["turn"] = Fixed(c.turn);
  columns["active_player"] = Fixed(c.active_player);
  columns["events"] = Fixed(c.events);
  columns["state_start_hash"] = Strings(c.start_hash);
  columns["state_end_hash"] = Strings(c.end_hash);
  columns["events_json"] = Strings(c.events_json);
  columns["state_start_json"] = Strings(c.state_start);
  columns["state_end_json"] = Strings(c.state_end);
  return columns;
}

// One packed column (read_decisions' tuple) checked against its own lengths.
struct Piece {
  size_t length = 0, nulls = 0;
  const unsigned char* validity = nullptr;  // null: every value present
  const char* offsets = nullptr;            // length + 1 int32 (read with memcpy: any alignment)
  std::string_view values;

  int32_t Offset(size_t i) const {
    int32_t v;
    std::memcpy(&v, offsets + 4 * i, 4);
    return v;
  }
  bool Present(size_t i) const { return validity == nullptr || (validity[i / 8] >> (i % 8)) & 1; }
};

size_t Size(nb::handle item, const char* what) {
  if (!PyLong_Check(item.ptr())) throw nb::type_error((std::string(what) + " must be an int").c_str());
  const long long v = PyLong_AsLongLong(item.ptr());
  if (v < 0 || v > INT32_MAX) throw std::invalid_argument(std::string(what) + " must be in 0..2**31-1");
  return static_cast<size_t>(v);
}

const char* Optional(nb::handle item, size_t size, const char* what) {
  if (item.is_none()) return nullptr;
  if (!PyBytes_Check(item.ptr()) || static_cast<size_t>(PyBytes_GET_SIZE(item.ptr())) != size) {
    throw std::invalid_argument(std::string(what) + " must be None or bytes of " + std::to_string(size));
  }
  return PyBytes_AS_STRING(item.ptr());
}

Piece ReadPiece(nb::handle item, size_t item_bytes) {
  if (!PyTuple_Check(item.ptr()) || PyTuple_GET_SIZE(item.ptr()) != 5) {
    throw nb::type_error("each piece must be a packed column (length, null_count, validity, offsets, values)");
  }
  const auto at = [&](Py_ssize_t k) { return nb::handle(PyTuple_GET_ITEM(item.ptr(), k)); };
  Piece p;
  p.length = Size(at(0), "length");
  p.nulls = Size(at(1), "null_count");
  p.validity = reinterpret_cast<const unsigned char*>(Optional(at(2), (p.length + 7) / 8, "validity"));
  p.offsets = Optional(at(3), 4 * (p.length + 1), "offsets");
  if (!PyBytes_Check(at(4).ptr())) throw nb::type_error("values must be bytes");
  p.values = std::string_view(PyBytes_AS_STRING(at(4).ptr()), PyBytes_GET_SIZE(at(4).ptr()));
  size_t nulls = 0;
  for (size_t i = 0; i < p.length; ++i) nulls += !p.Present(i);
  if (nulls != p.nulls) throw std::invalid_argument("null_count does not match the validity bitmap");
  size_t items = p.length;
  if (p.offsets != nullptr) {
    for (size_t i = 0; i < p.length; ++i) {
      if (p.Offset(i) > p.Offset(i + 1)) throw std::invalid_argument("offsets must not decrease");
    }
    if (p.Offset(0) != 0) throw std::invalid_argument("offsets must start at 0");
    items = static_cast<size_t>(p.Offset(p.length));
  }
  if (p.values.size() != items * item_bytes) throw std::invalid_argument("values do not match the lengths");
  return p;
}

// Packed columns of several battles as one (a chunk's): values joined, offsets shifted, validity
// bitmaps merged; every piece checked against its own lengths first.
nb::tuple ConcatColumns(nb::handle pieces_obj, size_t item_bytes) {
  if (!PyList_Check(pieces_obj.ptr())) throw nb::type_error("pieces must be a list of packed columns");
  if (item_bytes < 1 || item_bytes > 8) throw std::invalid_argument("item_bytes must be in 1..8");
  std::vector<Piece> pieces;
  const Py_ssize_t count = PyList_GET_SIZE(pieces_obj.ptr());
  size_t length = 0, nulls = 0, values = 0;
  for (Py_ssize_t k = 0; k < count; ++k) {
    pieces.push_back(ReadPiece(PyList_GET_ITEM(pieces_obj.ptr(), k), item_bytes));
    if ((pieces.back().offsets == nullptr) != (pieces.front().offsets == nullptr)) {
      throw std::invalid_argument("pieces must all have offsets or none");
    }
    length += pieces.back().length;
    nulls += pieces.back().nulls;
    values += pieces.back().values.size();
  }
  const bool with_offsets = !pieces.empty() && pieces.front().offsets != nullptr;
  if (length > INT32_MAX || (with_offsets && values / item_bytes > INT32_MAX)) {
    throw std::invalid_argument("the pieces hold more than 2**31-1 values");
  }
  std::string data;
  data.reserve(values);
  std::vector<int32_t> offsets;
  if (with_offsets) offsets.push_back(0);
  Validity valid;
  size_t row = 0;
  for (const Piece& p : pieces) {
    const int32_t base = with_offsets ? offsets.back() : 0;
    for (size_t i = 0; i < p.length; ++i) {
      if (with_offsets) offsets.push_back(base + p.Offset(i + 1));
      if (nulls) valid.Add(row, p.Present(i));
      ++row;
    }
    data.append(p.values);
  }
  return Column(length, nulls ? &valid : nullptr, with_offsets ? nb::object(Buffer(offsets)) : nb::none(),
                nb::bytes(data.data(), data.size()));
}

}  // namespace

void BindTraces(nb::module_& m) {
  m.def("read_decisions", &Decisions, nb::arg("data"), nb::arg("battle_id"), nb::arg("schema_version"),
        nb::arg("obs_version"), nb::arg("obs_bytes"),
        "The decisions of a trace's actions.jsonl as datasets.battles reads them: (columns, observations bytes, "
        "first state bytes), columns a dict of the decisions table's columns the trace holds (turn, player, actor_*, "
        "state_hash_before, legal_action_ids, action_id, action_index, rationale, policy_*), each as the buffers of an "
        "Arrow array (length, null count, validity bitmap or None, int32 offsets or None, values); None where the "
        "file is not as the writer writes it (the reference reader decides).");
  m.def("read_turns", &Turns, nb::arg("data"), nb::arg("schema_version"),
        "The turns of a trace's turns.jsonl: a dict of the turns table's columns the trace holds (turn, "
        "active_player, events count, state_start_hash, state_end_hash, events_json, state_start_json, "
        "state_end_json), each as read_decisions gives its columns; None where the reference reader decides.");
  m.def("concat_columns", &ConcatColumns, nb::arg("pieces"), nb::arg("item_bytes"),
        "Packed columns as read_decisions gives them (several battles') as one: values joined, offsets "
        "shifted, validity bitmaps merged. item_bytes: the size of one value (of a string's data: 1; of a "
        "list's child). Each piece is checked against its own lengths (ValueError, TypeError).");
  m.def("_sha256_hex", [](nb::handle data_obj) {
        const nb::bytes data = Data(data_obj);
        char hex[64];
        arena::Sha256Hex(data.c_str(), data.size(), hex);
        return std::string(hex, 64);
      }, nb::arg("data"), "sha256 hex digest by the core's own code (SHA-NI where the CPU has it), for the tests.");
  m.def("_base64_decode", [](nb::handle data_obj) -> nb::object {
        const nb::bytes data = Data(data_obj);
        std::string out;
        if (!arena::traces::DecodeBase64(View(data), &out)) return nb::none();
        return nb::bytes(out.data(), out.size());
      }, nb::arg("data"), "The core's strict base64 decoding (None where it refuses), for the tests.");
  m.def("_orjson_float", &arena::traces::OrjsonFloat, nb::arg("value"),
        "The text the trace reader takes as orjson's for a float, for the tests.");
}
