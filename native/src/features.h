// Observation and per-action features, a port of engine/features.py (the reference): the
// same float32 values, each the rounding of the same double expression (Python floats are
// doubles; struct.pack("f") / np.float32 round them), in the same layout. OBS_VERSION 1.
#pragma once

#include "state.h"

namespace arena {

constexpr int kCardFeatures = 38;      // len(CARD_FEATURES)
constexpr int kCreatureFeatures = 13;  // len(CREATURE_FEATURES)
constexpr int kGlobalFeatures = 16;    // len(GLOBAL_FEATURES)
constexpr int kObsDim = kGlobalFeatures + kHandLimit * kCardFeatures + 2 * kBoardSlots * kCreatureFeatures;  // 476
constexpr int kTargetKinds = 5;        // len(TARGET_KINDS)
constexpr int kActionFeatureDim = 3 + kCardFeatures + kCreatureFeatures + kTargetKinds + kCreatureFeatures + 5;  // 77

// features.observation(state, player): kObsDim floats into `out`; player is 1 or 2.
void Observation(const State& state, int player, float* out);

// features.action_features(state, [action_id]) for the player to move: kActionFeatureDim
// floats into `out`; action_id is 0..kActionSpaceSize-1 (the caller checked).
void ActionFeatures(const State& state, int action_id, float* out);

}  // namespace arena
