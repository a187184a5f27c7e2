// Battle state and rules of ruleset arena-1, a line-by-line port of engine/state.py (the
// reference): the same fields, the same generator use, the same events in the same order.
// In the style of OpenSpiel's games/*.cc: explicit state, small pure functions, one seeded
// generator per battle.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "rng.h"

namespace arena {

constexpr int kHandLimit = 8;
constexpr int kBoardSlots = 6;
constexpr int kPlayTargets = 15;
constexpr int kAttackTargets = 7;
constexpr int kEndTurn = 0;
constexpr int kPlayBase = 1;
constexpr int kAttackBase = kPlayBase + kHandLimit * kPlayTargets;              // 121
constexpr int kActionSpaceSize = kAttackBase + kBoardSlots * kAttackTargets;   // 163
constexpr int kTargetNone = 0;
constexpr int kTargetOwnHero = 1;
constexpr int kTargetEnemyHero = 2;
constexpr int kTargetOwnSlot = 3;
constexpr int kTargetEnemySlot = 9;

constexpr int kHeroHealth = 30;
constexpr int kMaxMana = 10;
constexpr int kMaxTurns = 60;
constexpr int kDeckSize = 30;
constexpr int kMaxCopies = 2;
constexpr int kStateSchemaVersion = 1;

enum class EndReason : uint8_t { kNone, kHeroDefeated, kSimultaneousDeath, kTurnLimit };
const char* EndReasonName(EndReason reason);  // "" for kNone

struct Creature {
  int64_t uid = 0;
  int32_t card_id = 0;  // 0: empty slot
  int64_t attack = 0;
  int64_t health = 0;
  int64_t max_health = 0;
  uint8_t keywords = 0;
  bool sick = false;
  bool attacked = false;
  bool present() const { return card_id != 0; }
};

struct Player {
  int64_t hp = kHeroHealth;
  int32_t max_mana = 0;
  int32_t mana = 0;
  int64_t fatigue = 0;
  int32_t deck_size = 0;
  std::array<int16_t, kDeckSize> deck{};  // draw order: the top is deck[deck_size - 1]
  int32_t hand_size = 0;
  std::array<int16_t, kHandLimit> hand{};
  std::array<Creature, kBoardSlots> board{};
};

enum class EventType : uint8_t {
  kFatigue, kBurn, kDraw, kTurnStart, kEndTurn, kGameOver, kDamage, kHeal, kWardBroken,
  kDeath, kPlay, kSummon, kBuff, kKeywordGranted, kKeywordRemoved, kAttack,
};

// What an event points at: a hero (`creature` false) or a creature on a board.
struct EventTarget {
  bool creature = false;
  int8_t player = 0;  // 1 or 2
  int8_t slot = 0;
  int64_t uid = 0;
};

// One event; the meaning of a/b/c per type is in events_to_python (binding.cc) and mirrors
// the dicts engine/state.py appends.
struct Event {
  explicit Event(EventType t) : type(t) {}
  EventType type;
  int8_t player = 0;
  int64_t a = 0, b = 0, c = 0;
  EventTarget target;
  bool flag = false;     // damage: lethal
  uint8_t keyword = 0;   // keyword_granted / keyword_removed
  EndReason reason = EndReason::kNone;
};

using Events = std::vector<Event>;

// Legal action ids, ascending, as State._compute_legal.
struct ActionList {
  int size = 0;
  std::array<int16_t, kActionSpaceSize> ids;
  void push(int id) { ids[size++] = static_cast<int16_t>(id); }
};

struct State {
  std::string seed;  // decimal text of the Python integer seed (it may exceed 64 bits)
  std::array<std::array<int16_t, kDeckSize>, 2> decks{};
  int starting_player = 1;
  SplitMix64 rng{0};
  std::array<Player, 2> players;
  int active = 0;  // 0 or 1
  int turn = 0;
  int64_t next_uid = 1;
  int winner = -1;  // -1: not over; 0 draw; 1 or 2
  EndReason end_reason = EndReason::kNone;

  bool terminal() const { return winner >= 0; }
};

// A seeded valid deck, sorted by id, as engine.decks.random_deck.
std::array<int16_t, kDeckSize> RandomDeck(SplitMix64& rng);

// new_battle(seed, decks, starting_player): `decks[i]` null pointer = the seeded default deck,
// starting_player 0 = the seeded coin flip. Decks are valid (the binding validated them).
State NewBattle(const std::string& seed, const std::array<int16_t, kDeckSize>* p1_deck,
                const std::array<int16_t, kDeckSize>* p2_deck, int starting_player, Events* events);

void LegalActions(const State& state, ActionList* out);

// Applies a legal action (the caller checked legality); appends its events when `events` is set.
void ApplyAction(State& state, int action_id, Events* events);

// json.dumps(state.to_dict(), sort_keys=True, separators=(",", ":")) and its sha256 hex.
std::string CanonicalJson(const State& state);
std::string StateHash(const State& state);

}  // namespace arena
