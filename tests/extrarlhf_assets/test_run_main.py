"""``make run`` (``python -m extrarlhf_assets.run_main``) as a user runs it: outcomes that are
not errors (an inconclusive benchmark, a refused promotion) end in a successful run, exit 0,
no traceback, a summary that names each reason once, and Dagster's full log in a file; the
first run promotes under the first-promotion rule and the next one benchmarks against it."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEACHER = "search:baseline:greedy?sims=4"  # the default teacher's kind, cheaper


def _run(cwd: Path, *args: str) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RLHF_", "DAGSTER_"))}
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run([sys.executable, "-m", "extrarlhf_assets.run_main", "--group", "g", "--p1-model", TEACHER,
                          "--epochs", "3", "--seed", "1", "--baseline-pairs", "1", "--workers", "1",
                          "--dagster-home", str(cwd / "home"), *args], cwd=cwd, env=env, capture_output=True,
                         text=True, timeout=600)
    summary = out.stdout.split("== ExtraRLHF campaign summary", 1)[-1]
    return out.returncode, out.stdout + out.stderr, summary


def _promoted(cwd: Path) -> str:
    return json.loads((cwd / "checkpoints" / "promoted.json").read_text())["name"]


def test_gates_are_outcomes_not_errors(tmp_path):
    # nothing promoted: the incumbent is baseline:random (the first-promotion rule, said twice)
    # and 4 pairs cannot pass: a warning, promotion skipped with its reason
    code, output, summary = _run(tmp_path, "--battles", "24", "--pairs", "4", "--quiet")
    assert code == 0, output
    assert "Traceback" not in output and "DagsterAssetCheckFailedError" not in output and "ERROR" not in output
    assert "nothing is promoted yet: the incumbent is baseline:random (the first-promotion rule" in output
    assert "success) ==" in summary and "vs baseline:random" in summary and "first-promotion rule" in summary
    assert "benchmark_passed=warn" in summary and "nemesis_lite_ready=" in summary
    assert "nemesis_standard" not in summary  # no Standard split per session group: nothing to warn about
    assert "FAIL" not in summary
    assert "promoted_policy not built: held by benchmark_passed (above)" in summary
    log = Path(re.search(r"Dagster's full log of the run: (\S+)", summary).group(1))
    assert log.parent == tmp_path / "home" / "logs" and "benchmark_passed" in log.read_text()
    assert "STEP_SUCCESS" not in output  # --quiet: the console shows warnings only, the file keeps it all
    assert "DEBUG" in log.read_text()
    assert not (tmp_path / "checkpoints" / "promoted.json").exists()

    # enough pairs: the candidate beats random play and is the first promotion
    code, output, summary = _run(tmp_path, "--battles", "24", "--pairs", "150", "--quiet")
    assert code == 0, output
    assert "benchmark_passed=pass" in summary and "PROMOTED g-bc-" in summary and "(previous: none)" in summary
    first = _promoted(tmp_path)
    # the group did not change between the runs: its dataset version was kept
    assert "g/v1 (unchanged group: version kept)" in summary

    # passed against baseline:random, which is no longer the incumbent: refused, the reason once
    code, output, summary = _run(tmp_path, "--battles", "24", "--pairs", "150", "--incumbent", "baseline:random")
    assert code == 0, output
    assert "benchmark_passed=pass" in summary and "not promoted" in summary
    assert summary.count("[current_incumbent]") == 1 and summary.count("was played against") == 1
    assert "Traceback" not in output and _promoted(tmp_path) == first

    # the switch: a promotion decided against another reference on purpose
    code, output, summary = _run(tmp_path, "--battles", "24", "--pairs", "150", "--incumbent", "baseline:random",
                                 "--no-require-current-incumbent", "--quiet")
    assert code == 0, output
    assert f"(previous: {first})" in summary and _promoted(tmp_path) != first
    assert sorted(p.name for p in (tmp_path / "datasets" / "g").iterdir() if p.name.startswith("v")) == ["v1"]


def test_each_run_is_a_round_that_grows_the_group(tmp_path):
    """Without --battles a run adds --more-battles to the group; the second run's candidate
    learns from all of it and is benchmarked against the first run's promoted policy."""
    code, output, summary = _run(tmp_path, "--more-battles", "20", "--pairs", "150", "--quiet")
    assert code == 0, output
    assert "the group holds 20 battles (search:baseline:greedy?sims=4 vs baseline:greedy)" in output
    assert "battle_sessions   20 battles" in summary and "PROMOTED g-bc-" in summary
    first = _promoted(tmp_path)
    # the ladder: its one promotion, against the first-promotion rule's incumbent, with intervals
    assert "policy_ladder     1 promotion(s)" in summary
    assert re.search(rf"  +1 {first} +vs baseline:random: \+\d+ \[[+-]\d+, \+\d+\]; vs greedy [+-]\d+ ", summary)
    code, output, summary = _run(tmp_path, "--more-battles", "20", "--pairs", "20", "--quiet")
    assert code == 0, output
    assert "the group holds 40 battles" in output and "battle_sessions   40 battles" in summary
    assert "g/v2:" in summary  # a new dataset version with the new battles
    assert f"vs {first}:" in summary and "first-promotion rule" not in summary
    candidate = re.search(r"checkpoint        (\S+) ", summary).group(1)
    assert candidate != first
    training = json.loads((tmp_path / "checkpoints" / f"{candidate}.card.json").read_text())["training"]
    assert training["imitate"] == "search" and training["hyperparameters"]["target"] == "search_values"
    assert training["hyperparameters"]["encoder"] == "sets"
    assert training["loss"].startswith("cross-entropy of the softmax of the search teacher's action values")


def test_defaults_make_a_policy_worth_having():
    """``make run``'s defaults (issue 51): a round of 2,000 teacher battles and a sets-encoder
    student learning the search's action values in large batches, so that the first run's
    promoted policy beats baseline:greedy (docs/training.md, the improvement loop)."""
    from extrarlhf_assets import run_main

    args = run_main._parser().parse_args([])
    assert args.battles is None and args.more_battles == run_main.ROUND_BATTLES == 2000
    assert args.p1_model == "search:baseline:greedy?sims=32" and args.imitate == "search"
    args.battles = args.more_battles
    ops = run_main.run_config(args)["ops"]
    assert ops["battle_sessions"]["config"]["n_battles"] == 2000
    train = ops["v5_policy_checkpoint"]["config"]
    assert {k: train[k] for k in ("epochs", "encoder", "hidden", "hidden2", "embed", "batch_size", "lr")} == {
        "epochs": 6, "encoder": "sets", "hidden": 256, "hidden2": 128, "embed": 64, "batch_size": 512, "lr": 3e-3}
    assert 1 <= train["threads"] <= 2
    # the asset accepts every key run_main sends
    from extrarlhf_assets.defs.training.assets import TrainConfig

    assert set(train) <= set(TrainConfig.model_fields)


def test_a_shared_instance_is_refused_with_the_command_that_queues_the_run(tmp_path, monkeypatch):
    """``make run`` pointed at a PostgreSQL-backed DAGSTER_HOME (deploy/dagster.yaml, a real server)
    would execute in its own process, past the run queue, ``max_concurrent_runs`` and the
    per-partition limit (issue 52 item 3): it refuses, runs and writes nothing, and prints a
    ``dagster job launch`` command whose run config the job accepts."""
    import dagster as dg

    from extrarlhf_assets.definitions import defs
    from tests.dagster_helpers import instance_env, tcp_postgres

    with tcp_postgres() as server:
        home = tmp_path / "home"
        home.mkdir()
        (home / "dagster.yaml").write_text((ROOT / "deploy" / "dagster.yaml").read_text())
        server.psql("postgres", 'CREATE DATABASE "dagster_run_main"')
        env = {k: v for k, v in instance_env(home, server, "dagster_run_main").items() if not k.startswith("RLHF_")}
        env.update({"RLHF_SESSIONS_DIR": str(tmp_path / "sessions"), "RLHF_DATASETS_DIR": str(tmp_path / "datasets"),
                    "RLHF_CHECKPOINTS_DIR": str(tmp_path / "checkpoints")})
        out = subprocess.run([sys.executable, "-m", "extrarlhf_assets.run_main", "--group", "shared-g", "--battles", "8",
                              "--epochs", "2"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert out.returncode == 2, out.stdout + out.stderr
        assert "error [shared_instance]: DAGSTER_HOME=" in out.stderr and "is a shared instance (PostgresRunStorage)" \
            in out.stderr
        assert "Nothing was run or written." in out.stderr and "Traceback" not in out.stderr
        assert "dagster job launch -w deploy/workspace.grpc.yaml -j campaign_loop" in out.stderr
        assert '--tags \'{"dagster/partition": "shared-g"}\'' in out.stderr
        assert env["DAGSTER_PG_PASSWORD"] not in out.stdout + out.stderr
        assert "campaign summary" not in out.stdout
        # the printed run config is the one make run would have used, and the job accepts it
        config = json.loads(re.search(r"--config-json '([^']*)'", out.stderr).group(1))
        assert config["ops"]["battle_sessions"]["config"]["n_battles"] == 8
        assert dg.validate_run_config(defs.resolve_job_def("campaign_loop"), config)
        # nothing ran, nothing was added to the instance or written on disk
        for key in [k for k in env if k.startswith("DAGSTER_")]:
            monkeypatch.setenv(key, env[key])
        with dg.DagsterInstance.from_config(str(home)) as instance:
            assert instance.get_runs() == []
            assert "shared-g" not in instance.get_dynamic_partitions("session_groups")
        assert not any((tmp_path / d).exists() for d in ("sessions", "datasets", "checkpoints"))
        assert sorted(p.name for p in home.iterdir()) == ["dagster.yaml"]
