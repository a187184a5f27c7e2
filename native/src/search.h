// The search actor of adapters/search.py in C++ when its rollout policy is a baseline:
// determinization of the acting player's information set, the candidate cut, sequential
// halving over common worlds and truncated rollouts (DESIGN 14). Bit-identical to the Python
// reference; rounding the values to 6 places and shaping the Decision stay in Python.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "rng.h"
#include "state.h"

namespace arena {

constexpr int kMaxCandidates = 12;  // MAX_CANDIDATES
constexpr int kLookaheadTurns = 3;  // LOOKAHEAD_TURNS
constexpr double kLeafScale = 30.0; // LEAF_SCALE

enum class Rollout : uint8_t { kGreedy, kRandom };

// What one decision found, per legal action (in legal order): the mean leaf value (valid where
// visits > 0) and the visits; `action` is the chosen one.
struct SearchOutput {
  int action = -1;
  int num_legal = 0;
  std::array<int16_t, kActionSpaceSize> legal{};
  std::array<double, kActionSpaceSize> mean{};
  std::array<int32_t, kActionSpaceSize> visits{};
};

// determinize(state, player, rng) into `world`.
void Determinize(const State& state, int player, SplitMix64& rng, State* world);

// leaf_value: a rollout's end scored for `player` in [-1, 1].
double LeafValue(const State& state, int player);

// SearchPolicy.decide's search with its generator seeded `search_seed` (= derive_seed(actor
// seed, "search:" + information-set digest)) for the player to move in a non-terminal state.
// `random_rollout_rng` is the random rollout policy's generator (it goes on across decisions,
// as RandomPolicy.rng does); unused (may be null) with greedy rollouts.
void SearchWithSeed(const State& state, uint64_t search_seed, int sims, Rollout rollout,
                    SplitMix64* random_rollout_rng, SearchOutput* out);

// The whole decision as SearchPolicy(rollout, sims, seed=actor_seed).decide makes it, with no
// Python: the search seed from the information-set digest below. One decision takes about a
// millisecond (sims 32), so a caller that can be cancelled checks between decisions.
void SearchAct(const State& state, uint64_t actor_seed, int sims, Rollout rollout, SplitMix64* random_rollout_rng,
               SearchOutput* out);

// orjson.dumps(information_set(state, player), option=OPT_SORT_KEYS) and its sha256 hex
// (adapters.search.information_set_digest). The card parts come from SetViewCards.
std::string InformationSetJson(const State& state, int player);
std::string InformationSetDigest(const State& state, int player);

// The orjson text of each card's fixed parts of engine/views.py's player view, made by
// engine_native at import from engine.views (so names and texts are escaped by orjson itself):
// the name as a JSON string, and {"hand_slot": h, **card_json(id)} with its sorted keys split
// around "hand_slot" (`before` and `after`: the members, without braces; either may be empty).
struct ViewCard {
  std::string name;
  std::string before;
  std::string after;
};
void SetViewCards(const std::vector<std::pair<int, ViewCard>>& cards);

}  // namespace arena
