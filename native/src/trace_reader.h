// The decision and turn lines of a V5 trace read into columns (materialize's reading, issue 50):
// datasets/battles.py's fast path. It takes the lines as the trace writer writes them (compact
// JSON, states as canonical JSON whose sha256 is the recorded hash, the policy object as orjson
// writes it) and checks what the reference reader checks (contiguous indexes of the one battle,
// the chosen action among the legal ones, the observation's layout and base64, every embedded
// state against its hash). Anything it does not take, it refuses (returns false) without saying
// why: the caller then reads the file with the Python reference, which decides whether the file is
// fine after all (another JSON layout) or corrupt, and words the error. So the fast path never
// accepts what the reference refuses, and its columns equal the reference's where it accepts.
#ifndef ARENA_TRACE_READER_H_
#define ARENA_TRACE_READER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace arena {
namespace traces {

// A string field that may be null; the view points into the file's bytes.
struct Text {
  std::string_view value;
  bool null = true;
};

struct DecisionExpect {
  std::string_view battle_id;
  int64_t schema_version = 0;
  int64_t obs_version = 0;
  size_t obs_bytes = 0;
};

struct DecisionColumns {
  size_t count = 0;
  std::vector<int16_t> turn;
  std::vector<int8_t> player;
  std::vector<std::string_view> actor_type, actor_kind, state_hash;
  std::vector<Text> actor_spec, actor_weights_hash, actor_codename, rationale;
  std::vector<Text> policy_json;       // null where the policy is absent, null or not an object
  std::string observations;            // count * obs_bytes: the decoded float32 vectors, in order
  std::vector<int32_t> legal_offsets;  // count + 1 offsets into legal_ids
  std::vector<int16_t> legal_ids;
  std::vector<int16_t> action_id, action_index;
  std::vector<uint8_t> has_probabilities;  // the policy's probabilities: numbers, one per legal action
  std::vector<int32_t> probability_offsets;  // count + 1 offsets into probabilities
  std::vector<double> probabilities;
  std::vector<uint8_t> has_value;
  std::vector<double> value;
  std::string_view first_state;  // decision 0's state_before, verified against its hash
};

// false: not taken (see above); `out` is then unspecified.
bool ReadDecisions(std::string_view data, const DecisionExpect& expect, DecisionColumns* out);

struct TurnColumns {
  std::vector<int16_t> turn;
  std::vector<int8_t> active_player;
  std::vector<int32_t> events;  // the number of events of each turn
  std::vector<std::string_view> start_hash, end_hash, events_json, state_start, state_end;
};

bool ReadTurns(std::string_view data, int64_t schema_version, TurnColumns* out);

// Strict base64 decoding (SSSE3 where the CPU has it, unless ENGINE_NATIVE_NO_SSSE3 is set),
// appended to *out; false for anything pybase64.b64decode(validate=True) refuses.
bool DecodeBase64(std::string_view text, std::string* out);

// orjson's text of a float (what json.dumps-with-orjson writes for it), for the tests.
std::string OrjsonFloat(double value);

}  // namespace traces
}  // namespace arena

#endif  // ARENA_TRACE_READER_H_
