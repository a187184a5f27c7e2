"""What ``tools/list`` shows an agent (DESIGN section 8.1): every character there is read by
every client in every session, so the advertised input schemas are lean.

Validation is untouched (it runs on the tool's own argument model); only the advertised copy
is rewritten: pydantic's ``title`` of every property and model (the name again, title-cased)
and ``"default": null`` (an optional argument is simply left out) go; ``anyOf: [X, {"type":
"null"}]`` for an optional simple ``X`` becomes ``X`` with ``"type": [..., "null"]``; an
object whose properties all have one schema (the readiness thresholds) lists their names once
(``propertyNames``) with that schema, and an argument marked :data:`NAMES_LISTED_ONCE` (the same
object, whose names another tool's schema lists) leaves the names out; a ``$defs`` entry used
once is written in place. Tools
declare no output schema: every result is the one envelope the server instructions describe
(``{"ok", "result", "error"}``). Each tool's description is the first paragraph of its
docstring (one or two sentences: when to use it); the rest is for the tool reference.
"""

from __future__ import annotations

from typing import Any

_SCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties")
NAMES_LISTED_ONCE = "x-names-listed-once"  # json_schema_extra of an object whose key names another tool lists


def lean_schema(schema: Any) -> Any:
    """The advertised form of a tool's input schema (see the module docstring)."""
    return _lean(_inline_defs(schema))


def _inline_defs(schema: Any) -> Any:
    defs = schema.get("$defs") if isinstance(schema, dict) else None
    if not isinstance(defs, dict):
        return schema
    refs = {f"#/$defs/{name}": sub for name, sub in defs.items()}

    def replace(node: Any) -> Any:
        if isinstance(node, list):
            return [replace(item) for item in node]
        if not isinstance(node, dict):
            return node
        if set(node) == {"$ref"} and node["$ref"] in refs:
            return replace(refs[node["$ref"]])
        return {key: replace(value) for key, value in node.items()}

    return replace({key: value for key, value in schema.items() if key != "$defs"})


def _lean(schema: Any) -> Any:
    if isinstance(schema, list):
        return [lean_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" or (key == "default" and value is None):  # an optional argument is simply omitted
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):  # names -> schemas: keep every name
            out[key] = {name: _lean(sub) for name, sub in value.items()}
        else:
            out[key] = _lean(value)
    lean = _merge_optional(_uniform_object(out))
    if lean.pop(NAMES_LISTED_ONCE, False):
        lean.pop("propertyNames", None)
    return lean


def _uniform_object(schema: dict[str, Any]) -> dict[str, Any]:
    props = schema.get("properties")
    if schema.get("additionalProperties") is not False or not isinstance(props, dict) or len(props) < 3:
        return schema
    shapes = {repr(sorted(sub.items())) for sub in props.values() if isinstance(sub, dict)}
    if len(shapes) != 1 or "required" in schema:
        return schema
    rest = {key: value for key, value in schema.items() if key not in ("properties", "additionalProperties")}
    return {**rest, "propertyNames": {"enum": list(props)}, "additionalProperties": next(iter(props.values()))}


def _merge_optional(schema: dict[str, Any]) -> dict[str, Any]:
    options = schema.get("anyOf")
    if not (isinstance(options, list) and len(options) == 2 and {"type": "null"} in options):
        return schema
    other = options[0] if options[1] == {"type": "null"} else options[1]
    if not isinstance(other.get("type"), str) or "anyOf" in other or "$ref" in other:
        return schema
    merged = {key: value for key, value in schema.items() if key != "anyOf"}
    for key, value in other.items():
        merged.setdefault(key, value)
    merged["type"] = [other["type"], "null"]
    return merged
