#include "random_battles.h"

namespace arena {

std::vector<BattleResult> PlayRandomBattles(const std::vector<uint64_t>& seeds, bool with_hashes) {
  ActionList legal;
  return PlayBattles(seeds, with_hashes, [&legal](const State& s, SplitMix64& rng) {
    LegalActions(s, &legal);
    return static_cast<int>(legal.ids[rng.Below(legal.size)]);
  });
}

}  // namespace arena
