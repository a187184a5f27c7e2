"""The skills never drift from the code: every tool, argument, result field, error code, env
var, CLI command and file name they mention exists (checked against the live server's
``tools/list``, results of real calls, the CLI's argparse parser and the code), and every tool
of the server is documented in mcp-tools.md with every argument, its type and default."""

from __future__ import annotations

import ast
import importlib
import re
import shlex
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from adapters import BASELINES, AdapterError, parse_search_spec
from extrarlhf.cli import build_parser
from mcp_server.__main__ import parse_args as server_args
from tests.mcp_helpers import Checked, stdio_params
from tests.skills.skilldocs import (REPO, SKILLS, TOOLS_MD, argument_rows, code_spans, code_text, code_vocabulary,
                                    error_codes, expand_braces, failure_table_codes, fenced_blocks, listed,
                                    markdown_files, render_default, render_type, skill_dirs, tool_sections)

ACTOR_TYPES = ("human", "llm", "rl")


async def _live(sessions: Path) -> dict[str, Any]:
    """tools/list of a real stdio server, and the result keys of real calls of the cheap tools."""
    async with Client(stdio_params(sessions, "--datasets-dir", str(sessions.parent / "d"), "--checkpoints-dir",
                                   str(sessions.parent / "c"))) as client:
        listed_tools = (await client.list_tools()).tools
        c = Checked(client)
        results: dict[str, dict[str, Any]] = {}

        async def call(tool: str, /, **arguments: Any) -> dict[str, Any]:
            results[tool] = await c.ok(tool, arguments)
            return results[tool]

        start = await call("start_battle", p1_actor_type="llm", group="drift", seed=5)
        match = start["match_id"]
        await call("get_state", match_id=match)
        actions = await call("legal_actions", match_id=match)
        await call("submit_action", match_id=match, action_id=actions["actions"][0]["action_id"], rationale="r")
        await call("list_matches")
        done = await call("abandon_battle", match_id=match)
        await call("claim_codename", codename="Drift", group="drift-rl")
        await call("list_codenames")
        await call("release_codename", codename="Drift")
        await call("run_series", group="drift-rl", n_battles=2, p1_model="baseline:greedy",
                   opponent="baseline:random")
        await call("series_status", group="drift-rl")
        await call("list_sessions")
        await call("inspect_session", group="drift")
        await call("replay_battle", group="drift", battle_id=done["battle_id"])
        await call("list_models")
        await call("inspect_model", name="baseline:greedy")
        await call("dataset_readiness", group="drift-rl")
        await call("list_datasets")
        await call("promotion_status")
        await call("production_status")
        await call("check_data")
        await call("ping")
    return {"tools": {t.name: t.input_schema for t in listed_tools}, "results": results}


@pytest.fixture(scope="module")
def live(tmp_path_factory) -> dict[str, Any]:
    return anyio.run(_live, tmp_path_factory.mktemp("drift") / "sessions")


@pytest.fixture(scope="module")
def vocabulary(live) -> set[str]:
    words = code_vocabulary() | set(live["tools"])
    for schema in live["tools"].values():
        words |= set(schema.get("properties", {}))
    return words


# ----------------------------------------------------------------------------- mcp-tools.md
def test_every_tool_is_documented_with_every_argument(live):
    sections = tool_sections()
    assert set(live["tools"]) - set(sections) == set(), "tools missing from mcp-tools.md"
    assert set(sections) - set(live["tools"]) == set(), "mcp-tools.md documents tools the server does not have"
    for name, schema in live["tools"].items():
        rows = argument_rows(sections[name])
        props, required = schema.get("properties", {}), set(schema.get("required", []))
        assert list(rows) == list(props), f"{name}: documented arguments {list(rows)} != {list(props)}"
        for arg, prop in props.items():
            expected = (render_type(prop), render_default(prop, arg in required))
            assert rows[arg] == expected, f"{name}.{arg}: documented {rows[arg]}, the server says {expected}"
        if not props:
            assert "No arguments." in sections[name]


def test_documented_result_fields_are_what_the_tools_return(live, vocabulary):
    sections = tool_sections()
    for name, section in sections.items():
        fields = listed(section, "Result")
        assert fields, f"{name}: no Result line"
        if name in live["results"]:  # called for real: every returned field is documented
            undocumented = [f for f in live["results"][name] if f not in fields]
            assert undocumented == [], f"{name}: returns {undocumented}, not in its Result line"
        unknown = [f for f in fields if f not in vocabulary]
        assert unknown == [], f"{name}: result fields that appear nowhere in the code: {unknown}"


def test_documented_error_codes_exist():
    codes = error_codes()
    for name, section in tool_sections().items():
        assert re.search(r"^Errors: ", section, flags=re.M), f"{name}: no Errors line"
        unknown = [c for c in listed(section, "Errors") if c not in codes]
        assert unknown == [], f"{name}: error codes the code never raises: {unknown}"
    for skill in skill_dirs():
        table = failure_table_codes(skill / "SKILL.md")
        assert skill.name == "extra-rlhf" or table, f"{skill.name}: no Failure handling table"
        assert [c for c in table if c not in codes] == [], skill.name


def test_adding_a_tool_without_documenting_it_fails(live):
    """The completeness check above really catches an undocumented tool or argument."""
    sections = tool_sections()
    text = TOOLS_MD.read_text(encoding="utf-8")
    without = tool_sections(text.replace("### `legal_actions`", "### `legal_actions_renamed`"))
    assert "legal_actions" in sections and "legal_actions" not in without
    row = next(line for line in sections["submit_action"].splitlines() if line.startswith("| `rationale`"))
    assert "rationale" not in argument_rows(sections["submit_action"].replace(row, ""))


# ----------------------------------------------------------------------------- every mention
def _tool_call(span: str, tools: dict[str, Any]) -> str | None:
    call = ast.parse(span, mode="eval").body
    assert isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
    name = call.func.id
    if name not in tools:
        return f"{span}: no tool {name}"
    props = tools[name].get("properties", {})
    named = [kw.arg for kw in call.keywords] + [a.id for a in call.args if isinstance(a, ast.Name)]
    bad = [a for a in named if a not in props]
    if bad:
        return f"{span}: {name} has no argument {bad}"
    if call.keywords and not call.args:  # a real call: every required argument is given
        missing = set(tools[name].get("required", [])) - set(named)
        if missing:
            return f"{span}: misses required {sorted(missing)}"
    return None


def _dotted(span: str, vocabulary: set[str]) -> str | None:
    path = span.split("(", 1)[0]
    parts = path.split(".")
    for i in range(len(parts), 0, -1):  # the longest importable module prefix, then attributes
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return f"{span}: {'.'.join(parts[:i])} has no {attr}"
            obj = getattr(obj, attr)
        return None
    unknown = [p for p in parts if p not in vocabulary]
    return f"{span}: unknown names {unknown}" if unknown else None


def _command(line: str) -> str | None:
    words = shlex.split(line.replace("<", "_").replace(">", "_"))
    while words and words[0] in ("cd", "export") or (words and "=" in words[0]):
        return None
    if words[:3] in (["python", "-m", "extrarlhf"], [".venv/bin/python", "-m", "extrarlhf"]):
        try:
            build_parser().parse_args(words[3:])
        except SystemExit:
            return f"{line}: the CLI parser refuses it"
    elif words[:3] in (["python", "-m", "mcp_server"], [".venv/bin/python", "-m", "mcp_server"]):
        try:
            server_args(words[3:])
        except SystemExit:
            return f"{line}: python -m mcp_server refuses it"
    elif words[:1] == ["make"]:
        makefile = (REPO / "Makefile").read_text(encoding="utf-8")
        missing = [t for t in words[1:] if not re.search(rf"^{re.escape(t)}:", makefile, flags=re.M)]
        if missing:
            return f"{line}: no make target {missing}"
    return None


def _path(span: str, code: str) -> str | None:
    problems = []
    for path in expand_braces(span):
        path = path.strip().removeprefix("~/")
        files = re.findall(r"[A-Za-z0-9_.\-]*\.(?:jsonl|json|md|toml|parquet|onnx)\b", path)
        for name in files:
            if not ((REPO / path).exists() or name in code or list(SKILLS.rglob(name))):
                problems.append(name)
        if not files:  # a folder: its path without placeholders is in the repo or named by the code
            parts = [p for p in path.strip("/").split("/") if p and "<" not in p]
            bare = "/".join(parts)
            if bare and not ((REPO / bare).exists() or bare in code or all(p in code for p in parts)):
                problems.append(bare)
    return f"{span}: {problems} not found in the code or the checkout" if problems else None


def _check_span(span: str, ctx: dict[str, Any]) -> str | None:
    s = span.strip()
    if re.fullmatch(r"[a-z_][a-z0-9_]*\(.*\)", s):
        return _tool_call(s, ctx["tools"])
    if re.match(r"(\.venv/bin/)?python -m |make ", s):
        return _command(s)
    if re.fullmatch(r"[A-Z][A-Z0-9_]{2,}(=.*)?", s):
        var = s.split("=", 1)[0]
        return None if var in ctx["code"] else f"{s}: {var} appears nowhere in the code"
    if re.fullmatch(r"baseline:[a-z]+", s):
        return None if s.split(":")[1] in BASELINES else f"{s}: no such baseline"
    if s.startswith("search:") and "<" not in s:  # a concrete search spec must parse, over a real baseline
        try:
            rollout, _, _ = parse_search_spec(s)
        except AdapterError as exc:
            return f"{s}: {exc}"
        return None if rollout.removeprefix("baseline:") in BASELINES else f"{s}: no such rollout baseline"
    if re.fullmatch(r"[a-z]+-vs-[a-z]+", s) and s.split("-")[0] in ACTOR_TYPES:
        return None if s.split("-vs-")[1] in ("bot", "rl") else f"{s}: not a battle_tag"
    if re.fullmatch(r"extra-rlhf(-[a-z0-9-]+)?", s):
        return None if (SKILLS / s).is_dir() or s == "extra-rlhf" else f"{s}: no such skill"
    if re.fullmatch(r"[a-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+(\(.*\))?(\.[a-z_]+\(.*\))?", s):
        return _dotted(s, ctx["vocabulary"])
    if "/" in s or re.search(r"\.(jsonl|json|md|toml|parquet|onnx)$", s):
        if " " in s.strip() and not s.startswith("sessions/"):
            return None  # prose with a slash, not a path
        return _path(s, ctx["code"])
    if re.fullmatch(r"--[a-z][a-z0-9-]*", s):
        return None if s in ctx["options"] else f"{s}: no command of the CLI or the server takes it"
    if re.fullmatch(r"[a-z_][a-z0-9_]*=\S+", s):
        s = s.split("=", 1)[0]
    if re.fullmatch(r"[a-z]+[A-Z][A-Za-z]*", s):  # camelCase: MCP wire names and client config keys
        return None if s in ctx["code"] else f"{s}: appears nowhere in the code"
    if re.fullmatch(r"[a-z][a-z0-9_]*", s):
        return None if s in ctx["vocabulary"] else f"{s}: appears nowhere in the code or the tool schemas"
    return None  # JSON examples, values, placeholders: not names


def _options() -> set[str]:
    """Every option string of every command of the CLI and of ``python -m mcp_server``."""
    import argparse

    found: set[str] = set()
    parsers = [build_parser()]
    while parsers:
        parser = parsers.pop()
        for action in parser._actions:
            found.update(o for o in action.option_strings if o.startswith("--"))
            if isinstance(action, argparse._SubParsersAction):
                parsers.extend(action.choices.values())
    found.update(re.findall(r'add_argument\("(--[a-z-]+)"', (REPO / "mcp_server" / "__main__.py").read_text()))
    return found


@pytest.fixture(scope="module")
def ctx(live, vocabulary) -> dict[str, Any]:
    return {"tools": live["tools"], "vocabulary": vocabulary, "code": code_text(), "options": _options()}


def test_every_name_the_skills_mention_exists(ctx):
    problems = []
    checked = 0
    for path in markdown_files():
        for span in code_spans(path):
            checked += 1
            problem = _check_span(span, ctx)
            if problem:
                problems.append(f"{path.relative_to(SKILLS)}: {problem}")
        for block in fenced_blocks(path):
            for line in block.splitlines():
                if re.match(r"\s*((\.venv/bin/)?python -m |make |export )", line):
                    checked += 1
                    line = line.strip()
                    problem = _command(line) if not line.startswith("export ") else \
                        _check_span(line.split()[1], ctx)
                    if problem:
                        problems.append(f"{path.relative_to(SKILLS)}: {problem}")
    assert checked > 300
    assert problems == []


def test_the_span_checks_catch_drift(ctx):
    """Each kind of check refuses a name that does not exist."""
    assert _check_span('start_battle(p1_actor_type="llm")', ctx) is None
    assert "no tool" in _check_span("play_battle(match_id=m)", ctx)
    assert "no argument" in _check_span("submit_action(match_id=m, action=3)", ctx)
    assert "misses required" in _check_span("submit_action(match_id=m)", ctx)
    assert "refuses" in _check_span("python -m extrarlhf skills install --target vim", ctx)
    assert _check_span("python -m extrarlhf skills install --target codex --user --dry-run", ctx) is None
    assert "appears nowhere" in _check_span("RLHF_NO_SUCH_VARIABLE", ctx)
    assert "appears nowhere" in _check_span("weights_hashish", ctx)
    assert "not found" in _check_span("sessions/<group>/ledger.jsonl", ctx)
    assert _check_span("sessions/<group>/{manifest.json, summary.json, catalog.jsonl}", ctx) is None
    assert "has no" in _check_span("adapters.default_registries()", ctx)
    assert "no make target" in _check_span("make deploy-everything", ctx)
    assert "no command" in _check_span("--sessions-folder", ctx)
    assert _check_span("--checkpoints-dir", ctx) is None
    assert "appears nowhere" in _check_span("include_everything=true", ctx)
    assert "appears nowhere" in _check_span("structuredContents", ctx)
    assert _check_span("search:baseline:greedy?sims=64", ctx) is None
    assert "sims must be an integer" in _check_span("search:baseline:greedy?sims=0", ctx)
    assert "no such rollout baseline" in _check_span("search:baseline:clever?sims=8", ctx)
