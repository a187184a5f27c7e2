"""The documentation site (mkdocs.yml, docs/) builds in strict mode, offline, as `make docs`
builds it: a broken link or anchor, a page missing from the nav or a missing include fails the
build; the README's links resolve; the reference page names every CLI subcommand, MCP tool and
schema. The run that plants broken links shows the strict build really catches them."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from extrarlhf.cli import build_parser
from mcp_server import build_server

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs").glob("*.md"))
MCP_REFERENCE = Path("skills/extra-rlhf/references/mcp-tools.md")
# A proxy on a closed port: a plugin or theme that tried to fetch anything would fail the build.
OFFLINE = {"HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9",
           "http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9", "NO_PROXY": "",
           "no_proxy": "", "NO_MKDOCS_2_WARNING": "1"}


def _build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
                           "--site-dir", str(site)], cwd=config.parent, env={**os.environ, **OFFLINE},
                          capture_output=True, text=True, timeout=120)


def _html(site: Path, page: str) -> str:
    """The built HTML of docs/<page>.md (mkdocs' directory URLs: <page>/index.html)."""
    stem = page.removesuffix(".md")
    return (site / ("index.html" if stem == "index" else f"{stem}/index.html")).read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = _build(ROOT / "mkdocs.yml", out)
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    return out


def test_the_site_builds_strictly_with_every_page_and_include(site: Path) -> None:
    assert len(PAGES) >= 12
    for page in PAGES:
        html = _html(site, page.name)
        assert "--8&lt;--" not in html and "--8<--" not in html, f"{page.name}: an include was not expanded"
        assert "fonts.googleapis.com" not in html, f"{page.name}: the theme links web fonts (theme.font: false)"
    # the README's sections included in the home page and getting started
    assert "deterministic two-player card-battle game" in _html(site, "index.md")
    assert '<pre class="mermaid">' in _html(site, "index.md")
    assert "maintenance/       check (fsck) and gc" in _html(site, "getting-started.md")
    # the skills' MCP reference included whole: every tool heading has its anchor
    tools = re.findall(r"^### `(\w+)`", (ROOT / MCP_REFERENCE).read_text(encoding="utf-8"), re.M)
    reference = _html(site, "mcp-tools.md")
    assert len(tools) > 30 and [t for t in tools if f'id="{t}"' not in reference] == []
    assert (site / "rl_reference_curve.png").stat().st_size > 1000


def test_the_readme_is_short_and_its_links_resolve(site: Path) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) < 250
    links = re.findall(r"\]\(([^)#\s]+)(?:#([^)\s]+))?\)", readme)
    local = [(path, anchor) for path, anchor in links if "://" not in path]
    assert len(local) >= 12
    for path, anchor in local:
        assert (ROOT / path).is_file(), f"README.md links {path}, which does not exist"
        if anchor and path.startswith("docs/"):
            assert f'id="{anchor}"' in _html(site, path.removeprefix("docs/")), f"README.md links {path}#{anchor}: no such anchor"
    for page in PAGES:
        assert f"docs/{page.name}" in readme or page.name in ("index.md", "mcp-tools.md"), f"README.md does not link {page.name}"


def test_the_readme_dependency_chain_is_the_import_contract() -> None:
    """The README's picture of the concerns says what pyproject's import-linter layers enforce."""
    readme = re.sub(r"\s+", " ", (ROOT / "README.md").read_text(encoding="utf-8"))
    chain = re.search(r"`engine <- adapters <- (extrarlhf\.core <- [^`]+)`", readme)
    assert chain, "README.md lost its dependency chain (`engine <- adapters <- extrarlhf.core <- ...`)"
    said = [set(re.sub(r"[{}]|extrarlhf\.", "", step).replace(",", " ").split()) for step in chain.group(1).split(" <- ")]
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["id"] == "concerns")["layers"]
    enforced = [set(layer.replace("|", " ").split()) - {"__main__", "ladder"} for layer in reversed(layers)]
    assert said == [layer for layer in enforced if layer], (said, enforced)


def _resolve(dotted: str) -> object:
    """The object a dotted name names: the longest importable module prefix, then attributes."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(dotted)


def test_every_python_name_the_docs_give_resolves() -> None:
    """Every project name in a code span or a ``from ... import`` of the README and the pages
    (``extrarlhf.policies.policy_ladder``, ``engine.new_battle``, ...) still imports, so moving a
    module cannot leave the documented Python API behind."""
    text = "\n".join(p.read_text(encoding="utf-8") for p in [ROOT / "README.md", *PAGES])
    package = r"(?:engine|adapters|extrarlhf|mcp_server|extrarlhf_assets)"
    blocks = re.findall(r"^```.*?^```", text, re.M | re.S)
    spans = re.findall(r"`([^`]+)`", re.sub(r"^```.*?^```", "", text, flags=re.M | re.S))
    names = set()
    for code in blocks + spans:
        names.update(re.findall(rf"(?<![\w./]){package}(?:\.[A-Za-z_]\w*)+", code))
        for module, imported in re.findall(rf"from ({package}[\w.]*) import (\w+(?:,\s*\w+)*)", code):
            names.update(f"{module}.{name.strip()}" for name in imported.split(",") if name.strip())
    assert len(names) > 40
    unresolved = []
    for name in sorted(names):
        try:
            _resolve(name)
        except (ImportError, AttributeError) as exc:
            unresolved.append(f"{name}: {exc}")
    assert unresolved == [], "names in the docs that no longer import:\n" + "\n".join(unresolved)


def test_the_strict_build_fails_on_a_broken_link_a_missing_anchor_and_a_page_left_out(tmp_path: Path) -> None:
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    (tmp_path / MCP_REFERENCE).parent.mkdir(parents=True)
    shutil.copy(ROOT / MCP_REFERENCE, tmp_path / MCP_REFERENCE)
    with (tmp_path / "docs" / "playing.md").open("a", encoding="utf-8") as f:
        f.write("\nSee [a page that is gone](no-such-page.md) and [a section](training.md#no-such-section).\n")
    (tmp_path / "docs" / "orphan-page.md").write_text("# Not in the nav\n", encoding="utf-8")
    done = _build(tmp_path / "mkdocs.yml", tmp_path / "site")
    out = done.stdout + done.stderr
    assert done.returncode != 0 and "strict mode" in out, out
    assert "no-such-page.md" in out and "#no-such-section" in out and "orphan-page.md" in out, out


def test_a_missing_include_fails_the_build(tmp_path: Path) -> None:
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")  # the skills' MCP reference is left out
    done = _build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0 and "mcp-tools.md" in done.stdout + done.stderr, done.stdout + done.stderr


def test_the_reference_names_every_cli_subcommand_mcp_tool_and_schema(tmp_path: Path) -> None:
    text = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    commands = next(a for a in build_parser()._actions if a.dest == "command").choices
    expected = []
    for name, parser in commands.items():
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        expected += [f"extrarlhf {name} {sub}" for action in subs for sub in action.choices] or [f"extrarlhf {name}"]
    assert len(expected) > 25
    assert [c for c in expected if not re.search(rf"`python -m {c}`", text)] == []
    server = build_server(tmp_path / "s", tmp_path / "d", tmp_path / "c")
    tools = {t.name for t in asyncio.run(server.list_tools())}
    assert [t for t in sorted(tools) if f"`{t}`" not in text] == []
    schemas = sorted(p.name for p in (ROOT / "extrarlhf" / "schemas").glob("*.schema.json"))
    assert len(schemas) >= 12 and [s for s in schemas if f"`{s}`" not in text] == []
