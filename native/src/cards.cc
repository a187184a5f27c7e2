#include "cards.h"

#include <algorithm>

namespace arena {

const char* const kKeywordNames[kNumKeywords] = {"guard", "charge", "ward", "drain", "lethal", "breakthrough"};

void CardPool::Set(const std::vector<Card>& cards) {
  int max_id = 0;
  for (const Card& card : cards) max_id = std::max(max_id, card.id);
  by_id_.assign(max_id + 1, Card{});
  ids_.clear();
  for (const Card& card : cards) {
    by_id_[card.id] = card;
    ids_.push_back(card.id);
  }
  std::sort(ids_.begin(), ids_.end());
  copies_.clear();
  for (int id : ids_) {
    copies_.push_back(static_cast<int16_t>(id));
    copies_.push_back(static_cast<int16_t>(id));
  }
}

CardPool g_pool;

}  // namespace arena
