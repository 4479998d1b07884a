"""``CycleConfig``: the model, the loop's limits and retries, and the request options.

The limits and the retry settings each travel as one small frozen value
(:class:`Limits`, :class:`Retries`), as httpx groups its ``Timeout`` and ``Limits``;
the flat keywords they replace stay accepted as shorthands.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, overload

from typing_extensions import deprecated

from .._deprecated import renamed
from .._keywords import checks_init_keywords
from ..error import LlmConfigError, LlmUsageError
from ._config_checks import (
    FLAT_CHECKS,
    KNOWN_OPTIONS,
    RESERVED_FIXES,
    RESERVED_OPTIONS,
    check_choice_count,
    check_count,
    check_number,
    check_responses_options,
    conversation_id,
    refuse_other_apis_options,
    refuse_typo,
    refuse_unknown,
)
from .history import HistoryPolicy, TrimOldest
from .profiles import ServerProfile, resolve_profile

__all__ = ["CycleConfig", "Limits", "Retries"]

# Header and query values may be credentials (Authorization, api-key): repr shows names.
_SECRET_OPTIONS = ("extra_headers", "extra_query")
_UNKNOWN_TOOL_POLICIES = ("raise", "tell_model")
_APIS = ("chat", "responses")


class _Unset(enum.Enum):
    UNSET = enum.auto()


_UNSET = _Unset.UNSET


@checks_init_keywords
@dataclass(frozen=True)
class Limits:
    """How far one ``submit*`` call may go: turns, tool calls per turn, tool time, result
    sizes, definitions.

    Example:
        >>> limits = Limits(max_turns=5, tool_timeout=None)
        >>> limits.max_turns, limits.tool_timeout, limits.max_result_bytes
        (5, None, 16384)
        >>> limits.max_tool_calls_per_turn
        128
        >>> Limits(max_turns=0)
        Traceback (most recent call last):
        ...
        agcore_tools.error.LlmConfigError: Limits.max_turns must be an integer at least 1 or None, got 0
    """

    max_turns: int | None = 10
    """Most requests one ``submit*`` call may make; None for no limit."""
    tool_timeout: float | None = 60.0
    """Time limit of each tool call (and of its ``needs_approval`` function), in
    seconds; None for none."""
    max_result_bytes: int | None = 16384
    """UTF-8 bytes of a tool result's text the model sees before it is cut; None for no
    limit."""
    max_attachment_bytes: int | None = 5 * 1024 * 1024
    """Bytes of each image, sound or file a tool returns; a larger one is not sent and
    the model reads why (see :mod:`agcore_tools.content`). None for no limit. It bounds
    each value, not a turn's or a request's total (docs/guides/images.md)."""
    max_definition_tokens: int | None = None
    """Most tokens the tool definitions of one request may cost (counted with
    ``tiktoken`` for a model it knows, else estimated: the ``tokens`` extra);
    a request over it is not sent and raises :class:`~agcore_tools.DefinitionBudgetError`
    naming the costliest tools. None for no limit."""
    max_tool_calls_per_turn: int | None = 128
    """Most tool calls of one model answer that run, in the answer's order; None for no
    limit. Each call past it is not run, nor asked about, and is answered with an error
    the model reads ("not run: more than 128 tool calls in one answer; send the rest in
    your next turn"), so the history stays valid and the model can go on.

    ``max_turns`` counts requests, not calls: without this, one answer of 3,000 calls ran
    them all. Models answer with a few calls at once, and a fan-out over a list with
    tens; 128, the most functions one OpenAI request may offer, lets a model call every
    tool it could be offered once, and past it is a looping or steered model. A code-mode
    program's calls have their own limit (``CodeMode(limits={"max_calls": ...})``, 500),
    and ``run_tool_calls`` runs the calls it is given: a hand-written loop decides."""

    def __post_init__(self) -> None:
        check_count("Limits.max_turns", self.max_turns, 1)
        check_number(
            "Limits.tool_timeout", self.tool_timeout, minimum=0.0, optional=True, strict=True
        )
        check_count("Limits.max_result_bytes", self.max_result_bytes, 64)
        check_count("Limits.max_attachment_bytes", self.max_attachment_bytes, 1)
        check_count("Limits.max_definition_tokens", self.max_definition_tokens, 1)
        check_count("Limits.max_tool_calls_per_turn", self.max_tool_calls_per_turn, 1)


@checks_init_keywords
@dataclass(frozen=True)
class Retries:
    """How a failed request is retried (408, 409, 429, 5xx, timeouts, connection errors).

    Example:
        >>> Retries(max_retries=5).initial_delay
        0.5
    """

    max_retries: int = 3
    """Retries of a failed request."""
    initial_delay: float = 0.5
    """Seconds before the first retry; doubled each time, with jitter."""
    max_delay: float = 8.0
    """Longest computed wait between retries, in seconds (a server's ``Retry-After``
    of up to 60 s is honoured even when longer)."""

    def __post_init__(self) -> None:
        check_number("Retries.max_retries", self.max_retries, minimum=0, integer=True)
        check_number("Retries.initial_delay", self.initial_delay, minimum=0.0)
        check_number("Retries.max_delay", self.max_delay, minimum=0.0)


# Flat keywords of CycleConfig -> (group, field there, the new name when deprecated).
_FLAT: dict[str, tuple[str, str, str | None]] = {
    "max_turns": ("limits", "max_turns", None),
    "tool_timeout": ("limits", "tool_timeout", None),
    "max_result_bytes": ("limits", "max_result_bytes", None),
    "max_tool_attachment_bytes": ("limits", "max_attachment_bytes", None),
    "max_definition_tokens": ("limits", "max_definition_tokens", None),
    "max_tool_calls_per_turn": ("limits", "max_tool_calls_per_turn", None),
    "tool_timeout_secs": ("limits", "tool_timeout", "tool_timeout"),
    "max_tool_result_bytes": ("limits", "max_result_bytes", "max_result_bytes"),
    "max_retries": ("retries", "max_retries", None),
    "retry_initial_delay": ("retries", "initial_delay", None),
    "retry_max_delay": ("retries", "max_delay", None),
}


@dataclass(frozen=True, init=False, repr=False)
class CycleConfig:
    """Settings of an :class:`~agcore_tools.LlmCycle`.

    Any keyword not listed below is a request option passed unchanged to
    ``chat.completions.create`` (or ``responses.create``, with ``api="responses"``) on
    every request (``temperature``, ``tool_choice``,
    ``parallel_tool_calls``, ``max_completion_tokens``, ``extra_body``,
    ``extra_headers``, ``timeout``, ...). They are gathered in ``request_options``.

    A forced ``tool_choice`` (``"required"``, or a dict naming a tool) applies to the
    first request of each new prompt; later requests send ``"auto"`` (an
    ``allowed_tools`` choice keeps its tools, in ``"auto"`` mode), so a forced loop can
    end before ``max_turns``. A resume (``submit_with_tools(None, ...)``) goes on with
    the same prompt: once the model made a tool call since the last user message, it
    sends ``"auto"`` too. Pass ``reset_tool_choice=False`` to force every request.

    The loop's limits are one :class:`Limits` (``limits=``), its retry settings one
    :class:`Retries` (``retries=``). Each of their fields is also accepted, and
    readable, as a flat keyword (``max_turns=5``, ``max_retries=0``;
    ``retry_initial_delay``, ``retry_max_delay`` and ``max_tool_attachment_bytes`` for
    the fields named ``initial_delay``, ``max_delay`` and ``max_attachment_bytes``); a
    flat keyword given with a group replaces that field of it. ``tool_timeout_secs``
    and ``max_tool_result_bytes`` still work, with a ``DeprecationWarning`` (and marked
    deprecated for type checkers): they are ``tool_timeout`` and ``max_result_bytes`` now.

    A keyword that is neither one of the above nor a request option of the OpenAI SDK,
    but is spelt close to one (``max_turn=3``, ``temprature=0``), is a typo: it raises
    a ``TypeError`` naming the nearest valid keyword. Any other keyword the installed
    SDK's ``create()`` (of the configured ``api``) does not take raises one too
    (``history_policy=``), rather than the SDK's own at the first request. An option
    only your server knows (``top_k``) goes in ``extra_body={...}``, as the SDK wants;
    the ``request_options`` mapping is not checked (for a custom
    :class:`~agcore_tools.cycle.Requester`). The counts (``max_turns``, the calls per
    turn, the byte and token limits, ``max_retries``) must be ints, a ``timeout``
    given in seconds must be positive, and ``n`` 1 or None (the loop reads one answer
    of each request). A streamed Chat Completions request adds ``include_usage: true``
    to your ``stream_options`` unless you set ``include_usage`` (``False``: the
    run's usage then reads as unreported).
    An option only the other API takes (``max_tokens`` or ``seed`` with
    ``api="responses"``, ``max_output_tokens`` or ``reasoning`` with ``api="chat"``),
    given either way, raises an ``LlmConfigError`` naming this API's equivalent where
    there is one: that API's ``create()`` would refuse it. ``response_format`` works on
    both (it becomes ``text.format`` on the Responses API).

    ``repr()`` shows the names of ``extra_headers`` and ``extra_query`` but not their
    values, which may be credentials, nor ``approval_key``.

    To change settings, ``dataclasses.replace`` the fields below: a group
    (``limits=replace(config.limits, max_turns=None)``) or ``request_options``. A flat
    name or a request option given to ``replace()`` works too, but a type checker
    (mypy) refuses it, since it is no field.

    A call to a tool the registry does not have stops the loop with an ``LlmError``
    (``unknown_tool="raise"``, the default). With ``unknown_tool="tell_model"`` the
    call's result is instead the error text, which lists the tools offered (never one
    the permissions deny), and the loop goes on; a denied permission still stops it.

    Example:
        >>> config = CycleConfig("gpt-4o-mini", max_turns=5, temperature=0.2)
        >>> config.max_turns, dict(config.request_options)
        (5, {'temperature': 0.2})
        >>> from dataclasses import replace
        >>> more = replace(config, limits=replace(config.limits, max_turns=None))
        >>> more.max_turns, more.request_options["temperature"]
        (None, 0.2)
        >>> hotter = replace(config, request_options={**config.request_options, "temperature": 1})
        >>> hotter.max_turns, dict(hotter.request_options)
        (5, {'temperature': 1})
        >>> config = CycleConfig("m", limits=Limits(max_turns=3, tool_timeout=5), retries=Retries(0))
        >>> config.max_turns, config.limits.tool_timeout, config.max_retries
        (3, 5, 0)
        >>> flat = CycleConfig("m", max_result_bytes=4096, retry_max_delay=2.0)
        >>> flat.max_result_bytes, flat.max_tool_attachment_bytes, flat.max_definition_tokens
        (4096, 5242880, None)
        >>> flat.retry_initial_delay, flat.retry_max_delay, flat.tool_timeout
        (0.5, 2.0, 60.0)
        >>> flat.max_tool_calls_per_turn
        128
        >>> CycleConfig("m", max_turn=3)
        Traceback (most recent call last):
        ...
        agcore_tools.error._UnknownKeywordError: CycleConfig got an unknown keyword 'max_turn': did you mean max_turns=...? (an option only your server knows goes in extra_body={'max_turn': ...})
        >>> CycleConfig("m", api="responses", max_tokens=200)
        Traceback (most recent call last):
        ...
        agcore_tools.error.LlmConfigError: CycleConfig(api='responses') cannot send max_tokens=..., which responses.create does not take: use max_output_tokens=... instead
        >>> "sk-" in repr(CycleConfig("m", extra_headers={"Authorization": "Bearer sk-..."}))
        False
    """

    model: str
    """The model name sent with every request."""
    limits: Limits
    """How far one ``submit*`` call may go (see :class:`Limits`)."""
    retries: Retries
    """How failed requests are retried (see :class:`Retries`)."""
    unknown_tool: Literal["raise", "tell_model"]
    """What a call to an unregistered tool does: ``"raise"`` stops the loop with an
    ``LlmError``; ``"tell_model"`` answers the call with the error text (listing the
    tools offered) and goes on."""
    reset_tool_choice: bool
    """Whether a forced ``tool_choice`` becomes ``"auto"`` after a prompt's first request
    (a resume of the same prompt included)."""
    repair_arguments: bool
    """Whether tool-call arguments that are not valid JSON get one deterministic repair
    (closing a document that was cut off, dropping trailing commas) before the error
    goes back to the model. Off by default; it never guesses a value, so a document cut
    inside a string or a number is not repaired. A turn cut at the output token limit
    (``finish_reason`` ``"length"``, or ``max_output_tokens``) is never repaired: its
    calls whose arguments do not parse are answered with an error saying so."""
    history: HistoryPolicy
    """Chooses which messages each request sends; the default, ``TrimOldest()`` with no
    budget, sends them all (see :mod:`agcore_tools.cycle.history`)."""
    api: Literal["chat", "responses"]
    """The wire API: ``"chat"`` (``chat.completions.create``, the default) or
    ``"responses"`` (``responses.create``; reasoning items go back to the model with
    their calls on every turn). Request options are passed to that API as they are; one
    only the other API takes is refused at construction."""
    chain_responses: bool
    """With ``api="responses"``: send only what follows the last response, with its
    ``previous_response_id``, instead of the whole history (the server must store
    responses, so not with ``store=False``). A ``conversation`` request option sends
    only what follows the last response too (the server prepends the conversation's
    items), without ``previous_response_id``, so it is refused next to this."""
    approval_key: bytes | None = field(repr=False)
    """A secret the loop signs its :class:`~agcore_tools.ApprovalRequest` values with
    (HMAC-SHA256 over call id, tool and arguments), and each call a run leaves open in
    the history; a resume then refuses an approval without the matching signature, and
    an open call whose tool or arguments were changed. None (the default) signs nothing."""
    request_options: Mapping[str, Any]
    """Options passed to the API's create call on every request (read-only)."""
    profile: ServerProfile | None = None
    """What the server can do (see :mod:`agcore_tools.cycle.profiles`): a
    :class:`~agcore_tools.cycle.profiles.ServerProfile`, given as one or by a built-in
    one's name (``profile="llama-cpp-python"``). None (the default): what the client's base
    URL tells, else the server's model list (``GET /models``, read once per client),
    else OpenAI's."""
    adapt: bool = True
    """Whether a request the server refuses, naming a capability (``response_format``,
    ``strict``, ``tool_choice``, a cut streamed ``"auto"``), is sent once more in the
    next mode, with a WARNING, and the fallback kept for the client (see
    :func:`~agcore_tools.cycle.profiles.read_refusal`); and whether any other stream that
    brought nothing (the server failed after its 200, without saying why) is sent once
    more unstreamed, for that request only, to bring back the server's error. A refusal
    naming none stays an error."""

    # The deprecated keywords' overloads come first: **options takes any keyword, so a
    # checker would otherwise match every call to the current signature.
    @overload
    @deprecated(
        "CycleConfig(tool_timeout_secs=...) is deprecated; use CycleConfig(tool_timeout=...)",
        category=None,  # renamed() warns at run time
    )
    def __init__(self, model: str, *, tool_timeout_secs: float | None, **options: Any) -> None: ...

    @overload
    @deprecated(
        "CycleConfig(max_tool_result_bytes=...) is deprecated; use "
        "CycleConfig(max_result_bytes=...)",
        category=None,
    )
    def __init__(
        self, model: str, *, max_tool_result_bytes: int | None, **options: Any
    ) -> None: ...

    @overload
    def __init__(
        self,
        model: str,
        *,
        limits: Limits | None = None,
        retries: Retries | None = None,
        max_turns: int | _Unset | None = _UNSET,
        tool_timeout: float | _Unset | None = _UNSET,
        max_result_bytes: int | _Unset | None = _UNSET,
        max_tool_attachment_bytes: int | _Unset | None = _UNSET,
        max_definition_tokens: int | _Unset | None = _UNSET,
        max_tool_calls_per_turn: int | _Unset | None = _UNSET,
        max_retries: int | _Unset = _UNSET,
        retry_initial_delay: float | _Unset = _UNSET,
        retry_max_delay: float | _Unset = _UNSET,
        unknown_tool: Literal["raise", "tell_model"] = "raise",
        reset_tool_choice: bool = True,
        repair_arguments: bool = False,
        history: HistoryPolicy | None = None,
        api: Literal["chat", "responses"] = "chat",
        chain_responses: bool = False,
        approval_key: bytes | None = None,
        request_options: Mapping[str, Any] | None = None,
        profile: ServerProfile | str | None = None,
        adapt: bool = True,
        **options: Any,
    ) -> None: ...

    def __init__(
        self,
        model: str,
        *,
        limits: Limits | None = None,
        retries: Retries | None = None,
        max_turns: int | _Unset | None = _UNSET,
        tool_timeout: float | _Unset | None = _UNSET,
        max_result_bytes: int | _Unset | None = _UNSET,
        max_tool_attachment_bytes: int | _Unset | None = _UNSET,
        max_definition_tokens: int | _Unset | None = _UNSET,
        max_tool_calls_per_turn: int | _Unset | None = _UNSET,
        max_retries: int | _Unset = _UNSET,
        retry_initial_delay: float | _Unset = _UNSET,
        retry_max_delay: float | _Unset = _UNSET,
        unknown_tool: Literal["raise", "tell_model"] = "raise",
        reset_tool_choice: bool = True,
        repair_arguments: bool = False,
        history: HistoryPolicy | None = None,
        api: Literal["chat", "responses"] = "chat",
        chain_responses: bool = False,
        approval_key: bytes | None = None,
        request_options: Mapping[str, Any] | None = None,
        profile: ServerProfile | str | None = None,
        adapt: bool = True,
        tool_timeout_secs: float | _Unset | None = _UNSET,
        max_tool_result_bytes: int | _Unset | None = _UNSET,
        **options: Any,
    ) -> None:
        for name in options:
            refuse_typo(name, _VALID_KEYWORDS)
        if request_options is not None and not isinstance(request_options, Mapping):
            raise LlmUsageError(
                "CycleConfig.request_options must be a mapping of option names to values, "
                f"such as request_options={{'temperature': 0.2}}, got {type(request_options).__name__}"
            )
        merged = {**(request_options or {}), **options}
        reserved = sorted(RESERVED_OPTIONS.intersection(merged))
        if reserved:
            fixes = "; ".join(f"{name}: {RESERVED_FIXES[name]}" for name in reserved)
            raise LlmConfigError(
                f"CycleConfig cannot take {', '.join(reserved)} as request options: the loop "
                f"sets them ({fixes})"
            )
        flat = {
            "max_turns": max_turns,
            "tool_timeout": tool_timeout,
            "max_result_bytes": max_result_bytes,
            "max_tool_attachment_bytes": max_tool_attachment_bytes,
            "max_definition_tokens": max_definition_tokens,
            "max_tool_calls_per_turn": max_tool_calls_per_turn,
            "tool_timeout_secs": tool_timeout_secs,
            "max_tool_result_bytes": max_tool_result_bytes,
            "max_retries": max_retries,
            "retry_initial_delay": retry_initial_delay,
            "retry_max_delay": retry_max_delay,
        }
        changes: dict[str, dict[str, Any]] = {"limits": {}, "retries": {}}
        for name, value in flat.items():
            if value is _UNSET:
                continue
            group, target, new = _FLAT[name]
            if new is not None:
                renamed(f"CycleConfig({name}=...)", f"CycleConfig({new}=...)")
            FLAT_CHECKS[name](f"CycleConfig.{name}", value)
            changes[group][target] = value
        limits = limits if limits is not None else Limits()
        retries = retries if retries is not None else Retries()
        if not isinstance(limits, Limits) or not isinstance(retries, Retries):
            raise LlmConfigError(
                f"CycleConfig takes limits=Limits(...) and retries=Retries(...), got "
                f"{type(limits).__name__} and {type(retries).__name__}"
            )
        if changes["limits"]:
            limits = dataclasses.replace(limits, **changes["limits"])
        if changes["retries"]:
            retries = dataclasses.replace(retries, **changes["retries"])
        if unknown_tool not in _UNKNOWN_TOOL_POLICIES:
            raise LlmConfigError(
                f"CycleConfig.unknown_tool must be 'raise' or 'tell_model', got {unknown_tool!r}"
            )
        if not isinstance(reset_tool_choice, bool):
            raise LlmConfigError(
                f"CycleConfig.reset_tool_choice must be True or False, got {reset_tool_choice!r}"
            )
        if not isinstance(repair_arguments, bool):
            raise LlmConfigError(
                f"CycleConfig.repair_arguments must be True or False, got {repair_arguments!r}"
            )
        if api not in _APIS:
            raise LlmConfigError(f"CycleConfig.api must be 'chat' or 'responses', got {api!r}")
        refuse_other_apis_options(api, merged)
        check_responses_options(merged)
        check_choice_count(merged)
        for name in options:
            refuse_unknown(name, api, _VALID_KEYWORDS)
        if not isinstance(chain_responses, bool):
            raise LlmConfigError(
                f"CycleConfig.chain_responses must be True or False, got {chain_responses!r}"
            )
        if chain_responses and (api != "responses" or merged.get("store") is False):
            raise LlmConfigError(
                "CycleConfig.chain_responses needs api='responses' and stored responses "
                f"(not store=False), got chain_responses={chain_responses!r}, api={api!r}"
            )
        if chain_responses and conversation_id(merged):
            # The API refuses previous_response_id next to a conversation.
            raise LlmConfigError(
                "CycleConfig takes chain_responses=True or conversation=..., not both: a "
                "conversation already keeps the earlier items, and the loop sends only what "
                "follows the last response; drop chain_responses=True"
            )
        if history is not None and not isinstance(history, HistoryPolicy):
            # Checked here: the first request would fail on history.select().
            count = isinstance(history, int) and not isinstance(history, bool) and history > 0
            example = history if count else 20
            raise LlmUsageError(
                "CycleConfig.history must be a HistoryPolicy (an object with "
                f"select(messages), such as TrimOldest(max_messages={example})) or None, "
                f"got {type(history).__name__}"
            )
        if approval_key is not None and (not isinstance(approval_key, bytes) or not approval_key):
            raise LlmConfigError("CycleConfig.approval_key must be non-empty bytes or None")
        if not isinstance(model, str) or not model:
            raise LlmConfigError(f"CycleConfig.model must be a non-empty string, got {model!r}")
        set_ = object.__setattr__
        set_(self, "model", model)
        set_(self, "limits", limits)
        set_(self, "retries", retries)
        set_(self, "unknown_tool", unknown_tool)
        set_(self, "reset_tool_choice", reset_tool_choice)
        set_(self, "repair_arguments", repair_arguments)
        set_(self, "history", history if history is not None else TrimOldest())
        set_(self, "api", api)
        set_(self, "chain_responses", chain_responses)
        set_(self, "approval_key", approval_key)
        set_(self, "request_options", types.MappingProxyType(merged))
        set_(self, "profile", resolve_profile(profile))
        if not isinstance(adapt, bool):
            raise LlmConfigError(f"CycleConfig.adapt must be True or False, got {adapt!r}")
        set_(self, "adapt", adapt)

    def __repr__(self) -> str:
        shown = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.repr}
        options = dict(self.request_options)
        for name in _SECRET_OPTIONS:
            value = options.get(name)
            if value is not None:
                hidden = isinstance(value, Mapping)
                options[name] = dict.fromkeys(value, "***") if hidden else "***"
        shown["request_options"] = types.MappingProxyType(options)
        return f"CycleConfig({', '.join(f'{k}={v!r}' for k, v in shown.items())})"

    # -- the flat names, read from the groups ------------------------------------------

    @property
    def max_turns(self) -> int | None:
        """``limits.max_turns``: most requests one ``submit*`` call may make."""
        return self.limits.max_turns

    @property
    def tool_timeout(self) -> float | None:
        """``limits.tool_timeout``: time limit of each tool call, in seconds."""
        return self.limits.tool_timeout

    @property
    def max_result_bytes(self) -> int | None:
        """``limits.max_result_bytes``: bytes of a tool result's text the model sees."""
        return self.limits.max_result_bytes

    @property
    def max_tool_attachment_bytes(self) -> int | None:
        """``limits.max_attachment_bytes``: bytes of each attachment a tool returns."""
        return self.limits.max_attachment_bytes

    @property
    def max_definition_tokens(self) -> int | None:
        """``limits.max_definition_tokens``: most tokens of one request's definitions."""
        return self.limits.max_definition_tokens

    @property
    def max_tool_calls_per_turn(self) -> int | None:
        """``limits.max_tool_calls_per_turn``: most tool calls of one answer that run."""
        return self.limits.max_tool_calls_per_turn

    @property
    def max_retries(self) -> int:
        """``retries.max_retries``: retries of a failed request."""
        return self.retries.max_retries

    @property
    def retry_initial_delay(self) -> float:
        """``retries.initial_delay``: seconds before the first retry."""
        return self.retries.initial_delay

    @property
    def retry_max_delay(self) -> float:
        """``retries.max_delay``: longest computed wait between retries."""
        return self.retries.max_delay

    @property
    @deprecated(
        "CycleConfig.tool_timeout_secs is deprecated; use CycleConfig.tool_timeout", category=None
    )
    def tool_timeout_secs(self) -> float | None:
        """Deprecated: use :attr:`tool_timeout` (or ``limits.tool_timeout``).

        Example:
            >>> import warnings
            >>> with warnings.catch_warnings(record=True) as caught:  # it warns
            ...     warnings.simplefilter("always")
            ...     CycleConfig("m").tool_timeout_secs
            60.0
            >>> caught[0].category.__name__
            'DeprecationWarning'
        """
        renamed("CycleConfig.tool_timeout_secs", "CycleConfig.tool_timeout")
        return self.limits.tool_timeout

    @property
    @deprecated(
        "CycleConfig.max_tool_result_bytes is deprecated; use CycleConfig.max_result_bytes",
        category=None,
    )
    def max_tool_result_bytes(self) -> int | None:
        """Deprecated: use :attr:`max_result_bytes` (or ``limits.max_result_bytes``).

        Example:
            >>> import warnings
            >>> with warnings.catch_warnings(record=True) as caught:  # it warns
            ...     warnings.simplefilter("always")
            ...     CycleConfig("m").max_tool_result_bytes
            16384
            >>> caught[0].category.__name__
            'DeprecationWarning'
        """
        renamed("CycleConfig.max_tool_result_bytes", "CycleConfig.max_result_bytes")
        return self.limits.max_result_bytes


# Every keyword CycleConfig takes, and the SDK request options it passes on.
_VALID_KEYWORDS = sorted(
    (set(inspect.signature(CycleConfig.__init__).parameters) - {"self", "options"}) | KNOWN_OPTIONS
)
