// adapters/baselines.py ported line by line; each function names the one it mirrors.
#include "policies.h"

#include <algorithm>
#include <string>

#include "cards.h"

namespace arena {
namespace {

constexpr double kWin = 1e6;  // _WIN

// _KEYWORD_VALUE, in its dict order (the order the bonuses are added in).
constexpr struct {
  uint8_t bit;
  double bonus;
} kKeywordValue[] = {{kGuard, 1.0}, {kWard, 1.5}, {kDrain, 1.0}, {kLethal, 2.0}, {kBreakthrough, 0.5}};

// _creature_value: 1.0 + attack + 0.8 * health, then the keyword bonuses.
double CreatureValue(const Creature& c) {
  double value = (1.0 + static_cast<double>(c.attack)) + 0.8 * static_cast<double>(c.health);
  for (const auto& kv : kKeywordValue) {
    if (c.keywords & kv.bit) value += kv.bonus;
  }
  return value;
}

// _hero_value: health is worth more the closer a hero is to death.
double HeroValue(int64_t hp) {
  return hp < 10 ? static_cast<double>(hp) + static_cast<double>(10 - hp) * 1.5 : static_cast<double>(hp);
}

// sum(_creature_value(c) for c in board if c is not None): Python's sum starts from int 0,
// and 0 + v == v, so starting from 0.0 adds the same floats in the same order.
double BoardValue(const Player& p) {
  double total = 0.0;
  for (const Creature& c : p.board) {
    if (c.present()) total += CreatureValue(c);
  }
  return total;
}

// GreedyPolicy._lethal_face_action: the first face attack when the ready attack plus the
// affordable face-damage spells (cheapest first) kill the enemy hero and no guard blocks; -1 else.
int LethalFaceAction(const State& s, const ActionList& legal) {
  const Player& me = s.players[s.active];
  const Player& opp = s.players[1 - s.active];
  for (const Creature& c : opp.board) {
    if (c.present() && (c.keywords & kGuard)) return -1;
  }
  int first_face = -1;
  int64_t damage = 0;
  for (int i = 0; i < legal.size; ++i) {
    const int a = legal.ids[i];
    if (a >= kAttackBase && (a - kAttackBase) % kAttackTargets == 0) {
      if (first_face < 0) first_face = a;
      damage += me.board[(a - kAttackBase) / kAttackTargets].attack;
    }
  }
  // sorted(me.hand, key=cost): a stable sort by cost.
  std::array<int16_t, kHandLimit> hand = me.hand;
  const CardPool& pool = Pool();
  std::stable_sort(hand.begin(), hand.begin() + me.hand_size,
                   [&pool](int16_t x, int16_t y) { return pool.Get(x).cost < pool.Get(y).cost; });
  int64_t mana = me.mana;
  for (int i = 0; i < me.hand_size; ++i) {
    const Card& card = pool.Get(hand[i]);
    if (card.effect == Effect::kDamage &&
        (card.target == TargetRule::kEnemyHero || card.target == TargetRule::kAnyCharacter) && card.cost <= mana) {
      damage += card.amount;
      mana -= card.cost;
    }
  }
  if (damage < opp.hp) return -1;
  return first_face;  // -1 with spells only: the one-ply lookahead finds the killing spell itself
}

}  // namespace

// evaluate
double Evaluate(const State& s, int player) {
  if (s.terminal()) return s.winner == player ? kWin : (s.winner != 0 ? -kWin : -kWin / 10);
  const Player& me = s.players[player - 1];
  const Player& opp = s.players[2 - player];
  double score = HeroValue(me.hp) - 1.2 * HeroValue(opp.hp);
  score += BoardValue(me);
  score -= 1.1 * BoardValue(opp);
  score += 0.6 * static_cast<double>(me.hand_size);
  return score;
}

// GreedyPolicy.act
int GreedyAct(const State& s) {
  ActionList legal;
  LegalActions(s, &legal);
  if (legal.size == 0) return kEndTurn;  // what the reference returns for a finished battle
  if (legal.size == 1) return legal.ids[0];
  const int player = s.active + 1;
  const int face = LethalFaceAction(s, legal);
  if (face >= 0) return face;
  int best_action = kEndTurn;
  double best_value = Evaluate(s, player) + 1e-6;
  State child;
  for (int i = 0; i < legal.size; ++i) {
    const int action = legal.ids[i];
    if (action == kEndTurn) continue;
    child = s;
    ApplyAction(child, action, nullptr);
    const double value = Evaluate(child, player);
    if (value > best_value) {
      best_action = action;
      best_value = value;
    }
  }
  return best_action;
}

// RandomPolicy.act
int RandomAct(const State& s, SplitMix64& rng) {
  ActionList legal;
  LegalActions(s, &legal);
  return legal.ids[rng.Below(static_cast<uint64_t>(legal.size))];
}

std::vector<BattleResult> PlayGreedyBattles(const std::vector<uint64_t>& seeds, bool with_hashes) {
  return PlayBattles(seeds, with_hashes, [](const State& s, SplitMix64&) { return GreedyAct(s); });
}

}  // namespace arena
