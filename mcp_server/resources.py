"""What an agent reads once instead of learning it by losing (DESIGN 8.1): the MCP resources
``extrarlhf://rules`` (the rules of arena-1 for player 1), ``extrarlhf://cards`` (the card pool)
and ``extrarlhf://data-format`` (what lands on disk), and the prompts ``play_battle`` and
``run_campaign`` that clients offer as slash commands.

The pages are generated, so they cannot drift from the engine: every number comes from the
engine's constants, the keyword and card lists from ``engine.cards``, and each keyword's
example is a small battle played by the engine itself when the page is first read (the rule
sentence beside it is checked against those battles by tests/mcp_server/test_mcp_resources.py).
The data-format page is the skills' reference ``skills/extra-rlhf/references/data-format.md``,
served as it is (one text for both). Nothing here adds to ``tools/list``; the engine is imported
only when a page is read, and each page is built once per process.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Annotated, Any

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError
from mcp.server.mcpserver.prompts.base import Prompt
from mcp.server.mcpserver.resources.types import FunctionResource
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS
from pydantic import Field

from . import guards

RULES_URI = "extrarlhf://rules"
CARDS_URI = "extrarlhf://cards"
DATA_FORMAT_URI = "extrarlhf://data-format"
MARKDOWN = "text/markdown"
DATA_FORMAT_PAGE = Path(__file__).resolve().parents[1] / "skills" / "extra-rlhf" / "references" / "data-format.md"

# The rule of each keyword, as engine/state.py applies it (State._attack, _damage_creature,
# _compute_legal). A keyword the engine gains without a sentence here fails the tests.
KEYWORD_RULES = {
    "guard": "while the enemy has a guard creature, every attack must target a guard (one played this "
             "turn counts too); the hero and the other creatures cannot be attacked. Spells ignore guard.",
    "charge": "can attack on the turn it is played; without charge a creature waits until your next turn "
              "(summoning sickness).",
    "ward": "absorbs the next damage instance whole, whatever its size (an attack, a strike-back, a spell, "
            "its share of an area spell), and is then gone; lethal, breakthrough and drain get nothing from "
            "the absorbed hit. Heroes never have ward.",
    "drain": "when this creature attacks and its damage lands, your hero heals by its full attack (not capped "
             "by the defender's health, even if the drainer dies in the exchange; never above the hero's "
             "maximum). Nothing when a ward absorbs the hit, and nothing when it is attacked or strikes back.",
    "lethal": "any combat damage it deals to a creature destroys that creature, when attacking and when "
              "striking back (not through a ward). Against a hero it is ordinary damage; spells are never "
              "lethal.",
    "breakthrough": "when it attacks a creature, the damage beyond that creature's health goes to the enemy "
                    "hero (nothing through a ward, nothing when it strikes back).",
}

# What each spell effect does (State._cast). An effect without a sentence fails the tests.
EFFECT_RULES = {
    "damage": "deals its amount to the target (a creature's ward absorbs it).",
    "heal": "restores health up to the target's maximum (a hero's maximum is its starting health).",
    "buff": "changes attack and health (attack never below 0; a health buff raises the maximum too).",
    "grant_keyword": "gives the target the keyword.",
    "remove_keyword": "takes the keyword away.",
    "draw": "you draw that many cards (fatigue and a full hand apply as for the turn's draw).",
    "area_damage": "one damage instance to each creature in scope (each ward absorbs its own); "
                   "all_characters also hits both heroes.",
}


# ---------------------------------------------------------------------------- small battles
def _card_by_name(name: str) -> Any:
    from engine import CARDS

    return next(card for card in CARDS.values() if card.name == name)


def _label(name: str) -> str:
    card = _card_by_name(name)
    return f"{card.name} ({card.text()})"


def _board(names: list[str], first_uid: int) -> list[dict[str, Any] | None]:
    from engine.actions import BOARD_SLOTS

    board: list[dict[str, Any] | None] = [None] * BOARD_SLOTS
    for slot, name in enumerate(names):
        card = _card_by_name(name)
        board[slot] = {"uid": first_uid + slot, "card_id": card.id, "attack": card.attack, "health": card.health,
                       "max_health": card.health, "keywords": _keywords(name), "sick": False,
                       "attacked": False}
    return board


def _position(mine: list[str], theirs: list[str], *, hand: tuple[str, ...] = (), mana: int = 0, my_hp: int = 20,
              their_hp: int = 20) -> Any:
    """A state with player 1 to move: these creatures ready on each side, this hand and mana."""
    from engine import State, new_battle

    data = new_battle(0, starting_player=1).to_dict()
    me, them = data["players"]
    me.update(hero_health=my_hp, max_mana=mana, mana=mana, hand=[_card_by_name(n).id for n in hand],
              board=_board(mine, 1))
    them.update(hero_health=their_hp, board=_board(theirs, 1 + len(mine)))
    data["next_uid"] = 1 + len(mine) + len(theirs)
    return State.from_dict(data)


def _fight(attacker: str, defender: str | None) -> dict[str, Any]:
    """Player 1's ``attacker`` attacks player 2's ``defender`` (None: the hero): what it did."""
    from engine import attack_action

    state = _position([attacker], [defender] if defender else [])
    before = state.player(1).hp, state.player(2).hp
    state.apply(attack_action(0, 1 if defender else 0))
    mine, theirs = state.player(1).board[0], state.player(2).board[0]
    return {"my_hero": (before[0], state.player(1).hp), "enemy_hero": (before[1], state.player(2).hp),
            "attacker": mine, "defender": theirs}


def _fate(creature: Any, card_name: str) -> str:
    """What became of a creature that started as a fresh ``card_name``."""
    if creature is None:
        return "dies"
    if "ward" in _keywords(card_name) and not creature.has("ward"):
        return f"loses its ward and keeps {creature.health} health"
    return f"survives with {creature.health} health"


def _keywords(card_name: str) -> list[str]:
    from engine.cards import mask_to_keywords

    return mask_to_keywords(_card_by_name(card_name).keywords)


def _heroes(result: dict[str, Any], who: str, hero: str) -> str:
    start, end = result[hero]
    if end == start:
        return f"{who} hero stays at {end}"
    return f"{who} hero {'heals' if end > start else 'takes'} {abs(end - start)} ({start} -> {end})"


def _attack_line(attacker: str, defender: str, extra: str = "") -> str:
    r = _fight(attacker, defender)
    parts = [f"{_label(attacker)} attacks {_label(defender)}: the defender {_fate(r['defender'], defender)}, "
             f"the attacker {_fate(r['attacker'], attacker)}"]
    if extra == "my_hero":
        parts.append(_heroes(r, "your", "my_hero"))
    elif extra == "enemy_hero":
        parts.append(_heroes(r, "the enemy", "enemy_hero"))
    return "; ".join(parts) + "."


def _enemy_drain_attacked(attacker: str, drainer: str) -> str:
    """The drain creature on the enemy side is attacked: what its hero gets."""
    r = _fight(attacker, drainer)
    return (f"Your {_card_by_name(attacker).name} attacks the enemy's {_label(drainer)}: "
            f"{_heroes(r, 'the enemy', 'enemy_hero')} (drain heals only when it attacks).")


def _targets_of(state: Any, slot: int) -> list[str]:
    from engine.actions import ATTACK_BASE, ATTACK_TARGETS

    names = []
    for a in state.legal_actions():
        if ATTACK_BASE + slot * ATTACK_TARGETS <= a < ATTACK_BASE + (slot + 1) * ATTACK_TARGETS:
            t = a - ATTACK_BASE - slot * ATTACK_TARGETS
            names.append("the enemy hero" if t == 0 else _name_of(state.player(2).board[t - 1]))
    return names


def _name_of(creature: Any) -> str:
    from engine import CARDS

    return CARDS[creature.card_id].name


def _can_attack_after_play(name: str) -> bool:
    from engine import play_action
    from engine.actions import ATTACK_BASE

    card = _card_by_name(name)
    state = _position([], [], hand=(name,), mana=card.cost)
    state.apply(play_action(0))
    return any(a >= ATTACK_BASE for a in state.legal_actions())


def _keyword_examples() -> dict[str, str]:
    guard_state = _position(["Stormcaller"], ["Pike Runner", "Shieldling"])
    targets = _targets_of(guard_state, 0)
    charge, plain = "Raging Boar", "Pike Runner"
    return {
        "guard": f"the enemy has {_label('Pike Runner')} and {_label('Shieldling')}: your Stormcaller's only "
                 f"attack target{'s are' if len(targets) > 1 else ' is'} {', '.join(targets)}.",
        "charge": f"{_label(charge)} played this turn "
                  f"{'can attack at once' if _can_attack_after_play(charge) else 'cannot attack yet'}; "
                  f"{_label(plain)} played this turn "
                  f"{'can attack too' if _can_attack_after_play(plain) else 'cannot attack until your next turn'}.",
        "ward": _attack_line("Pike Runner", "Bubble Knight"),
        "drain": _attack_line("Vampire Bat", "Ember Imp", "my_hero") + " "
                 + _enemy_drain_attacked("Pike Runner", "Blood Moth"),
        "lethal": _attack_line("Venom Sprite", "Tide Serpent"),
        "breakthrough": _attack_line("Cinder Hound", "Ember Imp", "enemy_hero"),
    }


def _shifting_ids() -> str:
    """A played card shifts the hand: the same card's play id before and after (the issue's
    Iron Bulwark went from 61 to 46)."""
    from engine import play_action
    from engine.state import MAX_MANA

    hand = ("Ember Imp", "Swift Scout", "Mire Leech", "Shieldling", "Iron Bulwark")
    bulwark = _card_by_name("Iron Bulwark").id
    state = _position([], [], hand=hand, mana=MAX_MANA)
    before = state.player(1).hand.index(bulwark)
    state.apply(play_action(0))
    after = state.player(1).hand.index(bulwark)
    return (f"with Iron Bulwark in hand slot {before} its play id is {play_action(before)}; after you play the card "
            f"in slot 0 it sits in slot {after} and its play id is {play_action(after)}")


# ---------------------------------------------------------------------------- pages
@functools.cache
def keyword_glossary() -> tuple[str, ...]:
    """One Markdown line per engine keyword, its rule and an example the engine played: the
    rules page's glossary, which the L2 skill carries too (tests/skills/test_skill_glossary.py)."""
    from engine import KEYWORDS

    examples = _keyword_examples()
    return tuple(f"- **{keyword}**: {KEYWORD_RULES[keyword]} Example: {examples[keyword]}" for keyword in KEYWORDS)


@functools.cache
def rules_text() -> str:
    """The rules page (Markdown), from the engine's constants and small battles it plays."""
    from engine import CARDS, DECK_SIZE, MAX_COPIES
    from engine.actions import (ACTION_SPACE_SIZE, ATTACK_BASE, ATTACK_TARGETS, BOARD_SLOTS, END_TURN,
                                HAND_LIMIT, PLAY_BASE, PLAY_TARGETS, TARGET_ENEMY_HERO, TARGET_ENEMY_SLOT,
                                TARGET_NONE, TARGET_OWN_HERO, TARGET_OWN_SLOT)
    from engine.cards import EFFECTS, TARGET_RULES
    from engine.state import HERO_HEALTH, MAX_MANA, MAX_TURNS, MAX_TURNS_PER_PLAYER, RULESET, STARTING_HAND

    last_hand, last_slot = HAND_LIMIT - 1, BOARD_SLOTS - 1
    lines = [
        f"# ExtraArena rules ({RULESET}) for player 1",
        "",
        "You are player 1: start_battle(p1_actor_type=\"llm\"), then submit_action once per decision; the "
        "opponent (player 2) moves on its own after each of your moves, up to your next decision. The card "
        f"pool is {CARDS_URI}.",
        "",
        "## Limits",
        f"- Hero health {HERO_HEALTH}; heals never go above it. A hero at 0 or less loses; both at once is a draw.",
        f"- Deck {DECK_SIZE} cards, at most {MAX_COPIES} copies of a card, from a pool of {len(CARDS)}; decks "
        "are shuffled from the battle seed.",
        f"- Hand at most {HAND_LIMIT} cards: a card drawn into a full hand is burned (lost). Starting hands: "
        f"{STARTING_HAND[True]} cards for the starting player (a seeded coin flip), {STARTING_HAND[False]} for "
        "the other.",
        f"- Board {BOARD_SLOTS} slots a side (0..{last_slot}), fixed: a creature keeps its slot until it dies, a "
        "new creature takes the lowest free slot, and a full board takes no more creatures.",
        f"- Mana: at the start of each of your turns your maximum grows by 1, up to {MAX_MANA}, and refills; "
        "unspent mana is lost.",
        f"- Turn limit: {MAX_TURNS_PER_PLAYER} turns per player ({MAX_TURNS} in all); then the battle is a draw "
        "(end_reason turn_limit).",
        "",
        "## Turn structure",
        "1. Your turn starts: maximum mana +1 and refilled, your creatures may attack again, you draw 1 card. "
        "Drawing from an empty deck is fatigue: 1 damage to your hero, then 2, 3, ... each further time.",
        "2. Play cards (cost <= your mana) and attack, in any order, as often as mana and creatures allow.",
        f"3. End your turn (action {END_TURN}).",
        "",
        "Attacks: a creature attacks at most once per turn, never on the turn it is played (summoning "
        "sickness) unless it has charge, and never with 0 attack. Attacking a creature, both deal their attack "
        "to each other at once (the defender strikes back with its attack); attacking the hero, nothing strikes "
        "back. Damage stays on a creature until healed; a creature at 0 health or less dies. Heroes do not "
        "attack.",
        "",
        "## Keywords",
    ]
    lines += keyword_glossary()
    lines += ["", "## Spells",
              "A spell costs mana, has one effect and needs a target by its rule "
              f"({', '.join(TARGET_RULES)}; any_character is either hero or any creature).", ""]
    lines += [f"- {effect}: {EFFECT_RULES[effect]}" for effect in EFFECTS]
    lines += [
        "",
        f"## Action ids ({ACTION_SPACE_SIZE}, ids 0..{ACTION_SPACE_SIZE - 1})",
        f"- {END_TURN}: End turn.",
        f"- {PLAY_BASE} + h*{PLAY_TARGETS} + t: play hand slot h (0..{last_hand}) at target t: {TARGET_NONE} none "
        f"(every creature, and spells without a target), {TARGET_OWN_HERO} your hero, {TARGET_ENEMY_HERO} the "
        f"enemy hero, {TARGET_OWN_SLOT}..{TARGET_OWN_SLOT + last_slot} your board slots 0..{last_slot}, "
        f"{TARGET_ENEMY_SLOT}..{TARGET_ENEMY_SLOT + last_slot} enemy slots 0..{last_slot}.",
        f"- {ATTACK_BASE} + a*{ATTACK_TARGETS} + t: attack with your board slot a (0..{last_slot}) at t: 0 the "
        f"enemy hero, 1..{ATTACK_TARGETS - 1} enemy slots 0..{last_slot}.",
        "",
        "**Action ids change after every move.** Always choose from the latest legal_actions (each "
        "{action_id, description}; submit_action's result carries the next ones): a played card shifts the "
        f"cards after it down one hand slot, so their play ids drop by {PLAY_TARGETS} (e.g. {_shifting_ids()}), a "
        "drawn card is added at the end, and dead creatures empty their slots. An id that is not legal now is "
        "refused (illegal_action, with the reason and the legal ids) and changes nothing.",
        "",
        "## The end",
        "winner is null while the battle runs, then 1 (you), 2 (the opponent) or 0 (a draw); end_reason is "
        "hero_defeated, simultaneous_death or turn_limit. When done is true, call finish_battle(match_id=...) "
        "to record the trace.",
    ]
    return "\n".join(lines) + "\n"


@functools.cache
def cards_text() -> str:
    """The card pool as one Markdown table (id, name, cost, type, stats or effect, keywords)."""
    from engine import CARDS, KEYWORDS
    from engine.state import RULESET

    lines = [f"# The {RULESET} card pool ({len(CARDS)} cards)", "",
             f"Keywords ({', '.join(KEYWORDS)}) and spell targets: {RULES_URI}. A creature's text is "
             "attack/health and its keywords.", "",
             "| id | name | cost | type | text |", "|---|---|---|---|---|"]
    lines += [f"| {card.id} | {card.name} | {card.cost} | {card.type} | {card.text()} |"
              for _, card in sorted(CARDS.items())]
    return "\n".join(lines) + "\n"


def data_format_text() -> str:
    """The skills' data-format reference, as it is in the checkout."""
    try:
        return DATA_FORMAT_PAGE.read_text(encoding="utf-8")
    except OSError:
        raise ResourceError("the data-format page is not in this installation (it is "
                            "skills/extra-rlhf/references/data-format.md of the ExtraRLHF checkout); read "
                            "docs/data-format.md there") from None


# ---------------------------------------------------------------------------- prompts
_SPEC = re.compile(r"[A-Za-z0-9@][A-Za-z0-9_.:?=&@/+-]{0,199}")


def _refuse(prompt: str, message: str) -> MCPError:
    return MCPError(INVALID_PARAMS, f"{prompt}: {message}")


def _spec(prompt: str, what: str, value: str) -> str:
    if not _SPEC.fullmatch(value):
        raise _refuse(prompt, f"{what} must be an actor spec such as baseline:greedy or a checkpoint name from "
                              "list_models (one word of at most 200 characters, no spaces or quotes); the value "
                              "was not used")
    return value


def _integer(prompt: str, what: str, value: str, low: int, high: int) -> int:
    if not (value.isascii() and value.isdigit() and len(value) <= 19) or not low <= int(value) <= high:
        raise _refuse(prompt, f"{what} must be a whole number in {low}..{high:,}; the value was not used")
    return int(value)


def _group(prompt: str, value: str) -> str:
    from extrarlhf.core.names import is_name

    if not is_name(value):
        raise _refuse(prompt, "group must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or "
                              "digit (a session group name); the value was not used")
    return value


def play_battle(
    opponent: Annotated[str, Field(description="Player 2's spec, e.g. baseline:greedy (see list_models).")]
    = "baseline:greedy",
    seed: Annotated[str | None, Field(description="Battle seed, a whole number (default: derived).")] = None,
    group: Annotated[str | None, Field(description="Session group to record into (default: interactive).")]
    = None,
) -> str:
    """Play one ExtraArena battle yourself as player 1, move by move, with a rationale per move."""
    from extrarlhf.runtime.match import MAX_SEED

    name = "play_battle"
    call = ['p1_actor_type="llm"', f'opponent="{_spec(name, "opponent", opponent)}"']
    if seed is not None:
        call.append(f"seed={_integer(name, 'seed', seed, 0, MAX_SEED)}")
    if group is not None:
        call.append(f'group="{_group(name, group)}"')
    return "\n".join([
        f"Play one ExtraArena battle as player 1 against {opponent} through the extra-rlhf MCP server.",
        "",
        f"1. Read the resource {RULES_URI} once: the keywords with examples, the turn structure, the limits and "
        f"how action ids work. The card pool is {CARDS_URI}.",
        f"2. Call start_battle({', '.join(call)}). Keep match_id; read board and legal_actions (your_turn says "
        "whether you move now; opponent_moves lists what player 2 did first).",
        "3. For each decision choose an action_id from the latest legal_actions (action ids change after "
        "every move: never reuse an old one) and call submit_action(match_id=..., action_id=..., "
        "rationale=\"...\") with one or two sentences on why. The result holds opponent_moves (described from "
        "player 2's side), board, legal_actions, your_turn, done and winner; your own move is not echoed.",
        "4. If your_turn is false while done is false (a call returned paused), call advance_bot(match_id=...).",
        "5. When done is true, call finish_battle(match_id=...) and report the winner, the end reason, the "
        "turns and decisions, and degraded or policy_warnings if any.",
        "",
        "Never call get_state with view=\"omniscient\" during play: it reveals the opponent's hand, is "
        "recorded, and makes the battle ineligible as training data. To stop early: "
        "abandon_battle(match_id=..., reason=\"...\").",
    ])


def _default_group(p1_model: str, opponent: str) -> str:
    def slug(spec: str) -> str:
        return re.sub(r"[^A-Za-z0-9]+", "-", spec.removeprefix("baseline:")).strip("-")[:28] or "model"

    return f"{slug(p1_model)}-vs-{slug(opponent)}"


def run_campaign(
    opponent: Annotated[str, Field(description="Player 2's spec, e.g. baseline:random (see list_models).")]
    = "baseline:random",
    battles: Annotated[str, Field(description="How many battles the group should hold (whole number).")] = "100",
    p1_model: Annotated[str, Field(description="Player 1's spec, e.g. baseline:greedy or a checkpoint.")]
    = "baseline:greedy",
    group: Annotated[str | None, Field(description="Session group (default: '<p1_model>-vs-<opponent>').")]
    = None,
) -> str:
    """Run a data-collection campaign: a resumable series of auto-played battles into one group."""
    from extrarlhf.runtime.series import MAX_BATTLES

    name = "run_campaign"
    p1_model, opponent = _spec(name, "p1_model", p1_model), _spec(name, "opponent", opponent)
    n = _integer(name, "battles", battles, 1, MAX_BATTLES)
    group = _group(name, group if group is not None else _default_group(p1_model, opponent))
    return "\n".join([
        f"Run a data-collection campaign through the extra-rlhf MCP server: {n} battles of {p1_model} "
        f"(player 1) against {opponent}, recorded into the session group {group}.",
        "",
        "1. Call list_models() and check that both specs are among its specs; if one is not, stop and say so.",
        f"2. Call run_series(group=\"{group}\", n_battles={n}, p1_model=\"{p1_model}\", opponent=\"{opponent}\", "
        "seed=0). It blocks until done and sends a progress notification per battle; calling it again with "
        "the same arguments resumes (finished battles are skipped). max_workers=N uses more processes "
        "without changing the traces.",
        "3. Check its summary: by_status, results (p1_wins, draws, p2_wins), degraded and policy_warnings "
        "(above 0: a model fell back to a baseline; those battles are not training data), weights_hashes "
        "(the models that really played) and readiness (v5_policy_training_ready, else "
        "v5_policy_blockers).",
        f"4. From another client, series_status(group=\"{group}\") follows a running series; "
        f"inspect_session(group=\"{group}\") gives the manifest, summary and catalog; "
        f"replay_battle(group=\"{group}\", battle_id=...) checks that a trace reproduces.",
        "5. Report the counts, the results, anything degraded, and whether the group is training-ready. "
        "Turning it into a dataset is the next step: dataset_readiness, then materialize_v5_dataset.",
    ])


class _CheckedPrompt(Prompt):
    """A prompt whose arguments pass the same guards as tool arguments first: an unknown or
    secret-looking argument is refused by position, never repeated."""

    async def render(self, arguments: dict[str, Any] | None, context: Any) -> Any:
        try:
            guards.check_arguments(self.name, arguments or {}, [a.name for a in self.arguments or ()])
        except guards.GuardError as exc:
            raise MCPError(INVALID_PARAMS, str(exc)) from None
        return await super().render(arguments, context)


# ---------------------------------------------------------------------------- registration
def register(server: MCPServer) -> None:
    """Add the resources and prompts to ``server`` (nothing in tools/list changes)."""
    pages = ((RULES_URI, "rules", "ExtraArena rules for player 1", rules_text,
              "Read once before playing: keywords with examples, turn structure, limits, and how action ids "
              "work (they change after every move)."),
             (CARDS_URI, "cards", "The card pool", cards_text,
              "Every card: id, name, cost, type, and its stats and keywords or its spell effect."),
             (DATA_FORMAT_URI, "data-format", "What ExtraRLHF writes on disk", data_format_text,
              "Session groups, the V5 trace files, datasets and checkpoints, in one page."))
    for uri, name, title, page, description in pages:
        server.add_resource(FunctionResource(uri=uri, name=name, title=title, description=description,
                                             mime_type=MARKDOWN, fn=page))
    server.add_prompt(_CheckedPrompt.from_function(play_battle, title="Play a battle as player 1"))
    server.add_prompt(_CheckedPrompt.from_function(run_campaign, title="Run a campaign"))
    server.middleware.append(functools.partial(_unknown_names_not_repeated, server))


async def _unknown_names_not_repeated(server: MCPServer, ctx: Any, call_next: Any) -> Any:
    """An unknown resource URI or prompt name is refused saying what exists, without repeating
    the caller's text (the SDK's own errors echo it, like the method name of -32601)."""
    params = ctx.params if isinstance(ctx.params, dict) else {}
    if ctx.method == "resources/read" and isinstance(params.get("uri"), str):
        uris = sorted(str(r.uri) for r in await server.list_resources())
        if params["uri"] not in uris:
            raise MCPError(INVALID_PARAMS, f"there is no resource at that URI (not repeated); the resources are "
                                           f"{', '.join(uris)} (resources/list describes them)")
    elif ctx.method == "prompts/get" and isinstance(params.get("name"), str):
        names = sorted(p.name for p in await server.list_prompts())
        if params["name"] not in names:
            raise MCPError(INVALID_PARAMS, f"there is no prompt of that name (not repeated); the prompts are "
                                           f"{', '.join(names)} (prompts/list describes their arguments)")
    return await call_next(ctx)
