"""The batched API and the vector envs on it (extrarlhf/envs/vector.py, sb3_vec.py,
engine_native.batch): battle i of the native batch is ArenaGymEnv's episode with the same
battle seed, step by step (observation bytes, masks, rewards, terminations, seeds), for the
opponents the core plays; autoreset, the seed stream, bad input, and the Gymnasium and SB3 APIs.

The native parts are skipped only when engine_native is not built (a failure under
RLHF_REQUIRE_NATIVE=1, as in `make test`)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from engine import ACTION_SPACE_SIZE, OBS_DIM, IllegalActionError, backend
from extrarlhf.envs import VECTOR_ENV_ID, ArenaGymEnv, ArenaVectorEnv, ReferenceBatch
from extrarlhf.envs.vector import episode_seed, make_batch
from tests.native_helpers import native_or_none

engine_native = native_or_none()
if engine_native is not None:
    from engine_native.batch import BattleBatch

needs_native = pytest.mark.skipif(engine_native is None, reason="engine_native is not built (`make setup`)")
KEYS = ("obs", "mask", "seed", "seat")
STEP_KEYS = KEYS + ("reward", "terminated", "final_obs", "winner", "illegal", "final_seed")


@pytest.fixture
def python_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXTRAARENA_ENGINE", "python")


def _same(a: dict, b: dict, keys: tuple[str, ...], where: str) -> None:
    for key in keys:
        assert a[key].dtype == b[key].dtype and a[key].shape == b[key].shape, (where, key)
        assert a[key].tobytes() == b[key].tobytes(), (where, key, np.argwhere(a[key] != b[key])[:4])


def _actions(mask: np.ndarray, rng: np.random.Generator, illegal_rate: float) -> np.ndarray:
    out = np.empty(len(mask), np.int64)
    for i, row in enumerate(mask):
        legal = np.flatnonzero(row)
        out[i] = rng.integers(ACTION_SPACE_SIZE) if rng.random() < illegal_rate else rng.choice(legal)
    return out


@needs_native
@pytest.mark.parametrize("opponent, seat, n, steps, illegal_rate", [
    ("baseline:random", "random", 6, 700, 0.01),
    ("baseline:greedy", [2, 1, "random", 2], 4, 300, 0.0),
    ("search:baseline:greedy?sims=4", 1, 2, 25, 0.0),
    ("search:baseline:random?sims=3", "random", 2, 25, 0.0),
])
def test_native_batch_equals_the_single_env_step_by_step(python_engine: None, opponent: str, seat: object, n: int,
                                                         steps: int, illegal_rate: float) -> None:
    native = BattleBatch(n, opponent=opponent, seat=seat)
    reference = ReferenceBatch(n, opponent=opponent, seat=seat)  # one ArenaGymEnv per battle, Python engine
    a, b = native.reset(11), reference.reset(11)
    _same(a, b, KEYS, "reset")
    assert [int(s) for s in a["seed"]] == [episode_seed(11, i, 0) for i in range(n)]
    rng, ended = np.random.default_rng(5), 0
    for t in range(steps):
        actions = _actions(a["mask"], rng, illegal_rate)
        a, b = native.step(actions), reference.step(actions)
        _same(a, b, STEP_KEYS, f"step {t}")
        ended += int(a["terminated"].sum())
    assert ended > 0 or steps < 100


@needs_native
def test_row_i_is_the_single_envs_episode_and_autoreset_follows_the_seed_stream() -> None:
    batch = BattleBatch(3, opponent="baseline:random", seat="random")
    out = batch.reset(4)
    env = ArenaGymEnv(opponent="baseline:random", seat="random")
    obs, info = env.reset(seed=int(out["seed"][1]))
    assert obs.tobytes() == out["obs"][1].tobytes() and info["seat"] == out["seat"][1]
    episodes, rng = [0, 0, 0], np.random.default_rng(0)
    while min(episodes) < 2:
        previous, seats = out["seed"].copy(), out["seat"].copy()
        out = batch.step(_actions(out["mask"], rng, 0.0))
        ended = np.flatnonzero(out["terminated"])
        assert out["final_obs"].shape == (len(ended), OBS_DIM)
        for j, i in enumerate(ended):
            assert out["final_seed"][i] == previous[i] == episode_seed(4, i, episodes[i])
            winner = out["winner"][i]
            assert winner in (0, 1, 2) and not out["illegal"][i]
            assert out["reward"][i] == (0.0 if winner == 0 else 1.0 if winner == seats[i] else -1.0)
            episodes[i] += 1
            assert out["seed"][i] == episode_seed(4, i, episodes[i])
            assert out["mask"][i].any() and out["final_obs"][j].any()


@needs_native
def test_penalized_illegal_action_ends_only_that_episode() -> None:
    batch = BattleBatch(2, opponent="baseline:greedy")
    out = batch.reset(9)
    legal0 = int(np.flatnonzero(out["mask"][0])[0])
    illegal1 = int(np.flatnonzero(out["mask"][1] == 0)[-1])
    before = batch.battle(1).observation(1)
    step = batch.step(np.array([legal0, illegal1], np.int32))
    assert step["terminated"].tolist() == [False, True] and step["illegal"].tolist() == [False, True]
    assert step["reward"][1] == -1.0 and step["winner"][1] == -1
    assert step["final_obs"].tobytes() == before.tobytes()  # the ended episode's state is unchanged
    assert step["seed"][1] == episode_seed(9, 1, 1)


@needs_native
def test_raise_mode_refuses_the_whole_step_with_the_reference_reason(python_engine: None) -> None:
    native, reference = (BattleBatch(3, opponent="baseline:random", illegal_action="raise"),
                         ReferenceBatch(3, opponent="baseline:random", illegal_action="raise"))
    a, _ = native.reset(2), reference.reset(2)
    hashes = [native.battle(i).state_hash() for i in range(3)]
    actions = _actions(a["mask"], np.random.default_rng(1), 0.0)
    actions[2] = int(np.flatnonzero(a["mask"][2] == 0)[0])
    messages = []
    for batch in (native, reference):
        with pytest.raises(IllegalActionError) as error:
            batch.step(actions)
        messages.append(str(error.value))
    assert messages[0] == messages[1]
    assert messages[0].startswith("battle 2: ") and "legal" in messages[0] and messages[0].endswith("nothing was stepped")
    assert [native.battle(i).state_hash() for i in range(3)] == hashes  # nothing was stepped
    actions[2] = int(np.flatnonzero(a["mask"][2])[0])
    _same(native.step(actions), reference.step(actions), STEP_KEYS, "after the refusal")


@pytest.mark.parametrize("actions, error, message", [
    (np.zeros(2, np.int64), ValueError, r"shape \(3,\); got shape \(2,\)"),
    (np.zeros((3, 1), np.int64), ValueError, r"shape \(3,\); got shape \(3, 1\)"),
    (np.zeros(3, np.float32), IllegalActionError, r"integer action ids 0\.\.162 .*got dtype float32"),
    (np.array(["0", "0", "0"]), IllegalActionError, r"got dtype <U1"),
    (np.array([0, 163, -1]), IllegalActionError, r"battle 1: action id 163 is outside .*\(2 such ids\); nothing was stepped"),
])
@pytest.mark.parametrize("kind", ["native", "python"])
def test_bad_actions_are_refused_before_anything_is_stepped(kind: str, actions: np.ndarray, error: type,
                                                           message: str) -> None:
    if kind == "native" and engine_native is None:
        pytest.skip("engine_native is not built")
    batch = BattleBatch(3) if kind == "native" else ReferenceBatch(3, opponent="baseline:random")
    first = batch.reset(1)
    with pytest.raises(error, match=message):
        batch.step(actions)
    again = batch.step(np.array([np.flatnonzero(m)[0] for m in first["mask"]]))  # still at the reset's decision
    twin = BattleBatch(3) if kind == "native" else ReferenceBatch(3, opponent="baseline:random")
    twin_first = twin.reset(1)
    _same(again, twin.step(np.array([np.flatnonzero(m)[0] for m in twin_first["mask"]])), STEP_KEYS, "after")


@needs_native
def test_bad_construction_and_call_order_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="the native batch plays 'baseline:random'.*got 'baseline:nope'"):
        BattleBatch(2, opponent="baseline:nope")
    with pytest.raises(ValueError, match="num_battles must be an integer >= 1, got 0"):
        BattleBatch(0)
    with pytest.raises(ValueError, match=r"seat must be 1, 2 or 'random' \(or one of these per battle\), got 3"):
        BattleBatch(2, seat=3)
    with pytest.raises(ValueError, match=r"one of these per battle \(2\); got 3 seats"):
        BattleBatch(2, seat=[1, 2, 1])
    batch = BattleBatch(2)
    with pytest.raises(RuntimeError, match=r"call reset\(seed\) before step\(\)"):
        batch.step(np.zeros(2, np.int64))
    with pytest.raises(ValueError, match="seed must be an integer >= 0, got -1"):
        batch.reset(-1)
    with pytest.raises(IndexError, match=r"battle index 2 is outside 0\.\.1"):
        batch.battle(2)


def test_vector_env_api_masks_and_same_step_autoreset() -> None:
    env = gym.make_vec(VECTOR_ENV_ID, num_envs=4, opponent="baseline:random", seat="random")
    assert isinstance(env, ArenaVectorEnv) and env.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    assert env.backend == backend.name()  # native when built, python under EXTRAARENA_ENGINE=python
    assert env.observation_space.shape == (4, OBS_DIM) and env.single_action_space.n == ACTION_SPACE_SIZE
    obs, info = env.reset(seed=3)
    again, _ = ArenaVectorEnv(4, opponent="baseline:random", seat="random").reset(seed=3)
    assert obs.tobytes() == again.tobytes() and obs.dtype == np.float32
    assert env.action_masks() is info["action_mask"] and env.action_masks().dtype == np.int8
    rng, finals = np.random.default_rng(2), 0
    for _ in range(400):
        mask = env.action_masks()
        actions = np.array([env.single_action_space.sample(mask=row, probability=None) for row in mask])
        obs, reward, terminated, truncated, info = env.step(actions)
        assert reward.dtype == np.float32 and not truncated.any() and obs.shape == (4, OBS_DIM)
        assert all(info["action_mask"][i].any() for i in range(4))  # every row is a live decision point
        if terminated.any():
            finals += 1
            assert info["_final_obs"].tolist() == terminated.tolist()
            for i in np.flatnonzero(terminated):
                assert info["final_obs"][i].shape == (OBS_DIM,)
                assert info["final_info"]["winner"][i] in (0, 1, 2)
                assert info["final_info"]["battle_seed"][i] != info["battle_seed"][i]
            assert all(info["final_obs"][i] is None for i in np.flatnonzero(~terminated))
        rng.random()
    assert finals > 0
    with pytest.raises(ValueError, match="does not render"):
        ArenaVectorEnv(2, render_mode="human")


@needs_native
def test_vector_env_is_the_same_on_both_backends(monkeypatch: pytest.MonkeyPatch) -> None:
    def run() -> list[bytes]:
        env = ArenaVectorEnv(3, opponent="baseline:greedy", seat="random")
        obs, _ = env.reset(seed=8)
        trace, rng = [obs.tobytes()], np.random.default_rng(3)
        for _ in range(120):
            obs, reward, terminated, _, info = env.step(_actions(env.action_masks(), rng, 0.0))
            trace += [obs.tobytes(), reward.tobytes(), terminated.tobytes(), info["battle_seed"].tobytes()]
        return [env.backend, *trace]

    monkeypatch.setenv("EXTRAARENA_ENGINE", "native")
    native = run()
    monkeypatch.setenv("EXTRAARENA_ENGINE", "python")
    python = run()
    assert native[0] == "native" and python[0] == "python" and native[1:] == python[1:]


def test_make_batch_falls_back_to_the_reference_for_policy_objects() -> None:
    from adapters.baselines import RandomPolicy

    assert isinstance(make_batch(2, opponent=RandomPolicy(3)), ReferenceBatch)
    with pytest.raises(ValueError, match="illegal_action must be one of"):
        make_batch(2, illegal_action="ignore")


def test_sb3_vec_env_masks_terminal_observations_and_maskable_ppo() -> None:
    pytest.importorskip("stable_baselines3", reason="the sb3 extra")
    from stable_baselines3.common.vec_env import VecEnv

    from extrarlhf.envs.sb3_vec import ArenaSB3VecEnv

    env = ArenaSB3VecEnv(4, opponent="baseline:random")
    assert isinstance(env, VecEnv)
    env.seed(5)
    obs = env.reset()
    assert obs.shape == (4, OBS_DIM) and env.reset_infos[0]["battle_seed"] == episode_seed(5, 0, 0)
    masks = np.stack(env.env_method("action_masks"))
    assert masks.shape == (4, ACTION_SPACE_SIZE) and env.has_attr("action_masks")
    with pytest.raises(AttributeError, match="no method 'render'"):
        env.env_method("render")
    rng, done_seen = np.random.default_rng(0), False
    for _ in range(300):
        obs, reward, done, infos = env.step(_actions(env.action_masks(), rng, 0.0))
        for i in np.flatnonzero(done):
            done_seen = True
            assert infos[i]["terminal_observation"].shape == (OBS_DIM,) and infos[i]["TimeLimit.truncated"] is False
    assert done_seen
    sb3_contrib = pytest.importorskip("sb3_contrib", reason="the sb3 extra")
    from sb3_contrib.common.maskable.utils import get_action_masks

    assert get_action_masks(env).shape == (4, ACTION_SPACE_SIZE)
    model = sb3_contrib.MaskablePPO("MlpPolicy", env, n_steps=32, batch_size=64, n_epochs=1, seed=0, device="cpu")
    model.learn(total_timesteps=128)
    assert model.num_timesteps >= 128


# ------------------------------------------------------------------ checkpoint opponents, decided together
@pytest.fixture
def mlp_checkpoint(tmp_path) -> str:
    from extrarlhf.checkpoints.registry import CheckpointRegistry
    from tests import onnx_factory

    root = tmp_path / "checkpoints"
    CheckpointRegistry(root).register("mlp-opponent", onnx_factory.save(onnx_factory.mlp_v5(16, seed=3),
                                                                        tmp_path / "mlp.onnx"), "v5")
    return str(root)


def _lockstep(batch: ReferenceBatch, checkpoints_dir: str, seed: int, steps: int, between=None) -> list[list[int]]:
    """Step ``batch`` and one ArenaGymEnv per battle (the episodes' seeds) with the same actions,
    asserting every row, final observation and battle state equal; returns the opponent's
    decisions per battle per step (reset first), as the single envs report them."""
    n = batch.num_battles
    singles = [ArenaGymEnv(opponent="mlp-opponent", seat="random", checkpoints_dir=checkpoints_dir) for _ in range(n)]
    out = batch.reset(seed)
    if between:
        between()
    infos = [env.reset(seed=episode_seed(seed, i, 0))[1] for i, env in enumerate(singles)]
    decisions, episodes, rng = [[len(info["opponent_actions"]) for info in infos]], [0] * n, np.random.default_rng(4)
    moves: list[list[tuple[int, ...]]] = []
    for t in range(steps):
        for i, env in enumerate(singles):
            assert out["obs"][i].tobytes() == env.battle.observation(env.seat).tobytes(), (t, i)
            assert out["mask"][i].tobytes() == infos[i]["action_mask"].tobytes(), (t, i)
            assert batch.envs[i].battle.state_hash() == env.battle.state_hash(), (t, i)
        actions = _actions(out["mask"], rng, 0.02)
        out = batch.step(actions)
        if between:
            between()
        finals, counts, played = iter(out["final_obs"]), [], []
        for i, env in enumerate(singles):
            obs, reward, terminated, _, infos[i] = env.step(int(actions[i]))
            assert (out["reward"][i], out["terminated"][i]) == (reward, terminated), (t, i)
            counts.append(len(infos[i]["opponent_actions"]))
            played.append(tuple(infos[i]["opponent_actions"]))
            if terminated:
                assert next(finals).tobytes() == obs.tobytes() and out["final_seed"][i] == env.battle_seed
                episodes[i] += 1
                _, infos[i] = env.reset(seed=episode_seed(seed, i, episodes[i]))
                counts[i] += len(infos[i]["opponent_actions"])
        decisions.append(counts)
        moves.append(played)
    assert sum(batch._episodes) > 0
    # the battles' opponents played different moves in the same steps: a batch that gave one
    # battle another's choice would have diverged from its single env (or played an illegal move)
    assert sum(len({m for m in step if m}) > 1 for step in moves) > steps // 3
    return decisions


def test_checkpoint_opponents_decided_together_play_each_battles_own_episode(mlp_checkpoint: str) -> None:
    batch = ReferenceBatch(6, opponent="mlp-opponent", seat="random", checkpoints_dir=mlp_checkpoint)
    assert make_batch(2, opponent="mlp-opponent", checkpoints_dir=mlp_checkpoint).batched_opponents
    _lockstep(batch, mlp_checkpoint, 21, 70)


def test_checkpoint_opponents_cost_one_onnxruntime_run_per_decision_round(mlp_checkpoint: str,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from adapters.onnx_models import load_model
    from extrarlhf.checkpoints.registry import CheckpointRegistry

    session = load_model(CheckpointRegistry(mlp_checkpoint).get("mlp-opponent").path).session  # the shared one
    real, rows, recording = session.run, [], [True]

    def counted(names, feeds, options=None):
        outputs = real(names, feeds, options)
        if recording[0]:
            rows.append(len(feeds["obs"]))
            for k in range(len(feeds["obs"])):  # each row has the bits of a run of its own (argmax needs no more)
                c = int(feeds["action_mask"][k].sum())
                alone = real(names, {"obs": feeds["obs"][k:k + 1], "action_features": feeds["action_features"][k:k + 1, :c],
                                     "action_mask": feeds["action_mask"][k:k + 1, :c]}, options)
                assert alone[0].tobytes() == outputs[0][k, :c].tobytes() and alone[1].tobytes() == outputs[1][k].tobytes()
        return outputs

    monkeypatch.setattr(session, "run", counted)
    batch = ReferenceBatch(8, opponent="mlp-opponent", seat="random", checkpoints_dir=mlp_checkpoint)
    per_step: list[list[int]] = []

    def between() -> None:  # after each reset/step of the batch, before the single envs step
        per_step.append(rows.copy())
        rows.clear()
        recording[0] = False

    original_step = batch.step

    def step(actions):
        recording[0] = True
        return original_step(actions)

    batch.step = step  # type: ignore[method-assign]
    decisions = _lockstep(batch, mlp_checkpoint, 5, 40, between)
    assert len(per_step) == len(decisions) == 41
    for t, (sizes, counts) in enumerate(zip(per_step, decisions)):
        # a battle's opponent decisions in a step are consecutive rounds from the first one:
        # as many runs as the most decisions one battle needs, every decision a row of one
        assert len(sizes) == max(counts) and sum(sizes) == sum(counts), (t, sizes, counts)
    assert sum(map(sum, decisions)) > 2 * sum(map(len, per_step)), "8 battles: over half the runs saved"


def _mid_battle_states(count: int) -> list:
    """``count`` states of random battles at varied points (varied numbers of legal actions)."""
    from engine import SplitMix64, new_battle

    states, seed = [], 0
    while len(states) < count:
        state, rng = new_battle(seed), SplitMix64(seed)
        while not state.is_terminal:
            if rng.below(3) == 0:
                states.append(state.clone())
            legal = state.legal_actions()
            state.apply(legal[rng.below(len(legal))])
        seed += 1
    return states[:count]


def test_a_large_batch_runs_in_buckets_of_similar_width_with_every_decision_unchanged(
        mlp_checkpoint: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from adapters import onnx_models
    from extrarlhf.checkpoints.registry import CheckpointRegistry

    policy = onnx_models.ModelPolicy(CheckpointRegistry(mlp_checkpoint).get("mlp-opponent").path, "v5")
    states = _mid_battle_states(120)
    widest = max(len(s.legal_actions()) for s in states)
    session, shapes = policy.model.session, []
    real = session.run

    def recorded(names, feeds, options=None):
        shapes.append(feeds["action_mask"].shape)
        return real(names, feeds, options)

    monkeypatch.setattr(session, "run", recorded)
    together = policy.decide_batch(states)
    assert 2 <= len(shapes) <= 4 and sum(n for n, _ in shapes) == len(states), shapes
    assert min(w for _, w in shapes) < widest == max(w for _, w in shapes), shapes  # narrower runs, less padding
    assert sum(n * w for n, w in shapes) < len(states) * widest
    monkeypatch.setattr(onnx_models, "_MIN_SPLIT", 10 ** 9)
    shapes.clear()
    whole = policy.decide_batch(states)
    assert shapes == [(len(states), widest)]
    assert together == whole  # the same actions, probabilities and values, bit for bit
    alone = [policy.decide(s) for s in states]  # the logits' bits; the float64 softmax sums over its own width
    assert [(d.action_id, d.value) for d in together] == [(d.action_id, d.value) for d in alone]
    assert all(np.allclose(a.probabilities, b.probabilities, rtol=1e-12, atol=0) for a, b in zip(together, alone))


@needs_native
def test_the_cores_model_feed_has_the_bytes_of_the_python_one(monkeypatch: pytest.MonkeyPatch) -> None:
    from adapters import onnx_models

    if backend.name() != "native":
        pytest.skip("the core's feed is used on the native backend only (make test's Python-backend pass)")
    states = _mid_battle_states(90) + [s.clone() for s in _mid_battle_states(3)]
    assert all(hasattr(s, "_core") for s in states)
    for mask_dtype in (np.float32, np.bool_):
        native, legal = onnx_models.build_inputs("v5", states, mask_dtype)
        monkeypatch.setattr(onnx_models, "native_model_inputs", lambda _: None)
        python, python_legal = onnx_models.build_inputs("v5", states, mask_dtype)
        monkeypatch.undo()
        assert legal == python_legal and native.keys() == python.keys()
        for key in native:
            assert native[key].dtype == python[key].dtype and native[key].shape == python[key].shape, key
            assert native[key].tobytes() == python[key].tobytes(), key
    finished = states[0].clone()
    while not finished.is_terminal:
        finished.apply(finished.legal_actions()[0])
    with pytest.raises(ValueError, match="cannot decide in a finished battle"):
        onnx_models.build_inputs("v5", states[:40] + [finished])
    with pytest.raises(TypeError, match=r"states\[1\] is not an engine_native.State"):
        engine_native.model_inputs([states[0]._core, "not a state"])


def test_checkpoint_policy_is_reseeded_until_the_registry_changes(mlp_checkpoint: str, tmp_path) -> None:
    from extrarlhf.checkpoints.registry import CheckpointRegistry
    from extrarlhf.envs.opponents import resolve_opponent
    from extrarlhf.envs.vector import _OpponentPolicies
    from tests import onnx_factory

    member, policies = resolve_opponent("mlp-opponent", mlp_checkpoint), _OpponentPolicies()
    first, second, fresh = policies.make(member, 1), policies.make(member, 2), member.make(2)
    assert second is not first and second.model is first.model is fresh.model
    same = lambda p: {k: v for k, v in vars(p).items() if k not in ("rng", "fallback_policy")}  # noqa: E731
    assert same(second) == same(fresh) and second.seed == 2
    assert [second.rng.next_u64() for _ in range(3)] == [fresh.rng.next_u64() for _ in range(3)]
    CheckpointRegistry(mlp_checkpoint).register("mlp-opponent", onnx_factory.save(
        onnx_factory.mlp_v5(16, seed=4), tmp_path / "other.onnx"), "v5", overwrite=True)
    changed = policies.make(member, 3)
    assert changed.weights_hash == member.make(3).weights_hash != first.weights_hash
