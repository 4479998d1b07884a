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


def names_every_type(kind: Any) -> bool:
    """Whether a ``type`` value names every JSON type: any value, said outright.

    Example:
        >>> names_every_type(list(ANY_JSON_TYPE)), names_every_type(["object", "null"])
        (True, False)
    """
    return isinstance(kind, list) and set(kind) >= set(ANY_JSON_TYPE)


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


def mend_unambiguous(schema: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A copy of ``schema`` with the faults that have one meaning mended, and what was.

    An empty list where a map of schemas belongs (``"properties": []``: PHP's
    ``json_encode`` writes an empty map so) is that empty map, ``"required": null`` is
    no ``required``, and an array with no ``items`` gets ``"items": {}`` (any item, as
    before). A server can send each, and OpenAI refuses the whole request for it ("[] is
    not of type 'object'", "array schema missing items"); nothing else changes.

    Example:
        >>> mend_unambiguous({"type": "object", "properties": [], "required": None})
        ({'type': 'object', 'properties': {}}, ["'properties': [] as {}", "'required': null dropped"])
        >>> mend_unambiguous({"properties": {"ids": {"type": "array"}}})
        ({'properties': {'ids': {'type': 'array', 'items': {}}}}, ["'ids': items {} added"])
    """
    mended: list[str] = []

    def walk(node: dict[str, Any], path: str) -> dict[str, Any]:
        where = f"{path}." if path else ""
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in NAMED_SCHEMAS and value == []:
                mended.append(f"'{where}{key}': [] as {{}}")
                out[key] = {}
            elif key == "required" and value is None:
                mended.append(f"'{where}required': null dropped")
            elif key in NAMED_SCHEMAS and isinstance(value, dict):
                named: dict[str, Any] = {}
                for name, sub in value.items():
                    step = f"{where}{name}" if key == "properties" else f"{where}{key}.{name}"
                    named[name] = walk(sub, step) if isinstance(sub, dict) else sub
                out[key] = named
            elif key in SCHEMA_LISTS and isinstance(value, list):
                out[key] = [walk(s, f"{where}{key}") if isinstance(s, dict) else s for s in value]
            elif key in SINGLE_SCHEMAS and isinstance(value, dict):
                out[key] = walk(value, f"{where}{key}")
            else:
                out[key] = value
        kind = out.get("type")
        if "items" not in out and (kind == "array" or (isinstance(kind, list) and "array" in kind)):
            mended.append(f"'{path or '(top level)'}': items {{}} added")
            out["items"] = {}
        return out

    return walk(dict(schema), ""), mended


def shape_fault(key: str, value: Any) -> str | None:
    """Why ``value`` cannot be the value of keyword ``key``, or None. Only the keyword's
    own shape: the entries of a map or list of schemas are checked where they are walked
    (each must be an object or a boolean).

    Example:
        >>> shape_fault("required", "abc"), shape_fault("properties", []), shape_fault("type", "string")
        ('not a list of names', 'not an object', None)
    """
    if key in NAMED_SCHEMAS:
        return None if isinstance(value, dict) else "not an object"
    if key in SCHEMA_LISTS:
        return None if isinstance(value, list) else "not a list"
    if key in SINGLE_SCHEMAS:
        tuple_form = key == "items" and isinstance(value, list)  # draft-07
        return None if isinstance(value, (dict, bool)) or tuple_form else "not a schema"
    if key == "required":
        names = isinstance(value, list) and all(isinstance(n, str) for n in value)
        return None if names else "not a list of names"
    if key == "type":
        kinds = isinstance(value, list) and all(isinstance(k, str) for k in value)
        return None if isinstance(value, str) or kinds else "not a type name or a list of them"
    if key in ("$ref", "description", "title"):
        return None if isinstance(value, str) else "not text"
    return None


def schema_entries(key: str, value: Any) -> list[tuple[str, Any]]:
    """The entries of keyword ``key``'s value that must each be a schema, with their
    names (a property's, or a list index): none for a keyword that holds one schema.

    Example:
        >>> schema_entries("anyOf", [{"type": "string"}, 5])
        [('0', {'type': 'string'}), ('1', 5)]
    """
    if key in NAMED_SCHEMAS and isinstance(value, dict):
        return [(str(name), sub) for name, sub in value.items()]
    if (key in SCHEMA_LISTS or key == "items") and isinstance(value, list):
        return [(str(index), sub) for index, sub in enumerate(value)]
    return []


def malformed(schema: Mapping[str, Any], path: str = "") -> str | None:
    """Where ``schema`` breaks JSON Schema's shape (see :func:`shape_fault`), as a short
    phrase, or None. A server can send such a schema; what rewrites schemas (strict
    mode) refuses it by name.

    Example:
        >>> malformed({"type": "object", "properties": {"a": {"required": "a"}}})
        "'a.required' is not a list of names"
        >>> malformed({"type": "object", "properties": {"a": "string"}})
        "'a' is not a schema"
        >>> malformed({"type": "object", "properties": {"a": {"type": "string"}}}) is None
        True
    """
    where = f"{path}." if path else ""
    for key, value in schema.items():
        fault = shape_fault(key, value)
        if fault is not None:
            return f"'{where}{key}' is {fault}"
        for name, sub in schema_entries(key, value):
            step = f"{where}{name}" if key == "properties" else f"{where}{key}.{name}"
            if not isinstance(sub, (dict, bool)):
                return f"'{step}' is not a schema"
            found = malformed(sub, step) if isinstance(sub, dict) else None
            if found is not None:
                return found
        if key in SINGLE_SCHEMAS and isinstance(value, dict):
            found = malformed(value, f"{where}{key}")
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
