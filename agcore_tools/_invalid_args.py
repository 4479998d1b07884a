"""A function tool's argument problems, as the model reads them and as spans and logs
record them (:attr:`InvalidArgumentsError.redacted <agcore_tools.InvalidArgumentsError.redacted>`).

The model needs the values it sent to correct them. A span or a log line with content
capture off must carry none of the model's text: not the value (pydantic's ``input``),
not a validator's own message, which often quotes it (``Value error, unknown city
'...'``), and not an unknown key, which the model wrote. The bare form keeps the field
names of the tool's schema, pydantic's own wording of each problem (which quotes the
schema, never the input), the title of a validator's failure, and the number of unknown
keys.
"""

from __future__ import annotations

from typing import get_args

from pydantic import ValidationError
from pydantic_core.core_schema import ErrorType

from .error import InvalidArgumentsError
from .schema._argplan import EXTRA_KEY
from .schema._problems import join_problems

__all__ = ["invalid_arguments", "unknown_keys_error", "validation_problems"]

Problems = list[tuple[str, str]]

# pydantic's own error types: their messages quote the schema, never the input. Any
# other type is a validator's own (PydanticCustomError), whose message may quote it.
_BUILT_IN = frozenset(get_args(ErrorType))
# A validator's ValueError or AssertionError: pydantic's title, then the raiser's text.
_VALIDATORS = frozenset({"value_error", "assertion_error"})


def validation_problems(exc: ValidationError) -> tuple[Problems, Problems, int]:
    """The problems of ``exc`` quoting the bad values (for the model), the same without
    the model's text (see the module), and the number of unknown keys among them.

    Example:
        >>> from pydantic import BaseModel, ConfigDict, field_validator
        >>> class Args(BaseModel):
        ...     model_config = ConfigDict(extra="forbid")
        ...     city: str
        ...     @field_validator("city")
        ...     def known(cls, city):
        ...         raise ValueError(f"unknown city {city!r}")
        >>> try:
        ...     Args.model_validate({"city": "Xyz", "secret note": 1})
        ... except ValidationError as exc:
        ...     problems, bare, unknown = validation_problems(exc)
        >>> problems[0]
        ('city', "Value error, unknown city 'Xyz' (got 'Xyz')")
        >>> bare, unknown
        ([('city', 'Value error')], 1)
    """
    problems: Problems = []
    bare: Problems = []
    unknown = 0
    for err in exc.errors(include_url=False):
        field = ".".join(str(part) for part in err["loc"]) or "(arguments)"
        message = err["msg"]
        kind = err["type"]
        if kind == "extra_forbidden":
            unknown += 1
        elif kind in _VALIDATORS:
            bare.append((field, message.split(",", 1)[0]))
        elif kind in _BUILT_IN:
            bare.append((field, message))
        else:
            bare.append((field, f"failed its check ({kind})"))
        if kind != "missing" and "input" in err and kind != "extra_forbidden":
            message = f"{message} (got {err['input']!r:.80})"
        problems.append((field, message))
    return problems, bare, unknown


def _bare_reason(bare: Problems, unknown: int) -> str:
    counted = f"{unknown} unknown key{'s' if unknown != 1 else ''} ({EXTRA_KEY})"
    return "; ".join(filter(None, (join_problems(bare), counted if unknown else "")))


def invalid_arguments(tool: str, exc: ValidationError, unknown: Problems) -> InvalidArgumentsError:
    """The error of a validation that failed, with the ``unknown`` keys the argument
    plan found (``(field, problem)`` pairs) beside pydantic's problems."""
    problems, bare, extra = validation_problems(exc)
    problems += unknown
    return InvalidArgumentsError(
        tool,
        join_problems(problems),
        errors=problems,
        redacted_reason=_bare_reason(bare, extra + len(unknown)),
    )


def unknown_keys_error(tool: str, unknown: Problems) -> InvalidArgumentsError:
    """The error of arguments whose only problem is the ``unknown`` keys.

    Example:
        >>> error = unknown_keys_error("add", [("note SSN-1", EXTRA_KEY)])
        >>> str(error)
        "tool 'add' got invalid arguments: note SSN-1: Extra inputs are not permitted"
        >>> error.redacted
        "tool 'add' got invalid arguments: 1 unknown key (Extra inputs are not permitted)"
    """
    return InvalidArgumentsError(
        tool, join_problems(unknown), errors=unknown, redacted_reason=_bare_reason([], len(unknown))
    )
