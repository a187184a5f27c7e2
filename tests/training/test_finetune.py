"""The policy-gradient fine-tune (extrarlhf/training/ppo.py, finetune.py) on real checkpoints
and real battles stepped by the native core."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
import torch

import engine
from adapters.model_files import read_model_file
from extrarlhf.checkpoints.registry import CheckpointRegistry
from extrarlhf.core.errors import InvalidArgument, NotFound, RLHFError
from extrarlhf.training.card import read_card
from extrarlhf.training.finetune import finetune_policy
from extrarlhf.training.model import from_onnx
from extrarlhf.training.ppo import FinetuneSettings
from tests.native_helpers import require_native
from tests.onnx_factory import action_model, v5_model
from tests.training_helpers import train_small

require_native()

TINY = {"num_envs": 8, "horizon": 8, "minibatch": 32, "eval_every": 1, "eval_battles": 16, "max_updates": 2,
        "threads": 1, "selection_battles": 24}


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ft") / "checkpoints"
    train_small(root, "bc")
    return root


def _copy(base: Path, dest: Path) -> Path:
    import shutil

    shutil.copytree(base, dest)
    return dest


def test_finetune_registers_the_best_network_with_its_card_and_is_deterministic(base: Path, tmp_path: Path) -> None:
    ck = _copy(base, tmp_path / "ck")
    registry = CheckpointRegistry(ck)
    first = finetune_policy("bc", "tuned", 5, minutes=5, checkpoints_dir=ck, **TINY)
    again = finetune_policy("bc", "tuned-again", 5, minutes=5, checkpoints_dir=ck, **TINY)
    assert first["updates"] == again["updates"] == 2
    assert first["weights_hash"] == again["weights_hash"]  # same seed, settings and updates: the same weights
    scores = [e["score"] for e in first["evaluations"]]
    assert [e["update"] for e in first["evaluations"]] == [0, 1, 2]
    assert first["best"]["score"] == max(scores) and first["start"]["score"] == scores[0]
    assert first["improved"] == (max(scores[1:]) > scores[0])
    tuned = registry.get("tuned")
    assert tuned.kind == "v5" and tuned.weights_hash == first["weights_hash"]
    if not first["improved"]:  # no update beat the start: the base network is what was registered
        assert tuned.weights_hash == registry.get("bc").weights_hash
    card = read_card(ck, "tuned")
    assert card["training"]["method"] == "ppo_finetune" and card["dataset"] is None
    assert card["training"]["base"] == {"name": "bc", "weights_hash": registry.get("bc").weights_hash}
    assert card["training"]["settings"]["opponents"] == ["baseline:greedy"] and card["training"]["settings"]["ema"] == 0.99
    assert "moving average of the learner's weights (decay 0.99 per update)" in card["training"]["selection"]
    assert len(card["metrics"]["per_update"]) == 2 and card["metrics"]["evaluations"] == first["evaluations"]
    assert first["export_verification"]["max_abs_logit_diff"] <= first["export_verification"]["tolerance"]

    # the registered file is the network: onnxruntime's argmax is torch's on a real decision point
    net = from_onnx(onnx.load_from_string(read_model_file(tuned.path)))
    state = engine.new_battle(11)
    legal = state.legal_actions()
    obs = torch.from_numpy(engine.features.observation(state, state.to_move)[None])
    feats = torch.from_numpy(engine.features.action_features(state, legal)[None])
    logits, _ = net(obs, feats, torch.ones(1, len(legal)))
    decision = registry.policy("tuned").decide(state)
    assert not decision.degraded and decision.action_id == legal[int(np.argmax(logits.detach().numpy()[0]))]


def test_finetune_refuses_bad_input_before_playing(base: Path, tmp_path: Path) -> None:
    ck = _copy(base, tmp_path / "ck")
    before = sorted(p.name for p in ck.iterdir())
    with pytest.raises(NotFound):
        finetune_policy("no-such", "tuned", checkpoints_dir=ck, **TINY)
    with pytest.raises(RLHFError, match=r"checkpoint 'bc' already exists; choose another name or pass overwrite=true"):
        finetune_policy("bc", "bc", checkpoints_dir=ck, **TINY)
    with pytest.raises(InvalidArgument, match=r"opponents must be specs the native core plays .* got \['bc'\]"):
        finetune_policy("bc", "tuned", checkpoints_dir=ck, opponents=["bc"])
    with pytest.raises(InvalidArgument, match=r"lr must be a number in \(0.0, 1.0\], got 0"):
        finetune_policy("bc", "tuned", checkpoints_dir=ck, lr=0)
    with pytest.raises(InvalidArgument, match=r"unknown fine-tune setting .*'batch'.*the settings are opponents, "):
        finetune_policy("bc", "tuned", checkpoints_dir=ck, batch=3)
    with pytest.raises(InvalidArgument, match=r"minutes must be a number in \(0, 1440\], got 0"):
        finetune_policy("bc", "tuned", checkpoints_dir=ck, minutes=0)
    path = tmp_path / "v4.onnx"
    onnx.save(action_model(), path)
    CheckpointRegistry(ck).register("v4", path, "action_onnx")
    with pytest.raises(InvalidArgument, match=r"checkpoint 'v4' is a action_onnx model; only v5 checkpoints"):
        finetune_policy("v4", "tuned", checkpoints_dir=ck, **TINY)
    onnx.save(v5_model(), tmp_path / "scripted.onnx")
    CheckpointRegistry(ck).register("scripted", tmp_path / "scripted.onnx", "v5")
    with pytest.raises(InvalidArgument, match=r"checkpoint 'scripted': not a v5 checkpoint of this project's trainer"):
        finetune_policy("scripted", "tuned", checkpoints_dir=ck, **TINY)
    assert sorted(p.name for p in ck.iterdir() if "v4" not in p.name and "scripted" not in p.name) == before
    assert "tuned" not in CheckpointRegistry(ck).specs()


def test_settings_say_what_is_wrong() -> None:
    with pytest.raises(InvalidArgument, match=r"num_envs must be an integer >= 1, got 0"):
        FinetuneSettings(num_envs=0)
    with pytest.raises(InvalidArgument, match=r"gae_lambda must be a number in \[0.0, 1.0\], got 1.5"):
        FinetuneSettings(gae_lambda=1.5)
    assert FinetuneSettings().opponents == ("baseline:greedy",)


def test_the_finetune_command_reports_and_refuses_in_one_line(base: Path, tmp_path: Path) -> None:
    from tests.test_cli import assert_clean_error, cli

    ck = _copy(base, tmp_path / "ck")
    proc = cli("finetune", "bc", "--name", "tuned", "--minutes", "0.1", "--envs", "8", "--checkpoints-dir", str(ck))
    assert proc.returncode == 0, proc.stderr
    assert "tuned: v5 checkpoint fine-tuned from bc with PPO against baseline:greedy" in proc.stdout
    assert "next: python -m extrarlhf benchmark tuned bc" in proc.stdout and "finetune tuned [" in proc.stderr
    assert read_card(ck, "tuned")["training"]["method"] == "ppo_finetune"
    assert_clean_error(cli("finetune", "bc", "--name", "other", "--opponent", "bc", "--checkpoints-dir", str(ck)),
                       "invalid_argument", "opponents must be specs the native core plays")
    assert "other" not in CheckpointRegistry(ck).specs()


def test_ema_returns_the_moving_average_of_the_learners_weights(base: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from extrarlhf.training import ppo
    from extrarlhf.training.finetune import load_base

    # every evaluation scores higher than the one before, so the network returned is the last one evaluated
    calls = iter(range(1000))
    monkeypatch.setattr(ppo, "evaluate", lambda *a: {"score": next(calls) / 1000})
    _, net = load_base(CheckpointRegistry(base), "bc")
    tiny = {**TINY, "max_updates": 1, "ema": 0.0}  # the learner itself

    def weights(result: ppo.FinetuneResult) -> dict[str, torch.Tensor]:
        return {k: v.clone() for k, v in result.net.state_dict().items()}

    w1 = weights(ppo.finetune(net, FinetuneSettings(**tiny), 5, seconds=300))
    w2 = weights(ppo.finetune(net, FinetuneSettings(**{**tiny, "max_updates": 2}), 5, seconds=300))
    averaged = ppo.finetune(net, FinetuneSettings(**{**tiny, "max_updates": 2, "ema": 0.75}), 5, seconds=300)
    assert averaged.best["update"] == 2 and averaged.settings["ema"] == 0.75
    assert all(not torch.equal(w1[k], w2[k]) for k in w1)  # the second update moved every parameter
    for k, v in averaged.net.state_dict().items():  # the first update's weights, then 0.75 of them + 0.25 of the next
        torch.testing.assert_close(v, 0.75 * w1[k] + 0.25 * w2[k], rtol=1e-5, atol=1e-6)
    with pytest.raises(InvalidArgument, match=r"ema must be a number in \[0.0, 0.9999\], got 1.0"):
        FinetuneSettings(ema=1.0)


def test_parallel_learners_keep_the_best_of_the_base_each_learner_their_average_and_ensemble(base: Path) -> None:
    import multiprocessing

    from engine import derive_seed

    from extrarlhf.training import ppo
    from extrarlhf.training.finetune import load_base

    _, net = load_base(CheckpointRegistry(base), "bc")
    tiny = {**TINY, "max_updates": 2}
    alone = ppo.finetune(net, FinetuneSettings(**tiny), 5, seconds=300)
    both = ppo.finetune(net, FinetuneSettings(**tiny, learners=2), 5, seconds=300)
    # learner 0 is the one-learner fine-tune of the same seed, in its own process; learner 1 has another seed
    first = [{k: v for k, v in h.items() if k not in ("learner", "seconds")} for h in both.history if h["learner"] == 0]
    assert first == [{k: v for k, v in h.items() if k != "seconds"} for h in alone.history]
    assert [e for e in both.evaluations if e["learner"] == 0] == [{"learner": 0, **e} for e in alone.evaluations]
    assert any(h["learner"] == 1 for h in both.history) and ppo.learner_seed(5, 0) == 5 != ppo.learner_seed(5, 1)
    # the selection: every candidate on the same fresh battles, the best (earliest on a tie) is returned
    selection = both.best["selection"]
    assert [c["candidate"] for c in selection] == ["base", "ensemble", "average", "learner 0", "learner 1"]
    assert {c["battles"] for c in selection} == {24} and both.start == selection[0]
    top = max(c["score"] for c in selection)
    assert both.best["candidate"] == next(c["candidate"] for c in selection if c["score"] == top)
    assert both.improved == (both.best["candidate"] != "base")
    score = ppo.evaluate(both.net, "baseline:greedy", selection[0]["battles"],
                         derive_seed(5, "ppo-selection") >> 2)["score"]
    assert score == both.best["score"]  # what is returned is the network that scored it
    assert multiprocessing.active_children() == []  # the learners' processes are gone
    picked = [c["candidate"] for c in selection].index(both.best["candidate"])
    assert ("update" in both.best) == (picked >= 3)  # a learner's pick says which of its updates it is
    with pytest.raises(InvalidArgument, match=r"learners must be at most 8 \(one process each\), got 9"):
        FinetuneSettings(learners=9)
    with pytest.raises(InvalidArgument, match=r"selection_battles must be an integer >= 1, got 0"):
        FinetuneSettings(selection_battles=0)


def test_the_selection_keeps_time_for_every_candidate_by_its_networks() -> None:
    from extrarlhf.training.ppo import POOL_START_SECONDS, SELECTION_SECONDS_PER_1K, selection_seconds

    per_network = SELECTION_SECONDS_PER_1K * 4  # 4,096 battles
    # a plain base, six learners: base, average, six learners and their ensemble (six networks)
    assert selection_seconds(1, 6, 4096, 2) == pytest.approx(POOL_START_SECONDS + per_network * 14 / 2)
    # an ensemble of six as the base: every candidate is six networks, and no ensemble of ensembles
    assert selection_seconds(6, 2, 4096, 2) == pytest.approx(POOL_START_SECONDS + per_network * 24 / 2)
    # two stages of three: base, average, six learners, one distilled network and the six-member ensemble
    assert selection_seconds(1, 6, 4096, 2, distilled=1) == pytest.approx(POOL_START_SECONDS + per_network * 15 / 2)


def test_a_weight_average_is_the_mean_of_every_parameter(base: Path) -> None:
    from extrarlhf.training import ppo
    from extrarlhf.training.finetune import load_base

    _, a = load_base(CheckpointRegistry(base), "bc")
    b = ppo.ActionScorer(a.arch)
    b.reset_parameters(torch.Generator().manual_seed(3))
    soup = ppo.weight_average([a, b])
    for k, v in soup.state_dict().items():
        torch.testing.assert_close(v, (a.state_dict()[k] + b.state_dict()[k]) / 2)
    assert not torch.equal(soup.state_dict()["obs_in.weight"], a.state_dict()["obs_in.weight"])


def test_an_ensemble_is_one_v5_network_whose_logits_are_the_mean_of_its_members(base: Path, tmp_path: Path) -> None:
    import onnxruntime as ort

    from extrarlhf.training import ppo
    from extrarlhf.training.export import build_model, torch_forward
    from extrarlhf.training.finetune import load_base
    from extrarlhf.training.model import Architecture, pack_ensemble

    _, a = load_base(CheckpointRegistry(base), "bc")
    members = [a]
    for seed in (3, 4):
        m = ppo.ActionScorer(a.arch)
        m.reset_parameters(torch.Generator().manual_seed(seed))
        members.append(m)
    packed = pack_ensemble(members)
    assert packed.arch == Architecture(a.arch.hidden, a.arch.hidden2, a.arch.depth, a.arch.value_hidden, members=3)
    rng = np.random.default_rng(0)
    obs = rng.uniform(-1, 1, (5, engine.OBS_DIM)).astype(np.float32)
    feats = rng.uniform(-1, 1, (5, 6, engine.ACTION_FEATURE_DIM)).astype(np.float32)
    mask = np.ones((5, 6), np.float32)
    mask[:, 4:] = 0.0
    logits, value = torch_forward(packed, obs, feats, mask)
    each = [torch_forward(m, obs, feats, mask) for m in members]
    np.testing.assert_allclose(logits[:, :4], np.mean([lg[:, :4] for lg, _ in each], axis=0), atol=1e-5)
    assert (logits[:, 4:] < -1e8).all()
    np.testing.assert_array_equal(value, each[0][1])  # the first member's value head
    # one ONNX graph of the v5 signature that onnxruntime runs, read back as the same ensemble
    proto = build_model(packed)
    run = ort.InferenceSession(proto.SerializeToString()).run(
        None, {"obs": obs, "action_features": feats, "action_mask": mask})
    np.testing.assert_allclose(run[0][:, :4], logits[:, :4], atol=1e-4)
    back = from_onnx(proto)
    assert back.arch == packed.arch
    np.testing.assert_array_equal(torch_forward(back, obs, feats, mask)[0], logits)
    # the card says what it is
    from extrarlhf.training.card import model_block
    block = model_block(packed.arch)
    assert block["members"] == 3 and block["description"].startswith("an ensemble of 3 scorers side by side")
    assert model_block(a.arch)["members"] == 1
    # only plain networks of one architecture pack
    other = ppo.ActionScorer(Architecture(hidden=8, hidden2=4, depth=1, value_hidden=4))
    with pytest.raises(ValueError, match="an ensemble packs plain networks \\(members 1\\) of one architecture"):
        pack_ensemble([a, other])
    with pytest.raises(ValueError, match="members 1"):
        pack_ensemble([packed, packed])


def test_staged_learners_restart_from_the_distilled_ensemble_and_all_are_candidates(base: Path) -> None:
    import multiprocessing

    from extrarlhf.training import ppo
    from extrarlhf.training.finetune import load_base

    _, net = load_base(CheckpointRegistry(base), "bc")
    settings = FinetuneSettings(**TINY, learners=2, stages=2, distill_battles=8, distill_steps=6)
    staged = ppo.finetune(net, settings, 5, seconds=300)
    selection = staged.best["selection"]
    assert [c["candidate"] for c in selection] == ["base", "ensemble", "distilled 1", "average", "learner 0",
                                                  "learner 1", "learner 2", "learner 3"]
    assert {h["learner"] for h in staged.history} == {0, 1, 2, 3}  # two learners in each of the two stages
    assert {c["battles"] for c in selection} == {24}
    (figures,) = staged.best["distilled"]
    assert figures["decisions"] == 8 * 6 and len(figures["kl_per_epoch"]) == 3
    # stage 1 is the two-learner fine-tune of the same seed: learner 0 and 1 the same updates
    plain = ppo.finetune(net, FinetuneSettings(**TINY, learners=2), 5, seconds=300)
    strip = lambda hs: [{k: v for k, v in h.items() if k != "seconds"} for h in hs if h["learner"] < 2]  # noqa: E731
    assert strip(staged.history) == strip(plain.history)
    assert multiprocessing.active_children() == []
    with pytest.raises(InvalidArgument, match=r"stages must be 1, or up to 4 with learners >= 2 .*got stages 2 with "
                                              r"learners 1"):
        FinetuneSettings(stages=2)
    with pytest.raises(InvalidArgument, match=r"got stages 5 with learners 2"):
        FinetuneSettings(stages=5, learners=2)
    packed = ppo.pack_ensemble([net, net])
    with pytest.raises(InvalidArgument, match=r"this base is an ensemble of 2: fine-tune it with stages 1"):
        ppo.finetune(packed, settings, 5, seconds=300)


def test_distillation_moves_a_network_toward_its_teacher_deterministically(base: Path) -> None:
    from extrarlhf.training import ppo
    from extrarlhf.training.acting import segments
    from extrarlhf.training.distill import DistillSettings, collect, distill
    from extrarlhf.training.finetune import load_base

    _, student = load_base(CheckpointRegistry(base), "bc")
    teacher = ppo.ActionScorer(student.arch)
    teacher.reset_parameters(torch.Generator().manual_seed(11))
    small = DistillSettings(battles=16, steps=12, epochs=4, lr=3e-3)
    one, figures = distill(teacher, student, "baseline:greedy", 0.3, 7, small)
    again, _ = distill(teacher, student, "baseline:greedy", 0.3, 7, small)
    for k, v in one.state_dict().items():
        assert torch.equal(v, again.state_dict()[k])  # the same seed: the same network
    assert figures["decisions"] == 16 * 12 and figures["kl_per_epoch"][-1] < figures["kl_per_epoch"][0]
    # the student's argmax agrees with the teacher's more often after than before, on fresh teacher states
    obs, feats, counts, logits = collect(teacher, "baseline:greedy", small, 0.3, torch.Generator().manual_seed(99))

    def agreement(net: ppo.ActionScorer) -> float:
        seg, starts = segments(torch.from_numpy(counts))
        with torch.no_grad():
            mine = net.flat_logits(torch.from_numpy(obs), torch.from_numpy(feats), seg).numpy()
        same = [np.argmax(mine[a:a + c]) == np.argmax(logits[a:a + c]) for a, c in zip(starts.tolist(), counts.tolist())]
        return float(np.mean(same))

    assert agreement(one) > agreement(student)
    assert student.state_dict()["obs_in.weight"].data_ptr() != one.state_dict()["obs_in.weight"].data_ptr()
