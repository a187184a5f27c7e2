#include "batch.h"

#include <cstring>
#include <stdexcept>

#include "policies.h"

namespace arena {

Batch::Batch(const BatchOptions& options) : options_(options), battles_(options.num_battles) {
  if (static_cast<int>(options_.seats.size()) != options_.num_battles) throw std::invalid_argument("one seat per battle");
}

void Batch::Reset(const std::string& base_seed, const BatchOut& out) {
  base_seed_ = base_seed;
  for (int i = 0; i < size(); ++i) {
    battles_[i].episode = 0;
    StartEpisode(i);
    WriteDecision(i, out);
  }
}

// ArenaGymEnv.reset(seed=battle seed): seat, opponent seed, new_battle, the opponent's moves.
void Batch::StartEpisode(int i) {
  Battle& b = battles_[i];
  b.seed = DeriveSeed(base_seed_, "vector:" + std::to_string(i) + ":" + std::to_string(b.episode));
  const std::string seed = std::to_string(b.seed);
  const int seat = options_.seats[i];
  b.seat = seat != 0 ? seat : 1 + static_cast<int>(DeriveSeed(seed, "gym-seat") % 2);
  b.opponent_seed = DeriveSeed(seed, "gym-opponent");
  b.opponent_rng = SplitMix64{options_.opponent == OpponentKind::kSearch
                                  ? DeriveSeed(std::to_string(b.opponent_seed), "rollout")
                                  : b.opponent_seed};
  b.state = NewBattle(seed, nullptr, nullptr, 0, nullptr);
  PlayOpponent(b);
}

// The opponent's policy .act (RandomPolicy, GreedyPolicy, SearchPolicy.decide's action).
int Batch::OpponentAct(Battle& b) {
  switch (options_.opponent) {
    case OpponentKind::kRandom:
      return RandomAct(b.state, b.opponent_rng);
    case OpponentKind::kGreedy:
      return GreedyAct(b.state);
    case OpponentKind::kSearch: {
      ActionList legal;
      LegalActions(b.state, &legal);
      if (legal.size == 1) return legal.ids[0];  // SearchPolicy.decide: no search for a forced move
      SearchAct(b.state, b.opponent_seed, options_.search_sims, options_.search_rollout,
                options_.search_rollout == Rollout::kRandom ? &b.opponent_rng : nullptr, &search_);
      return search_.action;
    }
  }
  throw std::logic_error("unknown opponent kind");
}

// ArenaGymEnv._play_opponent.
void Batch::PlayOpponent(Battle& b) {
  State& s = b.state;
  const int opponent_index = 2 - b.seat;
  while (!s.terminal() && s.active == opponent_index) {
    ApplyAction(s, OpponentAct(b), nullptr);
    actions_applied_ += 1;
  }
}

// ArenaGymEnv._decision_point: the learner's observation and mask (zeros when not to move).
void Batch::WriteDecision(int i, const BatchOut& out) {
  Battle& b = battles_[i];
  Observation(b.state, b.seat, out.obs + static_cast<size_t>(i) * kObsDim);
  int8_t* mask = out.mask + static_cast<size_t>(i) * kActionSpaceSize;
  std::memset(mask, 0, kActionSpaceSize);
  b.legal.size = 0;
  if (!b.state.terminal() && b.state.active == b.seat - 1) LegalActions(b.state, &b.legal);
  for (int k = 0; k < b.legal.size; ++k) mask[b.legal.ids[k]] = 1;
  out.seed[i] = b.seed;
  out.seat[i] = static_cast<int8_t>(b.seat);
}

namespace {
bool Contains(const ActionList& legal, int64_t a) {
  for (int k = 0; k < legal.size; ++k) {
    if (legal.ids[k] == a) return true;
  }
  return false;
}
}  // namespace

int Batch::FirstIllegal(const int64_t* actions) const {
  for (int i = 0; i < size(); ++i) {
    if (!Contains(battles_[i].legal, actions[i])) return i;
  }
  return -1;
}

// ArenaGymEnv.step, then the same-step reset of an ended episode.
void Batch::Step(const int64_t* actions, const BatchOut& out) {
  int num_final = 0;
  for (int i = 0; i < size(); ++i) {
    if (actions[i] < 0 || actions[i] >= kActionSpaceSize) {
      throw std::invalid_argument("battle " + std::to_string(i) + ": action " + std::to_string(actions[i]) +
                                  " is not an action id (0.." + std::to_string(kActionSpaceSize - 1) + ")");
    }
  }
  for (int i = 0; i < size(); ++i) {
    Battle& b = battles_[i];
    bool done = false, illegal = false;
    float reward = 0.0f;
    if (!Contains(b.legal, actions[i])) {  // penalize (the caller refused the batch in "raise" mode)
      done = illegal = true;
      reward = -1.0f;
    } else {
      ApplyAction(b.state, static_cast<int>(actions[i]), nullptr);
      actions_applied_ += 1;
      PlayOpponent(b);
      if (b.state.terminal()) {
        done = true;
        const int w = b.state.winner;
        reward = w == 0 ? 0.0f : (w == b.seat ? 1.0f : -1.0f);
      }
    }
    out.reward[i] = reward;
    out.terminated[i] = done;
    out.illegal[i] = illegal;
    if (done) {
      Observation(b.state, b.seat, out.final_obs + static_cast<size_t>(num_final++) * kObsDim);
      out.winner[i] = static_cast<int8_t>(illegal ? -1 : b.state.winner);
      out.final_seed[i] = b.seed;
      b.episode += 1;
      StartEpisode(i);
    } else {
      out.winner[i] = -1;
      out.final_seed[i] = 0;
    }
    WriteDecision(i, out);
  }
  *out.num_final = num_final;
}

}  // namespace arena
