"""Arguments checked against a tool's JSON Schema without running the tool (an edit in
an approval), by jsonschema, which comes with the mcp dependency."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jsonschema  # type: ignore[import-untyped]
from referencing.exceptions import Unresolvable  # jsonschema's own dependency

from ..error import InvalidArgumentsError

__all__ = ["check_against_schema"]


def check_against_schema(tool_name: str, schema: Mapping[str, Any], args: Any) -> None:
    """Raise :class:`~agcore_tools.InvalidArgumentsError` when ``args`` do not satisfy
    ``schema``, naming the first bad field. A schema the validator cannot read (a broken
    ``$ref``) checks nothing: the tool checks its arguments when it runs.

    Example:
        >>> schema = {"type": "object", "properties": {"text": {"type": "string"}}}
        >>> check_against_schema("echo", schema, {"text": "hi"})
        >>> check_against_schema("echo", schema, {"text": 12})
        Traceback (most recent call last):
        ...
        agcore_tools.error.InvalidArgumentsError: tool 'echo' got invalid arguments: text: 12 is not of type 'string'
    """
    validator_class = jsonschema.validators.validator_for(
        schema, default=jsonschema.Draft202012Validator
    )
    try:
        validator_class.check_schema(schema)
        errors = list(validator_class(schema).iter_errors(args))
    except (jsonschema.exceptions.SchemaError, Unresolvable):
        return
    if not errors:
        return
    problems = [
        ("/".join(str(p) for p in e.absolute_path) or "(arguments)", e.message) for e in errors
    ]
    best = jsonschema.exceptions.best_match(errors)
    where = "/".join(str(p) for p in best.absolute_path)
    reason = f"{where}: {best.message}" if where else best.message
    raise InvalidArgumentsError(tool_name, reason, errors=problems)
