// The card pool as the rules need it. It is not compiled in: engine_native passes the pool
// engine/cards.py parsed from engine/cards.json to SetCardPool at import (one source of truth).
#pragma once

#include <cstdint>
#include <vector>

namespace arena {

// Keyword bits, in engine.cards.KEYWORDS order.
enum Keyword : uint8_t {
  kGuard = 1, kCharge = 2, kWard = 4, kDrain = 8, kLethal = 16, kBreakthrough = 32,
};
constexpr int kNumKeywords = 6;
extern const char* const kKeywordNames[kNumKeywords];

enum class Effect : uint8_t { kNone, kDamage, kHeal, kBuff, kGrantKeyword, kRemoveKeyword, kDraw, kAreaDamage };
enum class TargetRule : uint8_t { kNone, kFriendlyCreature, kEnemyCreature, kAnyCreature, kEnemyHero, kAnyCharacter };
enum class Scope : uint8_t { kNone, kEnemyCreatures, kAllCreatures, kAllCharacters };

struct Card {
  int id = 0;
  bool creature = false;
  int cost = 0;
  int attack = 0;
  int health = 0;
  uint8_t keywords = 0;  // creature keywords (bitmask)
  Effect effect = Effect::kNone;
  TargetRule target = TargetRule::kNone;
  int amount = 0;
  int buff_attack = 0;
  int buff_health = 0;
  uint8_t keyword = 0;  // the keyword bit a spell grants or removes
  Scope scope = Scope::kNone;
};

class CardPool {
 public:
  // Replaces the pool; `cards` must have unique positive ids (engine.cards validated them).
  void Set(const std::vector<Card>& cards);
  const Card* Find(int id) const {
    return id > 0 && id < static_cast<int>(by_id_.size()) && by_id_[id].id == id ? &by_id_[id] : nullptr;
  }
  const Card& Get(int id) const { return by_id_[id]; }  // id known to be in the pool
  const std::vector<int>& Ids() const { return ids_; }   // ascending
  bool Empty() const { return ids_.empty(); }
  // Two copies of every id, ascending: what engine.decks.random_deck draws from.
  const std::vector<int16_t>& Copies() const { return copies_; }

 private:
  std::vector<Card> by_id_;
  std::vector<int> ids_;
  std::vector<int16_t> copies_;
};

// The one pool (a plain global: Pool() is on the stepping path, no initialization guard).
extern CardPool g_pool;
inline CardPool& Pool() { return g_pool; }

}  // namespace arena
