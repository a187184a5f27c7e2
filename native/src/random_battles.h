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

// For each seed s: new_battle(s) with the seeded decks and starting player, played to the end
// by `choose(state, rng) -> action id` for both players with ONE generator SplitMix64(state = s).
template <typename Choose>
std::vector<BattleResult> PlayBattles(const std::vector<uint64_t>& seeds, bool with_hashes, Choose choose) {
  std::vector<BattleResult> results;
  results.reserve(seeds.size());
  for (uint64_t seed : seeds) {
    State s = NewBattle(std::to_string(seed), nullptr, nullptr, 0, nullptr);
    SplitMix64 rng{seed};
    BattleResult r;
    while (!s.terminal()) {
      ApplyAction(s, choose(s, rng), nullptr);
      r.steps += 1;
    }
    r.winner = s.winner;
    r.end_reason = s.end_reason;
    r.turn = s.turn;
    r.hero_health[0] = s.players[0].hp;
    r.hero_health[1] = s.players[1].hp;
    if (with_hashes) r.final_hash = StateHash(s);
    results.push_back(r);
  }
  return results;
}

// PlayBattles where both players pick legal[rng.below(len(legal))] -- exactly
// benchmarks/engine.py's random_steps(s) on the Python engine.
std::vector<BattleResult> PlayRandomBattles(const std::vector<uint64_t>& seeds, bool with_hashes);

}  // namespace arena
