"""OpenAI strict mode (``"strict": true``) for a tool's parameters schema.

:func:`strict_parameters` turns a parameters schema into one strict mode accepts, or says
why it cannot. Three steps, on a copy (first, a ``$ref`` to anything but a whole
definition, such as zod-to-json-schema's ``"#/properties/a/items"``, is inlined: the
steps rewrite the nodes it would point into; a reference that still points at nothing
afterwards is refused):

1. **Optional becomes nullable** (ours). Strict mode wants every property required;
   an optional one becomes ``anyOf: [<its schema>, {"type": "null"}]`` without its
   ``default``, and the argument plan (``_argplan``) maps the model's ``null`` back to
   "use the default". OpenAI's transform makes every property required but not
   nullable, so this step comes first. ``oneOf`` becomes ``anyOf`` (the transform does
   not descend into ``oneOf``, and strict mode knows ``anyOf`` only), and
   ``additionalProperties: true`` becomes ``false`` (every object must be closed).
2. **OpenAI's own transform**, what ``openai.pydantic_function_tool`` applies: every
   object closed, every property required, ``$ref`` with siblings inlined, single
   ``allOf`` flattened, ``null`` defaults dropped. It is reached through that public
   function, with a model whose ``model_json_schema()`` is the schema of step 1.
3. **Keywords strict mode accepts** (ours). OpenAI's Structured Outputs guide lists:
   ``type``, ``properties``, ``required``, ``additionalProperties: false``, ``items``,
   ``anyOf``, ``enum``, ``const``, ``$ref``/``$defs``, ``description``; for strings
   ``pattern`` and ``format`` (date-time, time, date, duration, email, hostname, ipv4,
   ipv6, uuid); for numbers ``multipleOf``, ``minimum``, ``maximum``,
   ``exclusiveMinimum``, ``exclusiveMaximum``; for arrays ``minItems``, ``maxItems``.
   Any other keyword only documents or checks (``title``, ``default``, ``minLength``,
   ``uniqueItems``, other formats, ``not``, ``if``...) and is dropped: the tool still
   validates its arguments, and the model reads any failure. What changes the shape
   cannot be dropped, so such a schema is refused: values of any type (``typing.Any``),
   maps with free keys (``dict[str, int]``), tuples (``prefixItems``),
   ``patternProperties``, ``allOf`` of several schemas, and a root that is not an object.
   So is a schema over OpenAI's size limits: 5,000 object properties, 10 levels of
   nested objects, 1,000 enum values, 120,000 characters of property and definition
   names and enum and const values, and 15,000 characters for a string enum of over
   250 values.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from ._jsonschema import (
    accepts_null,
    malformed,
    names_every_type,
    required_names,
    resolve_ref,
    subschemas,
)
from ._transforms import inline_refs

KEPT = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "anyOf",
        "enum",
        "const",
        "$ref",
        "$defs",
        "definitions",
        "description",
        "pattern",
        "format",
        "multipleOf",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minItems",
        "maxItems",
    }
)
"""The keywords strict mode accepts (OpenAI's Structured Outputs guide, "Supported schemas")."""

FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
"""The string formats strict mode accepts."""

_REFUSED = {
    "allOf": "an intersection of schemas (allOf)",
    "patternProperties": "keys matched by pattern (patternProperties)",
    "prefixItems": "a tuple (prefixItems)",
}
_TYPED = ("type", "anyOf", "$ref", "enum", "const")

# OpenAI's size limits for a strict schema (Structured Outputs guide, "Supported
# schemas"); over any one, OpenAI refuses the whole request.
_MAX_PROPERTIES = 5_000
_MAX_OBJECT_LEVELS = 10
_MAX_ENUM_VALUES = 1_000
_MAX_NAME_CHARS = 120_000  # property and definition names, enum and const values
_LONG_ENUM = 250  # a string enum with more values than this...
_MAX_LONG_ENUM_CHARS = 15_000  # ...may have this many characters in all


def strict_parameters(schema: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """The strict form of a parameters schema, or ``(None, why not)``.

    Example:
        >>> strict, why = strict_parameters({
        ...     "type": "object",
        ...     "properties": {"city": {"type": "string"}, "days": {"type": "integer", "default": 3}},
        ...     "required": ["city"],
        ... })
        >>> strict["required"], strict["properties"]["days"], strict["additionalProperties"]
        (['city', 'days'], {'anyOf': [{'type': 'integer'}, {'type': 'null'}]}, False)
        >>> strict_parameters({"type": "object", "properties": {"anything": {}}})
        (None, "'anything' accepts any JSON value (typing.Any), which strict mode cannot describe")
    """
    prepared = copy.deepcopy(dict(schema))
    problems: list[str] = []
    if prepared.get("type") != "object" or "anyOf" in prepared or "oneOf" in prepared:
        return None, "the parameters are not a plain JSON object schema"
    broken = malformed(prepared)
    if broken is not None:
        return None, f"its schema is malformed: {broken}"
    if any(not _names_a_definition(ref) for ref in _refs(prepared)):
        # zod-to-json-schema points into properties ("#/properties/a/items"), and the
        # steps below rewrite such nodes: the reference would point at nothing.
        prepared = inline_refs(prepared)
    prepared.setdefault("properties", {})
    _prepare(prepared, prepared, problems, ())
    if problems:
        return None, problems[0]
    try:
        transformed = _openai_transform(prepared)
    except RecursionError:
        # A recursive reference with a sibling keyword ({"$ref": "#/$defs/Node",
        # "description": ...}): the transform inlines it, and the copy again, forever.
        return (
            None,
            "it has a recursive $ref with sibling keywords, which strict mode cannot inline",
        )
    except (TypeError, ValueError, KeyError, AssertionError) as exc:
        return None, f"OpenAI's strict transform refused it ({type(exc).__name__}: {exc})"
    _finish(transformed, (), problems)
    problems.extend(_over_limits(transformed))
    # What inlining could not remove (a recursive reference into properties, one that
    # pointed at nothing from the start) would make OpenAI refuse the whole request.
    problems.extend(
        f"its $ref {ref!r} points at nothing in the strict form"
        for ref in _refs(transformed)
        if resolve_ref(transformed, ref) is None
    )
    if problems:
        return None, problems[0]
    return transformed, None


def _over_limits(schema: dict[str, Any]) -> list[str]:
    """Which of OpenAI's size limits for strict schemas ``schema`` goes over."""
    totals = {"properties": 0, "levels": 0, "enum values": 0, "characters": 0}
    long_enums: list[str] = []

    def walk(node: dict[str, Any], levels: int, path: tuple[str, ...]) -> None:
        kind = node.get("type")
        if kind == "object" or (isinstance(kind, list) and "object" in kind):
            levels += 1
            totals["levels"] = max(totals["levels"], levels)
        properties = node.get("properties")
        if isinstance(properties, dict):
            totals["properties"] += len(properties)
            totals["characters"] += sum(len(name) for name in properties)
        for key in ("$defs", "definitions"):
            totals["characters"] += sum(len(name) for name in node.get(key) or ())
        enum = node.get("enum")
        if isinstance(enum, list):
            chars = sum(len(_text(value)) for value in enum)
            totals["enum values"] += len(enum)
            totals["characters"] += chars
            strings = all(isinstance(value, str) for value in enum)
            if strings and len(enum) > _LONG_ENUM and chars > _MAX_LONG_ENUM_CHARS:
                where = f"'{'.'.join(path)}'" if path else "an enum"
                long_enums.append(
                    f"{where} has {len(enum)} values of {chars} characters in all; strict "
                    f"mode allows {_MAX_LONG_ENUM_CHARS} for an enum of over {_LONG_ENUM}"
                )
        if "const" in node:
            totals["characters"] += len(_text(node["const"]))
        for step, sub in subschemas(node):
            walk(sub, levels, _deeper(path, step))

    walk(schema, 0, ())
    limits = {
        "properties": _MAX_PROPERTIES,
        "levels": _MAX_OBJECT_LEVELS,
        "enum values": _MAX_ENUM_VALUES,
        "characters": _MAX_NAME_CHARS,
    }
    over = [
        f"its schema has {totals[what]} {_LIMIT_NOUNS[what]}; strict mode allows {limit}"
        for what, limit in limits.items()
        if totals[what] > limit
    ]
    return over + long_enums


_LIMIT_NOUNS = {
    "properties": "object properties",
    "levels": "levels of nested objects",
    "enum values": "enum values",
    "characters": "characters of names, enum and const values",
}


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    import json  # only for a non-string enum or const: not worth loading with the package

    return json.dumps(value)


def _refs(node: dict[str, Any]) -> list[str]:
    """Every ``$ref`` in ``node``'s schemas (not in its data: defaults, examples)."""
    ref = node.get("$ref")
    found = [ref] if isinstance(ref, str) else []
    for _, sub in subschemas(node):
        found.extend(_refs(sub))
    return found


def _names_a_definition(ref: str) -> bool:
    # The steps below rewrite nodes in place but keep each definition where it is.
    parts = ref.split("/")
    return ref == "#" or (len(parts) == 3 and parts[:2] in (["#", "$defs"], ["#", "definitions"]))


def _prepare(
    node: dict[str, Any], root: dict[str, Any], problems: list[str], path: tuple[str, ...]
) -> None:
    if "oneOf" in node:
        if "anyOf" in node:
            problems.append("a schema uses both anyOf and oneOf")
            return
        node["anyOf"] = node.pop("oneOf")
    node.pop("discriminator", None)  # OpenAPI's hint next to oneOf; not JSON Schema
    if node is not root and _free_object(node):
        # Closed, it would take {} only: the keys it exists for could not be sent.
        where = f"'{'.'.join(path)}'" if path else "a definition"
        problems.append(
            f"{where} is a map with free keys (dict[str, ...]), which strict mode cannot describe"
        )
        return
    if node.get("additionalProperties") is True:
        node["additionalProperties"] = False  # declared properties stay; extras go
    kind = node.get("type")
    if isinstance(kind, list) and "object" in kind and "additionalProperties" not in node:
        # A nullable object (["object", "null"], as Go and TypeScript servers write it):
        # OpenAI's transform closes only a node whose type is "object" itself.
        node["additionalProperties"] = False
    properties = node.get("properties")
    undeclared = sorted(set(required_names(node)) - set(properties or ()))
    is_object = kind == "object" or (isinstance(kind, list) and "object" in kind)
    if undeclared and (isinstance(properties, dict) or node is root or is_object):
        # Closed to its declared keys, the object could never hold the required one,
        # and every call would be refused.
        where = f"'{'.'.join(path)}'" if path else "the arguments object"
        problems.append(
            f"{where} requires {undeclared[0]!r}, which it does not declare, so strict mode "
            "could never send it"
        )
        return
    if isinstance(properties, dict):
        required = required_names(node)
        for name, sub in list(properties.items()):
            if name not in required and isinstance(sub, dict):
                properties[name] = _nullable(sub, root)
    for step, sub in subschemas(node):
        _prepare(sub, root, problems, _deeper(path, step))


def _free_object(node: Mapping[str, Any]) -> bool:
    kind = node.get("type")
    # Every type at once is any value, which _finish names as such.
    is_object = kind == "object" or (
        isinstance(kind, list) and "object" in kind and not names_every_type(kind)
    )
    return (
        is_object
        and not node.get("properties")
        and node.get("additionalProperties", True) is True
        and "patternProperties" not in node
    )


def _deeper(path: tuple[str, ...], step: str) -> tuple[str, ...]:
    """``path`` (property names, ``[]`` for items, as messages show it) one step down."""
    key, _, name = step.partition("/")
    if key == "properties":
        return (*path, name)
    if key in ("$defs", "definitions"):
        return (name,)
    if key in ("items", "prefixItems"):
        return (*path[:-1], f"{path[-1]}[]") if path else ("[]",)
    return path


def _nullable(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    schema = dict(schema)
    schema.pop("default", None)
    if accepts_null(schema, root):
        return schema
    description = schema.pop("description", None)
    if set(schema) == {"anyOf"} and isinstance(schema["anyOf"], list):
        wrapped = {"anyOf": [*schema["anyOf"], {"type": "null"}]}
    else:
        wrapped = {"anyOf": [schema, {"type": "null"}]}
    if description is not None:
        wrapped["description"] = description
    return wrapped


def _openai_transform(schema: dict[str, Any]) -> dict[str, Any]:
    # openai.pydantic_function_tool reads the schema through model_json_schema(); this
    # model answers with ours, so the SDK's own transform applies to it unchanged.
    import openai
    from pydantic import BaseModel

    class _Parameters(BaseModel):
        @classmethod
        def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
            return schema

    definition = openai.pydantic_function_tool(_Parameters, name="parameters")
    parameters: dict[str, Any] = definition["function"]["parameters"]
    return parameters


def _finish(node: dict[str, Any], path: tuple[str, ...], problems: list[str]) -> None:
    where = f"'{'.'.join(path)}'" if path else "the arguments object"
    for key in list(node):
        if key in _REFUSED:
            problems.append(f"{where} is {_REFUSED[key]}, which strict mode cannot describe")
        elif key not in KEPT:
            del node[key]
    if node.get("format") not in FORMATS:
        node.pop("format", None)
    for exclusive, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        # Draft 4 and OpenAPI 3.0 write a flag next to the bound; strict mode takes the
        # later form, the bound itself.
        flag = node.pop(exclusive) if isinstance(node.get(exclusive), bool) else None
        if flag and bound in node:
            node[exclusive] = node.pop(bound)
    extra = node.get("additionalProperties")
    if isinstance(extra, dict) or extra is True:
        problems.append(
            f"{where} is a map with free keys (dict[str, ...]), which strict mode cannot describe"
        )
    if isinstance(node.get("items"), list):
        problems.append(f"{where} is a tuple, which strict mode cannot describe")
    if not any(key in node for key in _TYPED) or names_every_type(node.get("type")):
        problems.append(
            f"{where} accepts any JSON value (typing.Any), which strict mode cannot describe"
        )
    for name, sub in (node.get("properties") or {}).items():
        if isinstance(sub, dict):
            _finish(sub, (*path, name), problems)
    for key in ("$defs", "definitions"):
        for name, sub in (node.get(key) or {}).items():
            if isinstance(sub, dict):
                _finish(sub, (name,), problems)
    items = node.get("items")
    if isinstance(items, dict):
        _finish(items, (*path[:-1], f"{path[-1]}[]") if path else ("[]",), problems)
    for sub in node.get("anyOf") or ():
        if isinstance(sub, dict):
            _finish(sub, path, problems)
