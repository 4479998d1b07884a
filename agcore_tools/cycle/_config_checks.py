"""What :class:`~agcore_tools.cycle.CycleConfig` checks of what it is given: the request
options of the OpenAI SDK it passes on (by the API that takes them), those the loop
sets itself, the keywords that are a typo of one, and the bounds of its limits and
retry settings.

Kept out of :mod:`agcore_tools.cycle.config`, which reads as the settings themselves.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Collection, Mapping
from typing import Any

from .._aio import positive_number
from .._keywords import nearest_keyword, unknown_keyword
from ..error import LlmConfigError

__all__ = [
    "FLAT_CHECKS",
    "KNOWN_OPTIONS",
    "OTHER_APIS_OPTIONS",
    "RESERVED_FIXES",
    "RESERVED_OPTIONS",
    "check_choice_count",
    "check_count",
    "check_number",
    "check_responses_options",
    "conversation_id",
    "refuse_other_apis_options",
    "refuse_typo",
    "refuse_unknown",
]

# The loop sets these itself; accepting them as options would silently conflict. Each
# with where it goes instead.
RESERVED_FIXES = {
    "input": "the prompt goes to submit*(), the history in cycle.messages",
    "messages": "give them to submit_messages(), or set cycle.messages",
    "model": "pass it as CycleConfig's first argument, CycleConfig('gpt-4o-mini')",
    "previous_response_id": "set chain_responses=True with api='responses', and the loop sends it",
    "stream": "call submit_stream() or submit_stream_with_tools() for a streamed run",
    "tools": "register tools in a ToolRegistry and pass it to submit_with_tools()",
}
RESERVED_OPTIONS = frozenset(RESERVED_FIXES)
# The request options of chat.completions.create and responses.create (openai 3.60), by
# the API that takes them. A keyword that is none of them nor a CycleConfig keyword, but
# close to one, is a typo refused at construction; one close to nothing passes only if
# the installed SDK's create() takes it (a newer SDK's option).
_CHAT_ONLY_OPTIONS = frozenset(
    {
        "audio", "frequency_penalty", "function_call", "functions", "logit_bias", "logprobs",
        "max_completion_tokens", "max_tokens", "modalities", "n", "prediction",
        "presence_penalty", "reasoning_effort", "response_format", "seed", "stop",
        "verbosity", "web_search_options",
    }
)  # fmt: skip
_RESPONSES_ONLY_OPTIONS = frozenset(
    {
        "access_programs", "background", "background_options", "context_management",
        "conversation", "image",
        "include", "instructions", "max_output_tokens", "max_tool_calls", "prompt",
        "reasoning", "text", "truncation",
    }
)  # fmt: skip
_SHARED_OPTIONS = frozenset(
    {
        "extra_body", "extra_headers", "extra_query", "metadata", "moderation",
        "parallel_tool_calls", "prompt_cache_key", "prompt_cache_options",
        "prompt_cache_retention", "safety_identifier", "service_tier", "store",
        "stream_options", "temperature", "timeout", "tool_choice", "top_logprobs", "top_p",
        "user",
    }
)  # fmt: skip
KNOWN_OPTIONS = _CHAT_ONLY_OPTIONS | _RESPONSES_ONLY_OPTIONS | _SHARED_OPTIONS
# What each API's create() refuses (it takes no **kwargs): sent anyway, the SDK raises a
# bare TypeError at the first request, after the user's message joined the history. The
# Responses wire translates response_format into text.format itself.
OTHER_APIS_OPTIONS = {
    "chat": _RESPONSES_ONLY_OPTIONS,
    "responses": _CHAT_ONLY_OPTIONS - {"response_format"},
}
_CREATE = {"chat": "chat.completions.create", "responses": "responses.create"}
# The option the other API has for the same thing.
_EQUIVALENTS = {
    "max_tokens": "max_output_tokens=...",
    "max_completion_tokens": "max_output_tokens=...",
    "reasoning_effort": "reasoning={'effort': ...}",
    "verbosity": "text={'verbosity': ...}",
    "max_output_tokens": "max_completion_tokens=...",
    "reasoning": "reasoning_effort=...",
    "text": "response_format=... or verbosity=...",
}


def refuse_typo(name: str, valid: Collection[str]) -> None:
    """Refuse ``name``, a keyword of ``CycleConfig`` that is no request option the SDK
    knows, when it looks like one of ``valid`` (its keywords and the known options).

    Example:
        >>> refuse_typo("temperature", ["temperature"])  # a known option: taken
        >>> refuse_typo("temprature", ["temperature"])
        Traceback (most recent call last):
        ...
        agcore_tools.error._UnknownKeywordError: CycleConfig got an unknown keyword 'temprature': did you mean temperature=...? (an option only your server knows goes in extra_body={'temprature': ...})
    """
    if name in KNOWN_OPTIONS or name in RESERVED_OPTIONS:  # those get their own error
        return
    near = nearest_keyword(name, valid, cutoff=0.75)
    if near:
        raise unknown_keyword("CycleConfig", name, near=near, note=_EXTRA_BODY.format(name))


def refuse_unknown(name: str, api: str, valid: Collection[str]) -> None:
    """Refuse ``name``, a keyword of ``CycleConfig`` far from every known name, unless the
    installed SDK's ``create()`` of ``api`` takes it (a newer SDK's option); ``valid``
    as for :func:`refuse_typo`.

    Sent to ``create()``, one the installed SDK does not take failed at the first
    request as its bare TypeError, after the user's message joined the history.
    """
    if name in KNOWN_OPTIONS or name in _sdk_options(api):
        return
    raise unknown_keyword(
        "CycleConfig",
        name,
        near=nearest_keyword(name, valid),
        reason="neither a CycleConfig keyword nor an option of the installed openai "
        f"package's {_CREATE[api]}()",
        note=_EXTRA_BODY.format(name),
    )


_EXTRA_BODY = " (an option only your server knows goes in extra_body={{{!r}: ...}})"


@functools.cache
def _sdk_options(api: str) -> frozenset[str] | _Anything:
    """The keywords the installed SDK's ``create()`` of ``api`` takes. Read on the first
    unknown keyword only: ``import agcore_tools`` does not load openai."""
    from openai.resources.chat.completions import AsyncCompletions
    from openai.resources.responses import AsyncResponses

    create = AsyncCompletions.create if api == "chat" else AsyncResponses.create
    parameters = inspect.signature(create).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return _Anything()
    return frozenset(p.name for p in parameters) - {"self"}


class _Anything:
    """Every keyword: a ``create()`` that takes ``**kwargs``."""

    def __contains__(self, name: object) -> bool:
        return True


def refuse_other_apis_options(api: str, options: Mapping[str, Any]) -> None:
    """Refuse an option of ``options`` that only the other API's ``create()`` takes,
    naming this API's equivalent where there is one.

    Checked on the mapping too: ``replace(config, api=...)`` passes every option
    through it.
    """
    wrong = sorted(OTHER_APIS_OPTIONS[api].intersection(options))
    if wrong:
        name = wrong[0]
        instead = f": use {_EQUIVALENTS[name]} instead" if name in _EQUIVALENTS else ""
        raise LlmConfigError(
            f"CycleConfig(api={api!r}) cannot send {name}=..., which {_CREATE[api]} does "
            f"not take{instead}"
        )


def check_responses_options(options: Mapping[str, Any]) -> None:
    """Refuse an ``include`` that is no list of strings, a ``text`` that is no mapping
    or that has a ``format`` next to a ``response_format``, a ``response_format`` or
    ``text`` format that is no mapping (a pydantic model, as the SDK's ``parse()``
    takes), and a ``timeout`` that is no positive number of seconds.

    Checked when the config is made: the wire would send a string ``include`` as its
    characters, and a ``text`` that is no mapping failed only at the first request,
    after the user's message joined the history.
    """
    include = options.get("include")
    if include is not None and (
        not isinstance(include, (list, tuple)) or not all(isinstance(i, str) for i in include)
    ):
        example = include if isinstance(include, str) else "reasoning.encrypted_content"
        raise LlmConfigError(
            "CycleConfig.include must be a list of strings, such as "
            f"include=[{example!r}], got {type(include).__name__}"
        )
    text = options.get("text")
    if text is not None and not isinstance(text, Mapping):
        raise LlmConfigError(
            "CycleConfig.text must be a mapping, such as text={'verbosity': 'low'}, "
            f"got {type(text).__name__}"
        )
    # A pydantic model, as the SDK's parse() takes: create() refuses it (chat's bare
    # TypeError, or the Responses wire's AttributeError) at the first request, after the
    # user's message joined the history.
    given = (
        ("response_format", options.get("response_format")),
        ("text['format']", text.get("format") if isinstance(text, Mapping) else None),
    )
    for name, value in given:
        # Falsy: None, and the SDK's NOT_GIVEN and omit, which mean "not set".
        if value and not isinstance(value, Mapping):
            what = (
                f"the class {value.__name__}" if isinstance(value, type) else type(value).__name__
            )
            raise LlmConfigError(
                f"CycleConfig.{name} must be a mapping, such as {{'type': 'json_object'}}, "
                f"got {what}: for an answer validated into a type (what the SDK's parse() "
                "does), pass output_type= to submit*() instead"
            )
    if (
        isinstance(text, Mapping)
        and "format" in text
        and options.get("response_format") is not None
    ):
        # The Responses wire writes response_format into text.format: one replaced the
        # other without a word.
        raise LlmConfigError(
            "CycleConfig got both response_format and text={'format': ...}, which are one "
            "setting on the Responses API (response_format becomes text.format): give one"
        )
    # A number that is no positive one made every request time out at once, as an
    # APITimeoutError after the retries; an openai.Timeout is the SDK's to read.
    timeout = options.get("timeout")
    if isinstance(timeout, (int, float)) and not positive_number(timeout):
        raise LlmConfigError(
            "CycleConfig.timeout (each request's time limit) must be positive seconds, an "
            f"openai.Timeout or None, got {timeout!r}"
        )


def check_choice_count(options: Mapping[str, Any]) -> None:
    """Refuse an ``n`` (how many answers each request asks for) other than 1 or not
    set, given as an option or inside ``extra_body`` (which the SDK merges into the
    request): the loop reads only the first answer, but every one is generated and
    billed.

    Example:
        >>> check_choice_count({"n": 1, "extra_body": {"top_k": 5}})
        >>> check_choice_count({"extra_body": {"n": 2}})
        Traceback (most recent call last):
        ...
        agcore_tools.error.LlmConfigError: CycleConfig.extra_body['n'] must be 1 or None, got 2: the loop reads only the first answer of each request, but each of the n is generated and billed
    """
    extra = options.get("extra_body")
    given = [("n", options.get("n"))]
    if isinstance(extra, Mapping):
        given.append(("extra_body['n']", extra.get("n")))
    for name, n in given:
        # Falsy and no number: None, and the SDK's NOT_GIVEN and omit ("not set").
        if (not n and not isinstance(n, (int, float))) or (type(n) is int and n == 1):
            continue
        raise LlmConfigError(
            f"CycleConfig.{name} must be 1 or None, got {n!r}: the loop reads only the "
            "first answer of each request, but each of the n is generated and billed"
        )


def conversation_id(options: Mapping[str, Any]) -> str | None:
    """The id the request ``options``' ``conversation`` names (``"conv_..."`` or
    ``{"id": "conv_..."}``), given as an option or inside ``extra_body`` (which the SDK
    merges into the request); None without one.

    Example:
        >>> conversation_id({"extra_body": {"conversation": {"id": "conv_1"}}})
        'conv_1'
        >>> conversation_id({"conversation": None}) is None
        True
    """
    option = options.get("conversation")
    extra = options.get("extra_body")
    if not option and isinstance(extra, Mapping):
        option = extra.get("conversation")
    if isinstance(option, Mapping):
        option = option.get("id")
    return option if isinstance(option, str) and option else None


def check_number(
    name: str,
    value: float | None,
    *,
    minimum: float,
    optional: bool = False,
    strict: bool = False,
    integer: bool = False,
) -> None:
    """Refuse ``value`` of the setting ``name`` unless it is a number (an int with
    ``integer``) of at least ``minimum`` (above it with ``strict``), or None when
    ``optional``.

    Example:
        >>> check_number("Retries.max_retries", 2.5, minimum=0, integer=True)
        Traceback (most recent call last):
        ...
        agcore_tools.error.LlmConfigError: Retries.max_retries must be an integer at least 0, got 2.5
    """
    if value is None and optional:
        return
    # A count is an int: 2.5 turns would allow 3 requests.
    ok = isinstance(value, int if integer else (int, float)) and not isinstance(value, bool)
    if ok and value is not None:
        ok = value > minimum if strict else value >= minimum
    if not ok:
        bound = f"greater than {minimum:g}" if strict else f"at least {minimum:g}"
        kind = "an integer " if integer else ""
        none = " or None" if optional else ""
        raise LlmConfigError(f"{name} must be {kind}{bound}{none}, got {value!r}")


def check_count(name: str, value: int | None, minimum: int) -> None:
    """:func:`check_number` for a count that may be None (no limit)."""
    check_number(name, value, minimum=minimum, optional=True, integer=True)


def _limit(minimum: float, *, strict: bool = False, integer: bool = False) -> Any:
    def checked(name: str, value: Any) -> None:
        check_number(name, value, minimum=minimum, optional=True, strict=strict, integer=integer)

    return checked


def _number(minimum: float, *, integer: bool = False) -> Any:
    def checked(name: str, value: Any) -> None:
        check_number(name, value, minimum=minimum, integer=integer)

    return checked


# The flat keywords' checks, naming the keyword as the caller spelt it.
FLAT_CHECKS: dict[str, Any] = {
    "max_turns": _limit(1, integer=True),
    "tool_timeout": _limit(0.0, strict=True),
    "max_result_bytes": _limit(64, integer=True),
    "max_tool_attachment_bytes": _limit(1, integer=True),
    "max_definition_tokens": _limit(1, integer=True),
    "max_tool_calls_per_turn": _limit(1, integer=True),
    "tool_timeout_secs": _limit(0.0, strict=True),
    "max_tool_result_bytes": _limit(64, integer=True),
    "max_retries": _number(0, integer=True),
    "retry_initial_delay": _number(0.0),
    "retry_max_delay": _number(0.0),
}
