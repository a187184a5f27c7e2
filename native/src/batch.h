// N single-seat battles stepped at once (the batched API of issue 26, EnvPool-style): each
// battle is extrarlhf.envs.gym_single.ArenaGymEnv's episode with the same battle seed, the
// opponent played inside the core, and an ended battle reset at once (same-step autoreset)
// from a deterministic seed stream:
//
//   battle i's k-th episode (k = 0, 1, ...) has seed derive_seed(base_seed, "vector:{i}:{k}")
//
// and, as in the single env, its seat ("random": 1 + derive_seed(seed, "gym-seat") % 2) and
// its opponent's seed (derive_seed(seed, "gym-opponent")) come from that seed. Opponents, as
// extrarlhf.runtime.actors builds them from that seed: random (SplitMix64(opponent seed)),
// greedy (deterministic), search over a baseline (SearchPolicy(rollout, sims, opponent seed),
// a random rollout policy seeded derive_seed(opponent seed, "rollout")).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "features.h"
#include "search.h"
#include "state.h"

namespace arena {

enum class OpponentKind : uint8_t { kRandom, kGreedy, kSearch };

struct BatchOptions {
  int num_battles = 1;
  std::vector<int8_t> seats;  // per battle: 1, 2, or 0 (per episode, derived from its seed: seat="random")
  bool penalize = true;     // illegal_action="penalize" (else "raise": the caller refuses first)
  OpponentKind opponent = OpponentKind::kRandom;
  int search_sims = 32;                    // kSearch: the budget
  Rollout search_rollout = Rollout::kGreedy;  // kSearch: the rollout baseline
};

// One step's outputs, caller-allocated, row i for battle i.
struct BatchOut {
  float* obs;               // [N, kObsDim]: the learner's observation (of the new episode after a reset)
  int8_t* mask;             // [N, kActionSpaceSize]
  float* reward;            // [N]
  bool* terminated;         // [N]
  uint64_t* seed;           // [N]: the battle seed of the row's current episode
  int8_t* seat;             // [N]: the learner's seat in it
  float* final_obs;         // [N, kObsDim] scratch: row j, j < *num_final, the last observation of the
                            // j-th terminated battle (ascending battle index)
  int* num_final;           // how many battles terminated
  int8_t* winner;           // [N]: where terminated, 0 draw / 1 / 2 (and -1 after an illegal action)
  bool* illegal;            // [N]: the episode ended on a penalized illegal action
  uint64_t* final_seed;     // [N]: where terminated, the ended episode's seed
};

class Batch {
 public:
  explicit Batch(const BatchOptions& options);
  int size() const { return static_cast<int>(battles_.size()); }

  // Starts episode 0 of every battle from base_seed (decimal text of a Python int >= 0);
  // fills obs, mask, seed, seat of `out`.
  void Reset(const std::string& base_seed, const BatchOut& out);

  // The first battle whose action is not legal now (-1 when all are): what "raise" refuses.
  int FirstIllegal(const int64_t* actions) const;

  // One learner action per battle (ids 0..kActionSpaceSize-1, checked by the caller).
  void Step(const int64_t* actions, const BatchOut& out);

  const State& battle(int i) const { return battles_[i].state; }
  // Engine actions applied since construction (the learners' and the opponents'; resets' none).
  uint64_t actions_applied() const { return actions_applied_; }

 private:
  struct Battle {
    State state;
    uint64_t opponent_seed = 0;
    SplitMix64 opponent_rng{0};  // random: the policy's generator; search: its random rollouts
    uint64_t seed = 0;
    int64_t episode = 0;
    int seat = 1;
    ActionList legal;  // the learner's legal actions at its decision point (empty once over)
  };

  void StartEpisode(int i);
  void PlayOpponent(Battle& b);
  int OpponentAct(Battle& b);
  void WriteDecision(int i, const BatchOut& out);

  BatchOptions options_;
  std::string base_seed_ = "0";
  std::vector<Battle> battles_;
  uint64_t actions_applied_ = 0;
  SearchOutput search_;  // kSearch scratch (one decision at a time; kept out of Battle, which stays small)
};

}  // namespace arena
