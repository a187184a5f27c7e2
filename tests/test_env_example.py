""".env.example names every environment variable the project reads (issue 29, DESIGN 12.2): the
names the code reads (string constants of the project's prefixes in the packages) and the ones the
deploy files reference (`env:` in the instance and workspace files, `${...}` in the compose file)
are all in it and nothing else is; every entry is explained and carries no value (no secret can
be committed through it); copied to .env, `dg list envs` lists them, and Dagster's own .env
loading leaves them unset so the defaults apply."""

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("engine", "adapters", "extrarlhf", "extrarlhf_assets", "mcp_server", "benchmarks", "web")
NAME = re.compile(r"(RLHF|RETURNCLOCK|EXTRAARENA|DAGSTER)_[A-Z0-9_]+")
# read by the code for tests only, never by an operator
TEST_ONLY = {"RLHF_TEST_CRASH_AT"}


def _listed() -> list[str]:
    lines = (ROOT / ".env.example").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


def _read_by_code() -> set[str]:
    """String constants of the prefixes, except the names of a module's exports (``__all__``)."""
    names, exported = set(), set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            tree = ast.parse(path.read_text(), filename=str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and NAME.fullmatch(node.value):
                    names.add(node.value)
                if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
                    exported |= {c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant)}
    return names - exported


def _read_by_deploy_files() -> set[str]:
    names = set()
    for path in [ROOT / "workspace.yaml", *(ROOT / "deploy").rglob("*.yaml")]:
        text = path.read_text()
        names |= set(re.findall(r"env:\s*([A-Z][A-Z0-9_]+)", text))
        names |= set(re.findall(r"(?<!\$)\$\{([A-Z][A-Z0-9_]+)(?::?[-?][^}]*)?\}", text))  # not $${...}
    return names


def test_env_example_names_every_variable_the_project_reads():
    listed = _listed()
    assert len(listed) == len(set(listed)), "a variable is listed twice"
    read = (_read_by_code() | _read_by_deploy_files()) - TEST_ONLY
    assert read - set(listed) == set(), "read by the project but missing from .env.example"
    assert set(listed) - read == set(), "in .env.example but read nowhere"
    # the ones operators must know are there
    assert {"RLHF_ENABLE_PRODUCTION_DATASETS", "RLHF_PRODUCTION_DSN", "RETURNCLOCK_DATASET_SALT",
            "RETURNCLOCK_DATASET_SALT_KEY_ID", "DAGSTER_PG_PASSWORD", "RLHF_EXECUTOR",
            "RLHF_ALERT_WEBHOOK_URL", "RLHF_DAGSTER_UI_URL", "RLHF_NIGHTLY_BATTLES"} <= set(listed)


def test_every_entry_is_explained_and_has_no_value():
    lines = (ROOT / ".env.example").read_text().splitlines()
    for i, line in enumerate(lines):
        if not line.strip() or line.startswith("#"):
            continue
        assert re.fullmatch(r"[A-Z][A-Z0-9_]*", line), f"line {i + 1}: a bare name, no value: {line!r}"
        above = next(lines[j] for j in range(i - 1, -1, -1) if not re.fullmatch(r"[A-Z][A-Z0-9_]*", lines[j]))
        assert above.startswith("# "), f"{line} has no explanation above it"
    # the secrets are marked as such
    text = (ROOT / ".env.example").read_text()
    for secret in ("DAGSTER_PG_PASSWORD", "RLHF_PRODUCTION_DSN", "RETURNCLOCK_DATASET_SALT", "RLHF_JUDGE_KEY"):
        before = text[:text.index(f"\n{secret}\n")]
        assert "SECRET" in before[before.rindex("\n\n"):], secret


def test_dg_list_envs_shows_them_and_dagster_leaves_them_unset(tmp_path):
    from dagster._core.secrets.env_file import get_env_var_dict

    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    (tmp_path / ".env").write_text((ROOT / ".env.example").read_text())
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path), "COLUMNS": "200", "NO_COLOR": "1",
           "VIRTUAL_ENV": str(Path(sys.executable).parents[1])}
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    out = subprocess.run([str(Path(sys.executable).with_name("dg")), "list", "envs"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    shown = set(re.findall(r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b", out.stdout))
    assert set(_listed()) <= shown, set(_listed()) - shown
    # without a .env the project has none to show
    (tmp_path / ".env").unlink()
    empty = subprocess.run([str(Path(sys.executable).with_name("dg")), "list", "envs"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=120)
    assert "No environment variables are defined" in empty.stdout
    # the template copied as is sets nothing (bare names), so every default applies
    (tmp_path / ".env").write_text((ROOT / ".env.example").read_text())
    assert get_env_var_dict(str(tmp_path)) == {}
    (tmp_path / ".env").write_text("RLHF_NIGHTLY_BATTLES=50\nRLHF_EXECUTOR\n")
    assert get_env_var_dict(str(tmp_path)) == {"RLHF_NIGHTLY_BATTLES": "50"}
