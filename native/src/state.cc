// The rules of arena-1; each function names the engine/state.py method it mirrors.
#include "state.h"

#include <algorithm>

#include "cards.h"

namespace arena {
namespace {

void Emit(Events* events, const Event& event) {
  if (events != nullptr) events->push_back(event);
}

EventTarget HeroTarget(int index) { return EventTarget{false, static_cast<int8_t>(index + 1), 0, 0}; }

EventTarget CreatureTarget(const State& s, int index, int slot) {
  return EventTarget{true, static_cast<int8_t>(index + 1), static_cast<int8_t>(slot),
                     s.players[index].board[slot].uid};
}

// State._draw
void Draw(State& s, int index, Events* events) {
  Player& p = s.players[index];
  if (p.deck_size == 0) {
    p.fatigue += 1;
    p.hp -= p.fatigue;
    Event e{EventType::kFatigue};
    e.player = static_cast<int8_t>(index + 1);
    e.a = p.fatigue;
    e.b = p.hp;
    Emit(events, e);
    return;
  }
  const int card_id = p.deck[--p.deck_size];
  Event e{EventType::kDraw};
  e.player = static_cast<int8_t>(index + 1);
  e.a = card_id;
  if (p.hand_size >= kHandLimit) {
    e.type = EventType::kBurn;
  } else {
    p.hand[p.hand_size++] = static_cast<int16_t>(card_id);
  }
  Emit(events, e);
}

// State._finish
void Finish(State& s, int winner, EndReason reason, Events* events) {
  s.winner = winner;
  s.end_reason = reason;
  Event e{EventType::kGameOver};
  e.a = winner;
  e.reason = reason;
  Emit(events, e);
}

// State._check_end
void CheckEnd(State& s, Events* events) {
  if (s.winner >= 0) return;
  const bool dead1 = s.players[0].hp <= 0;
  const bool dead2 = s.players[1].hp <= 0;
  if (dead1 && dead2) {
    Finish(s, 0, EndReason::kSimultaneousDeath, events);
  } else if (dead1 || dead2) {
    Finish(s, dead1 ? 2 : 1, EndReason::kHeroDefeated, events);
  }
}

// State._start_turn
void StartTurn(State& s, int index, Events* events) {
  s.turn += 1;
  s.active = index;
  Player& p = s.players[index];
  p.max_mana = std::min(kMaxMana, p.max_mana + 1);
  p.mana = p.max_mana;
  for (Creature& c : p.board) {
    if (c.present()) {
      c.sick = false;
      c.attacked = false;
    }
  }
  Event e{EventType::kTurnStart};
  e.player = static_cast<int8_t>(index + 1);
  e.a = s.turn;
  e.b = p.max_mana;
  Emit(events, e);
  Draw(s, index, events);
  CheckEnd(s, events);
}

// State._end_turn
void EndTurn(State& s, Events* events) {
  Event e{EventType::kEndTurn};
  e.player = static_cast<int8_t>(s.active + 1);
  e.a = s.turn;
  Emit(events, e);
  if (s.turn >= kMaxTurns) {
    Finish(s, 0, EndReason::kTurnLimit, events);
  } else {
    StartTurn(s, 1 - s.active, events);
  }
}

// State._damage_hero
void DamageHero(State& s, int index, int64_t amount, Events* events) {
  Player& p = s.players[index];
  p.hp -= amount;
  Event e{EventType::kDamage};
  e.target = HeroTarget(index);
  e.a = amount;
  e.b = p.hp;
  Emit(events, e);
}

// State._heal_hero
void HealHero(State& s, int index, int64_t amount, Events* events) {
  Player& p = s.players[index];
  const int64_t healed = std::min<int64_t>(amount, kHeroHealth - p.hp);
  p.hp += healed;
  Event e{EventType::kHeal};
  e.target = HeroTarget(index);
  e.a = healed;
  e.b = p.hp;
  Emit(events, e);
}

// State._damage_creature: one damage instance; returns whether it landed (ward absorbs it).
bool DamageCreature(State& s, int index, int slot, int64_t amount, bool lethal, Events* events) {
  Creature& c = s.players[index].board[slot];
  const EventTarget target = CreatureTarget(s, index, slot);
  if (c.keywords & kWard) {
    c.keywords &= static_cast<uint8_t>(~kWard);
    Event e{EventType::kWardBroken};
    e.target = target;
    e.a = amount;
    Emit(events, e);
    return false;
  }
  int64_t health = c.health - amount;
  if (lethal) health = std::min<int64_t>(health, 0);
  c.health = health;
  Event e{EventType::kDamage};
  e.target = target;
  e.a = amount;
  e.b = health;
  e.flag = lethal;
  Emit(events, e);
  return true;
}

// State._remove_dead
void RemoveDead(State& s, Events* events) {
  for (int index = 0; index < 2; ++index) {
    for (int slot = 0; slot < kBoardSlots; ++slot) {
      Creature& c = s.players[index].board[slot];
      if (c.present() && c.health <= 0) {
        Event e{EventType::kDeath};
        e.player = static_cast<int8_t>(index + 1);
        e.a = slot;
        e.b = c.uid;
        e.c = c.card_id;
        c = Creature{};
        Emit(events, e);
      }
    }
  }
}

// State._cast
void Cast(State& s, const Card& card, int me, int t, Events* events) {
  if (card.effect == Effect::kDraw) {
    for (int i = 0; i < card.amount; ++i) Draw(s, me, events);
    CheckEnd(s, events);
    return;
  }
  if (card.effect == Effect::kAreaDamage) {
    const int sides[2] = {1 - me, me};
    const int num_sides = card.scope == Scope::kEnemyCreatures ? 1 : 2;
    for (int k = 0; k < num_sides; ++k) {
      for (int slot = 0; slot < kBoardSlots; ++slot) {
        if (s.players[sides[k]].board[slot].present()) DamageCreature(s, sides[k], slot, card.amount, false, events);
      }
    }
    if (card.scope == Scope::kAllCharacters) {
      DamageHero(s, 1 - me, card.amount, events);
      DamageHero(s, me, card.amount, events);
    }
    RemoveDead(s, events);
    CheckEnd(s, events);
    return;
  }
  if (t == kTargetOwnHero || t == kTargetEnemyHero) {
    const int index = t == kTargetOwnHero ? me : 1 - me;
    if (card.effect == Effect::kDamage) {
      DamageHero(s, index, card.amount, events);
      CheckEnd(s, events);
    } else {  // heal: the only hero-targeting effect besides damage
      HealHero(s, index, card.amount, events);
    }
    return;
  }
  const int index = t < kTargetEnemySlot ? me : 1 - me;
  const int slot = t < kTargetEnemySlot ? t - kTargetOwnSlot : t - kTargetEnemySlot;
  Creature& c = s.players[index].board[slot];
  Event e{EventType::kHeal};
  e.target = CreatureTarget(s, index, slot);
  switch (card.effect) {
    case Effect::kDamage:
      DamageCreature(s, index, slot, card.amount, false, events);
      RemoveDead(s, events);
      return;
    case Effect::kHeal: {
      const int64_t healed = std::min<int64_t>(card.amount, c.max_health - c.health);
      c.health += healed;
      e.a = healed;
      e.b = c.health;
      break;
    }
    case Effect::kBuff:
      c.attack = std::max<int64_t>(0, c.attack + card.buff_attack);
      c.health += card.buff_health;
      c.max_health += card.buff_health;
      e.type = EventType::kBuff;
      e.a = card.buff_attack;
      e.b = card.buff_health;
      break;
    case Effect::kGrantKeyword:
      c.keywords |= card.keyword;
      e.type = EventType::kKeywordGranted;
      e.keyword = card.keyword;
      break;
    default:  // remove_keyword
      c.keywords &= static_cast<uint8_t>(~card.keyword);
      e.type = EventType::kKeywordRemoved;
      e.keyword = card.keyword;
      break;
  }
  Emit(events, e);
}

// State._play
void Play(State& s, int h, int t, Events* events) {
  const int me = s.active;
  Player& p = s.players[me];
  const int card_id = p.hand[h];
  for (int i = h; i + 1 < p.hand_size; ++i) p.hand[i] = p.hand[i + 1];
  p.hand_size -= 1;
  const Card& card = Pool().Get(card_id);
  p.mana -= card.cost;
  Event e{EventType::kPlay};
  e.player = static_cast<int8_t>(me + 1);
  e.a = h;
  e.b = card_id;
  e.c = t;
  Emit(events, e);
  if (card.creature) {
    int slot = 0;
    while (p.board[slot].present()) ++slot;
    Creature& c = p.board[slot];
    c = Creature{s.next_uid, card_id, card.attack, card.health, card.health, card.keywords, true, false};
    s.next_uid += 1;
    Event summon{EventType::kSummon};
    summon.player = static_cast<int8_t>(me + 1);
    summon.a = slot;
    summon.b = c.uid;
    summon.c = card_id;
    Emit(events, summon);
    return;
  }
  Cast(s, card, me, t, events);
}

// State._attack
void Attack(State& s, int slot, int t, Events* events) {
  const int me = s.active;
  const int opp = 1 - me;
  Creature& attacker = s.players[me].board[slot];
  attacker.attacked = true;
  Event e{EventType::kAttack};
  e.player = static_cast<int8_t>(me + 1);
  e.a = slot;
  e.b = attacker.uid;
  e.target = t == 0 ? HeroTarget(opp) : CreatureTarget(s, opp, t - 1);
  Emit(events, e);
  const int64_t power = attacker.attack;
  const uint8_t kw = attacker.keywords;
  int64_t dealt = 0;
  if (t == 0) {
    DamageHero(s, opp, power, events);
    dealt = power;
  } else {
    const Creature defender = s.players[opp].board[t - 1];  // as it was before the blow
    const bool landed = DamageCreature(s, opp, t - 1, power, (kw & kLethal) != 0, events);
    dealt = landed ? power : 0;
    if (defender.attack > 0) {
      DamageCreature(s, me, slot, defender.attack, (defender.keywords & kLethal) != 0, events);
    }
    if (landed && (kw & kBreakthrough) && power > defender.health) {
      DamageHero(s, opp, power - defender.health, events);
    }
    RemoveDead(s, events);
  }
  if (dealt != 0 && (kw & kDrain)) HealHero(s, me, dealt, events);
  CheckEnd(s, events);
}

// _SPELL_TARGET_SIDES: (own hero, enemy hero, own creatures, enemy creatures).
struct Sides {
  bool own_hero, enemy_hero, own_creatures, enemy_creatures;
};

Sides SpellSides(TargetRule rule) {
  switch (rule) {
    case TargetRule::kFriendlyCreature: return {false, false, true, false};
    case TargetRule::kEnemyCreature: return {false, false, false, true};
    case TargetRule::kAnyCreature: return {false, false, true, true};
    case TargetRule::kEnemyHero: return {false, true, false, false};
    case TargetRule::kAnyCharacter: return {true, true, true, true};
    default: return {false, false, false, false};
  }
}

}  // namespace

const char* EndReasonName(EndReason reason) {
  switch (reason) {
    case EndReason::kHeroDefeated: return "hero_defeated";
    case EndReason::kSimultaneousDeath: return "simultaneous_death";
    case EndReason::kTurnLimit: return "turn_limit";
    default: return "";
  }
}

// engine.decks.random_deck: a partial Fisher-Yates over two copies of every card, sorted.
std::array<int16_t, kDeckSize> RandomDeck(SplitMix64& rng) {
  static_assert(kMaxCopies == 2, "CardPool::Copies holds two copies of each card");
  thread_local std::vector<int16_t> copies;
  copies = Pool().Copies();  // no allocation once the buffer has grown
  const uint64_t n = copies.size();
  for (int i = 0; i < kDeckSize; ++i) {
    const uint64_t j = i + rng.Below(n - i);
    std::swap(copies[i], copies[j]);
  }
  std::array<int16_t, kDeckSize> deck;
  std::copy(copies.begin(), copies.begin() + kDeckSize, deck.begin());
  std::sort(deck.begin(), deck.end());
  return deck;
}

// engine.state.new_battle
State NewBattle(const std::string& seed, const std::array<int16_t, kDeckSize>* p1_deck,
                const std::array<int16_t, kDeckSize>* p2_deck, int starting_player, Events* events) {
  State s;
  s.seed = seed;
  const std::array<int16_t, kDeckSize>* given[2] = {p1_deck, p2_deck};
  for (int i = 0; i < 2; ++i) {
    if (given[i] != nullptr) {
      s.decks[i] = *given[i];
    } else {
      SplitMix64 deck_rng{DeriveSeed(seed, i == 0 ? "deck1" : "deck2")};
      s.decks[i] = RandomDeck(deck_rng);
    }
  }
  if (starting_player == 0) {
    SplitMix64 start_rng{DeriveSeed(seed, "start")};
    starting_player = 1 + static_cast<int>(start_rng.Below(2));
  }
  s.starting_player = starting_player;
  s.rng = SplitMix64{DeriveSeed(seed, "battle")};
  for (int i = 0; i < 2; ++i) {
    Player& p = s.players[i];
    p.deck = s.decks[i];
    p.deck_size = kDeckSize;
    s.rng.Shuffle(p.deck.data(), kDeckSize);
  }
  s.turn = 0;
  s.active = starting_player - 1;
  s.next_uid = 1;
  const int order[2] = {s.active, 1 - s.active};
  for (int index : order) {
    const int hand = index == s.active ? 3 : 4;  // STARTING_HAND
    for (int k = 0; k < hand; ++k) Draw(s, index, events);
  }
  StartTurn(s, s.active, events);
  return s;
}

// State._compute_legal
void LegalActions(const State& s, ActionList* out) {
  out->size = 0;
  if (s.terminal()) return;
  const Player& me = s.players[s.active];
  const Player& opp = s.players[1 - s.active];
  int own_slots[kBoardSlots], enemy_slots[kBoardSlots];
  int num_own = 0, num_enemy = 0;
  for (int i = 0; i < kBoardSlots; ++i) {
    if (me.board[i].present()) own_slots[num_own++] = kTargetOwnSlot + i;
    if (opp.board[i].present()) enemy_slots[num_enemy++] = kTargetEnemySlot + i;
  }
  const bool board_full = num_own == kBoardSlots;
  out->push(kEndTurn);
  const CardPool& pool = Pool();
  for (int h = 0; h < me.hand_size; ++h) {
    const Card& card = pool.Get(me.hand[h]);
    if (card.cost > me.mana) continue;
    const int base = kPlayBase + h * kPlayTargets;
    if (card.creature) {
      if (!board_full) out->push(base);
      continue;
    }
    if (card.target == TargetRule::kNone) {
      out->push(base);
      continue;
    }
    const Sides sides = SpellSides(card.target);
    if (sides.own_hero) out->push(base + kTargetOwnHero);
    if (sides.enemy_hero) out->push(base + kTargetEnemyHero);
    if (sides.own_creatures) {
      for (int k = 0; k < num_own; ++k) out->push(base + own_slots[k]);
    }
    if (sides.enemy_creatures) {
      for (int k = 0; k < num_enemy; ++k) out->push(base + enemy_slots[k]);
    }
  }
  int targets[kAttackTargets];
  int num_targets = 0;
  for (int i = 0; i < kBoardSlots; ++i) {
    if (opp.board[i].present() && (opp.board[i].keywords & kGuard)) targets[num_targets++] = 1 + i;
  }
  if (num_targets == 0) {
    targets[num_targets++] = 0;
    for (int k = 0; k < num_enemy; ++k) targets[num_targets++] = enemy_slots[k] - kTargetEnemySlot + 1;
  }
  for (int slot = 0; slot < kBoardSlots; ++slot) {
    const Creature& c = me.board[slot];
    if (c.present() && c.attack > 0 && !c.attacked && (!c.sick || (c.keywords & kCharge))) {
      const int base = kAttackBase + slot * kAttackTargets;
      for (int k = 0; k < num_targets; ++k) out->push(base + targets[k]);
    }
  }
}

// State.apply after its legality check
void ApplyAction(State& s, int action_id, Events* events) {
  if (action_id == kEndTurn) {
    EndTurn(s, events);
  } else if (action_id < kAttackBase) {
    const int rel = action_id - kPlayBase;
    Play(s, rel / kPlayTargets, rel % kPlayTargets, events);
  } else {
    const int rel = action_id - kAttackBase;
    Attack(s, rel / kAttackTargets, rel % kAttackTargets, events);
  }
}

}  // namespace arena
