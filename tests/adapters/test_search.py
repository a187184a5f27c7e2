"""The search actor ``search:<rollout>?sims=N`` (adapters/search.py): spec parsing and bad specs,
determinism, information-set safety, provenance and action values in traces (schema-valid),
matches, series, MCP and benchmarks with it, and that it beats greedy on fixed paired seeds."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from mcp import Client

import engine
from engine import reference
from adapters import AdapterError, GreedyPolicy, SearchPolicy, default_registry, parse_search_spec
from adapters.search import determinize, information_set
from engine import CARD_IDS, SplitMix64
from extrarlhf.checkpoints.registry import CheckpointRegistry
from extrarlhf.core.errors import InvalidArgument, UnknownSpec
from extrarlhf.policies.benchmarking import benchmark_models
from extrarlhf.runtime.actors import resolve_actor
from extrarlhf.runtime.match import start_match
from extrarlhf.runtime.series import run_series
from extrarlhf.runtime.sessions import SessionStore
from mcp_server import build_server
from tests import onnx_factory
from tests.mcp_helpers import Checked, read_jsonl
from tests.trace_helpers import read_records
from tests.test_schemas import errors as schema_errors


def _mid_battle(seed: int, decisions: int = 25) -> engine.State:
    """A state after ``decisions`` greedy moves with a choice to make."""
    state, greedy = engine.new_battle(seed), GreedyPolicy()
    for _ in range(decisions):
        state.apply(greedy.act(state))
    while len(state.legal_actions()) < 3:
        state.apply(greedy.act(state))
    return state


def _records(paths: dict[str, str]) -> tuple[dict, list[dict]]:
    return read_jsonl(paths["meta.jsonl"])[0], read_jsonl(paths["actions.jsonl"])


@pytest.fixture
def checkpoint(tmp_path: Path) -> tuple[str, str]:
    """A registered v5 checkpoint: (checkpoints dir, name)."""
    root = tmp_path / "checkpoints"
    model = onnx_factory.save(onnx_factory.mlp_v5(16, seed=3), tmp_path / "m.onnx")
    CheckpointRegistry(root).register("tiny", model, "v5")
    return str(root), "tiny"


# ---------------------------------------------------------------------------- specs
def test_spec_parsing_and_canonical_form(tmp_path):
    assert parse_search_spec("search:baseline:greedy?sims=64") == ("baseline:greedy", 64, None)
    assert parse_search_spec("search:baseline:random") == ("baseline:random", 32, None)  # default budget
    actor = resolve_actor("search:baseline:greedy", "opponent", tmp_path)
    assert actor.spec == "search:baseline:greedy?sims=32" and actor.kind == "search" and not actor.is_baseline
    assert actor.as_dict() == {"spec": "search:baseline:greedy?sims=32", "kind": "search", "weights_hash": None,
                               "search": {"sims": 32, "rollout": {"spec": "baseline:greedy", "kind": "baseline",
                                                                  "weights_hash": None}}}
    assert "search" in default_registry().kinds()
    policy = default_registry().create("search", rollout=GreedyPolicy(), sims=3, seed=1)
    assert isinstance(policy, SearchPolicy) and policy.spec == "search:baseline:greedy?sims=3"


@pytest.mark.parametrize("spec, message", [
    ("search:", "names no rollout policy"),
    ("search:?sims=4", "names no rollout policy"),
    ("search:baseline:greedy?", "sets no option"),
    ("search:baseline:greedy?sims=0", "sims must be an integer in 1..4096, got '0'"),
    ("search:baseline:greedy?sims=4097", "sims must be an integer in 1..4096"),
    ("search:baseline:greedy?sims=-3", "sims must be an integer in 1..4096, got '-3'"),
    ("search:baseline:greedy?sims=ten", "sims must be an integer in 1..4096, got 'ten'"),
    ("search:baseline:greedy?depth=3", "unknown option 'depth'; options: sims"),
    ("search:baseline:greedy?sims=4&sims=8", "option 'sims' is given twice"),
    ("search:baseline:greedy?sims", "option 'sims' is not name=value"),
    ("search:search:baseline:greedy?sims=4", "nests a search as its rollout policy"),
    # digits other than ASCII 0-9 (str.isdigit() takes them; int() took some, crashed on others)
    ("search:baseline:greedy?sims=\u00b2", "sims must be an integer in 1..4096, got '\u00b2' (written with the digits 0-9)"),
    ("search:baseline:greedy?sims=\u0663\u0662", "sims must be an integer in 1..4096, got '\u0663\u0662'"),
    ("search:baseline:greedy?sims=\U0001d7d1", "sims must be an integer in 1..4096, got '\U0001d7d1'"),
    ("search:baseline:greedy?sims=" + "9" * 5000, "sims must be an integer in 1..4096, got '999"),
    ("search:baseline:greedy?sims=0032 ", "sims must be an integer in 1..4096, got '0032 '"),
])
def test_bad_specs_are_refused_with_what_is_wrong(tmp_path, spec, message):
    with pytest.raises(AdapterError) as direct:
        parse_search_spec(spec)
    assert message in str(direct.value) and "search:baseline:greedy?sims=64" in str(direct.value)
    with pytest.raises(InvalidArgument) as resolved:
        resolve_actor(spec, "opponent", tmp_path)
    assert str(resolved.value).startswith("opponent: ") and message in str(resolved.value)


def test_an_unknown_rollout_policy_is_refused_with_what_exists(tmp_path):
    with pytest.raises(UnknownSpec) as exc:
        resolve_actor("search:nobody?sims=4", "p1_model", tmp_path)
    text = str(exc.value)
    assert "unknown p1_model's rollout policy spec 'nobody'" in text and "baseline:greedy" in text
    assert "search:<one of these>?sims=N" in text
    with pytest.raises(AdapterError, match="sims must be an integer"):
        SearchPolicy(GreedyPolicy(), sims=0)
    with pytest.raises(AdapterError, match="must have decide"):
        SearchPolicy(object(), sims=4)


# ---------------------------------------------------------------------------- determinism and information sets
def test_deterministic_for_a_seed():
    state = _mid_battle(7)
    a = SearchPolicy(GreedyPolicy(), sims=8, seed=42).decide(state)
    b = SearchPolicy(GreedyPolicy(), sims=8, seed=42).decide(state.clone())
    assert a == b and a.policy_record() == b.policy_record()
    record = a.policy_record()
    legal = state.legal_actions()
    assert len(record["action_values"]) == len(record["visits"]) == len(legal)
    assert sum(record["visits"]) >= 8 and record["value"] == record["action_values"][legal.index(a.action_id)]
    assert all(v is None or -1.0 <= v <= 1.0 for v in record["action_values"])
    assert state == _mid_battle(7)  # the search never changes the state it decides in


def _same_view_other_hidden_cards(state: engine.State) -> engine.State:
    """``state`` with every hidden part changed: the opponent's hand and deck (other cards),
    both decks' order, the opponent's deck list, the battle seed and generator. Edited on the
    Python engine (a native state's fields are read-only), then put back on the backend in use."""
    other = reference.from_dict(state.to_dict())
    me = other.players[other.active]
    opp = other.players[1 - other.active]
    rng = SplitMix64(999)
    rng.shuffle(me.deck)
    pool = [c for c in CARD_IDS for _ in range(2)]
    rng.shuffle(pool)
    opp.hand = [c for c in pool if c not in opp.hand][:len(opp.hand)]
    opp.deck = pool[-len(opp.deck):] if opp.deck else []
    decks = list(other.decks)
    decks[1 - other.active] = engine.random_deck(rng)
    other.decks = tuple(decks)
    other.seed, other.rng = state.seed + 1, SplitMix64(12345)
    other._legal = None
    return engine.State.from_dict(other.to_dict())


def test_two_states_the_player_cannot_tell_apart_give_the_same_decision():
    compared = 0
    for seed in (3, 8, 21, 40):
        state = _mid_battle(seed)
        other = _same_view_other_hidden_cards(state)
        player = state.to_move
        opp = 2 - player
        # the hidden cards really differ, and the player's view and knowledge do not
        assert other.players[opp].hand != state.players[opp].hand and other.rng.state != state.rng.state
        assert other.players[player - 1].deck != state.players[player - 1].deck
        assert information_set(other, player) == information_set(state, player)
        a = SearchPolicy(GreedyPolicy(), sims=12, seed=5).decide(state)
        b = SearchPolicy(GreedyPolicy(), sims=12, seed=5).decide(other)
        assert (a.action_id, a.policy_record()) == (b.action_id, b.policy_record())
        compared += sum(v is not None for v in a.policy_record()["action_values"])
    assert compared > 12  # the action values (floats) agree, not just the chosen action


def test_worlds_keep_what_the_player_knows_and_redraw_the_rest():
    state = _mid_battle(11)
    player = state.to_move
    me, opp = state.players[player - 1], state.players[2 - player]
    worlds = [determinize(state, player, SplitMix64(k)) for k in range(6)]
    for w in worlds:
        assert w.player_view(player) == state.player_view(player)
        assert sorted(w.players[player - 1].deck) == sorted(me.deck)
        assert len(w.players[2 - player].hand) == len(opp.hand) and len(w.players[2 - player].deck) == len(opp.deck)
        assert w.legal_actions() == state.legal_actions()
        assert w.seed == 0 and w.last_events == []  # nothing of the real battle's seed or last draw survives
    assert len({tuple(w.players[2 - player].hand) for w in worlds}) > 1  # the opponent's hand is re-drawn


# ---------------------------------------------------------------------------- traces, matches, series
def test_a_match_records_the_search_provenance_and_action_values(tmp_path, checkpoint):
    checkpoints_dir, name = checkpoint
    store = SessionStore(tmp_path / "sessions")
    match = start_match(store, "g", "rl", opponent=f"search:{name}?sims=3", p1_model="baseline:greedy", seed=5,
                        checkpoints_dir=checkpoints_dir)
    match.run()
    result = match.finish()
    assert result["status"] == "finished" and not result["degraded"] and result["battle_tag"] == "rl-vs-rl"
    meta, actions = _records(result["paths"])
    weights = CheckpointRegistry(checkpoints_dir).get(name).weights_hash
    p2 = meta["actors"]["p2"]
    assert p2 == {"type": "rl", "spec": f"search:{name}?sims=3", "kind": "search", "weights_hash": weights,
                  "codename": None, "search": {"sims": 3, "rollout": {"spec": name, "kind": "v5",
                                                                      "weights_hash": weights}}}
    searched = [r for r in actions if r["player"] == 2]
    assert searched and all(r["actor"] == p2 for r in searched)
    for r in searched:
        values = r["policy"]["action_values"]
        assert len(values) == len(r["policy"]["visits"]) == len(r["legal_actions"])
        if len(values) > 1:
            chosen = [a["action_id"] for a in r["legal_actions"]].index(r["action_id"])
            visits = r["policy"]["visits"]
            finalists = [v for v, n in zip(values, visits) if n == max(visits)]  # survived every halving
            assert r["policy"]["value"] == values[chosen] == max(finalists) and visits[chosen] == max(visits)
    assert all(r["policy"] is None for r in actions if r["player"] == 1)
    assert schema_errors("meta", meta) == []
    assert [e for r in actions for e in schema_errors("action", r)] == []
    manifest = json.loads((store.root / "g" / "manifest.json").read_text())
    assert manifest["configuration"]["opponent"]["search"]["rollout"]["weights_hash"] == weights
    assert schema_errors("manifest", manifest) == []


def test_a_rollout_model_that_cannot_act_degrades_the_battle(tmp_path, checkpoint):
    checkpoints_dir, name = checkpoint
    path = CheckpointRegistry(checkpoints_dir).get(name).path
    Path(path).write_bytes(onnx_factory.mlp_v5(16, seed=4).SerializeToString())  # weights changed after registration
    match = start_match(SessionStore(tmp_path / "sessions"), "g", "rl", opponent=f"search:{name}?sims=2",
                        p1_model="baseline:greedy", seed=1, checkpoints_dir=checkpoints_dir)
    match.run()
    result = match.finish()
    assert result["degraded"] and result["policy_warnings"][0]["player"] == 2
    assert "in the search's rollouts" in result["policy_warnings"][0]["message"]
    p2 = _records(result["paths"])[0]["actors"]["p2"]
    registered = CheckpointRegistry(checkpoints_dir).get(name).weights_hash
    assert p2["search"]["rollout"]["weights_hash"] == p2["weights_hash"] != registered  # the hash that played


def test_a_series_with_the_search_is_deterministic(tmp_path):
    out = []
    for group in ("a", "b"):
        res = run_series(tmp_path / "sessions", group, 2, p1_model="search:baseline:greedy?sims=4",
                         opponent="baseline:greedy", seed=3, checkpoints_dir=tmp_path / "ck")
        assert res["ran"] == 2 and res["summary"]["by_status"]["finished"] == 2 == res["summary"]["eligible_battles"]
        store = SessionStore(tmp_path / "sessions")
        battles = []
        for entry in store.read_catalog(group):
            if entry["status"] != "finished":
                continue
            actions = read_records(store.battle_dir(group, entry["battle_id"]), "actions.jsonl")
            assert {r["actor"]["spec"] for r in actions if r["player"] == 1} == {"search:baseline:greedy?sims=4"}
            battles.append([(r["action_id"], r["policy"]) for r in actions])
        out.append(battles)
    assert out[0] == out[1] and len(out[0]) == 2


# ---------------------------------------------------------------------------- labelling (play=)
def test_play_spec_parsing_and_bad_play_specs(tmp_path, checkpoint):
    checkpoints_dir, name = checkpoint
    assert parse_search_spec(f"search:baseline:greedy?sims=8&play={name}") == ("baseline:greedy", 8, name)
    assert parse_search_spec("search:baseline:greedy?play=baseline:random") == ("baseline:greedy", 32,
                                                                                 "baseline:random")
    actor = resolve_actor(f"search:baseline:greedy?play={name}", "p1_model", checkpoints_dir)
    weights = CheckpointRegistry(checkpoints_dir).get(name).weights_hash
    assert actor.spec == f"search:baseline:greedy?sims=32&play={name}"  # canonical: sims first, then play
    assert actor.as_dict()["search"]["play"] == {"spec": name, "kind": "v5", "weights_hash": weights}
    for spec, message in [("search:baseline:greedy?play=", "play names no policy"),
                          ("search:baseline:greedy?play=search:baseline:greedy", "not a search"),
                          ("search:baseline:greedy?play=baseline:random&play=baseline:greedy", "given twice")]:
        with pytest.raises(InvalidArgument) as exc:
            resolve_actor(spec, "p1_model", checkpoints_dir)
        assert message in str(exc.value) and "search:baseline:greedy?sims=64" in str(exc.value)
    with pytest.raises(UnknownSpec) as unknown:
        resolve_actor("search:baseline:greedy?play=nobody", "p1_model", checkpoints_dir)
    assert "unknown p1_model's play policy spec 'nobody'" in str(unknown.value)


def test_a_labelling_search_plays_the_play_policy_and_records_its_own_values():
    for seed in (7, 11, 19):
        state = _mid_battle(seed)
        alone = SearchPolicy(GreedyPolicy(), sims=8, seed=42).decide(state)
        labelled = SearchPolicy(GreedyPolicy(), sims=8, seed=42, play=GreedyPolicy()).decide(state)
        assert labelled.action_id == GreedyPolicy().act(state)  # the play policy's action is played
        record, pure = labelled.policy_record(), alone.policy_record()
        assert record["search_choice"] == alone.action_id  # the search's own choice, recorded
        assert record["action_values"] == pure["action_values"] and record["visits"] == pure["visits"]
        legal = state.legal_actions()
        assert record["value"] == record["action_values"][legal.index(labelled.action_id)]
    with pytest.raises(AdapterError, match="play policy must have decide"):
        SearchPolicy(GreedyPolicy(), sims=4, play=object())


def test_a_labelling_series_records_the_play_policy_and_is_schema_valid(tmp_path, checkpoint):
    checkpoints_dir, name = checkpoint
    spec = f"search:baseline:greedy?sims=4&play={name}"
    res = run_series(tmp_path / "sessions", "dagger", 2, p1_model=spec, opponent="baseline:greedy", seed=3,
                     checkpoints_dir=checkpoints_dir)
    assert res["ran"] == 2 and res["summary"]["by_status"]["finished"] == 2
    store = SessionStore(tmp_path / "sessions")
    weights = CheckpointRegistry(checkpoints_dir).get(name).weights_hash
    differs = 0
    for entry in store.read_catalog("dagger"):
        folder = store.battle_dir("dagger", entry["battle_id"]) / "v5"
        meta, actions = read_jsonl(folder / "meta.jsonl")[0], read_records(folder, "actions.jsonl")
        assert meta["actors"]["p1"]["search"]["play"] == {"spec": name, "kind": "v5", "weights_hash": weights}
        assert schema_errors("meta", meta) == []
        assert [e for r in actions for e in schema_errors("action", r)] == []
        searched = [r for r in actions if r["player"] == 1]
        assert all("search_choice" in r["policy"] for r in searched)
        differs += sum(r["policy"]["search_choice"] != r["action_id"] for r in searched)
    assert differs > 0  # the tiny model plays other moves than the search would


# ---------------------------------------------------------------------------- MCP
@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_mcp_start_battle_accepts_a_search_opponent_and_refuses_a_bad_one(tmp_path, anyio_backend):
    server = build_server(tmp_path / "sessions", tmp_path / "datasets", tmp_path / "checkpoints")
    async with Client(server) as client:
        c = Checked(client)
        done = await c.ok("start_battle", {"p1_actor_type": "rl", "p1_model": "baseline:greedy", "group": "m",
                                           "opponent": "search:baseline:greedy?sims=2", "seed": 4})
        assert done["done"] and done["battle_tag"] == "rl-vs-rl"
        finished = await c.ok("finish_battle", {"match_id": done["match_id"]})
        meta = read_jsonl(finished["paths"]["meta.jsonl"])[0]
        assert meta["actors"]["p2"]["search"]["sims"] == 2
        error = await c.err("start_battle", {"p1_actor_type": "llm", "group": "m2",
                                             "opponent": "search:baseline:greedy?sims=0"}, "invalid_argument")
        assert "sims must be an integer in 1..4096" in error["message"]
        # non-ASCII digits and a 5,000-digit budget were an internal_error (or accepted as 32 and 3)
        for sims in ("\u00b2", "\u0663\u0662", "\U0001d7d1", "9" * 5000):
            error = await c.err("start_battle", {"p1_actor_type": "llm", "group": "m2",
                                                 "opponent": f"search:baseline:greedy?sims={sims}"}, "invalid_argument")
            assert "sims must be an integer in 1..4096" in error["message"] and len(error["message"]) < 1000
    assert not (tmp_path / "sessions" / "m2").exists()  # nothing half-created for the refused spec


# ---------------------------------------------------------------------------- strength
def test_it_beats_greedy_on_fixed_paired_seeds(tmp_path):
    """benchmark_models with the search as candidate: fixed seeds, so deterministic, with margin."""
    report = benchmark_models("search:baseline:greedy?sims=16", "baseline:greedy", n_pairs=8, seed=2,
                              baseline_pairs=0, stop_early=False, checkpoints_dir=tmp_path, write=False)
    match = report["match"]
    assert report["valid"] and report["candidate"]["kind"] == "search"
    assert match["wins"] >= match["losses"] + 4, match
