"""benchmarks/luck_ceiling.py: the worlds its searches are shown (the opponent's true hand with
the rest redrawn as the teacher redraws it; the true state itself) and one measured pair."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import engine
from adapters import search
from benchmarks import luck_ceiling
from engine import SplitMix64


def _midgame(seed: int = 5) -> engine.State:
    state = engine.new_battle(seed)
    greedy = luck_ceiling.GreedyPolicy()
    while state.turn < 6 and not state.is_terminal:
        state.apply(greedy.act(state))
    return state


def test_the_open_hands_world_shows_the_opponent_s_hand_and_redraws_the_rest() -> None:
    state = _midgame()
    player = state.to_move
    truth = state.to_dict()
    me, opp = truth["players"][player - 1], truth["players"][2 - player]
    world = luck_ceiling._open_hands(state, player, SplitMix64(7)).to_dict()
    wme, wopp = world["players"][player - 1], world["players"][2 - player]
    assert (wopp["hand"], wme["hand"], wopp["board"], wme["board"]) == (opp["hand"], me["hand"], opp["board"],
                                                                         me["board"])
    assert Counter(wme["deck"]) == Counter(me["deck"]) and len(wopp["deck"]) == len(opp["deck"])
    assert world["rng_state"] != truth["rng_state"]
    honest = search.determinize(state, player, SplitMix64(7)).to_dict()
    assert honest["players"][2 - player]["hand"] != opp["hand"]  # the teacher does not see it
    assert luck_ceiling._clairvoyant(state, player, SplitMix64(7)).to_dict() == truth


def test_one_pair_is_measured_for_each_actor() -> None:
    done = subprocess.run([sys.executable, "-m", "benchmarks.luck_ceiling", "--pairs", "1", "--sims", "4"],
                          capture_output=True, text=True, timeout=300, check=True)
    out = json.loads(done.stdout)
    assert [a["actor"] for a in out["actors"]] == list(luck_ceiling.ACTORS)
    for actor in out["actors"]:
        assert actor["wins"] + actor["draws"] + actor["losses"] == 2 and sum(actor["pentanomial"]) == 1
    bad = subprocess.run([sys.executable, "-m", "benchmarks.luck_ceiling", "--actors", "oracle"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "unknown actor(s) oracle: choose from honest, open_hands, clairvoyant" in bad.stderr
