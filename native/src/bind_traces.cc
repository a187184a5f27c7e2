// engine_native._core bindings of the trace reader (trace_reader.h): columns as the Python lists
// datasets/battles.py builds, or None where the fast path does not take the file. No reading here.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

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

nb::str Str(std::string_view s) { return nb::str(s.data(), s.size()); }

nb::bytes Bytes(std::string_view s) { return nb::bytes(s.data(), s.size()); }

template <typename T, typename F>
nb::list List(const std::vector<T>& values, F&& convert) {
  nb::list out;
  for (const T& v : values) out.append(convert(v));
  return out;
}

nb::object Nullable(const Text& t) { return t.null ? nb::none() : nb::object(Str(t.value)); }

template <typename T>
nb::list Ints(const std::vector<T>& values) {
  return List(values, [](T v) { return nb::int_(static_cast<long>(v)); });
}

nb::object Decisions(nb::handle data_obj, const std::string& battle_id, int64_t schema_version, int64_t obs_version,
                     size_t obs_bytes) {
  const nb::bytes data = Data(data_obj);
  arena::traces::DecisionColumns c;
  const arena::traces::DecisionExpect expect{battle_id, schema_version, obs_version, obs_bytes};
  if (!arena::traces::ReadDecisions(View(data), expect, &c)) return nb::none();
  nb::list legal, probabilities, values;
  for (size_t i = 0; i < c.count; ++i) {
    nb::list ids;
    for (int32_t k = c.legal_offsets[i]; k < c.legal_offsets[i + 1]; ++k) ids.append(nb::int_(c.legal_ids[k]));
    legal.append(ids);
    if (c.has_probabilities[i]) {
      nb::list p;
      for (int32_t k = c.probability_offsets[i]; k < c.probability_offsets[i + 1]; ++k) {
        p.append(nb::float_(c.probabilities[k]));
      }
      probabilities.append(p);
    } else {
      probabilities.append(nb::none());
    }
    values.append(c.has_value[i] ? nb::object(nb::float_(c.value[i])) : nb::none());
  }
  return nb::make_tuple(
      Ints(c.turn), Ints(c.player), List(c.actor_type, Str), List(c.actor_spec, Nullable), List(c.actor_kind, Str),
      List(c.actor_weights_hash, Nullable), List(c.actor_codename, Nullable), List(c.state_hash, Str),
      nb::bytes(c.observations.data(), c.observations.size()), legal, Ints(c.action_id), Ints(c.action_index),
      List(c.rationale, Nullable), probabilities, values, List(c.policy_json, Nullable),
      nb::bytes(c.first_state.data(), c.first_state.size()));
}

nb::object Turns(nb::handle data_obj, int64_t schema_version) {
  const nb::bytes data = Data(data_obj);
  arena::traces::TurnColumns c;
  if (!arena::traces::ReadTurns(View(data), schema_version, &c)) return nb::none();
  return nb::make_tuple(Ints(c.turn), Ints(c.active_player), Ints(c.events), List(c.start_hash, Str),
                        List(c.end_hash, Str), List(c.events_json, Bytes), List(c.state_start, Str),
                        List(c.state_end, Str));
}

}  // namespace

void BindTraces(nb::module_& m) {
  m.def("read_decisions", &Decisions, nb::arg("data"), nb::arg("battle_id"), nb::arg("schema_version"),
        nb::arg("obs_version"), nb::arg("obs_bytes"),
        "The columns of a trace's actions.jsonl as datasets.battles reads them: (turn, player, actor_type, "
        "actor_spec, actor_kind, actor_weights_hash, actor_codename, state_hash_before, observations bytes, "
        "legal ids per decision, action_id, action_index, rationale, probabilities, policy value, policy JSON, "
        "first state bytes); None where the file is not as the writer writes it (the reference reader decides).");
  m.def("read_turns", &Turns, nb::arg("data"), nb::arg("schema_version"),
        "The columns of a trace's turns.jsonl: (turn, active_player, events count, state_start_hash, "
        "state_end_hash, events JSON bytes, state_start JSON, state_end JSON); None where the reference reader decides.");
  m.def("_sha256_hex", [](nb::handle data_obj) {
        const nb::bytes data = Data(data_obj);
        char hex[64];
        arena::Sha256Hex(data.c_str(), data.size(), hex);
        return std::string(hex, 64);
      }, nb::arg("data"), "sha256 hex digest by the core's own code (SHA-NI where the CPU has it), for the tests.");
  m.def("_orjson_float", &arena::traces::OrjsonFloat, nb::arg("value"),
        "The text the trace reader takes as orjson's for a float, for the tests.");
}
