"""From a model's tool call to a :class:`ParsedCall`: its arguments as a JSON object,
or the reason the model reads for why they are unusable."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any

from .._records import ParsedCall
from .._repair import repair_json
from .._unicode import scrub
from ..error import InvalidArgumentsError

__all__ = [
    "CUT_CALLS_NOT_REPAIRED",
    "NON_FINITE_REFUSED",
    "loads_finite",
    "non_finite",
    "not_a_number",
    "parse_call",
]

logger = logging.getLogger("agcore_tools.toolcalls")

CUT_CALLS_NOT_REPAIRED: ContextVar[bool] = ContextVar(
    "agcore_tools_cut_calls_not_repaired", default=True
)
"""Whether the turn builders pass ``cut_at`` for a turn cut at the output token limit
(see :func:`parse_call`). False only in a Temporal run begun before that (its
``workflow.patched``): such a run repaired the calls of a cut turn and ran them, and a
replay must schedule the same activities."""

NON_FINITE_REFUSED: ContextVar[bool] = ContextVar("agcore_tools_non_finite_refused", default=True)
"""Whether a model's arguments holding ``NaN``, ``Infinity`` or a number past a float's
range are refused (see :func:`non_finite`). False only in a Temporal run begun before
that (its ``workflow.patched``): such a run ran those calls, and a replay must schedule
the same activities."""


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

    Empty arguments mean ``{}``. Text that is not JSON, JSON that is not an object, JSON
    nested too deeply (or holding an integer too long) to parse, and arguments holding a
    number JSON cannot (``NaN``, ``Infinity``, ``-Infinity``, which Python's ``json``
    reads, or one past a float's range: see :func:`non_finite`) give a call whose
    ``error`` is an :class:`InvalidArgumentsError` for the model; the last names the
    argument. Such a call never runs, nor asks for approval (a rule such as
    ``args["amount"] > 100`` is False for NaN). Lone surrogates in the name, id and
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
        >>> parse_call("pay", "c1", '{"amount": NaN}').error.reason
        'amount: NaN is not a JSON number; send a finite number'
        >>> parse_call("add", "c1", '{"a": 1, "b": [2, 3],', repair=True).args
        {'a': 1, 'b': [2, 3]}
        >>> cut = parse_call("add", "c1", '{"a": 1,', repair=True, cut_at="max_output_tokens")
        >>> cut.args, cut.error.reason[:62]
        (None, 'the turn was cut at the output token limit (max_output_tokens)')
    """
    name, call_id = scrub(name), scrub(call_id)
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        return ParsedCall(call_id, name, "{}", {})
    refuse = NON_FINITE_REFUSED.get()
    if isinstance(arguments, str):
        text = scrub(arguments)
        try:
            value, odd = _loads(text) if refuse else (json.loads(text), False)
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
        value, odd = arguments, refuse
        try:
            text = scrub(json.dumps(arguments, ensure_ascii=False, default=str))
        except (RecursionError, ValueError) as exc:
            # ValueError: a circular reference, or an integer past
            # sys.get_int_max_str_digits() that str() refuses to write.
            reason = _TOO_LONG if "integer string conversion" in str(exc) else _TOO_DEEP
            return ParsedCall(call_id, name, "{}", None, _invalid(name, reason, exc))
    if isinstance(value, Mapping):
        found = non_finite(value) if odd else None
        if found is not None:
            return ParsedCall(call_id, name, text, None, not_a_number(name, *found))
        return ParsedCall(call_id, name, text, dict(value))
    error = InvalidArgumentsError(name, f"arguments must be a JSON object, got {_json_type(value)}")
    return ParsedCall(call_id, name, text, None, error)


_TOO_DEEP = "arguments nest too deeply to parse; send a flatter JSON object"
_TOO_LONG = "arguments hold an integer with too many digits to read; send a shorter number"
_NOT_JSON = ("NaN", "Infinity", "-Infinity")


class _Number:
    """Where ``json.loads`` read a number JSON cannot hold: one of :data:`_NOT_JSON`,
    which are no JSON at all, or a literal past a float's range (``1e999``), which
    Python reads as an infinity."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _loads(text: str) -> tuple[Any, bool]:
    """``json.loads(text)``, and whether it read a number JSON cannot hold (then held
    as a :class:`_Number`, for :func:`non_finite` to name)."""
    seen: list[_Number] = []

    def number(literal: str) -> _Number:
        seen.append(_Number(literal))
        return seen[-1]

    def floating(literal: str) -> float | _Number:
        value = float(literal)
        return value if math.isfinite(value) else number(literal)

    return json.loads(text, parse_constant=number, parse_float=floating), bool(seen)


def loads_finite(text: str, whole: str = "(arguments)") -> tuple[Any, tuple[str, str] | None]:
    """``(json.loads(text), None)``, or ``(None, (path, problem))`` when the text holds a
    number JSON cannot (``NaN``, an infinity, a literal past a float's range), named as
    :func:`non_finite` names it (``whole`` when the text is that number). Raises as
    ``json.loads`` does for text that is not JSON.

    A model's structured answer is read with it: pydantic's JSON parser, like Python's
    ``json``, takes ``NaN`` for a ``float`` field.

    Example:
        >>> loads_finite('{"amount": 12.5}')
        ({'amount': 12.5}, None)
        >>> loads_finite('{"lines": [{"price": Infinity}]}')
        (None, ('lines.0.price', 'Infinity is not a JSON number'))
    """
    value, odd = _loads(text)
    found = non_finite(value, whole) if odd else None
    return (None, found) if found is not None else (value, None)


def non_finite(value: Any, whole: str = "(arguments)") -> tuple[str, str] | None:
    """The first number of ``value`` (a call's arguments) that JSON cannot hold (NaN,
    an infinity), as ``(path, problem)``: the path's keys and list positions joined by
    dots, as an argument's errors name it (``whole`` when ``value`` is that number);
    None when there is none.

    A comparison with NaN is always False, so ``args["amount"] > 100`` would let a
    ``needs_approval`` rule pass it, and pydantic's ``float`` takes it: a model's
    arguments holding one are refused before any rule or tool sees them.

    Example:
        >>> non_finite({"order": 2, "lines": [{"price": float("nan")}]})
        ('lines.0.price', 'NaN is not a JSON number')
        >>> non_finite({"amount": -float("inf")})
        ('amount', '-Infinity is not a JSON number')
        >>> non_finite({"amount": 1e308, "note": "NaN"}) is None
        True
        >>> looped = {"a": 1}; looped["self"] = looped
        >>> non_finite(looped) is None
        True
    """
    # A loop, not recursion: the arguments may nest as deeply as json.loads allows. An
    # app's edited arguments may hold one container twice, or inside itself: each is
    # walked once.
    stack: list[tuple[Any, tuple[Any, ...]]] = [(value, ())]
    walked: set[int] = set()
    while stack:
        item, path = stack.pop()
        if isinstance(item, (Mapping, list, tuple)):
            if id(item) in walked:
                continue
            walked.add(id(item))
        if isinstance(item, Mapping):
            stack.extend((v, (*path, k)) for k, v in reversed(list(item.items())))
        elif isinstance(item, (list, tuple)):
            stack.extend((v, (*path, i)) for i, v in reversed(list(enumerate(item))))
        elif isinstance(item, _Number):
            return _dotted(path, whole), _problem(item.text)
        elif isinstance(item, float) and not math.isfinite(item):
            literal = "NaN" if math.isnan(item) else "Infinity" if item > 0 else "-Infinity"
            return _dotted(path, whole), _problem(literal)
    return None


def not_a_number(name: str, path: str, problem: str) -> InvalidArgumentsError:
    """The error of a call to tool ``name`` whose argument at ``path`` is a number JSON
    cannot hold (see :func:`non_finite`).

    Example:
        >>> str(not_a_number("pay", "amount", "NaN is not a JSON number"))
        "tool 'pay' got invalid arguments: amount: NaN is not a JSON number; send a finite number"
    """
    fix = "send a finite number"
    # The path may hold keys the model made up, which spans must not record.
    bare = problem if problem.split(" ", 1)[0] in _NOT_JSON else "a number is out of range"
    return InvalidArgumentsError(
        name,
        f"{path}: {problem}; {fix}",
        errors=[(path, problem)],
        redacted_reason=f"{bare}; {fix}",
    )


def _problem(literal: str) -> str:
    if literal in _NOT_JSON:
        return f"{literal} is not a JSON number"
    shown = literal if len(literal) <= 24 else f"{literal[:20]}..."
    return f"{shown} is past the range of a 64-bit float (about 1.8e308)"


def _dotted(path: tuple[Any, ...], whole: str) -> str:
    dotted = ".".join(str(part) for part in path) or whole
    return dotted if len(dotted) <= 100 else f"{dotted[:97]}..."


def _invalid(name: str, reason: str, cause: BaseException) -> InvalidArgumentsError:
    error = InvalidArgumentsError(name, reason)
    error.__cause__ = cause
    return error
