#include "random_battles.h"

namespace arena {

std::vector<BattleResult> PlayRandomBattles(const std::vector<uint64_t>& seeds, bool with_hashes) {
  std::vector<BattleResult> results;
  results.reserve(seeds.size());
  ActionList legal;
  for (uint64_t seed : seeds) {
    State s = NewBattle(std::to_string(seed), nullptr, nullptr, 0, nullptr);
    SplitMix64 policy{seed};
    BattleResult r;
    while (!s.terminal()) {
      LegalActions(s, &legal);
      ApplyAction(s, legal.ids[policy.Below(legal.size)], nullptr);
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

}  // namespace arena
