"""Arguments checked against a tool's JSON Schema: an MCP tool's before each call is
sent, and an approval's edit without running the tool. By jsonschema, which comes with
the mcp dependency, with two keywords read as the servers that write them mean them:
``multipleOf`` exactly (19.99 is a multiple of 0.01, which it is not in binary floating
point), and OpenAPI 3.0's ``nullable: true`` as adding null to the ``type``."""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Iterator, Mapping
from decimal import Decimal
from fractions import Fraction
from itertools import pairwise
from typing import Any

import jsonschema  # type: ignore[import-untyped]
from referencing.exceptions import Unresolvable  # jsonschema's own dependency

from ..error import InvalidArgumentsError
from ._problems import join_problems

__all__ = ["PROBLEMS_SOUGHT", "check_against_schema", "check_with", "larger_than", "schema_check"]

PROBLEMS_SOUGHT = 1000
"""Problems counted at most in one check of arguments; past them, the check finds one
more, which says there are more, and stops."""


def schema_check(schema: Mapping[str, Any]) -> Any:
    """``schema`` compiled for :func:`check_with` (a jsonschema validator), or None when the validator cannot
    read it (it breaks the metaschema, or its ``$schema`` is not a string): such a
    schema checks nothing, and leaves the check to whoever runs the call.

    Compiling checks the schema against its metaschema, which costs milliseconds:
    a caller checking many calls keeps the result.

    Two keywords are read as the servers that write them mean them, so that what the
    server takes is not refused here: ``multipleOf`` is checked on the numbers as
    written in JSON, exactly (19.99 is a multiple of 0.01), and OpenAPI 3.0's
    ``nullable: true`` lets null through the ``type`` beside it.

    Example:
        >>> schema_check({"type": "object"}) is not None
        True
        >>> schema_check({"type": "int"}) is None  # not a JSON Schema type
        True
        >>> amount = schema_check({"type": "number", "multipleOf": 0.01})
        >>> check_with("refund", amount, 19.99)
        >>> check_with("refund", schema_check({"type": "string", "nullable": True}), None)
    """
    if not isinstance(schema.get("$schema", ""), str):
        return None  # jsonschema fails with an AttributeError on it
    validator_class = jsonschema.validators.validator_for(
        schema, default=jsonschema.Draft202012Validator
    )
    try:
        validator_class.check_schema(schema)
    except (jsonschema.exceptions.SchemaError, Unresolvable):
        return None
    return _as_servers_mean(validator_class)(schema)


def check_with(tool_name: str, check: Any, args: Any) -> None:
    """Raise :class:`~agcore_tools.InvalidArgumentsError` when ``args`` do not satisfy
    the schema compiled into ``check`` (:func:`schema_check`), naming each bad field
    (jsonschema's ``best_match`` first). None, or a ``$ref`` the validator cannot
    resolve, checks nothing.

    The search stops past :data:`PROBLEMS_SOUGHT` problems: the one named is
    jsonschema's ``best_match`` among those found, and the rest are counted as "at
    least" (each problem costs jsonschema about 20 µs: 100,000 bad items took 3.4 s).

    The error's ``redacted`` form names the rule that failed and the schema's property
    names on the way to it, never a value or a key the caller wrote (``*`` stands for
    such a key).

    Example:
        >>> check = schema_check({"type": "object", "additionalProperties": {"type": "integer"}})
        >>> check_with("tally", check, {"a": 1})
        >>> try:
        ...     check_with("tally", check, {"pin 1234": "x"})
        ... except InvalidArgumentsError as exc:
        ...     print(exc); print(exc.redacted)
        tool 'tally' got invalid arguments: pin 1234: 'x' is not of type 'integer'
        tool 'tally' got invalid arguments: *: the 'type' rule failed
    """
    if check is None:
        return
    found = check.iter_errors(args)
    try:
        # One past the bound: it tells whether there are more.
        errors = list(itertools.islice(found, PROBLEMS_SOUGHT + 1))
    except Unresolvable:
        return
    finally:
        found.close()
    if not errors:
        return
    more = len(errors) > PROBLEMS_SOUGHT
    problems = [(_path(e) or "(arguments)", _message(e)) for e in errors]
    best = jsonschema.exceptions.best_match(errors)
    where = _path(best)
    # Every bad field, the best match first (its message alone when it has no field),
    # so a model fixes them in one turn, as a function tool's message lets it.
    others: dict[str, str] = {}
    for error in errors:
        field = _path(error) or "(arguments)"
        if field != (where or "(arguments)") and field not in others:
            others[field] = _message(error)
    reason = join_problems([(where or None, _union_message(best)), *others.items()], at_least=more)
    bare = _bare_path(best)
    rule = f"the {best.validator!r} rule failed"
    raise InvalidArgumentsError(
        tool_name,
        reason,
        errors=problems,
        redacted_reason=f"{bare}: {rule}" if bare else rule,
        complete=not more,
    )


def check_against_schema(tool_name: str, schema: Mapping[str, Any], args: Any) -> None:
    """Raise :class:`~agcore_tools.InvalidArgumentsError` when ``args`` do not satisfy
    ``schema``, naming the first bad field. A schema the validator cannot read (a broken
    ``$ref``) checks nothing: the tool checks its arguments when it runs. It compiles
    ``schema`` on every call: :func:`schema_check` and :func:`check_with` keep it.

    Example:
        >>> schema = {"type": "object", "properties": {"text": {"type": "string"}}}
        >>> check_against_schema("echo", schema, {"text": "hi"})
        >>> check_against_schema("echo", schema, {"text": 12})
        Traceback (most recent call last):
        ...
        agcore_tools.error.InvalidArgumentsError: tool 'echo' got invalid arguments: text: 12 is not of type 'string'
    """
    check_with(tool_name, schema_check(schema), args)


def larger_than(value: Any, limit: int) -> bool:
    """Whether ``value`` holds more than ``limit`` values in its lists and maps, all
    levels counted; it stops counting there, so a large value costs what a small one
    does. What checking ``value`` against a schema costs grows with that count (about
    6 µs a value with jsonschema).

    Example:
        >>> larger_than({"ids": list(range(100_000))}, 1000), larger_than({"a": [1, 2]}, 1000)
        (True, False)
    """
    stack = [value]
    seen = 0
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            seen += len(item)
            inner: Any = item.values()
        elif isinstance(item, (list, tuple)):
            seen += len(item)
            inner = item
        else:
            continue
        if seen > limit:
            return True
        stack.extend(inner)
    return False


_SHOWN = 80
"""Characters of a value (or of a key on a field's path) a message quotes whole."""
_LONGEST = 400
"""Characters of one problem's message past which its middle is cut."""


def _path(error: Any) -> str:
    # The keys are the model's (a free map's): one of a megabyte would come back whole.
    return "/".join(_cut(str(part)) for part in error.absolute_path)


def _message(error: Any) -> str:
    """jsonschema's message of ``error`` with the value it quotes cut to an excerpt.

    Its messages quote the whole value (``'xxx...' is too long``): a model that sent a
    megabyte would read it back. The excerpt keeps the value's start and says its size;
    a message still too long (an unexpected key listed, a long ``enum``) keeps its start
    and end, where the field and the rule are named.

    Example:
        >>> check = schema_check({"type": "string", "maxLength": 4})
        >>> _message(next(check.iter_errors("x" * 10_000)))
        "'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'... (10000 characters) is too long"
        >>> _message(next(check.iter_errors("x" * 5)))
        "'xxxxx' is too long"
    """
    message: str = error.message
    instance = error.instance
    if isinstance(instance, (str, list, dict)) and len(message) > _SHOWN:
        whole = repr(instance)
        if len(whole) > _SHOWN and whole in message:
            message = message.replace(whole, _excerpt(instance, whole), 1)
    if len(message) > _LONGEST:
        message = f"{message[: _LONGEST - 100]} ... {message[-95:]}"
    return message


def _union_message(error: Any) -> str:
    """:func:`_message` of ``error``, and for an ``anyOf`` or ``oneOf`` that every
    branch refused for one same reason, that reason: jsonschema's ``best_match`` does
    not choose among tied branches, and "is not valid under any of the given schemas"
    alone does not tell the model what to add (a union of objects that each require a
    ``type`` key, as MCP content blocks are).

    Example:
        >>> text = {"type": "object", "required": ["type", "text"]}
        >>> image = {"type": "object", "required": ["type", "url"]}
        >>> check = schema_check({"anyOf": [text, image]})
        >>> _union_message(next(check.iter_errors({"text": "hi"})))
        "{'text': 'hi'} is not valid under any of the given schemas; in every one: 'type' is a required property"
    """
    message = _message(error)
    if error.validator not in ("anyOf", "oneOf") or not error.context:
        return message
    branches = error.validator_value
    by_branch: dict[Any, set[str]] = {}
    for sub in error.context:
        path = "/".join(_cut(str(part)) for part in sub.relative_path)
        reason = _message(sub)
        by_branch.setdefault(sub.schema_path[0], set()).add(f"{path}: {reason}" if path else reason)
    if not isinstance(branches, list) or len(by_branch) != len(branches):
        return message
    common = sorted(set.intersection(*by_branch.values()))
    return f"{message}; in every one: {'; '.join(common)}" if common else message


def _excerpt(value: str | list[Any] | dict[Any, Any], whole: str) -> str:
    if isinstance(value, str):
        return f"{value[: _SHOWN - 10]!r}... ({len(value)} characters)"
    size = f"{len(value)} {'items' if isinstance(value, list) else 'keys'}"
    return f"{whole[: _SHOWN - 10]}... ({size})"


def _cut(text: str) -> str:
    return text if len(text) <= _SHOWN else f"{text[: _SHOWN - 10]}... ({len(text)} characters)"


def _bare_path(error: Any) -> str:
    # A key the schema names under "properties" is the schema's; any other (a free
    # map's key) is the caller's, and may be what a log must not hold.
    named = {key for step, key in pairwise(error.absolute_schema_path) if step == "properties"}
    return "/".join(
        str(p) if isinstance(p, int) or p in named else "*" for p in error.absolute_path
    )


@functools.cache
def _as_servers_mean(validator_class: Any) -> Any:
    # Cached: extend() builds a new class, and every schema of one draft can share it.
    stock_type = validator_class.VALIDATORS["type"]

    def type_or_nullable(validator: Any, types: Any, instance: Any, schema: Any) -> Iterator[Any]:
        # OpenAPI 3.0: "a true value adds null to the allowed types specified by the
        # type keyword"; its other keywords (an enum without null) still apply.
        if instance is None and schema.get("nullable") is True:
            return
        yield from stock_type(validator, types, instance, schema)

    replaced: dict[str, Callable[[Any, Any, Any, Any], Iterator[Any]]] = {"type": type_or_nullable}
    # Draft 3 names it divisibleBy.
    for keyword in ("multipleOf", "divisibleBy"):
        if keyword in validator_class.VALIDATORS:
            replaced[keyword] = _multiple_of
    return jsonschema.validators.extend(validator_class, replaced)


def _multiple_of(validator: Any, multiple: Any, instance: Any, schema: Any) -> Iterator[Any]:
    # jsonschema divides in binary floating point, where 19.99 / 0.01 is
    # 1998.9999999999998: money amounts a server takes would be refused.
    if not validator.is_type(instance, "number"):
        return
    value, step = _exact(instance), _exact(multiple)
    if value is None or step is None or (value / step).denominator != 1:
        yield jsonschema.exceptions.ValidationError(f"{instance!r} is not a multiple of {multiple}")


def _exact(number: Any) -> Fraction | None:
    # A float's repr is the shortest text that reads back as it: the number as the JSON
    # held it (19.99, not the binary fraction nearest to it). None: NaN or an infinity,
    # which Python's json reads and which is no multiple of anything.
    if isinstance(number, float):
        return Fraction(repr(number)) if math.isfinite(number) else None
    if isinstance(number, Decimal) and not number.is_finite():
        return None
    return Fraction(number)
