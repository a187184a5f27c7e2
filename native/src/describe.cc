#include "describe.h"

#include <array>

#include "cards.h"

namespace arena {
namespace {

std::vector<DescribeCard> g_describe_cards;  // by card id

void Keywords(std::string& out, uint8_t mask) {
  bool first = true;
  for (int k = 0; k < kNumKeywords; ++k) {
    if (!(mask & (1u << k))) continue;
    if (!first) out += ' ';
    first = false;
    out += kKeywordNames[k];
  }
}

// views._creature_label: "Name (slot s, a/h kw kw)".
void CreatureLabel(std::string& out, const Creature& c, int slot) {
  out += g_describe_cards[c.card_id].name;
  out += " (slot ";
  out += std::to_string(slot);
  out += ", ";
  out += std::to_string(c.attack);
  out += '/';
  out += std::to_string(c.health);
  if (c.keywords) {
    out += ' ';
    Keywords(out, c.keywords);
  }
  out += ')';
}

// views._TargetTexts[t]: play target t as seen by the player to move.
void TargetText(std::string& out, const State& s, int t) {
  if (t <= kTargetEnemyHero) {
    const Player& hero = s.players[t == kTargetOwnHero ? s.active : 1 - s.active];
    out += t == kTargetOwnHero ? "your hero (" : "the enemy hero (";
    out += std::to_string(hero.hp);
    out += " health)";
    return;
  }
  const bool own = t < kTargetEnemySlot;
  const int slot = t - (own ? kTargetOwnSlot : kTargetEnemySlot);
  const Creature& c = s.players[own ? s.active : 1 - s.active].board[slot];
  out += own ? "your " : "enemy ";
  if (c.present()) {
    CreatureLabel(out, c, slot);
  } else {
    out += "slot ";
    out += std::to_string(slot);
    out += " (empty)";
  }
}

bool Known(int card_id) {
  return card_id > 0 && card_id < static_cast<int>(g_describe_cards.size()) && g_describe_cards[card_id].known;
}

}  // namespace

void SetDescribeCards(const std::vector<std::pair<int, DescribeCard>>& cards) {
  std::vector<DescribeCard> by_id;
  for (const auto& [id, card] : cards) {
    if (id <= 0) continue;
    if (id >= static_cast<int>(by_id.size())) by_id.resize(id + 1);
    by_id[id] = card;
    by_id[id].known = true;
  }
  g_describe_cards = std::move(by_id);
}

bool DescribeCardsKnown(const State& s) {
  for (const Player& p : s.players) {
    for (int h = 0; h < p.hand_size; ++h) {
      if (!Known(p.hand[h])) return false;
    }
    for (const Creature& c : p.board) {
      if (c.present() && !Known(c.card_id)) return false;
    }
  }
  return true;
}

const DescribeCard& DescribeCardOf(int card_id) { return g_describe_cards[card_id]; }

void DescribeActions(const State& s, const int* ids, int n, std::vector<std::string>* out) {
  const Player& me = s.players[s.active];
  out->clear();
  out->reserve(n);
  for (int i = 0; i < n; ++i) {
    const int a = ids[i];
    std::string line;
    if (a == kEndTurn) {
      line = "End turn";
    } else if (a < kAttackBase) {
      const int h = (a - kPlayBase) / kPlayTargets, t = (a - kPlayBase) % kPlayTargets;
      if (h >= me.hand_size) {
        line = "Play hand slot " + std::to_string(h) + " (empty)";
      } else {
        const DescribeCard& card = g_describe_cards[me.hand[h]];
        line = "Play " + card.card_text;
        if (!card.creature && t != 0) {
          line += " on ";
          TargetText(line, s, t);
        }
      }
    } else {
      const int slot = (a - kAttackBase) / kAttackTargets, t = (a - kAttackBase) % kAttackTargets;
      const Creature& c = me.board[slot];
      line = "Attack with ";
      if (c.present()) {
        CreatureLabel(line, c, slot);
      } else {
        line += "slot " + std::to_string(slot) + " (empty)";
      }
      line += " -> ";
      TargetText(line, s, t == 0 ? kTargetEnemyHero : kTargetEnemySlot + t - 1);
    }
    out->push_back(std::move(line));
  }
}

}  // namespace arena
