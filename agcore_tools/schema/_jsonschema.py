"""Small pure helpers over JSON Schema dicts, shared by the strict transform and the
argument plan."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

# Keywords whose value is a map of names to schemas, and those whose value is one schema
# or a list of schemas: the places a walk descends into. Anywhere else, a dict is data
# (a default, an example, an enum member) and must be left alone.
NAMED_SCHEMAS = ("properties", "$defs", "definitions", "patternProperties", "dependentSchemas")
SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
SINGLE_SCHEMAS = (
    "items",
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
)

# A `type` naming every JSON type: any value, said outright (grammar_safe_schema writes
# it where a node names no kind; strict mode cannot describe it).
ANY_JSON_TYPE = ("string", "number", "boolean", "object", "array", "null")


def subschemas(schema: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each direct subschema of ``schema`` that is a dict, with a short path step."""
    for key in NAMED_SCHEMAS:
        named = schema.get(key)
        if isinstance(named, dict):
            for name, sub in named.items():
                if isinstance(sub, dict):
                    yield f"{key}/{name}", sub
    for key in SCHEMA_LISTS:
        entries = schema.get(key)
        if isinstance(entries, list):
            for index, sub in enumerate(entries):
                if isinstance(sub, dict):
                    yield f"{key}/{index}", sub
    for key in SINGLE_SCHEMAS:
        sub = schema.get(key)
        if isinstance(sub, dict):
            yield key, sub
        elif key == "items" and isinstance(sub, list):  # draft-07 tuple form
            for index, entry in enumerate(sub):
                if isinstance(entry, dict):
                    yield f"items/{index}", entry


def required_names(schema: Mapping[str, Any]) -> set[str]:
    """The property names ``schema`` requires. A malformed ``required`` (not a list, or
    with entries that are not strings) names nothing it cannot name: ``"abc"`` is not
    read as ``a``, ``b`` and ``c``.

    Example:
        >>> sorted(required_names({"required": ["a", 1, "b"]})), required_names({"required": "abc"})
        (['a', 'b'], set())
    """
    required = schema.get("required")
    if not isinstance(required, list):
        return set()
    return {name for name in required if isinstance(name, str)}


def malformed(schema: Mapping[str, Any], path: str = "") -> str | None:
    """Where ``schema`` breaks JSON Schema's shape, as a short phrase, or None: a map of
    schemas (``properties``, ``$defs``) that is not an object, a ``required`` that is
    not a list of names, a list of schemas (``anyOf``) that is not a list. A server can
    send one; what reads schemas to rewrite them (strict mode) refuses it by name.

    Example:
        >>> malformed({"type": "object", "properties": {"a": {"required": "a"}}})
        "'a.required' is not a list of names"
        >>> malformed({"type": "object", "properties": {"a": {"type": "string"}}}) is None
        True
    """
    where = f"{path}." if path else ""
    for key in NAMED_SCHEMAS:
        named = schema.get(key, {})
        if not isinstance(named, dict):
            return f"'{where}{key}' is not an object"
        odd = next((n for n, sub in named.items() if not isinstance(sub, (dict, bool))), None)
        if odd is not None:
            return f"'{where}{key}.{odd}' is not a schema"
    for key in SCHEMA_LISTS:
        entries = schema.get(key, [])
        if not isinstance(entries, list) or not all(isinstance(e, (dict, bool)) for e in entries):
            return f"'{where}{key}' is not a list of schemas"
    for key in SINGLE_SCHEMAS:
        sub = schema.get(key, True)
        tuple_form = isinstance(sub, list) and key == "items"  # draft-07
        if tuple_form and not all(isinstance(e, (dict, bool)) for e in sub):
            return f"'{where}items' is not a list of schemas"
        if not isinstance(sub, (dict, bool)) and not tuple_form:
            return f"'{where}{key}' is not a schema"
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(n, str) for n in required):
        return f"'{where}required' is not a list of names"
    kind = schema.get("type", "string")
    if not isinstance(kind, (str, list)) or (
        isinstance(kind, list) and not all(isinstance(k, str) for k in kind)
    ):
        return f"'{where}type' is not a type name or a list of them"
    for step, sub in subschemas(schema):
        key, _, name = step.partition("/")
        found = malformed(sub, f"{where}{name}" if key == "properties" else f"{where}{step}")
        if found is not None:
            return found
    return None


def resolve_ref(root: Mapping[str, Any], ref: str) -> dict[str, Any] | None:
    """The schema a local ``$ref`` (``#/...``) points at, or None."""
    if ref == "#":
        return dict(root) if not isinstance(root, dict) else root
    if not ref.startswith("#/"):
        return None
    node: Any = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node if isinstance(node, dict) else None


def accepts_null(schema: Any, root: Mapping[str, Any], _seen: frozenset[str] = frozenset()) -> bool:
    """Whether ``null`` is a valid value for ``schema`` (``$ref`` followed within ``root``)."""
    if not isinstance(schema, dict):
        return schema is not False
    ref = schema.get("$ref")
    if isinstance(ref, str):
        if ref in _seen:
            return False
        target = resolve_ref(root, ref)
        if target is None or not accepts_null(target, root, _seen | {ref}):
            return False
    if "const" in schema and schema["const"] is not None:
        return False
    enum = schema.get("enum")
    if isinstance(enum, list) and None not in enum:
        return False
    kind = schema.get("type")
    if isinstance(kind, str) and kind != "null":
        return False
    if isinstance(kind, list) and "null" not in kind:
        return False
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and not any(accepts_null(o, root, _seen) for o in options):
            return False
    options = schema.get("allOf")
    return not (
        isinstance(options, list) and not all(accepts_null(o, root, _seen) for o in options)
    )


def is_open_object(schema: Mapping[str, Any]) -> bool:
    """An object schema with declared properties that does not say whether others are
    allowed: JSON Schema allows them, and a pydantic model with ``extra="ignore"``
    (its default) drops them silently."""
    return isinstance(schema.get("properties"), dict) and "additionalProperties" not in schema


def close_open_objects(schema: dict[str, Any]) -> None:
    """Set ``additionalProperties: false`` on every open object, in place."""
    if is_open_object(schema):
        schema["additionalProperties"] = False
    for _, sub in subschemas(schema):
        close_open_objects(sub)
