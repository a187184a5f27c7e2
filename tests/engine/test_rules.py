"""One focused test per arena-1 rule (DESIGN section 3) and per engine-contract guarantee
about actions (section 4). Positions are built with :mod:`rules_helpers`; every test checks
the resulting state and the events ``State.apply`` returns."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import engine
from engine import END_TURN, IllegalActionError

try:  # tests/ may or may not become a package; support both layouts
    from tests.rules_helpers import (ENEMY_HERO, NONE, OWN_HERO, attack, attack_targets, board, card_id,
                                     creature, enemy, make_state, of_type, own, play, play_targets, side,
                                     snapshot, types)
except ImportError:  # pragma: no cover - depends on how pytest put tests/ on sys.path
    from rules_helpers import (ENEMY_HERO, NONE, OWN_HERO, attack, attack_targets, board, card_id,  # type: ignore
                               creature, enemy, make_state, of_type, own, play, play_targets, side, snapshot,
                               types)


def hero_damage(events: list[dict[str, Any]], player: int) -> list[int]:
    """Amounts of the damage events that hit ``player``'s hero."""
    return [e["amount"] for e in of_type(events, "damage") if e["target"] == {"kind": "hero", "player": player}]


def creature_target(player: int, slot: int, uid: int) -> dict[str, Any]:
    return {"kind": "creature", "player": player, "slot": slot, "uid": uid}


# ---------------------------------------------------------------------------- start of battle

@pytest.mark.parametrize("starter", [1, 2])
def test_starting_hands_are_3_and_4_plus_first_turn_draw(starter: int) -> None:
    s = engine.new_battle(11, starting_player=starter)
    other = 3 - starter
    assert s.turn == 1 and s.to_move == starter and s.starting_player == starter
    assert len(side(s, starter)["hand"]) == 4  # 3 + the draw of turn 1
    assert len(side(s, other)["hand"]) == 4
    assert len(side(s, starter)["deck"]) == 26 and len(side(s, other)["deck"]) == 26
    assert (side(s, starter)["max_mana"], side(s, starter)["mana"]) == (1, 1)
    assert (side(s, other)["max_mana"], side(s, other)["mana"]) == (0, 0)
    ev = s.last_events
    assert types(ev) == ["draw"] * 7 + ["turn_start", "draw"]
    assert [e["player"] for e in of_type(ev, "draw")] == [starter] * 3 + [other] * 4 + [starter]
    assert ev[7] == {"type": "turn_start", "player": starter, "turn": 1, "max_mana": 1}
    drawn = {p: [e["card_id"] for e in of_type(ev, "draw") if e["player"] == p] for p in (1, 2)}
    assert drawn[starter] == side(s, starter)["hand"]
    assert drawn[other] == side(s, other)["hand"]


# ---------------------------------------------------------------------------- mana and draws

def test_max_mana_grows_by_one_per_own_turn_up_to_10() -> None:
    s = engine.new_battle(3, starting_player=1)
    seen: dict[int, list[int]] = {1: [1], 2: []}
    for _ in range(23):
        ev = s.apply(END_TURN)
        start = of_type(ev, "turn_start")[0]
        p = side(s, start["player"])
        assert start["max_mana"] == p["max_mana"] == p["mana"]
        seen[start["player"]].append(start["max_mana"])
    expected = list(range(1, 11)) + [10, 10]
    assert seen == {1: expected, 2: expected}


def test_mana_refills_at_turn_start_and_stays_capped() -> None:
    s = make_state(p1={"max_mana": 10, "mana": 0}, p2={"max_mana": 4, "mana": 1}, active=1)
    ev = s.apply(END_TURN)
    assert {"type": "turn_start", "player": 2, "turn": 10, "max_mana": 5} in ev
    assert (side(s, 2)["max_mana"], side(s, 2)["mana"]) == (5, 5)
    ev = s.apply(END_TURN)
    assert {"type": "turn_start", "player": 1, "turn": 11, "max_mana": 10} in ev
    assert (side(s, 1)["max_mana"], side(s, 1)["mana"]) == (10, 10)


def test_playing_a_card_spends_its_cost() -> None:
    s = make_state(p1={"max_mana": 5, "mana": 5, "hand": ["Pike Runner"]})
    s.apply(play(0))
    assert side(s, 1)["mana"] == 5 - engine.CARDS[card_id("Pike Runner")].cost == 3
    assert side(s, 1)["max_mana"] == 5


def test_active_player_draws_the_top_card_each_turn() -> None:
    s = make_state(p2={"deck": ["Firebolt", "Mend"], "hand": ["Insight"]}, active=1)
    ev = s.apply(END_TURN)
    assert ev == [
        {"type": "end_turn", "player": 1, "turn": 9},
        {"type": "turn_start", "player": 2, "turn": 10, "max_mana": 10},
        {"type": "draw", "player": 2, "card_id": card_id("Firebolt")},
    ]
    assert side(s, 2)["hand"] == [card_id("Insight"), card_id("Firebolt")]
    assert side(s, 2)["deck"] == [card_id("Mend")]


def test_card_drawn_into_full_hand_is_burned() -> None:
    full = ["Mend"] * 8
    s = make_state(p2={"deck": ["Firebolt", "Insight"], "hand": full}, active=1)
    ev = s.apply(END_TURN)
    assert of_type(ev, "burn") == [{"type": "burn", "player": 2, "card_id": card_id("Firebolt")}]
    assert of_type(ev, "draw") == []
    assert side(s, 2)["hand"] == [card_id("Mend")] * 8
    assert side(s, 2)["deck"] == [card_id("Insight")]


def test_fatigue_is_1_2_3_cumulative_across_turns() -> None:
    s = make_state(p1={"deck": []}, p2={"deck": []}, active=2)
    fatigue_p1 = []
    for _ in range(5):  # p1, p2, p1, p2, p1 turn starts
        ev = s.apply(END_TURN)
        fatigue_p1 += [(e["damage"], e["hero_health"]) for e in of_type(ev, "fatigue") if e["player"] == 1]
        assert len(of_type(ev, "fatigue")) == 1
    assert fatigue_p1 == [(1, 29), (2, 27), (3, 24)]
    assert side(s, 1)["fatigue"] == 3 and side(s, 1)["hero_health"] == 24
    assert side(s, 2)["fatigue"] == 2 and side(s, 2)["hero_health"] == 27


def test_fatigue_can_kill_at_turn_start() -> None:
    s = make_state(p1={"deck": [], "fatigue": 2, "hero_health": 3}, active=2)
    ev = s.apply(END_TURN)
    assert of_type(ev, "fatigue") == [{"type": "fatigue", "player": 1, "damage": 3, "hero_health": 0}]
    assert ev[-1] == {"type": "game_over", "winner": 2, "reason": "hero_defeated"}
    assert s.is_terminal and s.winner == 2 and s.end_reason == "hero_defeated"
    assert s.to_move is None and s.legal_actions() == []


# ---------------------------------------------------------------------------- board

def test_creature_is_summoned_into_the_first_empty_slot() -> None:
    s = make_state(p1={"board": ["Ember Imp", None, "Ember Imp"], "hand": ["Pike Runner"], "max_mana": 5})
    ev = s.apply(play(0))
    assert ev == [
        {"type": "play", "player": 1, "hand_slot": 0, "card_id": card_id("Pike Runner"), "target": NONE},
        {"type": "summon", "player": 1, "slot": 1, "uid": 3, "card_id": card_id("Pike Runner")},
    ]
    slot1 = board(s, 1)[1]
    assert slot1 is not None
    assert (slot1["attack"], slot1["health"], slot1["max_health"], slot1["keywords"]) == (3, 2, 2, [])
    assert slot1["sick"] is True and slot1["attacked"] is False
    assert side(s, 1)["hand"] == [] and side(s, 1)["mana"] == 3


def test_creature_cannot_be_played_on_a_full_board() -> None:
    s = make_state(p1={"board": ["Ember Imp"] * 6, "hand": ["Pike Runner", "Firebolt"]})
    assert play_targets(s, 0) == set()
    assert play(1, ENEMY_HERO) in s.legal_actions()  # spells are still fine
    before = snapshot(s)
    with pytest.raises(IllegalActionError, match="the board is full"):
        s.apply(play(0))
    assert snapshot(s) == before


# ---------------------------------------------------------------------------- attacking

def test_summoning_sickness_until_owners_next_turn() -> None:
    s = make_state(p1={"hand": ["Pike Runner"]})
    s.apply(play(0))
    assert attack_targets(s, 0) == set()
    with pytest.raises(IllegalActionError, match="was played this turn and has no charge"):
        s.apply(attack(0))
    s.apply(END_TURN)
    s.apply(END_TURN)
    assert board(s, 1)[0]["sick"] is False
    assert attack_targets(s, 0) == {None}
    ev = s.apply(attack(0))
    assert hero_damage(ev, 2) == [3]


def test_charge_attacks_the_turn_it_is_played() -> None:
    s = make_state(p1={"hand": ["Swift Scout"]})
    s.apply(play(0))
    assert board(s, 1)[0]["sick"] is True
    assert attack_targets(s, 0) == {None}
    ev = s.apply(attack(0))
    assert ev == [
        {"type": "attack", "player": 1, "slot": 0, "uid": 1, "target": {"kind": "hero", "player": 2}},
        {"type": "damage", "target": {"kind": "hero", "player": 2}, "amount": 1, "hero_health": 29},
    ]
    assert side(s, 2)["hero_health"] == 29


def test_each_creature_attacks_at_most_once_per_turn() -> None:
    s = make_state(p1={"board": ["Stormcaller", "Ember Imp"]})
    s.apply(attack(0))
    assert board(s, 1)[0]["attacked"] is True
    assert attack_targets(s, 0) == set()
    assert attack_targets(s, 1) == {None}  # the other creature is unaffected
    with pytest.raises(IllegalActionError, match="has already attacked this turn"):
        s.apply(attack(0))
    assert side(s, 2)["hero_health"] == 27
    s.apply(END_TURN)
    s.apply(END_TURN)
    assert board(s, 1)[0]["attacked"] is False
    assert attack_targets(s, 0) == {None}


def test_zero_attack_creature_cannot_attack() -> None:
    s = make_state(p1={"board": ["Stone Wall"]}, p2={"board": ["Ember Imp"]})
    assert attack_targets(s, 0) == set()
    with pytest.raises(IllegalActionError, match="has 0 attack"):
        s.apply(attack(0))


# ---------------------------------------------------------------------------- keywords alone

def test_guard_forces_attacks_onto_guards() -> None:
    s = make_state(p1={"board": ["Stormcaller"]}, p2={"board": ["Ember Imp", "Shieldling", None, "Stone Wall"]})
    assert attack_targets(s, 0) == {1, 3}
    for target in (None, 0):
        with pytest.raises(IllegalActionError, match="attacks must target a guard"):
            s.apply(attack(0, target))
    # guard restricts attacks only: spells may still hit the hero and non-guards
    s2 = make_state(p1={"hand": ["Firebolt"]}, p2={"board": ["Ember Imp", "Shieldling"]})
    assert play_targets(s2, 0) == {OWN_HERO, ENEMY_HERO, enemy(0), enemy(1)}


def test_hero_is_attackable_again_after_the_guard_dies() -> None:
    s = make_state(p1={"board": ["Stormcaller", "Pike Runner"]}, p2={"board": ["Ember Imp", "Shieldling"]})
    assert attack_targets(s, 1) == {1}
    ev = s.apply(attack(0, 1))
    assert {"type": "death", "player": 2, "slot": 1, "uid": 4, "card_id": card_id("Shieldling")} in ev
    assert board(s, 2)[1] is None
    assert attack_targets(s, 1) == {None, 0}
    assert board(s, 1)[0]["health"] == 2  # Shieldling struck back for 1


def test_ward_absorbs_first_damage_then_is_removed() -> None:
    s = make_state(p1={"board": ["Stormcaller", "Pike Runner"]}, p2={"board": ["Bubble Knight"]})
    ev = s.apply(attack(0, 0))
    assert ev[1] == {"type": "ward_broken", "target": creature_target(2, 0, 3), "absorbed": 3}
    assert of_type(ev, "death") == []
    knight = board(s, 2)[0]
    assert (knight["health"], knight["keywords"]) == (1, [])
    assert board(s, 1)[0]["health"] == 1  # combat still simultaneous: the knight dealt 2
    ev = s.apply(attack(1, 0))  # second instance lands
    assert of_type(ev, "ward_broken") == []
    assert board(s, 2)[0] is None


def test_ward_on_the_attacker_absorbs_the_counterattack() -> None:
    s = make_state(p1={"board": ["Bubble Knight"]}, p2={"board": ["Stormcaller"]})
    ev = s.apply(attack(0, 0))
    assert of_type(ev, "ward_broken") == [{"type": "ward_broken", "target": creature_target(1, 0, 1), "absorbed": 3}]
    assert board(s, 1)[0]["health"] == 1 and board(s, 1)[0]["keywords"] == []
    assert board(s, 2)[0]["health"] == 1


def test_zero_attack_defender_does_not_break_ward() -> None:
    s = make_state(p1={"board": ["Spellbound Golem"]}, p2={"board": ["Stone Wall"]})
    ev = s.apply(attack(0, 0))
    assert of_type(ev, "ward_broken") == []
    assert len(of_type(ev, "damage")) == 1
    assert board(s, 1)[0]["keywords"] == ["ward"] and board(s, 1)[0]["health"] == 4
    assert board(s, 2)[0]["health"] == 3


def test_ward_absorbs_spell_damage() -> None:
    s = make_state(p1={"hand": ["Firebolt", "Firebolt"]}, p2={"board": ["Bubble Knight"]})
    ev = s.apply(play(0, enemy(0)))
    assert types(ev) == ["play", "ward_broken"]
    assert ev[1]["absorbed"] == 2
    assert board(s, 2)[0]["health"] == 1 and board(s, 2)[0]["keywords"] == []
    ev = s.apply(play(0, enemy(0)))
    assert types(ev) == ["play", "damage", "death"]
    assert board(s, 2)[0] is None


@pytest.mark.parametrize("target_slot", [None, 0], ids=["hero", "creature"])
def test_drain_heals_own_hero_by_damage_dealt(target_slot: int | None) -> None:
    enemy_board = ["Tide Serpent"] if target_slot == 0 else []
    s = make_state(p1={"hero_health": 20, "board": ["Blood Moth"]}, p2={"board": enemy_board})
    ev = s.apply(attack(0, target_slot))
    heals = of_type(ev, "heal")
    assert heals == [{"type": "heal", "target": {"kind": "hero", "player": 1}, "amount": 2, "hero_health": 22}]
    assert side(s, 1)["hero_health"] == 22


def test_drain_heal_is_capped_at_30() -> None:
    s = make_state(p1={"hero_health": 29, "board": ["Vampire Bat"]})
    ev = s.apply(attack(0))
    assert of_type(ev, "heal")[0]["amount"] == 1
    assert side(s, 1)["hero_health"] == 30


def test_drain_does_not_heal_when_ward_absorbs_the_hit() -> None:
    s = make_state(p1={"hero_health": 20, "board": ["Blood Moth"]}, p2={"board": ["Bubble Knight"]})
    ev = s.apply(attack(0, 0))
    assert of_type(ev, "ward_broken") and of_type(ev, "heal") == []
    assert side(s, 1)["hero_health"] == 20


def test_lethal_destroys_any_creature_it_damages() -> None:
    s = make_state(p1={"board": ["Venom Sprite"]}, p2={"board": ["Bone Colossus"]})
    ev = s.apply(attack(0, 0))
    assert {"type": "damage", "target": creature_target(2, 0, 2), "amount": 1, "health": 0, "lethal": True} in ev
    assert {e["uid"] for e in of_type(ev, "death")} == {1, 2}  # the sprite also took 4
    assert board(s, 2)[0] is None and board(s, 1)[0] is None


def test_lethal_defender_destroys_the_attacker() -> None:
    s = make_state(p1={"board": ["Tide Serpent"]}, p2={"board": ["Venom Sprite"]})
    ev = s.apply(attack(0, 0))
    assert {"type": "damage", "target": creature_target(1, 0, 1), "amount": 1, "health": 0, "lethal": True} in ev
    assert board(s, 1)[0] is None and board(s, 2)[0] is None


def test_lethal_does_nothing_when_absorbed_by_ward() -> None:
    s = make_state(p1={"board": ["Venom Sprite"]}, p2={"board": ["Spellbound Golem"]})
    ev = s.apply(attack(0, 0))
    assert of_type(ev, "ward_broken")[0]["target"]["uid"] == 2
    golem = board(s, 2)[0]
    assert golem is not None and (golem["health"], golem["keywords"]) == (4, [])
    assert [e["uid"] for e in of_type(ev, "death")] == [1]


@pytest.mark.parametrize(("defender", "excess"), [
    ("Ember Imp", 3),  # 4 attack into 1 health
    (creature("Stormcaller", health=4), 0),  # exactly lethal: nothing left over
    ("Stone Wall", 0),  # not even lethal
])
def test_breakthrough_sends_excess_damage_to_the_hero(defender: Any, excess: int) -> None:
    s = make_state(p1={"board": ["Cinder Hound"]}, p2={"board": [defender]})
    ev = s.apply(attack(0, 0))
    assert hero_damage(ev, 2) == ([excess] if excess else [])
    assert side(s, 2)["hero_health"] == 30 - excess


def test_breakthrough_sends_nothing_when_warded() -> None:
    s = make_state(p1={"board": ["Cinder Hound"]}, p2={"board": ["Bubble Knight"]})
    ev = s.apply(attack(0, 0))
    assert hero_damage(ev, 2) == []
    assert side(s, 2)["hero_health"] == 30


# ---------------------------------------------------------------------------- keyword combinations

def test_ward_then_lethal_first_hit_breaks_ward_second_kills() -> None:
    s = make_state(p1={"board": ["Venom Sprite", "Venom Sprite"]}, p2={"board": ["Spellbound Golem"]})
    ev = s.apply(attack(0, 0))
    assert types(ev)[:2] == ["attack", "ward_broken"]
    assert board(s, 2)[0]["health"] == 4
    ev = s.apply(attack(1, 0))
    assert {"type": "damage", "target": creature_target(2, 0, 3), "amount": 1, "health": 0, "lethal": True} in ev
    assert board(s, 2)[0] is None


@pytest.mark.parametrize(("defender", "excess"), [("Ember Imp", 4), ("Bone Colossus", 0)])
def test_lethal_breakthrough_kills_and_tramples_only_real_excess(defender: str, excess: int) -> None:
    lancer = creature("Grave Lancer", keywords=["lethal", "breakthrough"])  # 5/3
    s = make_state(p1={"board": [lancer]}, p2={"board": [defender]})
    ev = s.apply(attack(0, 0))
    assert board(s, 2)[0] is None
    assert hero_damage(ev, 2) == ([excess] if excess else [])
    assert side(s, 2)["hero_health"] == 30 - excess


def test_drain_breakthrough_heals_the_full_attack() -> None:
    s = make_state(p1={"hero_health": 20, "board": ["Primeval Hydra"]}, p2={"board": ["Ember Imp"]})
    ev = s.apply(attack(0, 0))
    assert hero_damage(ev, 2) == [6]
    assert of_type(ev, "heal")[0]["amount"] == 7
    assert side(s, 1)["hero_health"] == 27 and side(s, 2)["hero_health"] == 24
    assert board(s, 1)[0]["health"] == 7


def test_guard_with_ward_keeps_guarding_after_ward_breaks() -> None:
    s = make_state(p1={"board": ["Stormcaller", "Pike Runner", "Ember Imp"]},
                   p2={"board": ["Warded Sentinel", "Ember Imp"]})
    assert attack_targets(s, 0) == {0}
    ev = s.apply(attack(0, 0))
    assert of_type(ev, "ward_broken")
    assert board(s, 2)[0]["keywords"] == ["guard"] and board(s, 2)[0]["health"] == 3
    assert attack_targets(s, 1) == {0}
    s.apply(attack(1, 0))
    assert board(s, 2)[0] is None
    assert attack_targets(s, 2) == {None, 1}


def test_combat_damage_is_simultaneous_both_can_die() -> None:
    s = make_state(p1={"board": ["Pike Runner"]}, p2={"board": ["Stormcaller"]})
    ev = s.apply(attack(0, 0))
    assert sorted((e["player"], e["card_id"]) for e in of_type(ev, "death")) == [
        (1, card_id("Pike Runner")), (2, card_id("Stormcaller"))]
    assert board(s, 1)[0] is None and board(s, 2)[0] is None


# ---------------------------------------------------------------------------- spells

def test_damage_spell_on_creature() -> None:
    s = make_state(p1={"hand": ["Frost Spike"]}, p2={"board": ["Ember Imp"]})
    ev = s.apply(play(0, enemy(0)))
    assert ev[1:] == [
        {"type": "damage", "target": creature_target(2, 0, 1), "amount": 3, "health": -2, "lethal": False},
        {"type": "death", "player": 2, "slot": 0, "uid": 1, "card_id": card_id("Ember Imp")},
    ]
    assert board(s, 2)[0] is None and side(s, 1)["mana"] == 8


def test_any_creature_damage_can_hit_own_creature() -> None:
    s = make_state(p1={"hand": ["Lightning Lance"], "board": ["Tide Serpent"]})
    s.apply(play(0, own(0)))
    assert board(s, 1)[0]["health"] == 1


@pytest.mark.parametrize(("spell", "target", "player", "hp"), [
    ("Searing Bolt", ENEMY_HERO, 2, 27),
    ("Firebolt", OWN_HERO, 1, 28),
])
def test_damage_spell_on_hero(spell: str, target: int, player: int, hp: int) -> None:
    s = make_state(p1={"hand": [spell]})
    ev = s.apply(play(0, target))
    assert ev[1] == {"type": "damage", "target": {"kind": "hero", "player": player}, "amount": 30 - hp,
                     "hero_health": hp}
    assert side(s, player)["hero_health"] == hp


def test_heal_creature_capped_at_max_health() -> None:
    s = make_state(p1={"hand": ["Field Medic"], "board": [creature("Stormcaller", health=1)]})
    ev = s.apply(play(0, own(0)))
    assert ev[1] == {"type": "heal", "target": creature_target(1, 0, 1), "amount": 2, "health": 3}
    assert board(s, 1)[0]["health"] == 3 and board(s, 1)[0]["max_health"] == 3


@pytest.mark.parametrize(("spell", "target", "player", "start", "end"), [
    ("Mend", OWN_HERO, 1, 28, 30),  # capped at 30
    ("Rejuvenate", ENEMY_HERO, 2, 10, 18),
])
def test_heal_hero_capped_at_30(spell: str, target: int, player: int, start: int, end: int) -> None:
    s = make_state(p1={"hand": [spell], "hero_health": start if player == 1 else 30},
                   p2={"hero_health": start if player == 2 else 30})
    ev = s.apply(play(0, target))
    assert ev[1] == {"type": "heal", "target": {"kind": "hero", "player": player}, "amount": end - start,
                     "hero_health": end}
    assert side(s, player)["hero_health"] == end


def test_buff_raises_attack_health_and_max_health() -> None:
    s = make_state(p1={"hand": ["Giant Growth"], "board": [creature("Pike Runner", health=1)]})
    ev = s.apply(play(0, own(0)))
    assert ev[1] == {"type": "buff", "target": creature_target(1, 0, 1), "attack": 2, "health": 2}
    c = board(s, 1)[0]
    assert (c["attack"], c["health"], c["max_health"]) == (5, 3, 4)


def test_negative_attack_buff_is_floored_at_zero() -> None:
    s = make_state(p1={"hand": ["Cripple", "Cripple"]}, p2={"board": ["Ember Imp", "Tide Serpent"]})
    ev = s.apply(play(0, enemy(0)))
    assert ev[1]["type"] == "buff" and ev[1]["attack"] == -3
    assert board(s, 2)[0]["attack"] == 0 and board(s, 2)[0]["health"] == 1
    s.apply(play(0, enemy(1)))
    assert board(s, 2)[1]["attack"] == 2
    s.apply(END_TURN)
    assert attack_targets(s, 0) == set()  # a 0-attack creature cannot attack
    assert attack_targets(s, 1) == {None}


def test_haste_lets_a_just_played_creature_attack() -> None:
    s = make_state(p1={"hand": ["Pike Runner", "Haste"]})
    s.apply(play(0))
    assert attack_targets(s, 0) == set()
    ev = s.apply(play(0, own(0)))
    assert ev[1] == {"type": "keyword_granted", "target": creature_target(1, 0, 1), "keyword": "charge"}
    assert attack_targets(s, 0) == {None}
    s.apply(attack(0))
    assert side(s, 2)["hero_health"] == 27


@pytest.mark.parametrize(("spell", "target", "player", "keyword"), [
    ("Stone Skin", own(0), 1, "guard"),
    ("Arcane Shield", enemy(0), 2, "ward"),
    ("Toxic Edge", own(0), 1, "lethal"),
    ("Siphon Rune", own(0), 1, "drain"),
    ("Trample Totem", own(0), 1, "breakthrough"),
])
def test_grant_keyword(spell: str, target: int, player: int, keyword: str) -> None:
    s = make_state(p1={"hand": [spell], "board": ["Tide Serpent"]}, p2={"board": ["Tide Serpent"]})
    ev = s.apply(play(0, target))
    assert ev[1]["type"] == "keyword_granted" and ev[1]["keyword"] == keyword
    assert board(s, player)[0]["keywords"] == [keyword]


def test_break_ranks_removes_guard_and_frees_the_hero() -> None:
    s = make_state(p1={"hand": ["Break Ranks"], "board": ["Stormcaller"]}, p2={"board": ["Shieldling"]})
    assert attack_targets(s, 0) == {0}
    ev = s.apply(play(0, enemy(0)))
    assert ev[1] == {"type": "keyword_removed", "target": creature_target(2, 0, 2), "keyword": "guard"}
    assert board(s, 2)[0]["keywords"] == []
    assert attack_targets(s, 0) == {None, 0}


def test_shatter_ward_removes_ward() -> None:
    s = make_state(p1={"hand": ["Shatter Ward"]}, p2={"board": ["Citadel Titan"]})
    s.apply(play(0, enemy(0)))
    assert board(s, 2)[0]["keywords"] == ["guard"]


def test_draw_spell_draws_from_the_top() -> None:
    s = make_state(p1={"hand": ["Insight"], "deck": ["Firebolt", "Mend", "Meteor"]})
    ev = s.apply(play(0))
    assert ev[1:] == [{"type": "draw", "player": 1, "card_id": card_id("Firebolt")},
                      {"type": "draw", "player": 1, "card_id": card_id("Mend")}]
    assert side(s, 1)["hand"] == [card_id("Firebolt"), card_id("Mend")]
    assert side(s, 1)["deck"] == [card_id("Meteor")]


def test_draw_spell_burns_into_full_hand() -> None:
    s = make_state(p1={"hand": ["Insight"] + ["Mend"] * 7, "deck": ["Firebolt", "Meteor"]})
    ev = s.apply(play(0))
    assert types(ev) == ["play", "draw", "burn"]
    assert ev[2]["card_id"] == card_id("Meteor")
    assert len(side(s, 1)["hand"]) == 8 and side(s, 1)["deck"] == []


def test_draw_spell_from_short_deck_takes_fatigue() -> None:
    s = make_state(p1={"hand": ["Insight"], "deck": ["Firebolt"], "fatigue": 1, "hero_health": 20})
    ev = s.apply(play(0))
    assert types(ev) == ["play", "draw", "fatigue"]
    assert ev[2] == {"type": "fatigue", "player": 1, "damage": 2, "hero_health": 18}
    assert side(s, 1)["fatigue"] == 2 and not s.is_terminal


def test_draw_spell_fatigue_can_kill_the_caster() -> None:
    s = make_state(p1={"hand": ["Deep Study"], "deck": [], "hero_health": 5})
    ev = s.apply(play(0))
    assert [e["damage"] for e in of_type(ev, "fatigue")] == [1, 2, 3]
    assert ev[-1] == {"type": "game_over", "winner": 2, "reason": "hero_defeated"}
    assert s.winner == 2 and s.legal_actions() == []


def test_area_damage_enemy_creatures() -> None:
    s = make_state(p1={"hand": ["Flame Wave"], "board": ["Tide Serpent"]},
                   p2={"board": ["Ember Imp", "Bubble Knight", "Tide Serpent"]})
    ev = s.apply(play(0))
    assert [e["player"] for e in of_type(ev, "death")] == [2]
    assert board(s, 2)[0] is None
    assert board(s, 2)[1]["health"] == 1 and board(s, 2)[1]["keywords"] == []  # ward absorbed it
    assert board(s, 2)[2]["health"] == 3
    assert board(s, 1)[0]["health"] == 5
    assert hero_damage(ev, 1) == hero_damage(ev, 2) == []


def test_area_damage_all_creatures() -> None:
    s = make_state(p1={"hand": ["Earthquake"], "board": ["Pike Runner", "Tide Serpent"]},
                   p2={"board": ["Stormcaller", "Tide Serpent"]})
    ev = s.apply(play(0))
    assert sorted((e["player"], e["slot"]) for e in of_type(ev, "death")) == [(1, 0), (2, 0)]
    assert board(s, 1)[1]["health"] == 2 and board(s, 2)[1]["health"] == 2
    assert side(s, 1)["hero_health"] == side(s, 2)["hero_health"] == 30


def test_area_damage_all_characters() -> None:
    s = make_state(p1={"hand": ["Cataclysm"], "board": ["Tide Serpent"]}, p2={"board": ["Stormcaller"]})
    ev = s.apply(play(0))
    assert hero_damage(ev, 1) == [4] and hero_damage(ev, 2) == [4]
    assert side(s, 1)["hero_health"] == side(s, 2)["hero_health"] == 26
    assert board(s, 1)[0]["health"] == 1 and board(s, 2)[0] is None
    assert not s.is_terminal


# ---------------------------------------------------------------------------- target rules

_P1_BOARD = ["Tide Serpent", None, "Stormcaller"]
_P2_BOARD = [None, "Shieldling", None, None, "Ember Imp"]  # a guard does not restrict spell targets
_OWN = {own(0), own(2)}
_ENEMY = {enemy(1), enemy(4)}


@pytest.mark.parametrize(("spell", "rule", "expected"), [
    ("Insight", "none", {NONE}),
    ("Flame Wave", "none", {NONE}),
    ("Giant Growth", "friendly_creature", _OWN),
    ("Frost Spike", "enemy_creature", _ENEMY),
    ("Lightning Lance", "any_creature", _OWN | _ENEMY),
    ("Searing Bolt", "enemy_hero", {ENEMY_HERO}),
    ("Firebolt", "any_character", {OWN_HERO, ENEMY_HERO} | _OWN | _ENEMY),
    ("Mend", "any_character", {OWN_HERO, ENEMY_HERO} | _OWN | _ENEMY),
])
def test_spell_target_rule_gives_exactly_the_legal_targets(spell: str, rule: str, expected: set[int]) -> None:
    assert engine.CARDS[card_id(spell)].target == rule
    s = make_state(p1={"hand": [spell], "board": _P1_BOARD}, p2={"board": _P2_BOARD})
    assert play_targets(s, 0) == expected
    assert list(np.flatnonzero(s.legal_action_mask())) == s.legal_actions()
    before = snapshot(s)
    for t in set(range(15)) - expected:
        with pytest.raises(IllegalActionError, match="must target"):
            s.apply(play(0, t))
    assert snapshot(s) == before


@pytest.mark.parametrize("spell", ["Giant Growth", "Frost Spike", "Lightning Lance"])
def test_creature_targeted_spell_unplayable_without_targets(spell: str) -> None:
    s = make_state(p1={"hand": [spell]})
    assert play_targets(s, 0) == set()


def test_creature_card_only_takes_target_none() -> None:
    s = make_state(p1={"hand": ["Pike Runner"]}, p2={"board": ["Ember Imp"]})
    assert play_targets(s, 0) == {NONE}
    with pytest.raises(IllegalActionError, match=r"target 0 \(none\)"):
        s.apply(play(0, enemy(0)))


# ---------------------------------------------------------------------------- end of battle

def test_turn_limit_after_30_turns_each_is_a_draw() -> None:
    s = make_state(active=2, turn=60)
    ev = s.apply(END_TURN)
    assert ev == [{"type": "end_turn", "player": 2, "turn": 60},
                  {"type": "game_over", "winner": 0, "reason": "turn_limit"}]
    assert s.is_terminal and s.winner == 0 and s.end_reason == "turn_limit"
    assert s.legal_actions() == [] and s.to_move is None


def test_turn_59_does_not_hit_the_limit() -> None:
    s = make_state(active=1, turn=59)
    ev = s.apply(END_TURN)
    assert not s.is_terminal and s.turn == 60 and s.to_move == 2 and s.player_turn == 30
    assert of_type(ev, "game_over") == []


def test_end_turn_only_battle_reaches_turn_limit_with_fatigue() -> None:
    """Whole battle: 30 turns each, decks run out (33/34 draw attempts for 30 cards)."""
    s = engine.new_battle(5, starting_player=1)
    events = list(s.last_events)
    for _ in range(59):
        events += s.apply(END_TURN)
    assert not s.is_terminal and s.turn == 60
    events += s.apply(END_TURN)
    assert (s.winner, s.end_reason) == (0, "turn_limit")
    assert side(s, 1)["fatigue"] == 3 and side(s, 1)["hero_health"] == 30 - (1 + 2 + 3)
    assert side(s, 2)["fatigue"] == 4 and side(s, 2)["hero_health"] == 30 - (1 + 2 + 3 + 4)
    for p in (1, 2):
        assert len([e for e in of_type(events, "burn") if e["player"] == p]) == 30 - 8
        assert len(side(s, p)["hand"]) == 8


@pytest.mark.parametrize(("spell", "target"), [(None, None), ("Searing Bolt", ENEMY_HERO)], ids=["attack", "spell"])
def test_hero_at_zero_loses(spell: str | None, target: int | None) -> None:
    s = make_state(p1={"board": ["Stormcaller"], "hand": [spell] if spell else []}, p2={"hero_health": 3})
    ev = s.apply(attack(0) if spell is None else play(0, target))
    assert side(s, 2)["hero_health"] == 0
    assert ev[-1] == {"type": "game_over", "winner": 1, "reason": "hero_defeated"}
    assert (s.winner, s.end_reason, s.to_move) == (1, "hero_defeated", None)


@pytest.mark.parametrize(("hp1", "hp2", "winner", "reason"), [
    (4, 3, 0, "simultaneous_death"),
    (30, 4, 1, "hero_defeated"),
    (2, 30, 2, "hero_defeated"),
])
def test_cataclysm_outcomes(hp1: int, hp2: int, winner: int, reason: str) -> None:
    s = make_state(p1={"hand": ["Cataclysm"], "hero_health": hp1}, p2={"hero_health": hp2})
    ev = s.apply(play(0))
    assert of_type(ev, "game_over") == [{"type": "game_over", "winner": winner, "reason": reason}]
    assert (s.winner, s.end_reason) == (winner, reason)


def test_no_legal_actions_once_terminal() -> None:
    s = make_state(p1={"board": ["Stormcaller", "Ember Imp"], "hand": ["Firebolt"]}, p2={"hero_health": 3})
    s.apply(attack(0))
    assert s.is_terminal
    assert s.legal_actions() == []
    assert not s.legal_action_mask().any()
    before = snapshot(s)
    for action in (END_TURN, attack(1), play(0, ENEMY_HERO)):
        with pytest.raises(IllegalActionError, match="the battle is over"):
            s.apply(action)
    assert snapshot(s) == before


# ---------------------------------------------------------------------------- refused actions

_ILLEGAL_CASES = [
    ("costs", dict(p1={"hand": ["Meteor"], "max_mana": 2}, p2={"board": ["Ember Imp"]}), play(0, enemy(0)),
     "Meteor costs 5 mana but only 2 is available"),
    ("empty hand slot", dict(p1={"hand": ["Firebolt"]}), play(3, ENEMY_HERO), "hand slot 3 is empty"),
    ("guard", dict(p1={"board": ["Stormcaller"]}, p2={"board": ["Ember Imp", "Shieldling"]}), attack(0),
     "attacks must target a guard"),
    ("already attacked", dict(p1={"board": [creature("Stormcaller", attacked=True)]}), attack(0),
     "Stormcaller has already attacked this turn"),
    ("sick", dict(p1={"board": [creature("Stormcaller", sick=True)]}), attack(0),
     "Stormcaller was played this turn and has no charge"),
    ("zero attack", dict(p1={"board": ["Stone Wall"]}), attack(0), "Stone Wall has 0 attack"),
    ("board full", dict(p1={"board": ["Ember Imp"] * 6, "hand": ["Ember Imp"]}), play(0), "the board is full"),
    ("own slot empty", dict(p1={"board": ["Stormcaller"]}), attack(3), "own board slot 3 is empty"),
    ("enemy slot empty", dict(p1={"board": ["Stormcaller"]}, p2={"board": ["Ember Imp"]}), attack(0, 4),
     "enemy board slot 4 is empty"),
    ("spell target", dict(p1={"hand": ["Frost Spike"]}, p2={"board": ["Ember Imp"]}), play(0, ENEMY_HERO),
     "Frost Spike must target: enemy creature"),
]


@pytest.mark.parametrize(("setup", "action", "reason"), [c[1:] for c in _ILLEGAL_CASES],
                         ids=[c[0] for c in _ILLEGAL_CASES])
def test_illegal_action_is_explained_and_changes_nothing(setup: dict, action: int, reason: str) -> None:
    s = make_state(**setup)
    legal = s.legal_actions()
    assert action not in legal
    before = snapshot(s)
    with pytest.raises(IllegalActionError) as err:
        s.apply(action)
    message = str(err.value)
    assert f"action {action} (" in message and "is not legal" in message
    assert reason in message
    assert f"Legal actions now: {legal}" in message
    assert snapshot(s) == before
    assert s.legal_actions() == legal
    s.apply(legal[-1])  # the state is still usable


@pytest.mark.parametrize("bad", [1.0, 0.0, 2.5, True, False, "0", None, [0], np.float64(0)],
                         ids=lambda v: f"{type(v).__name__}:{v!r}")
def test_non_integer_action_ids_are_refused(bad: Any) -> None:
    s = make_state(p1={"board": ["Stormcaller"]})
    before = snapshot(s)
    with pytest.raises(IllegalActionError, match=r"action id must be an integer 0\.\.162, got "):
        s.apply(bad)
    assert snapshot(s) == before


@pytest.mark.parametrize("bad", [163, -1, 10**9, np.int64(200)])
def test_out_of_range_action_ids_are_refused(bad: Any) -> None:
    s = make_state()
    before = snapshot(s)
    with pytest.raises(IllegalActionError, match=rf"action id {int(bad)} is outside the action space 0\.\.162"):
        s.apply(bad)
    assert snapshot(s) == before


def test_numpy_integer_action_id_is_accepted() -> None:
    s = make_state()
    ev = s.apply(np.int64(END_TURN))
    assert ev[0] == {"type": "end_turn", "player": 1, "turn": 9}
    assert s.to_move == 2
