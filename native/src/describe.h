// engine/views.py's describe_actions and action_json in C++: the readable line of each action
// and its JSON form, for the player to move, with the same words (the card names and texts are
// registered by engine_native from engine.views; see SetDescribeCards). The trace recorder
// renders one line per legal action of every decision, so these are on the path of every
// collected battle and every production replay.
#pragma once

#include <string>
#include <vector>

#include "state.h"

namespace arena {

// Per card id: its name, views._CARD_TEXT ("Name (cost mana, text)") and whether it is a
// creature (a creature's play line names no target).
struct DescribeCard {
  std::string name;
  std::string card_text;
  bool creature = false;
  bool known = false;
};
void SetDescribeCards(const std::vector<std::pair<int, DescribeCard>>& cards);

// Whether every card the lines of `state` may name (hands and boards) has registered texts.
bool DescribeCardsKnown(const State& state);

// views.describe_actions(state, ids) for ids in 0..162 (the caller checked them and
// DescribeCardsKnown).
void DescribeActions(const State& state, const int* ids, int n, std::vector<std::string>* out);

const DescribeCard& DescribeCardOf(int card_id);

}  // namespace arena
