"""The schema pipeline: what a tool's parameters schema looks like to the model.

A :data:`SchemaTransform` is a function ``(schema, ctx) -> schema``. The transforms of
``ToolRegistry(schema_transforms=[...])`` run in order when the registry builds its
definitions (once: the result is cached with them), each on a copy of the tool's
parameters that it owns and may edit in place. They change what the model reads, never
what the tool accepts: the tool still validates its arguments against its own schema.
When a tool is offered in strict mode, the strict transform (:func:`strict_parameters`)
runs last, on the pipeline's output; what the pipeline moved into descriptions survives
its keyword filter.

Two built-ins:

- :func:`portable_schema`, for servers that know only the core of JSON Schema: local
  ``$ref`` inlined and unused ``$defs`` dropped, ``oneOf`` read as ``anyOf``, keywords
  that only narrow a value (``minLength``, ``format``, ``default``...) moved into the
  description, annotations (``title``, ``examples``, ``$schema``...) dropped, boolean
  subschemas and odd references written in the core's terms, and what is malformed
  dropped (a server's schema is sent as written, and some are not JSON Schema);
- :func:`grammar_safe_schema`, for servers that turn schemas into grammars
  (llama-cpp-python, llama.cpp): no enum value or property name with a ``"`` (it
  breaks the grammar),
  no length or count bound over :data:`GRAMMAR_BOUND_LIMIT` (it exceeds llama.cpp's
  repetition limit), no ``pattern`` that is not anchored (it falls back to no grammar),
  no node that names no kind of value, as ``{}`` (read as objects only) or pydantic's
  ``list[Any]`` items (no grammar): such a node names every JSON type instead.
  llama-cpp-python's server process exits on the first two.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from ..error import ToolConfigError, ToolDefinitionError
from ._jsonschema import (
    ANY_JSON_TYPE,
    NAMED_SCHEMAS,
    SCHEMA_LISTS,
    SINGLE_SCHEMAS,
    mend_unambiguous,
    resolve_ref,
    schema_entries,
    shape_fault,
    subschemas,
)

__all__ = [
    "GRAMMAR_BOUND_LIMIT",
    "SchemaContext",
    "SchemaTransform",
    "apply_transforms",
    "grammar_safe_schema",
    "portable_schema",
]

logger = logging.getLogger("agcore_tools.registry")


@dataclass(frozen=True, slots=True)
class SchemaContext:
    """What a schema transform knows about the schema it is given.

    Example:
        >>> ctx = SchemaContext("notion__search", "chat", strict=False)
        >>> ctx.tool_name, ctx.api
        ('notion__search', 'chat')
    """

    tool_name: str
    """The tool's name as the model sees it (prefixed, for MCP tools)."""
    api: Literal["chat", "responses"]
    """The shape the definitions are built in: ``ToolRegistry.definitions(api=...)``'s.
    An :class:`~agcore_tools.LlmCycle` run builds Chat Completions definitions (``"chat"``)
    whatever its ``CycleConfig.api``, and a Responses run converts them; the parameters
    schema is the same in both shapes."""
    strict: bool = False
    """Whether strict mode is asked for this tool; it runs after the pipeline."""


SchemaTransform: TypeAlias = Callable[[dict[str, Any], SchemaContext], dict[str, Any]]
"""A function from a parameters schema (a copy it may edit) and its context to the
schema the model reads."""

GRAMMAR_BOUND_LIMIT = 100
"""The largest ``minLength``/``maxLength``/``minItems``/``maxItems`` that
:func:`grammar_safe_schema` leaves in a schema. llama.cpp refuses a repetition of about
2000 or more (and llama-cpp-python's server then exits); bounds multiply when nested,
so the limit is well below that."""

# Keywords that only narrow a value: moving them to the description keeps the model
# informed, and the tool's own validation still enforces them.
_NARROWING = (
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "default",
)
_ANNOTATIONS = (
    "title",
    "examples",
    "$schema",
    "$id",
    "$comment",
    "readOnly",
    "writeOnly",
    "deprecated",
    "contentEncoding",
    "contentMediaType",
)
_BOUNDS = ("minLength", "maxLength", "minItems", "maxItems")
# What llama-cpp-python's grammar converter reads a node's kind of value from.
_KIND_KEYWORDS = (
    "type",
    "$ref",
    "anyOf",
    "oneOf",
    "allOf",
    "const",
    "enum",
    "properties",
    "items",
    "prefixItems",
    "pattern",
)


def portable_schema(schema: dict[str, Any], ctx: SchemaContext) -> dict[str, Any]:
    """Only the core of JSON Schema, for servers that know no more.

    Local ``$ref`` are inlined (a recursive one stays, with the definitions it needs; a
    recursive ``"#"`` becomes a definition of the root), ``oneOf`` becomes ``anyOf``,
    narrowing keywords move into the description and annotations are dropped. The
    model reads every constraint; it just is not asked to follow it in the schema.
    Boolean subschemas become objects (``true`` is ``{}``; a ``false`` property is left
    out), a ``$ref`` to nothing or to another document becomes any value with the
    reference in the description, and what is not JSON Schema's shape (``properties``
    as a list, ``required`` as a string) is dropped, with a logged warning; what has
    one meaning (``"properties": []``, ``"required": null``) is mended first, as
    :func:`mend_unambiguous` says.

    Example:
        >>> schema = {
        ...     "type": "object",
        ...     "$defs": {"Id": {"type": "string", "minLength": 3, "title": "Id"}},
        ...     "properties": {"id": {"$ref": "#/$defs/Id", "description": "Page id."}},
        ... }
        >>> portable_schema(schema, SchemaContext("get_page", "chat"))
        {'type': 'object', 'properties': {'id': {'type': 'string', 'description': 'Page id. (minLength: 3)'}}}
    """
    # A fault with one meaning is mended as the MCP adapter mends it, not dropped.
    schema, mended = mend_unambiguous(schema)
    if mended:
        logger.info("portable_schema: tool %r: mended %s", ctx.tool_name, "; ".join(mended))
    dropped: list[str] = []
    schema = _well_formed(schema, "", dropped)
    if dropped:
        logger.warning(
            "portable_schema: tool %r has a malformed schema; dropped %s",
            ctx.tool_name,
            "; ".join(dropped),
        )
    schema = inline_refs(schema)
    _portable_node(schema)
    return schema


def grammar_safe_schema(schema: dict[str, Any], ctx: SchemaContext) -> dict[str, Any]:
    """A schema llama-cpp-python and llama.cpp can turn into a grammar.

    An ``enum`` or ``const`` with a string containing ``"`` becomes its plain type, with
    the values in the description; a property whose name contains ``"`` leaves
    ``properties`` for ``additionalProperties: true`` and the description; a length or
    count bound over
    :data:`GRAMMAR_BOUND_LIMIT` and a ``pattern`` not anchored with ``^...$`` move into
    the description. A node that accepts any value without saying so (``{}``, or only
    a description) names every JSON type, which the converter turns into "any value".

    Example:
        >>> schema = {"type": "object", "properties": {
        ...     "quote": {"type": "string", "enum": ['say "hi"', "bye"]},
        ...     "rows": {"type": "array", "items": {"type": "string"}, "maxItems": 10000},
        ... }}
        >>> safe = grammar_safe_schema(schema, SchemaContext("write_rows", "chat"))
        >>> safe["properties"]["quote"]
        {'type': 'string', 'description': 'One of: "say \\\\"hi\\\\"", "bye".'}
        >>> safe["properties"]["rows"]["description"]
        '(maxItems: 10000)'
    """
    _grammar_node(schema)
    return schema


def apply_transforms(
    schema: dict[str, Any], transforms: Sequence[SchemaTransform], ctx: SchemaContext
) -> dict[str, Any]:
    """Run ``transforms`` in order on a copy of ``schema``; the input is left unchanged.

    A transform that raises, or returns something other than a dict, fails with an
    error naming it and the tool.

    Example:
        >>> schema = {"type": "object", "title": "Args", "properties": {}}
        >>> apply_transforms(schema, [portable_schema], SchemaContext("t", "chat"))
        {'type': 'object', 'properties': {}}
        >>> schema["title"]
        'Args'
    """
    name = ctx.tool_name
    schema = copy.deepcopy(dict(schema))
    for transform in transforms:
        try:
            schema = transform(schema, ctx)
        except Exception as exc:
            label = getattr(transform, "__name__", repr(transform))
            raise ToolConfigError(
                f"schema transform {label} failed on tool '{name}': {type(exc).__name__}: {exc}",
                tool_name=name,
            ) from exc
        if not isinstance(schema, dict):
            label = getattr(transform, "__name__", repr(transform))
            raise ToolDefinitionError(
                f"schema transform {label} returned {type(schema).__name__} for tool "
                f"'{name}'; a transform must return the schema as a dict",
                tool_name=name,
            )
    return schema


# -- portable ----------------------------------------------------------------------


def inline_refs(root: dict[str, Any]) -> dict[str, Any]:
    """``root`` with every local ``$ref`` replaced by a copy of its target, and the
    definitions nothing points at any more dropped. A recursive reference stays, with
    the definition it needs (a recursive ``"#"`` becomes a definition of the root); one
    pointing at nothing becomes any value, with the reference in the description.

    Example:
        >>> inline_refs({"type": "object", "properties": {
        ...     "a": {"type": "array", "items": {"type": "string"}},
        ...     "b": {"$ref": "#/properties/a/items"},
        ... }})["properties"]["b"]
        {'type': 'string'}
    """
    needed: set[str] = set()
    # A recursive "#" (zod's z.lazy at the root) is kept as a definition of the root:
    # converters resolve "#/$defs/..." and refuse "#".
    defs = root.get("$defs")
    root_name = "root"
    while isinstance(defs, dict) and root_name in defs:
        root_name += "_"
    root_ref = f"#/$defs/{root_name}"

    def walk(node: Any, stack: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [walk(item, stack) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str):
            target = resolve_ref(root, ref)
            if target is None or ref in stack:
                siblings = {k: walk(v, stack) for k, v in node.items() if k != "$ref"}
                if target is None:
                    # Remote, or pointing at nothing: any value, and the model is told.
                    _append(siblings, f"(a schema this one does not include: {ref})")
                    return siblings
                needed.add(ref)  # recursive: keep the reference and its definition
                return {"$ref": root_ref if ref == "#" else ref, **siblings}
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            merged = {**copy.deepcopy(target), **siblings}
            return walk(merged, (*stack, ref))
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in ("$defs", "definitions") and node is root:
                out[key] = value
            elif key in NAMED_SCHEMAS and isinstance(value, dict):
                out[key] = {name: walk(sub, stack) for name, sub in value.items()}
            elif key in SCHEMA_LISTS or key in SINGLE_SCHEMAS:
                out[key] = walk(value, stack)
            else:
                out[key] = value  # data: a default, an example, enum members
        return out

    inlined: dict[str, Any] = walk(root, ())
    for key in ("$defs", "definitions"):
        found = inlined.pop(key, None)
        if not isinstance(found, dict):
            continue
        kept = {
            name: walk(sub, (f"#/{key}/{name}",))
            for name, sub in found.items()
            if f"#/{key}/{name}" in needed
        }
        if kept:
            inlined[key] = kept
    if "#" in needed:
        body = {k: v for k, v in root.items() if k not in ("$defs", "definitions")}
        inlined.setdefault("$defs", {})[root_name] = walk(body, ("#",))
    return inlined


def _well_formed(node: dict[str, Any], path: str, dropped: list[str]) -> dict[str, Any]:
    """``node`` with what is not JSON Schema's shape dropped (noted in ``dropped``; see
    :func:`shape_fault`), and boolean subschemas as objects: ``true`` is ``{}``; a
    ``false`` property or ``anyOf`` option is left out; ``items: false`` is
    ``maxItems: 0``."""
    where = f"{path}." if path else ""
    out: dict[str, Any] = {}
    never: set[str] = set()  # properties declared `false`: they cannot be required either
    for key, value in node.items():
        fault = shape_fault(key, value)
        if key == "required" and isinstance(value, list):
            names = [n for n in value if isinstance(n, str)]
            if fault is not None:
                dropped.append(f"the entries of '{where}required' that are not names")
            out[key] = names
        elif fault is not None:
            dropped.append(f"'{where}{key}' ({fault})")
        elif key == "items" and value is False:
            out["maxItems"] = 0
        elif entries := schema_entries(key, value):
            kept: dict[str, Any] = {}
            for name, sub in entries:
                step = f"{where}{name}" if key == "properties" else f"{where}{key}.{name}"
                if sub is False and key != "items":  # matches nothing: the option goes
                    if key == "properties":
                        never.add(name)
                elif isinstance(sub, (dict, bool)):
                    kept[name] = _well_formed(sub if isinstance(sub, dict) else {}, step, dropped)
                else:
                    dropped.append(f"'{step}' (not a schema)")
            out[key] = kept if isinstance(value, dict) else list(kept.values())
        elif key in SINGLE_SCHEMAS and isinstance(value, dict):
            out[key] = _well_formed(value, f"{where}{key}", dropped)
        elif key != "items" or value is not True:  # `items: true` is any item, as none
            out[key] = value
    if never and isinstance(out.get("required"), list):
        out["required"] = [name for name in out["required"] if name not in never]
    return out


def _portable_node(node: dict[str, Any]) -> None:
    if "oneOf" in node and "anyOf" not in node:
        node["anyOf"] = node.pop("oneOf")
    for key in _ANNOTATIONS:
        node.pop(key, None)
    moved = {key: node.pop(key) for key in _NARROWING if key in node}
    _describe(node, moved)
    for _, sub in subschemas(node):
        _portable_node(sub)


# -- grammar-safe ------------------------------------------------------------------


def _grammar_node(node: dict[str, Any]) -> None:
    if not any(key in node for key in _KIND_KEYWORDS):
        # No keyword says what the value is, so any is valid; said outright, since the
        # converter refuses such a node ("Unrecognized schema"; a KeyError for
        # pydantic's `list[Any]`, whose `items` is {}), or reads {} as objects only.
        # Naming every type changes no validation: each keyword applies to its own.
        node["type"] = list(ANY_JSON_TYPE)
    moved: dict[str, Any] = {}
    for key in _BOUNDS:
        value = node.get(key)
        if isinstance(value, int) and value > GRAMMAR_BOUND_LIMIT:
            moved[key] = node.pop(key)
    pattern = node.get("pattern")
    if isinstance(pattern, str) and not (pattern.startswith("^") and pattern.endswith("$")):
        moved["pattern"] = node.pop("pattern")
    _describe(node, moved)
    values = node["enum"] if isinstance(node.get("enum"), list) else None
    if values is None and "const" in node:
        values = [node["const"]]
    if values is not None and any(isinstance(v, str) and '"' in v for v in values):
        node.pop("enum", None)
        node.pop("const", None)
        kinds = sorted({_json_type(v) for v in values})
        node.setdefault("type", kinds[0] if len(kinds) == 1 else kinds)
        listed = ", ".join(_dumps(v) for v in values)
        _append(node, f"One of: {listed}." if len(values) > 1 else f"Exactly {listed}.")
    _quoted_names(node)
    for _, sub in subschemas(node):
        _grammar_node(sub)


def _quoted_names(node: dict[str, Any]) -> None:
    # A property name with a '"' breaks the grammar too. The name cannot change (the
    # tool reads it), so the property leaves the declared ones: it stays allowed as an
    # extra key, described in words.
    properties = node.get("properties")
    if not isinstance(properties, dict):
        return
    quoted = {name: properties.pop(name) for name in list(properties) if '"' in name}
    if not quoted:
        return
    required = node.get("required")
    if isinstance(required, list):
        node["required"] = [name for name in required if name not in quoted]
        needed = [name for name in required if name in quoted]
    else:
        needed = []
    node["additionalProperties"] = True
    listed = _dumps(quoted)
    must = f" Required: {_dumps(needed)}." if needed else ""
    _append(node, f"Also takes these properties: {listed}.{must}")


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "string"


# -- shared ------------------------------------------------------------------------


def _describe(node: dict[str, Any], moved: dict[str, Any]) -> None:
    if moved:
        text = "; ".join(f"{k}: {_dumps(v)}" for k, v in moved.items())
        _append(node, f"({text})")


def _dumps(value: Any) -> str:
    import json  # only for a schema that needs a note: not worth loading with the package

    return json.dumps(value, ensure_ascii=False)


def _append(node: dict[str, Any], text: str) -> None:
    description = node.get("description")
    node["description"] = f"{description} {text}" if isinstance(description, str) else text
