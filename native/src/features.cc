// A port of engine/features.py; the function names point at the Python ones. Every value is
// computed as a double (a Python float) and stored as float (the float32 rounding), so the
// bytes are those of the reference.
#include "features.h"

#include <cstring>
#include <vector>

#include "cards.h"

namespace arena {
namespace {

constexpr double kStat = 12.0;  // _STAT

// _clip
double Clip(double x) { return x > 1.0 ? 1.0 : (x < -1.0 ? -1.0 : x); }

double Flag(bool b) { return b ? 1.0 : 0.0; }

// (1.0, float(playable), *_card_static(card)): a hand card's piece, CARD_FEATURES order.
void CardPiece(const Card& card, bool playable, float* out) {
  const bool creature = card.creature;
  int k = 0;
  out[k++] = 1.0f;
  out[k++] = static_cast<float>(Flag(playable));
  out[k++] = static_cast<float>(card.cost / 10.0);
  out[k++] = static_cast<float>(Flag(creature));
  out[k++] = static_cast<float>(Flag(!creature));
  out[k++] = static_cast<float>(Clip(card.attack / kStat));
  out[k++] = static_cast<float>(Clip(card.health / kStat));
  for (int i = 0; i < kNumKeywords; ++i) out[k++] = static_cast<float>(Flag(card.keywords & (1 << i)));
  for (int e = 1; e <= 7; ++e) out[k++] = static_cast<float>(Flag(static_cast<int>(card.effect) == e));  // EFFECTS
  out[k++] = static_cast<float>(Clip(card.amount / 10.0));
  out[k++] = static_cast<float>(Clip(card.buff_attack / 5.0));
  out[k++] = static_cast<float>(Clip(card.buff_health / 5.0));
  for (int i = 0; i < kNumKeywords; ++i) out[k++] = static_cast<float>(Flag(card.keyword == (1 << i)));
  for (int t = 0; t < 6; ++t) {  // TARGET_RULES, "none" first
    out[k++] = static_cast<float>(Flag(!creature && static_cast<int>(card.target) == t));
  }
  for (int s = 1; s <= 3; ++s) out[k++] = static_cast<float>(Flag(static_cast<int>(card.scope) == s));  // AREA_SCOPES
}

// _HAND_PIECES: CardPiece of each (card, playable), computed once per card. An entry keeps the
// Card it was computed from and is recomputed if the pool changed it (set_card_pool).
struct CachedCard {
  Card card;
  float piece[2][kCardFeatures];
};

const float* CachedCardPiece(const Card& card, bool playable) {
  static std::vector<CachedCard> cache;
  if (card.id >= static_cast<int>(cache.size())) cache.resize(card.id + 1);
  CachedCard& entry = cache[card.id];
  if (std::memcmp(&entry.card, &card, sizeof(Card)) != 0) {
    std::memcpy(&entry.card, &card, sizeof(Card));
    CardPiece(card, false, entry.piece[0]);
    CardPiece(card, true, entry.piece[1]);
  }
  return entry.piece[playable ? 1 : 0];
}

// static_cast<float>(Clip(v / kStat)) for v in -12..12 (beyond, the clip gives -1 or 1): the
// same correctly rounded division, done once (a creature's stats are small integers).
struct StatTable {
  float value[25];
  constexpr StatTable() : value() {
    for (int v = -12; v <= 12; ++v) value[v + 12] = static_cast<float>(v / kStat);
  }
};
constexpr StatTable kStatTable;

float StatFeature(int64_t v) {
  return v >= 12 ? 1.0f : (v <= -12 ? -1.0f : kStatTable.value[v + 12]);
}

// creature_features of a present creature; an empty slot's are zeros, which the callers
// write for a whole row or board at once (cheaper than slot by slot), so it leaves `out` alone.
void CreaturePiece(const Creature& c, float* out) {
  if (!c.present()) return;
  const bool can_attack = c.attack > 0 && !c.attacked && (!c.sick || (c.keywords & kCharge));
  int k = 0;
  out[k++] = 1.0f;
  out[k++] = StatFeature(c.attack);
  out[k++] = StatFeature(c.health);
  out[k++] = StatFeature(c.max_health);
  for (int i = 0; i < kNumKeywords; ++i) out[k++] = static_cast<float>(Flag(c.keywords & (1 << i)));
  out[k++] = static_cast<float>(Flag(can_attack));
  out[k++] = static_cast<float>(Flag(c.sick));
  out[k++] = static_cast<float>(Flag(c.attacked));
}

int BoardCount(const Player& p) {
  int n = 0;
  for (const Creature& c : p.board) n += c.present() ? 1 : 0;
  return n;
}

// _would_kill
bool WouldKill(const Creature& c, int64_t amount, bool lethal) {
  return amount > 0 && !(c.keywords & kWard) && (lethal || amount >= c.health);
}

double Div(int64_t x, double d) { return static_cast<double>(x) / d; }

}  // namespace

// observation
void Observation(const State& state, int player, float* out) {
  const Player& me = state.players[player - 1];
  const Player& opp = state.players[2 - player];
  const int own_count = BoardCount(me);
  const double head[kGlobalFeatures] = {
      Div(me.hp, 30.0) > -1.0 ? Div(me.hp, 30.0) : -1.0,  // max(-1.0, hp / 30.0)
      Div(opp.hp, 30.0) > -1.0 ? Div(opp.hp, 30.0) : -1.0,
      me.mana / 10.0, me.max_mana / 10.0, opp.max_mana / 10.0,
      me.hand_size / 8.0, opp.hand_size / 8.0, me.deck_size / 30.0, opp.deck_size / 30.0,
      Div(me.fatigue, 10.0) < 1.0 ? Div(me.fatigue, 10.0) : 1.0,  // min(fatigue / 10.0, 1.0)
      Div(opp.fatigue, 10.0) < 1.0 ? Div(opp.fatigue, 10.0) : 1.0,
      state.turn / 60.0, Flag(!state.terminal() && state.active == player - 1),
      Flag(state.starting_player == player), own_count / 6.0, BoardCount(opp) / 6.0};
  for (int i = 0; i < kGlobalFeatures; ++i) out[i] = static_cast<float>(head[i]);
  float* at = out + kGlobalFeatures;
  const bool room = own_count < kBoardSlots;
  for (int h = 0; h < me.hand_size; ++h, at += kCardFeatures) {
    const Card& card = Pool().Get(me.hand[h]);
    std::memcpy(at, CachedCardPiece(card, card.cost <= me.mana && (room || !card.creature)),
                sizeof(float) * kCardFeatures);
  }
  const size_t empty_cards = static_cast<size_t>(kHandLimit - me.hand_size) * kCardFeatures;
  std::memset(at, 0, sizeof(float) * empty_cards);  // the empty hand slots, at once
  at += empty_cards;
  std::memset(at, 0, sizeof(float) * 2 * kBoardSlots * kCreatureFeatures);
  for (const Player* p : {&me, &opp}) {
    for (const Creature& c : p->board) {
      CreaturePiece(c, at);
      at += kCreatureFeatures;
    }
  }
}

// action_feature_parts, one action
void ActionFeatures(const State& state, int a, float* out) {
  const Player& me = state.players[state.active];
  const Player& opp = state.players[1 - state.active];
  std::memset(out, 0, sizeof(float) * kActionFeatureDim);
  float* card_at = out + 3;
  float* attacker_at = card_at + kCardFeatures;
  float* kind_at = attacker_at + kCreatureFeatures;
  float* target_at = kind_at + kTargetKinds;
  float* derived = target_at + kCreatureFeatures;  // hero health, mana after, kills, dies, hero damage
  const double mana_now = Clip(me.mana / 10.0);
  double hero_hp = 0.0, mana_after = mana_now, kills = 0.0, dies = 0.0, hero_damage = 0.0;
  if (a == kEndTurn) {
    out[0] = 1.0f;
    kind_at[0] = 1.0f;
  } else if (a < kAttackBase) {
    out[1] = 1.0f;
    const int h = (a - kPlayBase) / kPlayTargets, t = (a - kPlayBase) % kPlayTargets;
    if (h < me.hand_size) {
      const Card& card = Pool().Get(me.hand[h]);
      int kind = 0;
      if (t == kTargetNone) {
        if (card.effect == Effect::kAreaDamage && card.scope == Scope::kAllCharacters) hero_damage = Clip(card.amount / 30.0);
      } else if (t == kTargetOwnHero || t == kTargetEnemyHero) {
        kind = t;
        hero_hp = Clip(Div((t == kTargetOwnHero ? me : opp).hp, 30.0));
        if (card.effect == Effect::kDamage && t == kTargetEnemyHero) {
          kills = Flag(card.amount >= opp.hp);
          hero_damage = Clip(card.amount / 30.0);
        }
      } else {
        const bool own = t < kTargetEnemySlot;
        kind = own ? 3 : 4;
        const Creature& c = own ? me.board[t - kTargetOwnSlot] : opp.board[t - kTargetEnemySlot];
        if (c.present()) {
          CreaturePiece(c, target_at);
          if (card.effect == Effect::kDamage && WouldKill(c, card.amount, false)) kills = 1.0;
        }
      }
      std::memcpy(card_at, CachedCardPiece(card, true), sizeof(float) * kCardFeatures);
      kind_at[kind] = 1.0f;
      mana_after = Clip((me.mana - card.cost) / 10.0);
    }
  } else {
    out[2] = 1.0f;
    const int slot = (a - kAttackBase) / kAttackTargets, t = (a - kAttackBase) % kAttackTargets;
    const Creature& attacker = me.board[slot];
    CreaturePiece(attacker, attacker_at);
    if (t == 0) {
      kind_at[2] = 1.0f;
      hero_hp = Clip(Div(opp.hp, 30.0));
      if (attacker.present()) {
        kills = Flag(attacker.attack >= opp.hp);
        hero_damage = Clip(Div(attacker.attack, 30.0));
      }
    } else {
      const Creature& defender = opp.board[t - 1];
      kind_at[4] = 1.0f;
      CreaturePiece(defender, target_at);
      if (attacker.present() && defender.present()) {
        kills = Flag(WouldKill(defender, attacker.attack, attacker.keywords & kLethal));
        dies = Flag(WouldKill(attacker, defender.attack, defender.keywords & kLethal));
        if ((attacker.keywords & kBreakthrough) && !(defender.keywords & kWard)) {
          const int64_t excess = attacker.attack - defender.health;
          hero_damage = Clip(Div(excess > 0 ? excess : 0, 30.0));
        }
      }
    }
  }
  derived[0] = static_cast<float>(hero_hp);
  derived[1] = static_cast<float>(mana_after);
  derived[2] = static_cast<float>(kills);
  derived[3] = static_cast<float>(dies);
  derived[4] = static_cast<float>(hero_damage);
}

}  // namespace arena
