// State.canonical_json and State.state_hash: json.dumps(to_dict(), sort_keys=True,
// separators=(",", ":")) written directly (every string in a state is plain ASCII).
#include <cstdio>
#include <string>

#include "cards.h"
#include "state.h"

namespace arena {
namespace {

void Int(std::string& out, int64_t value) { out += std::to_string(value); }

void IntList(std::string& out, const int16_t* items, int n) {
  out += '[';
  for (int i = 0; i < n; ++i) {
    if (i) out += ',';
    Int(out, items[i]);
  }
  out += ']';
}

void Keywords(std::string& out, uint8_t mask) {
  out += '[';
  bool first = true;
  for (int i = 0; i < kNumKeywords; ++i) {
    if (mask & (1 << i)) {
      if (!first) out += ',';
      first = false;
      out += '"';
      out += kKeywordNames[i];
      out += '"';
    }
  }
  out += ']';
}

void CreatureJson(std::string& out, const Creature& c) {
  out += "{\"attack\":";
  Int(out, c.attack);
  out += ",\"attacked\":";
  out += c.attacked ? "true" : "false";
  out += ",\"card_id\":";
  Int(out, c.card_id);
  out += ",\"health\":";
  Int(out, c.health);
  out += ",\"keywords\":";
  Keywords(out, c.keywords);
  out += ",\"max_health\":";
  Int(out, c.max_health);
  out += ",\"sick\":";
  out += c.sick ? "true" : "false";
  out += ",\"uid\":";
  Int(out, c.uid);
  out += '}';
}

void PlayerJson(std::string& out, const Player& p) {
  out += "{\"board\":[";
  for (int slot = 0; slot < kBoardSlots; ++slot) {
    if (slot) out += ',';
    if (p.board[slot].present()) {
      CreatureJson(out, p.board[slot]);
    } else {
      out += "null";
    }
  }
  out += "],\"deck\":";
  IntList(out, p.deck.data(), p.deck_size);
  out += ",\"fatigue\":";
  Int(out, p.fatigue);
  out += ",\"hand\":";
  IntList(out, p.hand.data(), p.hand_size);
  out += ",\"hero_health\":";
  Int(out, p.hp);
  out += ",\"mana\":";
  Int(out, p.mana);
  out += ",\"max_mana\":";
  Int(out, p.max_mana);
  out += '}';
}

}  // namespace

std::string CanonicalJson(const State& s) {
  std::string out;
  out.reserve(1200);
  out += "{\"active_player\":";
  Int(out, s.active + 1);
  out += ",\"decks\":[";
  IntList(out, s.decks[0].data(), kDeckSize);
  out += ',';
  IntList(out, s.decks[1].data(), kDeckSize);
  out += "],\"end_reason\":";
  if (s.terminal()) {
    out += '"';
    out += EndReasonName(s.end_reason);
    out += '"';
  } else {
    out += "null";
  }
  out += ",\"next_uid\":";
  Int(out, s.next_uid);
  out += ",\"players\":[";
  PlayerJson(out, s.players[0]);
  out += ',';
  PlayerJson(out, s.players[1]);
  char rng[17];
  std::snprintf(rng, sizeof rng, "%016llx", static_cast<unsigned long long>(s.rng.state));
  out += "],\"rng_state\":\"";
  out += rng;
  out += "\",\"ruleset\":\"arena-1\",\"schema_version\":";
  Int(out, kStateSchemaVersion);
  out += ",\"seed\":";
  out += s.seed;
  out += ",\"starting_player\":";
  Int(out, s.starting_player);
  out += ",\"turn\":";
  Int(out, s.turn);
  out += ",\"winner\":";
  if (s.terminal()) {
    Int(out, s.winner);
  } else {
    out += "null";
  }
  out += '}';
  return out;
}

std::string StateHash(const State& s) { return Sha256Hex(CanonicalJson(s)); }

}  // namespace arena
