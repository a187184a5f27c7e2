"""Reading the skills as data: the tool reference's tables, backticked names, links, frontmatter.

The drift tests compare what these return with the live server, the CLI parser and the code.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SKILLS = REPO / "skills"
TOOLS_MD = SKILLS / "extra-rlhf" / "references" / "mcp-tools.md"


def skill_dirs() -> list[Path]:
    return sorted(p.parent for p in SKILLS.glob("*/SKILL.md"))


def markdown_files() -> list[Path]:
    return sorted(SKILLS.rglob("*.md"))


def render_type(schema: dict[str, Any]) -> str:
    """A JSON Schema property as the short type text of the reference's tables."""
    if "anyOf" in schema:
        return " or ".join(render_type(part) for part in schema["anyOf"])
    if "$ref" in schema:
        return "object (" + schema["$ref"].rsplit("/", 1)[-1] + ")"
    if isinstance(schema.get("type"), list):  # the lean listing's {"type": ["string", "null"]}
        return " or ".join(render_type({**schema, "type": kind}) if kind != "null" else "null"
                           for kind in schema["type"])
    if isinstance(schema.get("additionalProperties"), dict):  # named thresholds sharing one value schema
        return "object of " + render_type(schema["additionalProperties"])
    kind = schema.get("type", "any")
    if "enum" in schema:
        return "one of " + ", ".join(f"`{json.dumps(v)}`" for v in schema["enum"])
    if kind == "array":
        items = render_type(schema.get("items", {}))
        lo, hi = schema.get("minItems"), schema.get("maxItems")
        count = f"{lo} " if lo is not None and lo == hi else (f"at least {lo} " if lo else "")
        return f"array of {count}{items}"
    lo, hi = schema.get("minimum"), schema.get("maximum")
    if lo is not None and hi is not None:
        return f"{kind} {lo}..{hi}"
    bounds = [f"{op} {schema[key]}" for key, op in (("minimum", ">="), ("exclusiveMinimum", ">"),
                                                    ("maximum", "<="), ("exclusiveMaximum", "<")) if key in schema]
    return " ".join([kind, *bounds])


def render_default(schema: dict[str, Any], required: bool) -> str:
    return "required" if required else f"`{json.dumps(schema.get('default'))}`"


def tool_sections(text: str | None = None) -> dict[str, str]:
    """``### `tool` `` sections of mcp-tools.md by tool name."""
    text = TOOLS_MD.read_text(encoding="utf-8") if text is None else text
    parts = re.split(r"^### `([a-z_0-9]+)`\s*$", text, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


def argument_rows(section: str) -> dict[str, tuple[str, str]]:
    """``| `arg` | type | default | meaning |`` rows: arg -> (type, default)."""
    rows = {}
    for line in section.splitlines():
        m = re.match(r"^\| `([a-z_0-9]+)` \| (.*?) \| (.*?) \| .*\|$", line)
        if m:
            rows[m.group(1)] = (m.group(2), m.group(3))
    return rows


def listed(section: str, label: str) -> list[str]:
    """The backticked names of a ``Result:`` / ``Errors:`` line."""
    m = re.search(rf"^{label}: (.*)$", section, flags=re.M)
    return re.findall(r"`([A-Za-z_0-9.]+)`", m.group(1)) if m else []


def frontmatter(path: Path) -> tuple[str, str]:
    """(frontmatter text, body) of a SKILL.md; raises when there is none."""
    text = path.read_text(encoding="utf-8")
    m = re.match(r"^---\n(.*?)\n---\n(.*)$", text, flags=re.S)
    if not m:
        raise AssertionError(f"{path}: no YAML frontmatter between --- lines")
    return m.group(1), m.group(2)


def links(path: Path) -> list[str]:
    """Relative markdown link targets of a file (anchors and URLs left out)."""
    text = path.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    return [t.split("#", 1)[0] for t in targets if "://" not in t and not t.startswith(("#", "mailto:"))]


def code_spans(path: Path) -> list[str]:
    """Every inline code span of a file (fenced blocks excluded)."""
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)
    return re.findall(r"`([^`\n]+)`", text)


def fenced_blocks(path: Path) -> list[str]:
    return re.findall(r"^```[a-z]*\n(.*?)^```", path.read_text(encoding="utf-8"), flags=re.S | re.M)


CODE_DIRS = ("engine", "adapters", "extrarlhf", "mcp_server")


def _python_files() -> list[Path]:
    return sorted(p for d in CODE_DIRS for p in (REPO / d).rglob("*.py"))


def code_text() -> str:
    """Every source file of the packages, the JSON Schemas and the Makefile, as one text."""
    files = _python_files() + sorted((REPO / "extrarlhf" / "schemas").glob("*.json")) + [REPO / "Makefile"]
    return "\n".join(p.read_text(encoding="utf-8") for p in files)


def code_vocabulary() -> set[str]:
    """Every identifier and string constant of the code, and every key of the JSON Schemas."""
    import ast

    words: set[str] = set()
    for path in _python_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                words.add(node.value)
                words.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", node.value))
            elif isinstance(node, ast.Name):
                words.add(node.id)
            elif isinstance(node, ast.Attribute):
                words.add(node.attr)
            elif isinstance(node, ast.arg):
                words.add(node.arg)
            elif isinstance(node, ast.keyword) and node.arg:
                words.add(node.arg)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                words.add(node.name)

    def keys(obj: Any) -> None:
        if isinstance(obj, dict):
            words.update(obj)
            for value in obj.values():
                keys(value)
        elif isinstance(obj, list):
            for value in obj:
                keys(value)

    for path in (REPO / "extrarlhf" / "schemas").glob("*.json"):
        keys(json.loads(path.read_text(encoding="utf-8")))
    return words


def error_codes() -> set[str]:
    """The error codes the code can raise: ``code = "x"`` class attributes, ``code="x"``
    keywords, the code argument of ``...Error(message, "x")`` calls and ``failure("x", ...)``,
    and the server's own SERVER_CODES."""
    import ast

    from mcp_server.envelope import SERVER_CODES

    codes = set(SERVER_CODES)
    is_code = re.compile(r"[a-z][a-z0-9_]*").fullmatch
    for path in _python_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "code" for t in node.targets):
                if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                    codes.add(node.value.value)
            elif isinstance(node, ast.Call):
                name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
                for kw in node.keywords:
                    if kw.arg == "code" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                        codes.add(kw.value.value)
                position = 0 if name == "failure" else 1 if name.endswith(("Error", "error")) else None
                if position is not None and len(node.args) > position:
                    arg = node.args[position]
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and is_code(arg.value):
                        codes.add(arg.value)
    return codes


def failure_table_codes(path: Path) -> list[str]:
    """The codes in the first column of the "Failure handling" table of a SKILL.md."""
    text = path.read_text(encoding="utf-8")
    m = re.search(r"^## Failure handling\n(.*?)(?=^## |\Z)", text, flags=re.S | re.M)
    if not m:
        return []
    return re.findall(r"^\| `([a-z_]+)` \|", m.group(1), flags=re.M)


def expand_braces(text: str) -> list[str]:
    """``a/{b,c}.json`` -> ``a/b.json``, ``a/c.json`` (one level, enough for the skills)."""
    m = re.search(r"\{([^{}]*)\}", text)
    if not m:
        return [text]
    return [out for part in m.group(1).split(",")
            for out in expand_braces(text[:m.start()] + part.strip() + text[m.end():])]
