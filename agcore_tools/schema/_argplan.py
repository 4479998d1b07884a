"""What a tool's schema says to do with a model's arguments before they are validated.

Worked out once per tool from its JSON Schema, then applied to every call:

- **null means "use the default".** A ``null`` for an optional property whose schema
  does not accept null is dropped, so the default applies. Strict mode needs this: it
  makes every property required and the optional ones nullable, so the model sends
  ``null`` where it means "leave it out". When the property's own type accepts null
  (``x: int | None = 5``), ``null`` stays ``None``: the function said ``None`` means
  something.
- **Unknown keys are reported, never dropped.** An object that declares its properties
  but not ``additionalProperties`` (a pydantic model with its default
  ``extra="ignore"``) would drop unknown keys silently; they are reported instead, as
  the top level's are.

Only the parts of the schema where there is something to do are kept, so a flat tool
with required parameters only has no plan at all and pays nothing per call.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ._jsonschema import accepts_null, is_open_object, required_names, resolve_ref

EXTRA_KEY = "Extra inputs are not permitted"
"""The problem text for an unknown key, worded as pydantic words it."""


@dataclass(eq=False)
class _Object:
    keys: frozenset[str]
    """The declared properties."""
    closed: bool = False
    """Whether keys outside ``keys`` are reported here."""
    drop_null: frozenset[str] = frozenset()
    """Optional keys whose ``null`` means "absent"."""
    children: dict[str, _Node] = field(default_factory=dict)


@dataclass(eq=False)
class _Array:
    items: _Node


@dataclass(eq=False)
class _Map:
    """An object whose every value has one schema (``dict[str, Item]``)."""

    values: _Node


@dataclass(eq=False)
class _Tuple:
    """An array whose items have a schema each (``tuple[Item, int]``)."""

    items: tuple[_Node | None, ...]


@dataclass(eq=False)
class _Choice:
    """A union of objects told apart by one key's constant value (``kind: "cat"``):
    the shape that value names is planned alone, so a key only another shape knows is
    reported; a value naming no shape gets the merged plan."""

    key: str
    shapes: dict[Any, _Object]
    merged: _Object


@dataclass(eq=False)
class _Either:
    """A union of an object shape and an array shape (``M | list[M]``): the value's
    own kind picks the plan."""

    on_dict: _Node
    on_list: _Node


_Node = _Object | _Array | _Map | _Tuple | _Choice | _Either


class _Builder:
    def __init__(self, root: Mapping[str, Any], check_extras: bool) -> None:
        self.root = root
        self.check_extras = check_extras
        self.refs: dict[str, _Node | None] = {}
        self.nodes: list[_Node] = []

    def build(self, schema: Any) -> _Node | None:
        if not isinstance(schema, dict):
            return None
        ref = schema.get("$ref")
        if isinstance(ref, str):
            if ref not in self.refs:
                self.refs[ref] = None  # a cycle through a non-object gets no plan
                target = resolve_ref(self.root, ref)
                if isinstance(target, dict) and _alias(target):
                    # A definition that only names another ({"$ref": ...}): its plan is
                    # that one's, or the nulls strict mode sends through it stay.
                    self.refs[ref] = self.build(target)
                else:
                    self.refs[ref] = self._object(target, ref) if target is not None else None
            return self.refs[ref]
        return self._object(schema, None)

    def _object(self, schema: dict[str, Any], ref: str | None) -> _Node | None:
        own = self._own(schema, ref)
        parts = schema.get("allOf")
        if not isinstance(parts, list):
            return own
        # A described reference is written {"allOf": [{"$ref": ...}], "description": ...},
        # and strict mode flattens it, offering its optional keys nullable: the plan must
        # see through it as the model does.
        return self._intersection([own, *(self.build(part) for part in parts)])

    def _own(self, schema: dict[str, Any], ref: str | None) -> _Node | None:
        properties = schema.get("properties")
        if isinstance(properties, dict):
            required = required_names(schema)
            node = _Object(
                keys=frozenset(properties),
                closed=self.check_extras and is_open_object(schema),
                drop_null=frozenset(
                    key
                    for key, sub in properties.items()
                    if key not in required and not accepts_null(sub, self.root)
                ),
            )
            # Registered before the children, so a recursive model finds itself.
            if ref is not None:
                self.refs[ref] = node
            self.nodes.append(node)
            for key, sub in properties.items():
                child = self.build(sub)
                if child is not None:
                    node.children[key] = child
            return node
        values = schema.get("additionalProperties")
        if isinstance(values, dict):
            value_node = self.build(values)
            return self._add(_Map(value_node)) if value_node is not None else None
        prefix = schema.get("prefixItems")
        if isinstance(prefix, list):
            positions = tuple(self.build(item) for item in prefix)
            return self._add(_Tuple(positions)) if any(positions) else None
        items = schema.get("items")
        if isinstance(items, dict):
            item_node = self.build(items)
            return self._add(_Array(item_node)) if item_node is not None else None
        options = schema.get("anyOf") or schema.get("oneOf")
        if isinstance(options, list):
            return self._union([o for o in options if not _is_null(o)])
        return None

    def _add(self, node: _Node) -> _Node:
        self.nodes.append(node)
        return node

    def _intersection(self, parts: list[_Node | None]) -> _Node | None:
        built = [node for node in parts if node is not None]
        if len(built) <= 1:
            return built[0] if built else None
        objects = [node for node in built if isinstance(node, _Object)]
        if len(objects) != len(built):
            return None  # an object and a list at once, or a union: left to the validator
        merged = _merged(objects)
        for key in merged.keys:
            # A key planned in several shapes is left alone: their plans could disagree.
            found = {id(o.children[key]): o.children[key] for o in objects if key in o.children}
            if len(found) == 1:
                merged.children[key] = next(iter(found.values()))
        return self._add(merged)

    def _union(self, options: list[Any]) -> _Node | None:
        built = [self.build(o) for o in options]
        if len(built) == 1:
            return built[0]
        # A union may take an object or an array: each kind gets the plan of its shapes,
        # unless a shape with no plan takes that kind too (list[dict], dict[str, int],
        # Any), whose keys a plan would report as unknown.
        unplanned = frozenset().union(
            *(self._kinds(o) for o, n in zip(options, built, strict=True) if n is None)
        )
        on_dict = None
        if "object" not in unplanned:
            shapes = zip(options, built, strict=True)
            on_dict = self._objects_union([(o, n) for o, n in shapes if not isinstance(n, _LISTS)])
        on_list = None
        if "array" not in unplanned:
            on_list = self._arrays_union([n for n in built if isinstance(n, _LISTS)])
        if on_dict is None or on_list is None:
            return on_dict or on_list
        return self._add(_Either(on_dict, on_list))

    def _objects_union(self, shapes: list[tuple[Any, _Node | None]]) -> _Node | None:
        planned = [node for _, node in shapes if node is not None]
        objects = [node for node in planned if isinstance(node, _Object)]
        if len(planned) == 1 and not objects:
            return planned[0]  # a map (dict[str, M]) beside types with no plan
        if not objects or len(objects) != len(planned):
            # An object or a map (M | dict[str, M]): a value's keys do not tell which it
            # is, and reporting a map's keys as unknown would refuse a valid value.
            return None
        merged = _merged(objects)
        self.nodes.append(merged)
        tag = _tag([self._resolved(o) for o, _ in shapes]) if len(objects) == len(shapes) else None
        if tag is None:
            return merged
        key, values = tag
        return self._add(_Choice(key, dict(zip(values, objects, strict=True)), merged))

    def _arrays_union(self, arrays: list[_Node]) -> _Node | None:
        if not arrays:
            return None
        if len(arrays) == 1:
            return arrays[0]
        if not all(isinstance(node, _Array) for node in arrays):
            return None  # a tuple among them: left to the validator
        items = self._union_of([node.items for node in arrays if isinstance(node, _Array)])
        return self._add(_Array(items)) if items is not None else None

    def _union_of(self, nodes: list[_Node]) -> _Node | None:
        """The plan of built nodes that are alternatives (the items of ``list[M] |
        list[N]``), as :meth:`_union` makes it of schemas."""
        on_dict = self._objects_union([(None, n) for n in nodes if not isinstance(n, _LISTS)])
        on_list = self._arrays_union([n for n in nodes if isinstance(n, _LISTS)])
        if on_dict is None or on_list is None:
            return on_dict or on_list
        return self._add(_Either(on_dict, on_list))

    def _kinds(self, schema: Any, seen: frozenset[str] = frozenset()) -> frozenset[str]:
        """Which of "object" and "array" a schema takes (both for one saying nothing,
        as ``Any``'s ``{}``)."""
        ref = schema.get("$ref") if isinstance(schema, dict) else None
        if isinstance(ref, str):
            if ref in seen:  # a union that names itself adds nothing by doing so
                return frozenset()
            seen = seen | {ref}
        schema = self._resolved(schema)
        if not isinstance(schema, dict):
            return frozenset()
        options = schema.get("anyOf") or schema.get("oneOf") or schema.get("allOf")
        if isinstance(options, list):
            return frozenset().union(*(self._kinds(o, seen) for o in options))
        kind = schema.get("type")
        if kind is None:
            return frozenset() if "enum" in schema or "const" in schema else _CONTAINERS
        return _CONTAINERS.intersection([kind] if isinstance(kind, str) else kind)

    def _resolved(self, schema: Any) -> Any:
        ref = schema.get("$ref") if isinstance(schema, dict) else None
        return resolve_ref(self.root, ref) if isinstance(ref, str) else schema


def _alias(schema: Mapping[str, Any]) -> bool:
    """Whether ``schema`` only names another schema: a ``$ref`` with no shape of its own."""
    return isinstance(schema.get("$ref"), str) and not any(
        key in schema for key in ("properties", "items", "anyOf", "oneOf", "allOf", "type")
    )


def _merged(objects: list[_Object]) -> _Object:
    """The plan of several object shapes at once, without children."""
    # A key is unknown only if no shape knows it, and a null is dropped only where
    # every shape that has the key would drop it.
    return _Object(
        keys=frozenset().union(*(o.keys for o in objects)),
        closed=all(o.closed for o in objects),
        drop_null=frozenset(
            key
            for key in frozenset().union(*(o.drop_null for o in objects))
            if all(key in o.drop_null for o in objects if key in o.keys)
        ),
    )


def _tag(shapes: list[Any]) -> tuple[str, list[Any]] | None:
    """The key whose constant value tells ``shapes`` apart, and each shape's value."""
    properties = [s.get("properties") if isinstance(s, dict) else None for s in shapes]
    maps = [p for p in properties if isinstance(p, dict)]
    if len(maps) != len(shapes) or not maps:
        return None
    for key in maps[0]:
        values = [_constant(p.get(key)) for p in maps]
        if _NO_CONSTANT not in values and len(set(values)) == len(values):
            return key, values
    return None


_NO_CONSTANT = object()


_LISTS = (_Array, _Tuple)
_CONTAINERS = frozenset({"object", "array"})


def _constant(schema: Any) -> Any:
    if not isinstance(schema, dict):
        return _NO_CONSTANT
    if "const" in schema:
        value = schema["const"]
    elif isinstance(schema.get("enum"), list) and len(schema["enum"]) == 1:
        value = schema["enum"][0]
    else:
        return _NO_CONSTANT
    return value if isinstance(value, (str, int, bool)) else _NO_CONSTANT


def _is_null(schema: Any) -> bool:
    return isinstance(schema, dict) and schema.get("type") == "null"


def _children(node: _Node) -> tuple[_Node, ...]:
    if isinstance(node, _Object):
        return tuple(node.children.values())
    if isinstance(node, _Array):
        return (node.items,)
    if isinstance(node, _Map):
        return (node.values,)
    if isinstance(node, _Choice):
        return (*node.shapes.values(), node.merged)
    if isinstance(node, _Either):
        return (node.on_dict, node.on_list)
    return tuple(item for item in node.items if item is not None)


def _prune(nodes: list[_Node]) -> set[int]:
    # A node matters if it has work of its own or a child that matters; recursive
    # models make this a fixpoint.
    live = {id(n) for n in nodes if isinstance(n, _Object) and (n.closed or n.drop_null)}
    changed = True
    while changed:
        changed = False
        for node in nodes:
            if id(node) in live:
                continue
            children = _children(node)
            if any(id(child) in live for child in children):
                live.add(id(node))
                changed = True
    for node in nodes:
        if isinstance(node, _Object):
            node.children = {k: c for k, c in node.children.items() if id(c) in live}
    return live


class ArgumentPlan:
    """The per-call work a schema asks for; see the module docstring."""

    __slots__ = ("_root",)

    def __init__(self, root: _Object) -> None:
        self._root = root

    def apply(self, args: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        """``args`` with meaningless nulls dropped (a copy when anything changed), and
        one ``(field, problem)`` pair per unknown key."""
        problems: list[tuple[str, str]] = []
        return _apply(self._root, args, "", problems), problems


def build_plan(schema: Mapping[str, Any], *, check_extras: bool) -> ArgumentPlan | None:
    """The plan of a tool's parameters schema, or None when it has nothing to do.

    ``check_extras`` reports unknown keys of open objects (for a tool whose validator
    would drop them); without it, only nulls are handled.
    """
    builder = _Builder(schema, check_extras)
    root = builder._object(dict(schema), None)
    if not isinstance(root, _Object):
        return None
    live = _prune(builder.nodes)
    return ArgumentPlan(root) if id(root) in live else None


def _apply(node: _Node, value: Any, path: str, problems: list[tuple[str, str]]) -> Any:
    if isinstance(node, _Either):
        return _apply(node.on_list if isinstance(value, list) else node.on_dict, value, path, problems)  # fmt: skip
    if isinstance(node, (_Array, _Tuple)):
        if not isinstance(value, list):
            return value
        out_list = value
        for index, item in enumerate(value):
            if isinstance(node, _Array):
                child: _Node | None = node.items
            else:
                child = node.items[index] if index < len(node.items) else None
            new = _apply(child, item, f"{path}{index}.", problems) if child else item
            if new is not item:
                if out_list is value:
                    out_list = list(value)
                out_list[index] = new
        return out_list
    if not isinstance(value, dict):
        return value
    if isinstance(node, _Choice):
        tag = value.get(node.key)
        shape = node.shapes.get(tag) if isinstance(tag, (str, int, bool)) else None
        return _apply(shape if shape is not None else node.merged, value, path, problems)
    if isinstance(node, _Map):
        out_map = value
        for key, item in value.items():
            new = _apply(node.values, item, f"{path}{key}.", problems)
            if new is not item:
                if out_map is value:
                    out_map = dict(value)
                out_map[key] = new
        return out_map
    out = value
    for key in node.drop_null:
        if key in out and out[key] is None:
            if out is value:
                out = dict(value)
            del out[key]
    if node.closed:
        problems.extend((f"{path}{key}", EXTRA_KEY) for key in out if key not in node.keys)
    for key, child in node.children.items():
        if key in out:
            item = out[key]
            new = _apply(child, item, f"{path}{key}.", problems)
            if new is not item:
                if out is value:
                    out = dict(value)
                out[key] = new
    return out
