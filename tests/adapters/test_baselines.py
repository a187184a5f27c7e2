"""Baseline policies: legality, determinism and strength (issue 2 acceptance figure)."""

import pytest

import engine
from adapters import GreedyPolicy, RandomPolicy, make_baseline
from extrarlhf.runtime.duel import paired_series, play_duel


def test_greedy_beats_random_in_400_paired_battles():
    """200 seeds x 2 (sides swapped) = 400 battles; the bar is 80% wins."""
    stats = paired_series(lambda s: make_baseline("greedy", s), lambda s: make_baseline("random", s), range(200))
    assert stats.battles == 400
    assert stats.win_rate >= 0.80, stats.as_dict()


def test_paired_series_swaps_sides_and_counts_from_a():
    stats = paired_series(lambda s: make_baseline("greedy", s), lambda s: make_baseline("random", s), [7])
    assert stats.battles == 2
    first, second = stats.results
    assert first.seed == second.seed == 7
    wins = sum(1 for r, a_seat in zip(stats.results, (1, 2)) if r.winner == a_seat)
    assert stats.wins == wins


def test_random_policy_is_reproducible_and_legal():
    def choices(seed):
        state, policy, out = engine.new_battle(3), RandomPolicy(seed), []
        while not state.is_terminal:
            action = policy.act(state)
            assert action in state.legal_actions()
            out.append(action)
            state.apply(action)
        return out

    assert choices(11) == choices(11)
    assert choices(11) != choices(12)


def test_greedy_is_deterministic_and_only_plays_legal_actions():
    a = play_duel(5, GreedyPolicy(), GreedyPolicy())
    b = play_duel(5, GreedyPolicy(), GreedyPolicy())
    assert a == b
    assert a.winner in (0, 1, 2)


def test_greedy_takes_lethal_when_it_is_on_board():
    state = engine.new_battle(1)
    data = state.to_dict()
    me = data["players"][data["active_player"] - 1]
    opp = data["players"][2 - data["active_player"]]
    opp["hero_health"] = 3
    me["board"][2] = {"uid": 90, "card_id": 6, "attack": 3, "health": 2, "max_health": 2, "keywords": [],
                      "sick": False, "attacked": False}
    state = engine.State.from_dict(data)
    action = GreedyPolicy().act(state)
    state.apply(action)
    assert state.is_terminal and state.winner == data["active_player"]


def test_unknown_baseline_lists_the_available_ones():
    with pytest.raises(ValueError, match="unknown baseline 'smart'; available: random, greedy"):
        make_baseline("smart")
