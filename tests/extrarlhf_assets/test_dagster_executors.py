"""The executor is configuration (issue 29, DESIGN 12.2): ``RLHF_EXECUTOR`` picks it when the
code location loads, for both jobs and every other run; a bad value or a missing dagster-k8s
is a clear error. (A real run on each: test_dagster_recovery.py runs collection in process and
the production exports multiprocess by run config, on the Postgres-backed deployment.)"""

import os
import subprocess
import sys

import dagster as dg
import pytest

from extrarlhf.core.errors import InvalidArgument
from extrarlhf.core.extras import MissingExtra
from extrarlhf.production import gate
from extrarlhf_assets.executors import EXECUTOR_VAR, in_process_by_default, run_executor

from tests.dagster_helpers import ROOT

LOAD = """
import warnings; warnings.filterwarnings("ignore")
from extrarlhf_assets.definitions import defs
jobs = [defs.resolve_job_def(n) for n in ("campaign_loop", "production_daily")] + [defs.resolve_implicit_global_asset_job_def()]
print(" ".join(j.executor_def.name for j in jobs))
"""


VALUES = (None, "multiprocess", "k8s", "celery")


@pytest.fixture(scope="module")
def loads() -> dict:
    """The code location loaded in a fresh process per ``RLHF_EXECUTOR`` value (all at once;
    production opted in, so production_daily is there too): value -> (returncode, stdout, stderr)."""
    procs = {}
    for value in VALUES:
        env = {k: v for k, v in os.environ.items() if k != EXECUTOR_VAR}
        env[gate.ENABLE_VAR] = "1"
        if value is not None:
            env[EXECUTOR_VAR] = value
        procs[value] = subprocess.Popen([sys.executable, "-c", LOAD], cwd=ROOT, env=env, text=True,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = {}
    for value, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=180)
        out[value] = (proc.returncode, stdout, stderr)
    return out


@pytest.mark.parametrize(("value", "name"), [(None, "in_process_or_multiprocess"),
                                              ("multiprocess", "multi_or_in_process_executor"),
                                              ("k8s", "k8s")])
def test_the_code_location_loads_with_each_executor(loads, value, name):
    code, stdout, stderr = loads[value]
    assert code == 0, stderr[-2000:]
    assert stdout.split() == [name] * 3  # both jobs and every other run: one choice


def test_a_bad_value_fails_the_load_naming_the_choices(loads):
    code, _, stderr = loads["celery"]
    assert code != 0
    assert "RLHF_EXECUTOR='celery' is not an executor; use one of in_process, multiprocess, k8s" in stderr


def test_the_default_runs_in_process_unless_the_run_config_asks():
    assert run_executor({}) is in_process_by_default and run_executor({EXECUTOR_VAR: ""}) is in_process_by_default
    assert run_executor({EXECUTOR_VAR: "in_process"}) is in_process_by_default
    assert run_executor({EXECUTOR_VAR: "multiprocess"}) is dg.multi_or_in_process_executor
    # the default keeps a run in one process; the multiprocess selection needs a reconstructable job
    assert in_process_by_default.get_requirements({"in_process": {}}) == []
    assert in_process_by_default.get_requirements({"multiprocess": {}})


def test_k8s_without_dagster_k8s_says_which_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "dagster_k8s", None)  # an install without the k8s extra
    with pytest.raises(MissingExtra, match=r"pip install 'extrarlhf\[k8s\]'"):
        run_executor({EXECUTOR_VAR: "k8s"})
    with pytest.raises(InvalidArgument, match="use one of in_process, multiprocess, k8s"):
        run_executor({EXECUTOR_VAR: "K8S"})
