"""From a model's tool call to a :class:`ParsedCall`: its arguments as a JSON object,
or the reason the model reads for why they are unusable."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any

from .._records import ParsedCall
from .._repair import repair_json
from .._unicode import scrub
from ..error import InvalidArgumentsError

__all__ = ["CUT_CALLS_NOT_REPAIRED", "parse_call"]

logger = logging.getLogger("agcore_tools.toolcalls")

CUT_CALLS_NOT_REPAIRED: ContextVar[bool] = ContextVar(
    "agcore_tools_cut_calls_not_repaired", default=True
)
"""Whether the turn builders pass ``cut_at`` for a turn cut at the output token limit
(see :func:`parse_call`). False only in a Temporal run begun before that (its
``workflow.patched``): such a run repaired the calls of a cut turn and ran them, and a
replay must schedule the same activities."""


def _json_type(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return "null" if value is None else type(value).__name__


def parse_call(
    name: str, call_id: str, arguments: Any, *, repair: bool = False, cut_at: str | None = None
) -> ParsedCall:
    """Parse a tool call's arguments: JSON text, or an object some servers send as is.

    Empty arguments mean ``{}``. Text that is not JSON, JSON that is not an object, and
    JSON nested too deeply (or holding an integer too long) to parse give a call whose
    ``error`` is an
    :class:`InvalidArgumentsError` for the model. Lone surrogates in the name, id and
    arguments text become U+FFFD, so the history always encodes as UTF-8. With
    ``repair``, text that is not JSON gets one deterministic repair first (closing a
    document that was cut off, dropping trailing commas: see ``_repair``); the repaired
    text is what the history records.

    ``cut_at`` names the output token limit that cut the model's turn
    (``max_completion_tokens``, ``max_output_tokens``). Such a call is never repaired:
    closing a document cut between two arguments would run the tool with its defaults
    for the arguments never written. Text that is not JSON then tells the model that its
    turn was cut, so it sends shorter arguments rather than the same call again.

    Example:
        >>> parse_call("add", "c1", '{"a": 1}').args
        {'a': 1}
        >>> parse_call("add", "c1", "{oops").error.reason[:28]
        'arguments are not valid JSON'
        >>> parse_call("add", "c1", "[" * 100_000).error.reason
        'arguments nest too deeply to parse; send a flatter JSON object'
        >>> parse_call("add", "c1", '{"a": 1, "b": [2, 3],', repair=True).args
        {'a': 1, 'b': [2, 3]}
        >>> cut = parse_call("add", "c1", '{"a": 1,', repair=True, cut_at="max_output_tokens")
        >>> cut.args, cut.error.reason[:62]
        (None, 'the turn was cut at the output token limit (max_output_tokens)')
    """
    name, call_id = scrub(name), scrub(call_id)
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        return ParsedCall(call_id, name, "{}", {})
    if isinstance(arguments, str):
        text = scrub(arguments)
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            if cut_at is not None:
                reason = (
                    f"the turn was cut at the output token limit ({cut_at}) before these "
                    "arguments were complete; send shorter arguments or split the work "
                    "over several calls"
                )
                return ParsedCall(call_id, name, text, None, _invalid(name, reason, exc))
            repaired = repair_json(text) if repair else None
            if repaired is not None and repaired.lstrip().startswith("{"):
                # The arguments are content, never logged (and no environment is read:
                # this runs in Temporal's workflow sandbox too).
                logger.info(
                    "repaired the arguments of a call to %r (%d characters)", name, len(text)
                )
                return parse_call(name, call_id, repaired)
            # Some of json's messages end in "at" ("Invalid control character at").
            problem = exc.msg.removesuffix(" at")
            reason = (
                f"arguments are not valid JSON ({problem} at line {exc.lineno} column "
                f"{exc.colno}); send a JSON object"
            )
            return ParsedCall(call_id, name, text, None, _invalid(name, reason, exc))
        except RecursionError as exc:
            return ParsedCall(call_id, name, text, None, _invalid(name, _TOO_DEEP, exc))
        except ValueError as exc:
            # An integer past sys.get_int_max_str_digits() (4300): int() refuses it.
            return ParsedCall(call_id, name, text, None, _invalid(name, _TOO_LONG, exc))
    else:
        value = arguments
        try:
            text = scrub(json.dumps(arguments, ensure_ascii=False, default=str))
        except (RecursionError, ValueError) as exc:  # ValueError: a circular reference
            return ParsedCall(call_id, name, "{}", None, _invalid(name, _TOO_DEEP, exc))
    if isinstance(value, Mapping):
        return ParsedCall(call_id, name, text, dict(value))
    error = InvalidArgumentsError(name, f"arguments must be a JSON object, got {_json_type(value)}")
    return ParsedCall(call_id, name, text, None, error)


_TOO_DEEP = "arguments nest too deeply to parse; send a flatter JSON object"
_TOO_LONG = "arguments hold an integer with too many digits to read; send a shorter number"


def _invalid(name: str, reason: str, cause: BaseException) -> InvalidArgumentsError:
    error = InvalidArgumentsError(name, reason)
    error.__cause__ = cause
    return error
