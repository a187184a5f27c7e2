// Whole random battles stepped inside the core (no Python per step).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "state.h"

namespace arena {

struct BattleResult {
  int winner = 0;
  EndReason end_reason = EndReason::kNone;
  int turn = 0;
  int steps = 0;
  int64_t hero_health[2] = {0, 0};
  std::string final_hash;  // empty unless asked for
};

// For each seed s: new_battle(s) with the seeded decks and starting player, then both players
// pick legal[rng.below(len(legal))] with ONE generator SplitMix64(state = s) until the battle
// ends -- exactly benchmarks/engine.py's random_steps(s) on the Python engine.
std::vector<BattleResult> PlayRandomBattles(const std::vector<uint64_t>& seeds, bool with_hashes);

}  // namespace arena
