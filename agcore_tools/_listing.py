"""Code mode's listing: a registry's tools as typed async Python stubs.

Why: in code mode the model calls tools from a program, so ``run_python``'s
description lists each tool as the function the program calls, an ``async def`` with
its parameters and return type annotated and its description as docstring (see
:mod:`agcore_tools._code_mode`, which runs the program). Reading a tool's JSON Schemas
into Python annotations and shapes is a job of its own: these are pure functions from
JSON Schemas to source text, with no sandbox, loop or registry.
"""

from __future__ import annotations

import keyword
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

from ._sandbox import valid_identifier
from .schema import required_names

__all__ = ["RETURNS_LIMIT", "parameters_of", "python_signatures"]

_TYPES = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "null": "None"}


RETURNS_LIMIT = 300
"""Characters of a tool's ``Returns:`` line in its stub (and of a parameter's keys on
its line); the rest is cut to "..."."""
_NESTING = 2  # objects shown with their keys: the result and the objects in it
_DEPTH = 12  # schema nodes followed down one path: a cycle of $refs ends here


class _Schema:
    """A tool's output or parameters schema in two forms: the annotation (valid Python,
    every object a ``dict``; enums as ``Literal[...]`` when ``literals``, else their
    values' type) and the shape (objects with their keys, ``?`` after an optional one,
    enums as their values). Local ``$ref`` are followed, against ``root``; anything
    unreadable is ``Any``. ``keyed`` tells whether a shape showed an object's keys."""

    def __init__(self, root: Mapping[str, Any], literals: bool = False) -> None:
        self.root = root
        self.literals = literals
        self.keyed = False

    def resolve(self, node: Any) -> Mapping[str, Any] | None:
        for _ in range(_DEPTH):
            ref = node.get("$ref") if isinstance(node, Mapping) else None
            if not isinstance(ref, str):
                break
            if not ref.startswith("#"):  # a remote schema: nothing to read it from
                return None
            node = self.root
            for part in ref[1:].split("/")[1:]:
                part = part.replace("~1", "/").replace("~0", "~")
                node = node.get(part) if isinstance(node, Mapping) else None
        return node if isinstance(node, Mapping) and "$ref" not in node else None

    def render(self, node: Any, shape: bool, nesting: int = 0, depth: int = 0) -> str:
        schema = self.resolve(node)
        if schema is None or depth > _DEPTH:
            return "Any"
        deeper = depth + 1
        values = [schema["const"]] if "const" in schema else schema.get("enum")
        if isinstance(values, list) and values:
            if self.literals and not shape:
                return f"Literal[{', '.join(dict.fromkeys(repr(v) for v in values))}]"
            shown = (repr(v) if shape else _TYPES.get(_json_type(v), "Any") for v in values)
            return " | ".join(dict.fromkeys(shown))
        for union in ("anyOf", "oneOf"):
            members = schema.get(union)
            if isinstance(members, list) and members:
                shown = (self.render(m, shape, nesting, deeper) for m in members)
                return " | ".join(dict.fromkeys(shown))
        every = schema.get("allOf")
        if isinstance(every, list) and every:
            return self.render(self.merged(every), shape, nesting, deeper)
        kind = schema.get("type")
        if kind is None and isinstance(schema.get("properties"), Mapping):
            kind = "object"
        if isinstance(kind, list):
            kinds = [k for k in kind if isinstance(k, str)]
            shown = (self.render({**schema, "type": k}, shape, nesting, deeper) for k in kinds)
            return " | ".join(dict.fromkeys(shown)) or "Any"
        if kind == "array":
            items = schema.get("items")
            return f"list[{self.render(items, shape, nesting, deeper) if items else 'Any'}]"
        if kind == "object":
            return self.object(schema, shape, nesting, deeper)
        return _TYPES.get(kind, "Any") if isinstance(kind, str) else "Any"

    def object(self, schema: Mapping[str, Any], shape: bool, nesting: int, depth: int) -> str:
        properties = schema.get("properties")
        if isinstance(properties, Mapping) and properties:
            if not shape or nesting >= _NESTING:
                return "dict"
            self.keyed = True
            required = required_names(schema)
            keys = (
                f"{_key(name)}{'' if name in required else '?'}: "
                f"{self.render(value, shape, nesting + 1, depth)}"
                for name, value in properties.items()
            )
            return "{" + ", ".join(keys) + "}"
        values = schema.get("additionalProperties")
        if isinstance(values, Mapping) and values:  # a map: its values' type
            return f"dict[str, {self.render(values, shape, nesting + 1, depth)}]"
        return "dict"

    def merged(self, members: list[Any]) -> dict[str, Any]:
        """The members of an ``allOf`` as one object (a lone member as itself)."""
        resolved = [self.resolve(m) for m in members]
        if len(resolved) == 1:
            return dict(resolved[0] or {})
        properties: dict[str, Any] = {}
        required: set[str] = set()
        for member in resolved:
            if member is not None and isinstance(member.get("properties"), Mapping):
                properties.update(member["properties"])
                required |= required_names(member)
        return {"type": "object", "properties": properties, "required": sorted(required)}


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    return {str: "string", float: "number", type(None): "null"}.get(type(value), "")


def _key(name: str) -> str:
    return name if name.isidentifier() else repr(name)


def _returns(schema: Any) -> tuple[str, str]:
    """A tool's return annotation and, when it says less than the shape, the shape;
    ``("Any", "")`` when its output is unknown.

    Example:
        >>> _returns({"type": "array", "items": {"type": "string"}})
        ('list[str]', '')
        >>> _returns({"type": "object", "properties": {"n": {"type": "integer"}}})
        ('dict', '{n?: int}')
    """
    if not isinstance(schema, Mapping) or not schema:
        return "Any", ""
    reader = _Schema(schema)
    annotation, shape = reader.render(schema, False), reader.render(schema, True)
    if len(annotation) > 80:  # a long union: the shape line says it
        annotation = "Any"
    return annotation, "" if shape == annotation else shape


def parameters_of(definition: Mapping[str, Any]) -> tuple[list[str], Mapping[str, Any], set[str]]:
    """A tool definition's parameter names in the order a program passes them
    positionally (the required ones first, as the listing shows them, then the schema's
    order), their schemas, and the required ones; none for a malformed schema.

    Example:
        >>> parameters_of({"parameters": {"properties": {"a": {}, "b": {}}, "required": ["b"]}})
        (['b', 'a'], {'a': {}, 'b': {}}, {'b'})
    """
    schema = definition.get("parameters") or {}
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):  # a malformed schema lists no parameters
        properties = {}
    required = required_names(schema)
    # One order for the signature shown and the positional values read: a schema
    # listing an optional key first (Go servers sort keys) must not shift them.
    return sorted(properties, key=lambda n: n not in required), properties, required


def _stub(function: str, definition: Mapping[str, Any], output: Any = None) -> str:
    names, properties, required = parameters_of(definition)
    reader = _Schema(definition.get("parameters") or {}, literals=True)
    annotations = {n: reader.render(properties[n], False) for n in names}
    plain = all(_plain_name(n) for n in names)
    if plain:
        params = [f"{n}: {annotations[n]}" + ("" if n in required else " = None") for n in names]
        signature, note = ", ".join(params), ""
    else:
        # Keys that are no Python names ("from", "api-version") are passed as **{...};
        # the comment goes after the colon, where it cannot end the signature.
        keys = ", ".join(f"{n!r}: {annotations[n]}" for n in names)
        signature, note = "**arguments: Any", f"  # pass **{{{keys}}}"
    doc = _short(definition.get("description"), 400)
    described = [line for line in (_described(n, properties[n], reader) for n in names) if line]
    returns, shape = _returns(output)
    if shape:
        described.append(f"    Returns: {_short(shape, RETURNS_LIMIT)}")
    if described:
        doc = f"{doc}\n\n" + "\n".join(described) + "\n    "
    if doc.endswith('"'):
        doc += " "  # its closing quote would run into the docstring's three
    return f'async def {function}({signature}) -> {returns}:{note}\n    """{doc}"""'


def _plain_name(name: str) -> bool:
    """Whether a parameter can be written as a keyword argument and read back as itself.
    Python (and Monty) read names as NFKC, so ``ｑｕｅｒｙ=`` (full-width) or a
    decomposed ``café=`` reaches the tool as another key, and two such keys collide;
    ``__debug__`` cannot be a parameter.

    Example:
        >>> _plain_name("query"), _plain_name("ｑｕｅｒｙ"), _plain_name("from")
        (True, False, False)
    """
    return (
        name.isidentifier()
        and not keyword.iskeyword(name)
        and unicodedata.normalize("NFKC", name) == name
        and name != "__debug__"
    )


def _described(name: str, schema: Any, reader: _Schema) -> str:
    """A parameter's line in its tool's docstring: its description, and the keys of
    the objects it takes (which its annotation, a ``dict``, does not say); or ""."""
    text = schema.get("description") if isinstance(schema, Mapping) else None
    reader.keyed = False
    shape = reader.render(schema, True)
    keys = f" ({_short(shape, RETURNS_LIMIT)})" if reader.keyed else ""
    if not text:
        return f"    {_in_docstring(name)}{keys}" if keys else ""
    return f"    {_in_docstring(name)}{keys}: {_short(text, 120)}"


def _short(text: Any, limit: int) -> str:
    words = " ".join(str(text or "").split())
    if len(words) > limit:
        words = words[: limit - 3] + "..."
    return _in_docstring(words)


def _in_docstring(text: str) -> str:
    # A stub is Python source: a backslash is doubled (a description's "C:\Users" holds
    # no \U escape), three quotes cannot end the docstring early, and a NUL, which no
    # source may hold, goes.
    return text.replace("\\", "\\\\").replace('"""', "'''").replace("\x00", "")


def python_signatures(
    definitions: Sequence[Mapping[str, Any]], outputs: Mapping[str, Any] | None = None
) -> tuple[str, dict[str, str]]:
    """Stubs of ``definitions`` (Chat Completions form) as async Python functions, and
    each function's tool name. Names become valid, distinct identifiers.

    ``outputs`` maps a tool's name to the JSON Schema of what it returns (its
    :attr:`~agcore_tools.BaseTool.output_schema`): its stub's return type, and for
    objects a ``Returns:`` line with their keys (``?`` after an optional one), cut at
    :data:`RETURNS_LIMIT` characters. A tool without one returns ``Any``.

    Example:
        >>> text, names = python_signatures([{"function": {
        ...     "name": "github__list-issues", "description": "List issues.",
        ...     "parameters": {"type": "object", "required": ["repo"], "properties": {
        ...         "repo": {"type": "string"}, "state": {"enum": ["open", "closed"]}}}}}],
        ...     {"github__list-issues": {"type": "object", "required": ["issues"], "properties": {
        ...         "issues": {"type": "array", "items": {"$ref": "#/$defs/Issue"}}},
        ...         "$defs": {"Issue": {"type": "object", "required": ["number"], "properties": {
        ...             "number": {"type": "integer"}, "title": {"type": "string"}}}}}})
        >>> print(text)
        async def github__list_issues(repo: str, state: Literal['open', 'closed'] = None) -> dict:
            \"\"\"List issues.
        <BLANKLINE>
            Returns: {issues: list[{number: int, title?: str}]}
            \"\"\"
        >>> names
        {'github__list_issues': 'github__list-issues'}
    """
    functions = [definition.get("function", definition) for definition in definitions]
    # A name that is an identifier already keeps it, whatever came first: which tool
    # `gh__list_issues` calls must not hang on the order the tools were registered in.
    taken = {
        str(f["name"])
        for f in functions
        if str(f["name"]) == valid_identifier(str(f["name"]), set())
    }
    stubs, names = [], {}
    for function in functions:
        tool = str(function["name"])
        identifier = tool if tool in taken else valid_identifier(tool, taken)
        names[identifier] = tool
        stubs.append(_stub(identifier, function, (outputs or {}).get(tool)))
    return "\n\n".join(stubs), names
