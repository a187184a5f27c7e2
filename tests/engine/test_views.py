"""Views of a state (DESIGN section 4): the player view and observation hide the opponent's
hand and every deck order; the omniscient view shows everything; action descriptions and
action JSON are readable and stable; render shows one player's side of the table."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

import engine
from adapters import make_baseline
from engine import CARD_IDS, CARDS

TARGET_CODE = {"none": lambda s: 0, "own_hero": lambda s: 1, "enemy_hero": lambda s: 2,
               "own_creature": lambda s: 3 + s, "enemy_creature": lambda s: 9 + s}


def battle_states(seed: int, policies=("random", "random")) -> list[engine.State]:
    """Every state (cloned) along one battle played by seeded baselines."""
    state = engine.new_battle(seed)
    players = [make_baseline(name, seed + i) for i, name in enumerate(policies)]
    states = [state.clone()]
    while not state.is_terminal:
        state.apply(players[state.to_move - 1].act(state))
        states.append(state.clone())
    return states


BATTLES = {
    "random": battle_states(81),
    "greedy": battle_states(82, ("greedy", "greedy")),
    "mixed": battle_states(83, ("greedy", "random")),
}
ALL_STATES = [s for states in BATTLES.values() for s in states]


def all_keys(obj) -> list[str]:
    keys = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            keys.append(k)
            keys += all_keys(v)
    elif isinstance(obj, list):
        for v in obj:
            keys += all_keys(v)
    return keys


def hand_fields(obj, path="") -> list[tuple[str, list]]:
    """(path, value) of every field named 'hand' anywhere in a JSON document."""
    found = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == "hand":
                found.append((f"{path}.{k}", v))
            found += hand_fields(v, f"{path}.{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            found += hand_fields(v, f"{path}[{i}]")
    return found


def hidden_variant(state: engine.State, viewer: int, rnd: random.Random) -> engine.State:
    """The same position as ``viewer`` sees it, with everything hidden from them changed: the
    opponent's hand cards, the opponent's deck list and deck contents, both deck orders and
    the generator state."""
    d = state.to_dict()
    opp = d["players"][2 - viewer]
    mine = d["players"][viewer - 1]
    others = [c for c in CARD_IDS if c not in opp["hand"]]
    opp["hand"] = [rnd.choice(others) for _ in opp["hand"]]
    opp["deck"] = [rnd.choice(CARD_IDS) for _ in opp["deck"]]
    rnd.shuffle(mine["deck"])
    if len(set(mine["deck"])) > 1:
        while mine["deck"] == state.to_dict()["players"][viewer - 1]["deck"]:
            rnd.shuffle(mine["deck"])
    copies = [c for c in CARD_IDS for _ in range(2)]
    rnd.shuffle(copies)
    d["decks"][2 - viewer] = copies[:30]
    d["rng_state"] = f"{rnd.getrandbits(64):016x}"
    return engine.State.from_dict(d)


# ---------------------------------------------------------------------------- player view
@pytest.mark.parametrize("battle", sorted(BATTLES))
def test_player_view_never_shows_the_opponent_hand_or_any_deck(battle):
    for state in BATTLES[battle]:
        for viewer in (1, 2):
            view = state.player_view(viewer)
            assert json.loads(json.dumps(view)) == view
            keys = all_keys(view)
            assert "deck" not in keys, "the player view has a 'deck' field"
            assert "hand" not in view["opponent"], "the player view shows the opponent's hand"
            hands = hand_fields(view)
            assert [p for p, _ in hands] == [".you.hand"], f"hand fields in the player view: {[p for p, _ in hands]}"
            assert [c["id"] for c in view["you"]["hand"]] == state.player(viewer).hand
            opp = state.player(3 - viewer)
            assert view["opponent"]["hand_size"] == len(opp.hand)
            assert view["opponent"]["deck_size"] == len(opp.deck)
            assert view["you"]["hero_health"] == state.player(viewer).hp
            assert view["opponent"]["hero_health"] == opp.hp
            assert [c["uid"] for c in view["opponent"]["board"]] == [c.uid for c in opp.board if c is not None]


@pytest.mark.parametrize("battle", sorted(BATTLES))
def test_hidden_information_does_not_change_what_a_player_sees(battle):
    rnd = random.Random(battle)
    for state in BATTLES[battle][::2]:
        for viewer in (1, 2):
            variant = hidden_variant(state, viewer, rnd)
            # the variant really differs (its hidden fields), and the opponent can tell when it has a hand
            assert variant.to_dict() != state.to_dict()
            if state.player(3 - viewer).hand:
                assert variant.player_view(3 - viewer) != state.player_view(3 - viewer)
            assert variant.player_view(viewer) == state.player_view(viewer), "player view depends on hidden info"
            assert np.array_equal(variant.observation(viewer), state.observation(viewer)), \
                "observation depends on hidden info"
            assert variant.render(viewer) == state.render(viewer), "render depends on hidden info"
            if state.to_move == viewer:
                legal = state.legal_actions()
                assert variant.legal_actions() == legal
                assert np.array_equal(variant.action_features(), state.action_features())
                for a in legal:
                    assert variant.describe_action(a) == state.describe_action(a)
                    assert variant.action_json(a) == state.action_json(a)


def test_a_card_only_in_the_opponent_hand_is_nowhere_in_the_player_view_or_render():
    state = next(s for s in BATTLES["random"] if s.turn >= 6 and not s.is_terminal)
    viewer = state.to_move
    seen = json.dumps(state.player_view(viewer)) + state.render(viewer)
    secret = next(c for c in CARD_IDS if CARDS[c].name not in seen)
    d = state.to_dict()
    d["players"][2 - viewer]["hand"] = [secret] * max(1, len(d["players"][2 - viewer]["hand"]))
    hidden = engine.State.from_dict(d)
    name = CARDS[secret].name
    assert name not in json.dumps(hidden.player_view(viewer)) and name not in hidden.render(viewer)
    assert name in json.dumps(hidden.player_view(3 - viewer)) and name in hidden.render(3 - viewer)
    assert name in json.dumps(hidden.omniscient_view())


# ---------------------------------------------------------------------------- omniscient view
@pytest.mark.parametrize("battle", sorted(BATTLES))
def test_omniscient_view_shows_both_hands_and_decks(battle):
    for state in BATTLES[battle][::3]:
        view = state.omniscient_view()
        assert json.loads(json.dumps(view)) == view
        assert view["view"] == "omniscient"
        assert (view["turn"], view["to_move"], view["winner"], view["end_reason"]) == \
               (state.turn, state.to_move, state.winner, state.end_reason)
        assert [p["player"] for p in view["players"]] == [1, 2]
        for side, p in zip(view["players"], state.players):
            assert [c["id"] for c in side["hand"]] == p.hand
            assert [c["id"] for c in side["deck"]] == list(reversed(p.deck)), "deck must list the top card first"
            assert side["hero_health"] == p.hp and side["deck_size"] == len(p.deck)


# ---------------------------------------------------------------------------- actions
def _check_action_json(state: engine.State, a: int) -> None:
    j = state.action_json(a)
    assert json.loads(json.dumps(j)) == j
    assert j["action_id"] == a
    assert j["description"] == state.describe_action(a)
    me = state.players[state.active]
    opp = state.players[1 - state.active]
    if j["kind"] == "end_turn":
        assert set(j) == {"action_id", "kind", "description"}
        rebuilt = engine.END_TURN
    elif j["kind"] == "play":
        assert set(j) == {"action_id", "kind", "hand_slot", "target", "card_id", "card_name", "cost", "description"}
        assert j["card_id"] == me.hand[j["hand_slot"]]
        assert j["card_name"] == CARDS[j["card_id"]].name and j["cost"] == CARDS[j["card_id"]].cost
        t = j["target"]
        rebuilt = engine.play_action(j["hand_slot"], TARGET_CODE[t["kind"]](t.get("slot")))
    else:
        assert j["kind"] == "attack"
        assert set(j) == {"action_id", "kind", "attacker_slot", "target", "attacker_uid", "card_id", "card_name",
                          "description"}
        attacker = me.board[j["attacker_slot"]]
        assert (j["attacker_uid"], j["card_id"]) == (attacker.uid, attacker.card_id)
        t = j["target"]
        rebuilt = engine.attack_action(j["attacker_slot"], 0 if t["kind"] == "enemy_hero" else 1 + t["slot"])
    assert rebuilt == a, f"action_json of {a} describes action {rebuilt}"
    if "target" in j:
        t = j["target"]
        if t["kind"] in ("own_hero", "enemy_hero"):
            assert t["hero_health"] == (me if t["kind"] == "own_hero" else opp).hp
        elif t["kind"] in ("own_creature", "enemy_creature"):
            c = (me if t["kind"] == "own_creature" else opp).board[t["slot"]]
            assert (t["uid"], t["card_id"], t["name"]) == (c.uid, c.card_id, CARDS[c.card_id].name)
    decoded = engine.decode_action(a)
    assert decoded["kind"] == j["kind"]


@pytest.mark.parametrize("battle", sorted(BATTLES))
def test_every_legal_action_has_a_readable_description_and_json(battle):
    for state in BATTLES[battle]:
        me = state.players[state.active]
        opp = state.players[1 - state.active]
        for a in state.legal_actions():
            text = state.describe_action(a)
            assert isinstance(text, str) and text.strip() and "\n" not in text
            assert "(empty)" not in text, f"legal action {a} described as {text!r}"
            if a == engine.END_TURN:
                assert text == "End turn"
            elif a < engine.ATTACK_BASE:
                h, t = divmod(a - engine.PLAY_BASE, 15)
                assert text.startswith(f"Play {CARDS[me.hand[h]].name} (")
                if t in (1, 2):
                    assert "hero" in text
                elif t >= 3:
                    c = (me.board[t - 3] if t < 9 else opp.board[t - 9])
                    assert CARDS[c.card_id].name in text
            else:
                s, t = divmod(a - engine.ATTACK_BASE, 7)
                assert text.startswith(f"Attack with {CARDS[me.board[s].card_id].name}")
                assert ("enemy hero" in text) if t == 0 else (CARDS[opp.board[t - 1].card_id].name in text)
            _check_action_json(state, a)


def test_describe_and_json_accept_every_id_and_refuse_non_ids():
    state = next(s for s in BATTLES["greedy"] if s.turn >= 8 and not s.is_terminal)
    for a in range(engine.ACTION_SPACE_SIZE):
        assert state.describe_action(a).strip()
        j = state.action_json(a)
        assert j["action_id"] == a and json.loads(json.dumps(j)) == j
    for bad in (-1, engine.ACTION_SPACE_SIZE, 1.5, True, "3"):
        with pytest.raises(engine.IllegalActionError):
            state.describe_action(bad)
        with pytest.raises(engine.IllegalActionError):
            state.action_json(bad)


# ---------------------------------------------------------------------------- render
@pytest.mark.parametrize("battle", sorted(BATTLES))
def test_render_shows_the_player_hero_health_and_own_hand(battle):
    for state in BATTLES[battle][::3]:
        for viewer in (1, 2):
            me, opp = state.player(viewer), state.player(3 - viewer)
            text = state.render(viewer)
            assert f"you are player {viewer}" in text
            you_line = next(line for line in text.splitlines() if line.startswith("You:"))
            opp_line = next(line for line in text.splitlines() if line.startswith("Opponent:"))
            assert f"hero {me.hp} hp" in you_line and f"hero {opp.hp} hp" in opp_line
            assert f"hand {len(opp.hand)}" in opp_line
            hand_line = next(line for line in text.splitlines() if line.strip().startswith("hand:"))
            for h, card_id in enumerate(me.hand):
                assert f"[{h}] {CARDS[card_id].name}" in hand_line
            if not me.hand:
                assert "(empty)" in hand_line
            if state.is_terminal:
                assert "battle over" in text and state.end_reason in text


@pytest.mark.parametrize("bad", [0, 3, -1, "1"])
def test_views_refuse_a_player_that_is_not_1_or_2(bad):
    state = BATTLES["random"][5]
    for view in (state.player_view, state.observation, state.player):
        with pytest.raises(ValueError, match="player must be 1 or 2"):
            view(bad)


@pytest.mark.parametrize("bad", [0, 3, -1, "1"])
def test_render_refuses_a_player_that_is_not_1_or_2(bad):
    with pytest.raises(ValueError, match="player must be 1 or 2"):
        BATTLES["random"][5].render(bad)
