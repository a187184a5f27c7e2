// The baselines of adapters/baselines.py in C++: the greedy policy's board evaluation and its
// one-ply lookahead with the lethal check, and the uniform random policy. Bit-identical to the
// Python reference (the same float operations in the same order; -ffp-contract=off).
#pragma once

#include <cstdint>
#include <vector>

#include "random_battles.h"
#include "rng.h"
#include "state.h"

namespace arena {

// adapters.baselines.evaluate: the static value of `state` for `player` (1 or 2).
double Evaluate(const State& state, int player);

// adapters.baselines.GreedyPolicy.act: the action for the player to move (END_TURN once terminal).
int GreedyAct(const State& state);

// adapters.baselines.RandomPolicy.act: legal[rng.below(len(legal))] (the state is not terminal).
int RandomAct(const State& state, SplitMix64& rng);

// For each seed s: new_battle(s) (seeded decks and starting player) played to the end by the
// greedy policy on both sides (it is deterministic: no generator).
std::vector<BattleResult> PlayGreedyBattles(const std::vector<uint64_t>& seeds, bool with_hashes);

}  // namespace arena
