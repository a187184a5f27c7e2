"""Walk the tools' declared input schemas (what tools/list publishes) down to their leaves.

A leaf is one value a caller types: a top-level argument, an item of an array argument, or
a key of an object argument (``$ref`` into ``$defs`` resolved, ``anyOf`` members split, null
members noted). Tests use it to send every string parameter tricky strings, and every
numeric one wrong types and out-of-range values, without a hand-kept list of parameters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Leaf:
    tool: str
    argument: str            # the top-level argument
    key: str | int | None    # None: the argument itself; int: an array item; str: an object key
    schema: dict[str, Any]   # the leaf's own schema (type, enum, bounds)
    container: dict[str, Any] | None  # the array / object schema holding it
    nullable: bool           # the argument may be null

    @property
    def name(self) -> str:
        if self.key is None:
            return f"{self.tool}.{self.argument}"
        return f"{self.tool}.{self.argument}[{self.key}]" if isinstance(self.key, int) \
            else f"{self.tool}.{self.argument}.{self.key}"

    @property
    def type(self) -> str:
        return self.schema.get("type", "")


def _resolve(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = defs[schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def members(schema: dict[str, Any], defs: dict[str, Any]) -> tuple[list[dict[str, Any]], bool]:
    """The non-null alternatives of a property schema, resolved, and whether null is allowed."""
    schema = _resolve(schema, defs)
    alternatives = schema.get("anyOf") or schema.get("oneOf") or [schema]
    resolved = []
    for alternative in (_resolve(a, defs) for a in alternatives):
        kinds = alternative.get("type")
        if isinstance(kinds, list):  # the lean listing's {"type": ["string", "null"]} (mcp_server/listing.py)
            resolved += [{**alternative, "type": kind} for kind in kinds]
        else:
            resolved.append(alternative)
    return [a for a in resolved if a.get("type") != "null"], any(a.get("type") == "null" for a in resolved)


def _object_keys(member: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """An object argument's keys and their schemas: ``properties``, or the lean listing's
    ``propertyNames`` enum that shares one ``additionalProperties`` schema."""
    if "properties" in member:
        return member["properties"]
    return {key: member["additionalProperties"] for key in member.get("propertyNames", {}).get("enum", [])}


def leaves(tool: Any) -> list[Leaf]:
    """Every leaf of one tool (an ``mcp.types.Tool`` from tools/list)."""
    schema = tool.input_schema
    defs = schema.get("$defs", {})
    out: list[Leaf] = []
    for argument, prop in schema.get("properties", {}).items():
        alternatives, nullable = members(prop, defs)
        for member in alternatives:
            kind = member.get("type")
            if kind == "array":
                (item,), _ = members(member["items"], defs)
                out.append(Leaf(tool.name, argument, 0, item, member, nullable))
            elif kind == "object" and _object_keys(member):
                for key, sub in _object_keys(member).items():
                    (leaf,), _ = members(sub, defs)
                    out.append(Leaf(tool.name, argument, key, leaf, member, nullable))
            else:
                out.append(Leaf(tool.name, argument, None, member, None, nullable))
    return out


def valid_value(schema: dict[str, Any], defs: dict[str, Any] | None = None) -> Any:
    """A value the schema accepts (used to fill required arguments)."""
    defs = defs or {}
    alternatives, _ = members(schema, defs)
    schema = alternatives[0] if alternatives else schema
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "string":
        return "x"
    if kind == "boolean":
        return False
    if kind in ("integer", "number"):
        low = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        high = schema.get("maximum", schema.get("exclusiveMaximum"))
        if "exclusiveMinimum" in schema:
            if kind == "integer":
                return low + 1
            return (low + high) / 2 if high is not None else low + 1
        return low
    if kind == "array":
        return [valid_value(schema["items"], defs)] * max(1, schema.get("minItems", 1))
    if kind == "object":
        return {key: valid_value(schema["properties"][key], defs) for key in schema.get("required", [])}
    raise AssertionError(f"no valid value for {schema}")


def required_arguments(tool: Any) -> dict[str, Any]:
    schema = tool.input_schema
    defs = schema.get("$defs", {})
    return {name: valid_value(schema["properties"][name], defs) for name in schema.get("required", [])}


def arguments_with(leaf: Leaf, value: Any, tool: Any) -> dict[str, Any]:
    """The tool's required arguments with ``leaf`` set to ``value`` (its container filled in)."""
    defs = tool.input_schema.get("$defs", {})
    args = required_arguments(tool)
    if leaf.key is None:
        args[leaf.argument] = value
    elif isinstance(leaf.key, int):
        filler = valid_value(leaf.schema, defs)
        args[leaf.argument] = [value] + [filler] * (max(1, leaf.container.get("minItems", 1)) - 1)
    else:
        filled = {key: valid_value(_object_keys(leaf.container)[key], defs)
                  for key in leaf.container.get("required", [])}
        args[leaf.argument] = {**filled, leaf.key: value}
    return args
