"""Arguments checked against a tool's JSON Schema: an MCP tool's before each call is
sent, and an approval's edit without running the tool. By jsonschema, which comes with
the mcp dependency."""

from __future__ import annotations

from collections.abc import Mapping
from itertools import pairwise
from typing import Any

import jsonschema  # type: ignore[import-untyped]
from referencing.exceptions import Unresolvable  # jsonschema's own dependency

from ..error import InvalidArgumentsError

__all__ = ["check_against_schema", "check_with", "schema_check"]


def schema_check(schema: Mapping[str, Any]) -> Any:
    """``schema`` compiled for :func:`check_with` (a jsonschema validator), or None when the validator cannot
    read it (it breaks the metaschema, or its ``$schema`` is not a string): such a
    schema checks nothing, and leaves the check to whoever runs the call.

    Compiling checks the schema against its metaschema, which costs milliseconds:
    a caller checking many calls keeps the result.

    Example:
        >>> schema_check({"type": "object"}) is not None
        True
        >>> schema_check({"type": "int"}) is None  # not a JSON Schema type
        True
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
    return validator_class(schema)


def check_with(tool_name: str, check: Any, args: Any) -> None:
    """Raise :class:`~agcore_tools.InvalidArgumentsError` when ``args`` do not satisfy
    the schema compiled into ``check`` (:func:`schema_check`), naming the first bad
    field. None, or a ``$ref`` the validator cannot resolve, checks nothing.

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
    try:
        errors = list(check.iter_errors(args))
    except Unresolvable:
        return
    if not errors:
        return
    problems = [
        ("/".join(str(p) for p in e.absolute_path) or "(arguments)", e.message) for e in errors
    ]
    best = jsonschema.exceptions.best_match(errors)
    where = "/".join(str(p) for p in best.absolute_path)
    reason = f"{where}: {best.message}" if where else best.message
    bare = _bare_path(best)
    rule = f"the {best.validator!r} rule failed"
    raise InvalidArgumentsError(
        tool_name, reason, errors=problems, redacted_reason=f"{bare}: {rule}" if bare else rule
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


def _bare_path(error: Any) -> str:
    # A key the schema names under "properties" is the schema's; any other (a free
    # map's key) is the caller's, and may be what a log must not hold.
    named = {key for step, key in pairwise(error.absolute_schema_path) if step == "properties"}
    return "/".join(
        str(p) if isinstance(p, int) or p in named else "*" for p in error.absolute_path
    )
