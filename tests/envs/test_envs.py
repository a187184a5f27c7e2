"""RL wrappers: PettingZoo AEC env and Gymnasium single-seat env, checked by the official checkers."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env, data_equivalence
from gymnasium.utils.passive_env_checker import data_shares_objects
from pettingzoo.test import api_test, seed_test
from pettingzoo.utils import wrappers

import engine
from adapters import make_baseline
from engine import ACTION_SPACE_SIZE, END_TURN, OBS_DIM, IllegalActionError
from extrarlhf.envs import ENV_ID, ArenaAECEnv, ArenaGymEnv, aec_env
from extrarlhf.envs.gym_single import register

# api_test names dict observations "not a NumPy array" and dict spaces "probably should be Box"
# for every env outside its hard-coded list of PettingZoo's own classic envs.
BENIGN_PETTINGZOO_WARNINGS = ("Observation is not a NumPy array",
                              "Observation space for each agent probably should be")


def _starting_seed(starting_player: int) -> int:
    """The first battle seed whose coin flip gives ``starting_player`` the first turn."""
    return next(s for s in range(100) if engine.new_battle(s).starting_player == starting_player)


def _masked_choice(rng: np.random.Generator, mask: np.ndarray) -> int:
    legal = np.flatnonzero(mask)
    assert legal.size > 0, "a live decision point must have a legal action"
    return int(rng.choice(legal))


def _play_aec_episode(env: ArenaAECEnv, seed: int) -> dict:
    """Masked random play until every agent has left; returns what the test checks."""
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    final, streak, longest_streak, previous = {}, 0, 0, None
    for agent in env.agent_iter(100_000):
        obs, reward, terminated, truncated, info = env.last()
        assert truncated is False
        if terminated:
            final[agent] = (reward, dict(info))
            env.step(None)
            continue
        assert reward == 0, "no reward before the battle ends"
        player = int(agent[-1])
        assert env.battle.to_move == player, "agent_selection must follow the engine's to_move"
        other = env.observe("player_2" if player == 1 else "player_1")
        assert not other["action_mask"].any(), "only the agent to move gets a non-empty mask"
        streak = streak + 1 if agent == previous else 1
        longest_streak, previous = max(longest_streak, streak), agent
        env.step(_masked_choice(rng, obs["action_mask"]))
    return {"final": final, "longest_streak": longest_streak, "winner": env.battle.winner}


# ---------------------------------------------------------------------------------- PettingZoo
@pytest.mark.parametrize("make", [lambda: ArenaAECEnv(render_mode="ansi"), lambda: aec_env(render_mode="ansi")],
                         ids=["raw", "order_enforcing"])
def test_pettingzoo_api_test_passes(make) -> None:
    env = make()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        api_test(env, num_cycles=1000)  # 2000 agent steps: a whole battle is ~100 actions
    unexpected = [str(w.message) for w in caught if not str(w.message).startswith(BENIGN_PETTINGZOO_WARNINGS)]
    assert unexpected == []


@pytest.mark.parametrize("make", [ArenaAECEnv, aec_env], ids=["raw", "order_enforcing"])
def test_pettingzoo_seed_test_passes(make) -> None:
    seed_test(make, num_cycles=500)


def test_aec_spaces_and_metadata() -> None:
    env = ArenaAECEnv()
    assert env.metadata == {"name": "extraarena_v1", "is_parallelizable": False,
                            "render_modes": ["human", "ansi", "rgb_array"]}
    assert env.possible_agents == ["player_1", "player_2"]
    space = env.observation_space("player_1")
    assert space["observation"] == gym.spaces.Box(-1.0, 1.0, (OBS_DIM,), np.float32)
    assert space["action_mask"] == gym.spaces.Box(0, 1, (ACTION_SPACE_SIZE,), np.int8)
    assert env.action_space("player_2") == gym.spaces.Discrete(ACTION_SPACE_SIZE)
    assert env.action_space("player_1") is not env.action_space("player_2"), "each agent seeds its own space"


@pytest.mark.parametrize("seed", range(8))
def test_aec_masked_random_episodes_end_zero_sum(seed: int) -> None:
    env = ArenaAECEnv()
    result = _play_aec_episode(env, seed)
    winner = result["winner"]
    assert winner in (0, 1, 2)
    assert env.agents == [], "both done agents stepped with None and left"
    rewards = {agent: reward for agent, (reward, _) in result["final"].items()}
    assert set(rewards) == {"player_1", "player_2"}
    assert sum(rewards.values()) == 0
    expected = {1: {"player_1": 1, "player_2": -1}, 2: {"player_1": -1, "player_2": 1},
                0: {"player_1": 0, "player_2": 0}}[winner]
    assert rewards == expected
    for _, info in result["final"].values():
        assert info["winner"] == winner and info["end_reason"] == env.battle.end_reason
    assert result["longest_streak"] > 1, "a turn is several actions by the same agent"


def test_aec_reset_seed_is_the_engine_battle_and_unseeded_resets_follow_the_env_generator() -> None:
    env = ArenaAECEnv()
    env.reset(seed=7)
    reference = engine.new_battle(7)
    assert env.battle == reference
    assert env.agent_selection == f"player_{reference.to_move}"
    obs = env.observe(env.agent_selection)
    assert np.array_equal(obs["observation"], reference.observation(reference.to_move))
    assert np.array_equal(obs["action_mask"], reference.legal_action_mask().astype(np.int8))
    assert obs["action_mask"].dtype == np.int8
    env.reset()
    first = env.battle_seed
    env.reset(seed=7)
    env.reset()
    assert env.battle_seed == first, "reset() after reset(seed=7) draws the same battle seed"
    other = ArenaAECEnv(seed=3)
    again = ArenaAECEnv(seed=3)
    other.reset()
    again.reset()
    assert other.battle_seed == again.battle_seed and other.battle == again.battle
    assert other.battle_seed != _reset_seed(ArenaAECEnv(seed=4))


def _reset_seed(env: ArenaAECEnv) -> int:
    env.reset()
    return env.battle_seed


def test_aec_illegal_action_raises_with_legal_ids_and_changes_nothing() -> None:
    env = ArenaAECEnv()
    env.reset(seed=11)
    before = env.battle.state_hash()
    legal = env.battle.legal_actions()
    illegal = next(a for a in range(ACTION_SPACE_SIZE) if a not in legal)
    for bad in (illegal, 999, None):
        with pytest.raises(IllegalActionError) as err:
            env.step(bad)
        assert str(legal) in str(err.value), "the message lists the legal ids"
        assert env.agent_selection in str(err.value)
    assert env.battle.state_hash() == before
    assert env._cumulative_rewards == {"player_1": 0, "player_2": 0}


def test_aec_done_agent_must_step_with_none() -> None:
    env = ArenaAECEnv()
    _play_aec_episode(env, 5)
    env.reset(seed=5)
    rng = np.random.default_rng(5)
    while not env.terminations[env.agent_selection]:
        env.step(_masked_choice(rng, env.observe(env.agent_selection)["action_mask"]))
    with pytest.raises(ValueError, match="only valid action is None"):
        env.step(END_TURN)
    env.step(None)
    assert len(env.agents) == 1


def test_aec_render_ansi_is_the_selected_agents_view() -> None:
    env = ArenaAECEnv(render_mode="ansi")
    env.reset(seed=2)
    text = env.render()
    assert isinstance(text, str)
    assert text == env.battle.render(env.battle.to_move)
    with pytest.raises(ValueError, match=r"render_mode must be None or one of \['human', 'ansi', 'rgb_array'\]"):
        ArenaAECEnv(render_mode="opengl")


def test_aec_terminate_illegal_wrapper_gives_loss_semantics_on_request() -> None:
    env = wrappers.TerminateIllegalWrapper(ArenaAECEnv(), illegal_reward=-1)
    env.reset(seed=3)
    offender = env.agent_selection
    obs, *_ = env.last()
    illegal = int(np.flatnonzero(obs["action_mask"] == 0)[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PettingZoo logs the illegal move
        env.step(illegal)
    assert all(env.terminations.values())
    assert env._cumulative_rewards[offender] == -1


# ---------------------------------------------------------------------------------- Gymnasium
@pytest.mark.parametrize("kwargs", [{}, {"seat": 2}, {"seat": "random", "opponent": "random"},
                                    {"observation_mode": "dict"}, {"render_mode": "rgb_array"}],
                         ids=["defaults", "seat2-greedy", "random-seat-random-opponent", "dict", "rgb_array"])
def test_gymnasium_check_env_passes(kwargs: dict) -> None:
    """The default env: check_env steps with unmasked samples, which the default "penalize" takes."""
    env = gym.make(ENV_ID, **kwargs).unwrapped
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env)
    assert [str(w.message) for w in caught] == []


def test_gym_raise_mode_refuses_the_unmasked_samples_check_env_would_send() -> None:
    env = ArenaGymEnv(illegal_action="raise")
    env.reset(seed=123)
    before = env.battle.state_hash()
    legal = env.battle.legal_actions()
    env.action_space.seed(123)
    sample = next(int(a) for a in iter(env.action_space.sample, None) if int(a) not in legal)
    for bad in (sample, -1, 163, 2.0, None):
        with pytest.raises(IllegalActionError) as err:
            env.step(bad)
        assert f"{legal}" in str(err.value), f"message must list the legal ids: {err.value}"
    assert env.battle.state_hash() == before


def test_gym_penalize_mode_ends_the_episode_with_minus_one() -> None:
    env = ArenaGymEnv()  # penalize is the default
    obs, info = env.reset(seed=9)
    illegal = int(np.flatnonzero(info["action_mask"] == 0)[0])
    before = env.battle.state_hash()
    obs2, reward, terminated, truncated, info2 = env.step(illegal)
    assert (reward, terminated, truncated) == (-1.0, True, False)
    assert np.array_equal(obs, obs2) and env.battle.state_hash() == before
    assert "is not legal" in info2["illegal_action"] and not info2["action_mask"].any()
    with pytest.raises(RuntimeError, match="call reset"):
        env.step(END_TURN)
    env.reset(seed=9)
    with pytest.raises(IllegalActionError, match="outside the action space"):
        env.step(500)  # not an action id at all: a bug, never a move, so it raises even here


@pytest.mark.parametrize("seat", [1, 2])
@pytest.mark.parametrize("opponent", ["random", "greedy"])
def test_gym_masked_random_episodes_reward_the_result(seat: int, opponent: str) -> None:
    for seed in range(3):
        env = ArenaGymEnv(opponent=opponent, seat=seat)
        rng = np.random.default_rng(seed)
        obs, info = env.reset(seed=seed)
        rewards, terminated = [], False
        while not terminated:
            assert obs in env.observation_space
            assert np.array_equal(obs, env.battle.observation(seat)), "the learner sees its own seat's view"
            assert info["action_mask"].dtype == np.int8, "int8, as Discrete.sample(mask=...) requires"
            assert env.action_masks().dtype == np.int8 and np.array_equal(info["action_mask"], env.action_masks())
            assert env.battle.to_move == seat
            obs, reward, terminated, truncated, info = env.step(_masked_choice(rng, info["action_mask"]))
            assert truncated is False
            rewards.append(reward)
        winner = env.battle.winner
        assert info["winner"] == winner and info["seat"] == seat
        assert rewards[-1] == (0.0 if winner == 0 else 1.0 if winner == seat else -1.0)
        assert all(r == 0.0 for r in rewards[:-1])
        assert not env.action_masks().any()


@pytest.mark.parametrize("seat", [1, 2])
def test_gym_opponent_really_moves(seat: int) -> None:
    opponent_first = _starting_seed(3 - seat)
    env = ArenaGymEnv(opponent="greedy", seat=seat)
    _, info = env.reset(seed=opponent_first)
    assert info["turn"] == 2, "the opponent's whole first turn was played inside reset"
    assert info["opponent_actions"][-1] == END_TURN
    assert env.battle.to_move == seat
    for _ in range(4):
        turn = info["turn"]
        _, _, terminated, _, info = env.step(END_TURN)
        if terminated:
            break
        assert info["turn"] == turn + 2
        assert info["opponent_actions"] and info["opponent_actions"][-1] == END_TURN
        assert env.battle.to_move == seat
    learner_first = _starting_seed(seat)
    _, info = env.reset(seed=learner_first)
    assert info["turn"] == 1 and info["opponent_actions"] == []


def test_gym_same_seed_same_episode_with_fresh_data_each_step() -> None:
    def run(seed: int) -> list:
        env = ArenaGymEnv(opponent="random", seat="random")
        rng = np.random.default_rng(seed)
        obs, info = env.reset(seed=seed)
        trace, previous, terminated = [(obs, info)], (obs, info), False
        while not terminated:
            obs, reward, terminated, truncated, info = env.step(_masked_choice(rng, info["action_mask"]))
            assert not data_shares_objects(previous, (obs, info)), "returned data must be new each call"
            previous = (obs, info)
            trace.append((obs, reward, terminated, truncated, info))
        return trace

    first, second = run(21), run(21)
    assert len(first) > 5
    assert data_equivalence(first, second, exact=True)
    assert not data_equivalence(first, run(22), exact=True)


def test_gym_episode_replays_from_the_battle_seed_alone() -> None:
    """The documented contract: battle, seat and opponent seed all derive from info["battle_seed"]."""
    env = ArenaGymEnv(opponent="random", seat="random")
    env.reset(seed=31)
    obs, info = env.reset()  # an unseeded episode: its seed comes from the env's generator
    battle_seed, seat = info["battle_seed"], info["seat"]
    rng = np.random.default_rng(0)
    learner, opponent_moves, terminated = [], [info["opponent_actions"]], False
    while not terminated:
        learner.append(_masked_choice(rng, info["action_mask"]))
        obs, _, terminated, _, info = env.step(learner[-1])
        opponent_moves.append(info["opponent_actions"])

    replay = engine.new_battle(battle_seed)
    opponent = make_baseline("random", engine.derive_seed(battle_seed, "gym-opponent"))
    assert seat == 1 + engine.derive_seed(battle_seed, "gym-seat") % 2
    replayed = [[]]
    while not replay.is_terminal and replay.to_move != seat:
        replayed[-1].append(opponent.act(replay))
        replay.apply(replayed[-1][-1])
    for action in learner:
        replay.apply(action)
        replayed.append([])
        while not replay.is_terminal and replay.to_move != seat:
            replayed[-1].append(opponent.act(replay))
            replay.apply(replayed[-1][-1])
    assert replayed == opponent_moves
    assert replay == env.battle


def test_gym_unseeded_resets_follow_the_env_generator_and_random_seat_is_seeded() -> None:
    env = ArenaGymEnv(seat="random")
    env.reset(seed=5)
    seeds = [env.reset()[1]["battle_seed"] for _ in range(3)]
    env.reset(seed=5)
    assert [env.reset()[1]["battle_seed"] for _ in range(3)] == seeds
    assert len(set(seeds)) == 3
    seats = {s: env.reset(seed=s)[1]["seat"] for s in range(20)}
    assert set(seats.values()) == {1, 2}
    assert all(env.reset(seed=s)[1]["seat"] == seat for s, seat in seats.items())


def test_gymnasium_make_and_registration() -> None:
    env = gym.make(ENV_ID, render_mode="ansi", opponent="random")
    assert env.spec.id == "ExtraArena-v1"
    obs, info = env.reset(seed=1)
    assert obs.shape == (OBS_DIM,) and obs.dtype == np.float32
    assert np.array_equal(env.get_wrapper_attr("action_masks")(), info["action_mask"])
    assert isinstance(env.render(), str)
    env.step(END_TURN)
    env.close()
    spec = gym.spec(ENV_ID)
    register()  # a second registration must be a no-op, not a gymnasium error or an override warning
    assert gym.spec(ENV_ID) is spec
    assert isinstance(gym.make("extrarlhf.envs:ExtraArena-v1").unwrapped, ArenaGymEnv)


@pytest.mark.parametrize("kwargs, error", [
    ({"opponent": "minimax"}, ValueError), ({"opponent": object()}, TypeError), ({"seat": 3}, ValueError),
    ({"seat": True}, ValueError), ({"illegal_action": "ignore"}, ValueError), ({"render_mode": "opengl"}, ValueError),
    ({"observation_mode": "image"}, ValueError), ({"opponent": []}, ValueError),
])
def test_gym_constructor_rejects_bad_arguments(kwargs: dict, error: type) -> None:
    with pytest.raises(error):
        ArenaGymEnv(**kwargs)


def test_gym_accepts_a_policy_object_as_opponent() -> None:
    class EndTurnOnly:
        def act(self, state: engine.State) -> int:
            return END_TURN

    env = ArenaGymEnv(opponent=EndTurnOnly(), seat=2)
    _, info = env.reset(seed=_starting_seed(1))
    assert info["opponent_actions"] == [END_TURN]
