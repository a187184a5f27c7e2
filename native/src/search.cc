// adapters/search.py ported; each function names the one it mirrors.
#include "search.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "cards.h"
#include "policies.h"

namespace arena {
namespace {

std::vector<ViewCard> g_view_cards;  // by card id

// SearchPolicy._value: apply the candidate in a copy of the world, let the rollout policy play
// until the horizon turn starts (or the battle ends), score the leaf.
double RolloutValue(const State& world, int action, int player, int horizon, Rollout rollout, SplitMix64* rng) {
  State w = world;
  ApplyAction(w, action, nullptr);
  while (!w.terminal() && w.turn < horizon) {
    ApplyAction(w, rollout == Rollout::kGreedy ? GreedyAct(w) : RandomAct(w, *rng), nullptr);
  }
  return LeafValue(w, player);
}

// SearchPolicy._candidates: more than MAX_CANDIDATES legal actions are cut to the best by a
// one-ply evaluation in the first world (sorted by (-value, action)), returned ascending.
std::vector<int> Candidates(const State& world, const ActionList& legal, int player) {
  std::vector<int> out;
  if (legal.size <= kMaxCandidates) {
    out.assign(legal.ids.begin(), legal.ids.begin() + legal.size);
    return out;
  }
  std::vector<std::pair<double, int>> scored;
  scored.reserve(legal.size);
  State child;
  for (int i = 0; i < legal.size; ++i) {
    child = world;
    ApplyAction(child, legal.ids[i], nullptr);
    scored.emplace_back(-Evaluate(child, player), legal.ids[i]);
  }
  // Python's tuple order: the values compared by == and < (so -0.0 ties 0.0), then the action.
  std::sort(scored.begin(), scored.end(), [](const std::pair<double, int>& x, const std::pair<double, int>& y) {
    return x.first != y.first ? x.first < y.first : x.second < y.second;
  });
  for (int i = 0; i < kMaxCandidates; ++i) out.push_back(scored[i].second);
  std::sort(out.begin(), out.end());
  return out;
}

// max(1, ceil(log2(n))) for n >= 1, in integers (math.log2 is exact at powers of two).
int Rounds(size_t n) {
  int rounds = 0;
  while ((size_t(1) << rounds) < n) ++rounds;
  return std::max(1, rounds);
}

// ----------------------------------------------------------------- the information set as orjson prints it
void Int(std::string& out, int64_t value) { out += std::to_string(value); }
void Bool(std::string& out, bool value) { out += value ? "true" : "false"; }

void SortedList(std::string& out, const int16_t* items, int n) {
  std::array<int16_t, kDeckSize> sorted{};
  std::copy(items, items + n, sorted.begin());
  std::sort(sorted.begin(), sorted.begin() + n);
  out += '[';
  for (int i = 0; i < n; ++i) {
    if (i) out += ',';
    Int(out, sorted[i]);
  }
  out += ']';
}

// views.creature_json, keys sorted.
void CreatureJson(std::string& out, const Creature& c, int slot) {
  const bool can_attack = c.attack > 0 && !c.attacked && (!c.sick || (c.keywords & kCharge));
  out += "{\"attack\":";
  Int(out, c.attack);
  out += ",\"attacked\":";
  Bool(out, c.attacked);
  out += ",\"can_attack\":";
  Bool(out, can_attack);
  out += ",\"card_id\":";
  Int(out, c.card_id);
  out += ",\"health\":";
  Int(out, c.health);
  out += ",\"keywords\":[";
  bool first = true;
  for (int i = 0; i < kNumKeywords; ++i) {
    if (c.keywords & (1 << i)) {
      if (!first) out += ',';
      first = false;
      out += '"';
      out += kKeywordNames[i];
      out += '"';
    }
  }
  out += "],\"max_health\":";
  Int(out, c.max_health);
  out += ",\"name\":";
  out += g_view_cards[c.card_id].name;
  out += ",\"sick\":";
  Bool(out, c.sick);
  out += ",\"slot\":";
  Int(out, slot);
  out += ",\"uid\":";
  Int(out, c.uid);
  out += '}';
}

// views._side, keys sorted.
void SideJson(std::string& out, const State& s, int index, bool hidden) {
  const Player& p = s.players[index];
  out += "{\"board\":[";
  bool first = true;
  for (int slot = 0; slot < kBoardSlots; ++slot) {
    if (!p.board[slot].present()) continue;
    if (!first) out += ',';
    first = false;
    CreatureJson(out, p.board[slot], slot);
  }
  out += "],\"deck_size\":";
  Int(out, p.deck_size);
  out += ",\"fatigue\":";
  Int(out, p.fatigue);
  if (!hidden) {
    out += ",\"hand\":[";
    for (int h = 0; h < p.hand_size; ++h) {
      if (h) out += ',';
      const ViewCard& card = g_view_cards[p.hand[h]];
      out += '{';
      if (!card.before.empty()) {
        out += card.before;
        out += ',';
      }
      out += "\"hand_slot\":";
      Int(out, h);
      if (!card.after.empty()) {
        out += ',';
        out += card.after;
      }
      out += '}';
    }
    out += ']';
  }
  out += ",\"hand_size\":";
  Int(out, p.hand_size);
  out += ",\"hero_health\":";
  Int(out, p.hp);
  out += ",\"mana\":";
  Int(out, p.mana);
  out += ",\"max_mana\":";
  Int(out, p.max_mana);
  out += ",\"player\":";
  Int(out, index + 1);
  out += '}';
}

}  // namespace

void SetViewCards(const std::vector<std::pair<int, ViewCard>>& cards) {
  std::vector<ViewCard> by_id;
  for (const auto& [id, card] : cards) {
    if (id >= static_cast<int>(by_id.size())) by_id.resize(id + 1);
    by_id[id] = card;
  }
  g_view_cards = std::move(by_id);
}

// information_set (the player view with the own deck list and contents), as orjson prints it
// with OPT_SORT_KEYS: compact, keys sorted at every level.
std::string InformationSetJson(const State& s, int player) {
  std::string out;
  out.reserve(3000);
  const Player& me = s.players[player - 1];
  out += "{\"own_deck_contents\":";
  SortedList(out, me.deck.data(), me.deck_size);
  out += ",\"own_deck_list\":";
  SortedList(out, s.decks[player - 1].data(), kDeckSize);
  out += ",\"view\":{\"end_reason\":";
  if (s.terminal()) {
    out += '"';
    out += EndReasonName(s.end_reason);
    out += '"';
  } else {
    out += "null";
  }
  out += ",\"is_terminal\":";
  Bool(out, s.terminal());
  out += ",\"opponent\":";
  SideJson(out, s, 2 - player, true);
  out += ",\"player\":";
  Int(out, player);
  out += ",\"player_turn\":";
  Int(out, (s.turn + 1) / 2);
  out += ",\"ruleset\":\"arena-1\",\"starting_player\":";
  Int(out, s.starting_player);
  out += ",\"to_move\":";
  if (s.terminal()) {
    out += "null";
  } else {
    Int(out, s.active + 1);
  }
  out += ",\"turn\":";
  Int(out, s.turn);
  out += ",\"view\":\"player\",\"winner\":";
  if (s.terminal()) {
    Int(out, s.winner);
  } else {
    out += "null";
  }
  out += ",\"you\":";
  SideJson(out, s, player - 1, false);
  out += ",\"your_turn\":";
  Bool(out, !s.terminal() && s.active + 1 == player);
  out += "}}";
  return out;
}

std::string InformationSetDigest(const State& s, int player) { return Sha256Hex(InformationSetJson(s, player)); }

// determinize
void Determinize(const State& state, int player, SplitMix64& rng, State* world) {
  *world = state;
  Player& me = world->players[player - 1];
  Player& opp = world->players[2 - player];
  std::sort(me.deck.begin(), me.deck.begin() + me.deck_size);  // own = sorted(me.deck)
  rng.Shuffle(me.deck.data(), me.deck_size);
  // unseen: two copies of every pool card minus the opponent's creatures on the board.
  const std::vector<int>& ids = Pool().Ids();
  std::vector<int> count(ids.empty() ? 0 : ids.back() + 1, 0);
  for (int id : ids) count[id] = kMaxCopies;
  for (const Creature& c : opp.board) {
    if (c.present()) count[c.card_id] -= 1;
  }
  thread_local std::vector<int16_t> pool;
  pool.clear();
  for (int id : ids) {
    for (int k = 0; k < count[id]; ++k) pool.push_back(static_cast<int16_t>(id));
  }
  const int n = static_cast<int>(pool.size());
  rng.Shuffle(pool.data(), n);
  // opp.hand = pool[:n_hand]; opp.deck = pool[n_hand:n_hand + n_deck] (slices: short when the pool is).
  const int n_hand = std::min(opp.hand_size, n);
  const int n_deck = std::max(0, std::min(n, opp.hand_size + opp.deck_size) - opp.hand_size);
  std::copy(pool.begin(), pool.begin() + n_hand, opp.hand.begin());
  opp.hand_size = n_hand;
  std::copy(pool.begin() + n_hand, pool.begin() + n_hand + n_deck, opp.deck.begin());
  opp.deck_size = n_deck;
  // world.decks: the player's own list and sorted(pool[:30]) for the opponent (to_dict only).
  std::array<int16_t, kDeckSize>& opp_list = world->decks[2 - player];
  const int listed = std::min(n, kDeckSize);
  std::copy(pool.begin(), pool.begin() + listed, opp_list.begin());
  std::sort(opp_list.begin(), opp_list.begin() + listed);
  world->seed = "0";
  world->rng = SplitMix64{rng.NextU64()};
}

// leaf_value
double LeafValue(const State& s, int player) {
  if (s.terminal()) return s.winner == 0 ? 0.0 : (s.winner == player ? 1.0 : -1.0);
  return std::tanh(Evaluate(s, player) / kLeafScale);
}

// SearchPolicy.decide from its generator on (the single-legal-action shortcut included).
void SearchWithSeed(const State& state, uint64_t search_seed, int sims, Rollout rollout,
                    SplitMix64* random_rollout_rng, SearchOutput* out) {
  ActionList legal;
  LegalActions(state, &legal);
  out->num_legal = legal.size;
  std::copy(legal.ids.begin(), legal.ids.begin() + legal.size, out->legal.begin());
  std::fill(out->mean.begin(), out->mean.begin() + legal.size, 0.0);
  std::fill(out->visits.begin(), out->visits.begin() + legal.size, 0);
  if (legal.size == 1) {
    out->action = legal.ids[0];
    return;
  }
  const int player = state.active + 1;
  SplitMix64 rng{search_seed};
  std::vector<State> worlds(1);
  Determinize(state, player, rng, &worlds[0]);
  std::vector<int> alive = Candidates(worlds[0], legal, player);
  const int horizon = state.turn + kLookaheadTurns;
  std::array<double, kActionSpaceSize> totals{};
  std::array<int32_t, kActionSpaceSize> visits{};
  const int rounds = Rounds(alive.size());
  auto mean = [&](int a) { return totals[a] / visits[a]; };
  for (int r = 0; r < rounds; ++r) {
    const int each = std::max(1, sims / (rounds * static_cast<int>(alive.size())));
    for (int action : alive) {
      for (int e = 0; e < each; ++e) {
        const size_t j = static_cast<size_t>(visits[action]);
        while (j >= worlds.size()) {
          worlds.emplace_back();
          Determinize(state, player, rng, &worlds.back());
        }
        totals[action] += RolloutValue(worlds[j], action, player, horizon, rollout, random_rollout_rng);
        visits[action] += 1;
      }
    }
    if (r < rounds - 1) {
      // alive.sort(key=lambda a: (-totals[a] / visits[a], a)); keep the better half (rounded up).
      std::sort(alive.begin(), alive.end(), [&](int x, int y) {
        const double kx = -totals[x] / visits[x], ky = -totals[y] / visits[y];
        return kx != ky ? kx < ky : x < y;
      });
      alive.resize((alive.size() + 1) / 2);
    }
  }
  // max(alive, key=lambda a: (totals[a] / visits[a], -a)): the first strictly greater key wins.
  int best = alive[0];
  for (size_t i = 1; i < alive.size(); ++i) {
    const int a = alive[i];
    if (mean(a) > mean(best) || (mean(a) == mean(best) && a < best)) best = a;
  }
  out->action = best;
  for (int i = 0; i < legal.size; ++i) {
    const int a = legal.ids[i];
    out->visits[i] = visits[a];
    out->mean[i] = visits[a] ? mean(a) : 0.0;
  }
}

// SearchPolicy.decide: the generator is SplitMix64(derive_seed(seed, "search:" + digest)).
void SearchAct(const State& state, uint64_t actor_seed, int sims, Rollout rollout, SplitMix64* random_rollout_rng,
               SearchOutput* out) {
  ActionList legal;
  LegalActions(state, &legal);
  const int player = state.active + 1;
  // A forced move is not searched (SearchPolicy.decide returns it before computing the digest).
  const uint64_t search_seed =
      legal.size == 1 ? 0 : DeriveSeed(std::to_string(actor_seed), "search:" + InformationSetDigest(state, player));
  SearchWithSeed(state, search_seed, sims, rollout, random_rollout_rng, out);
}

}  // namespace arena
