"""Assembling one assistant turn from the SDK's stream chunks (or a whole completion).

Both paths feed the same :class:`TurnBuilder`, so a streamed and a non-streamed turn
normalise tool calls identically. Provider quirks handled here:

- a whole tool call in one chunk, and whole calls in a non-streamed message;
- deltas without ``index``, or an index reused for a different id (Ollama, SGLang);
- the function name repeated on every delta of one call (MiniMax through NVIDIA NIM),
  told from a reused index by the arguments so far: a new call starts only after
  complete ones;
- missing or empty ids: stable ones are generated (``call_<turn>_<n>``); a server's id
  that repeats an earlier call's, or holds ``~`` (the library's ids for a call's parts,
  such as a code-mode program's calls, are ``<id>~...``), is replaced by one too
  (:func:`turn_call_id`);
- an id split across chunks of one index (the rest without a name), joined;
- empty-string ``name``/``id`` on continuation deltas, treated as absent;
- ``arguments`` sent as a JSON object instead of a string (llama.cpp, TGI);
- ``content: null``, and chunks with empty ``choices`` (Azure's first chunk, usage);
- an error object in a chunk, raised as :class:`~agcore_tools.LlmError`;
- ``finish_reason`` in the same chunk as the last argument fragment;
- a stream that ends without any ``finish_reason`` (cut), raised as
  :class:`~agcore_tools.LlmError` by :meth:`TurnBuilder.end_stream`; so is one whose
  only chunk is a ``finish_reason``, with no role, text or usage (LiteLLM's proxy
  closes a stream that failed behind it so; a real empty answer has its role);
- ``content`` always a string on the assistant message (``""`` next to tool calls),
  the one shape both OpenAI and llama-cpp-python's server accept;
- DeepSeek/Qwen ``reasoning_content`` (or ``reasoning``) kept on the message;
- OpenAI's ``refusal`` (the model declined to answer), kept on the message as sent.

Keep-alive comment lines never reach this module: the SDK's SSE decoder drops them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from .._sdk import sdk_field as _field
from ..calls import CUT_CALLS_NOT_REPAIRED, ParsedCall, parse_call
from ..error import LlmError
from .events import (
    AssistantTextDelta,
    FinishReason,
    ReasoningDelta,
    StreamEvent,
    Usage,
)

__all__ = [
    "DERIVED_IDS_RESERVED",
    "EMPTY_STREAM",
    "Turn",
    "TurnBuilder",
    "describe_body",
    "malformed",
    "reason_text",
    "renamed_call",
    "turn_call_id",
]

logger = logging.getLogger("agcore_tools.cycle")

_NO_EVENTS: tuple[StreamEvent, ...] = ()
EMPTY_STREAM = "the model's stream was cut before anything arrived"
"""How :meth:`TurnBuilder.end_stream` begins the error of a stream that brought nothing:
the server failed after its 200 and sent no reason."""
_UNSTREAMED = "unstreamed, the same request brings back the server's error"
# Providers name the reasoning field differently; the history must echo the same name.
_REASONING_KEYS = ("reasoning_content", "reasoning")
_SNIPPET = 100  # characters of an unexpected body quoted in an error
_VALUE_ENDS = frozenset('}]"el0123456789')  # the last character of a whole JSON value

DERIVED_IDS_RESERVED: ContextVar[bool] = ContextVar(
    "agcore_tools_derived_ids_reserved", default=True
)
"""Whether :func:`turn_call_id` keeps a server's ids apart from those the library makes:
a server's id holding ``~`` is replaced, and a generated id never repeats another call's.
False only in a Temporal workflow run begun before that (the workflow sets it from
``workflow.patched``): such a run kept those ids."""


@dataclass(frozen=True, slots=True)
class Turn:
    """One assistant turn, assembled."""

    message: dict[str, Any]
    """The assistant message in the Chat Completions request format."""
    text: str
    """The visible text ("" when none)."""
    reason: FinishReason
    """``TOOL_CALLS`` whenever there are calls, else the provider's reason."""
    raw_reason: str | None
    """The provider's ``finish_reason``."""
    calls: tuple[ParsedCall, ...]
    """The tool calls, in the model's order."""
    usage: Usage | None
    """The request's token counts, when reported."""
    refusal: str | None = None
    """The model's refusal (it declined to answer), None when it did not refuse."""
    reasoning: str = ""
    """The model's reasoning text ("" when none): what its ``ReasoningDelta`` events
    carry when the turn streams."""


@dataclass(slots=True)
class _Slot:
    index: int | None
    id: str | None = None
    name: str | None = None
    parts: list[str] = field(default_factory=list)
    obj: Any = None
    echo: bool = False
    """Opened by a name repeated after a call's arguments were whole: a second call of
    the same tool, or only the first one's closing delta (a server naming the call on
    every delta), which brings no arguments and is no call."""

    @property
    def has_arguments(self) -> bool:
        return bool(self.parts) or self.obj is not None

    @property
    def says_something(self) -> bool:
        """Whether the arguments hold more than whitespace."""
        return self.obj is not None or any(part.strip() for part in self.parts)

    @property
    def complete(self) -> bool:
        """Whether the arguments so far form a whole JSON value (an object sent as is
        always does)."""
        if self.obj is not None:
            return True
        text = "".join(self.parts).rstrip()
        # Only a text ending the way a JSON value can end is worth parsing: most
        # prefixes of a call's arguments are told apart without a parse.
        if not text or text[-1] not in _VALUE_ENDS:
            return False
        try:
            json.loads(text)
        except (ValueError, RecursionError):
            return False
        return True


def _text(value: Any) -> str | None:
    # Empty strings on continuation deltas mean "absent", not "rename to ''".
    return value if isinstance(value, str) and value else None


class TurnBuilder:
    """Accumulates chunks of one response into a :class:`Turn`.

    ``turn_tag`` makes generated tool call ids unique within a conversation.
    """

    __slots__ = (
        "_avoided",
        "_by_id",
        "_by_index",
        "_content",
        "_opened",
        "_raw_reason",
        "_reasoning",
        "_reasoning_key",
        "_refusal",
        "_repair",
        "_shown",
        "_shown_parts",
        "_shown_tool",
        "_slots",
        "_turn_tag",
        "_usage",
    )

    def __init__(self, turn_tag: str, *, repair: bool = False) -> None:
        self._turn_tag = turn_tag
        self._repair = repair
        self._content: list[str] = []
        self._opened = False  # a delta named its role, as every answer's first one does
        self._reasoning: list[str] = []
        self._reasoning_key = _REASONING_KEYS[0]
        self._refusal: list[str] = []
        self._raw_reason: str | None = None
        self._usage: Usage | None = None
        self._slots: list[_Slot] = []
        self._by_index: dict[int, _Slot] = {}
        self._by_id: dict[str, _Slot] = {}
        self._shown_tool: str | None = None
        self._shown: _Slot | None = None
        self._shown_parts = 0  # how many of its argument fragments were shown (-1: all)
        self._avoided: Collection[str] = ()

    def avoid_ids(self, ids: Collection[str]) -> None:
        """Give a call whose server-given id is one of ``ids`` (the history's calls) an
        id of its own, as a second call of one turn with an id already used gets: some
        servers number each response's calls from "0" again, and each call needs its
        own answer, approval and idempotency key."""
        self._avoided = ids

    def show_arguments(self, tool_name: str) -> None:
        """Stream the arguments of the turn's first call of ``tool_name`` as
        :class:`AssistantTextDelta` events: they are the answer (structured output's
        ``final_result`` tool), not a call for the loop to run."""
        self._shown_tool = tool_name

    # -- what the response said so far (read by the tracing hooks, _trace.py) ----------

    @property
    def raw_reason(self) -> str | None:
        """The provider's ``finish_reason`` string, None until one arrives."""
        return self._raw_reason

    @property
    def usage(self) -> Usage | None:
        """The response's token counts, None until (unless) the server reports them."""
        return self._usage

    # -- input -------------------------------------------------------------------------

    def feed(self, chunk: Any) -> tuple[StreamEvent, ...] | list[StreamEvent]:
        """Take one streamed chunk (a dict, or an SDK ``ChatCompletionChunk``); return the
        text events it carries."""
        error = _field(chunk, "error")
        if error:
            raise LlmError(f"the model's stream reported an error: {_error_message(error)}")
        usage = _field(chunk, "usage")
        if usage is not None:
            # Some servers repeat cumulative usage on every chunk; the last one wins.
            self._usage = Usage.from_sdk(usage)
        choices = _field(chunk, "choices")
        if not choices:
            return _NO_EVENTS
        if not isinstance(choices, list):
            raise malformed("stream", "a chunk's choices", choices, "a list")
        events: list[StreamEvent] = []
        for choice in choices:
            if (_field(choice, "index") or 0) != 0:
                continue  # n > 1: only the first choice drives the loop
            delta = _field(choice, "delta")
            if delta is not None:
                self._take_delta(delta, events)
            reason = _field(choice, "finish_reason")
            if reason:
                self._raw_reason = reason
        return events

    def end_stream(self) -> None:
        """Check that the stream, now ended, carried a ``finish_reason`` and an answer.

        A stream without one was cut: the server failed after sending 200 (llama-cpp-
        python does so for a streamed ``tool_choice="auto"``, or a prompt over its
        context) or the connection was closed cleanly before the end. So was one whose
        only chunk is a ``finish_reason``, with no role, text or usage: LiteLLM's proxy
        ends a stream that failed behind it that way, where a real empty answer names
        its role. Such a turn is incomplete, so it is an error rather than an empty
        answer; the server sent no reason, which the same request unstreamed brings back
        (the loop sends it so, see ``CycleConfig.adapt``).
        """
        arrived = self._content or self._reasoning or self._refusal or self._slots or self._usage
        if self._raw_reason is None:
            if not arrived:
                raise LlmError(
                    f"{EMPTY_STREAM}: it ended without a finish_reason (the server failed "
                    f"after sending 200, without saying why; {_UNSTREAMED})"
                )
            raise LlmError(
                "the model's stream was cut: it ended without a finish_reason (the server "
                "failed after sending 200, or closed the stream early)"
            )
        if not (arrived or self._opened):
            raise LlmError(
                f"{EMPTY_STREAM}: it carried a finish_reason ({self._raw_reason!r}) but no "
                "role, text or usage (LiteLLM's proxy ends a stream that failed behind it "
                f"so; {_UNSTREAMED})"
            )

    def feed_completion(self, completion: Any) -> None:
        """Take a whole (non-streamed) ``ChatCompletion``."""
        error = _field(completion, "error")
        if error:
            raise LlmError(f"the model reported an error: {_error_message(error)}")
        usage = _field(completion, "usage")
        if usage is not None:
            self._usage = Usage.from_sdk(usage)
        choices = _field(completion, "choices")
        if not choices:
            raise LlmError(f"the model's response has no choices: {describe_body(completion)}")
        if not isinstance(choices, list):
            raise malformed("response", "choices", choices, "a list")
        choice = choices[0]
        self._raw_reason = _field(choice, "finish_reason")
        message = _field(choice, "message")
        if message is None:
            raise LlmError("the model's response has no message")
        self._take_text(message, None)
        calls = _field(message, "tool_calls")
        if calls and not isinstance(calls, list):
            raise malformed("response", "the message's tool_calls", calls, "a list")
        for call in calls or ():
            self._take_call(call, whole=True)

    def _take_delta(self, delta: Any, events: list[StreamEvent]) -> None:
        if not self._opened and _field(delta, "role"):
            self._opened = True
        self._take_text(delta, events)
        calls = _field(delta, "tool_calls")
        if calls:
            if not isinstance(calls, list):
                raise malformed("stream", "a chunk's tool_calls", calls, "a list")
            for call in calls:
                slot = self._take_call(call, whole=False)
                if self._shown_tool is not None:
                    self._show(slot, events)

    def _show(self, slot: _Slot, events: list[StreamEvent]) -> None:
        # The name may come after the first fragments (an id after the name, say): what
        # arrived before it is shown at once.
        if self._shown is None:
            if slot.name != self._shown_tool:
                return
            self._shown = slot
        elif slot is not self._shown or self._shown_parts < 0:
            return
        if slot.obj is not None:  # an object sent whole (llama.cpp, TGI)
            events.append(AssistantTextDelta(json.dumps(slot.obj, ensure_ascii=False)))
            self._shown_parts = -1
            return
        fresh = "".join(slot.parts[self._shown_parts :])
        self._shown_parts = len(slot.parts)
        if fresh:
            events.append(AssistantTextDelta(fresh))

    def _take_text(self, source: Any, events: list[StreamEvent] | None) -> None:
        content = _field(source, "content")
        if isinstance(content, str) and content:
            self._content.append(content)
            if events is not None:
                events.append(AssistantTextDelta(content))
        for key in _REASONING_KEYS:
            reasoning = _field(source, key)
            if isinstance(reasoning, str) and reasoning:
                self._reasoning_key = key
                self._reasoning.append(reasoning)
                if events is not None:
                    events.append(ReasoningDelta(reasoning))
                break
        refusal = _field(source, "refusal")
        if isinstance(refusal, str) and refusal:
            self._refusal.append(refusal)

    def _take_call(self, call: Any, *, whole: bool) -> _Slot:
        index = _field(call, "index")
        index = index if isinstance(index, int) else None
        call_id = _text(_field(call, "id"))
        function = _field(call, "function")
        name = _text(_field(function, "name")) if function is not None else None
        arguments = _field(function, "arguments") if function is not None else None
        slot = self._new_slot(index) if whole else self._slot_for(index, call_id, name)
        if call_id is not None and slot.id != call_id:
            slot.id = call_id if slot.id is None else slot.id + call_id
            self._by_id[slot.id] = slot
        if name is not None and slot.name is None:
            slot.name = name
        if isinstance(arguments, str):
            if arguments:
                slot.parts.append(arguments)
        elif arguments is not None:
            slot.obj = arguments  # llama.cpp and TGI send the object itself
        return slot

    def _slot_for(self, index: int | None, call_id: str | None, name: str | None) -> _Slot:
        # 1. A known id names its call, whatever the index says; unless the index is a
        #    new one too, from a server that gives two calls of a turn one id.
        if call_id is not None:
            slot = self._by_id.get(call_id)
            if slot is not None:
                if index is None or slot.index is None or slot.index == index:
                    return slot
                other = self._by_index.get(index)
                return other if other is not None and other.id == call_id else self._new_slot(index)
            if index is not None:
                slot = self._by_index.get(index)
                if slot is not None and slot.id is None and not slot.has_arguments:
                    return slot  # the id came after the name
                if slot is not None and name is None and slot.name is not None:
                    return slot  # the rest of an id split across chunks (a new call names itself)
            return self._new_slot(index)  # a new id: a new call, even on a reused index
        # 2. No id: the index decides, unless a second name shows the index was reused:
        #    another tool's, or the same one's after arguments already whole. Some servers
        #    repeat the name on every delta of one call.
        if index is not None:
            slot = self._by_index.get(index)
            return self._new_slot(index) if slot is None else self._named(slot, name, index)
        # 3. Neither: a name starts a new call on the same terms, anything else continues
        #    the last one.
        if not self._slots:
            return self._new_slot(None)
        return self._named(self._slots[-1], name, None)

    def _named(self, slot: _Slot, name: str | None, index: int | None) -> _Slot:
        """``slot``, or a new call where ``name`` shows the delta starts one: another
        tool's name, or the same one's after the arguments were whole."""
        if name is None or slot.name is None:
            return slot
        if name != slot.name:
            return self._new_slot(index)
        if slot.has_arguments and slot.complete:
            echo = self._new_slot(index)
            echo.echo = True
            return echo
        return slot

    def _new_slot(self, index: int | None) -> _Slot:
        slot = _Slot(index)
        self._slots.append(slot)
        if index is not None:
            self._by_index[index] = slot
        return slot

    # -- output ------------------------------------------------------------------------

    def build(self) -> Turn:
        """The assembled turn and its assistant message."""
        calls: list[ParsedCall] = []
        taken: set[str] = set()
        cut = self._raw_reason == "length" and CUT_CALLS_NOT_REPAIRED.get()
        cut_at = "max_completion_tokens" if cut else None
        for position, slot in enumerate(self._slots):
            if slot.name is None and not slot.has_arguments:
                continue  # a stray empty delta
            if slot.echo and not slot.says_something:
                continue  # the name repeated on a call's closing delta
            fresh = f"call_{self._turn_tag}_{position}"
            call_id = turn_call_id(slot.id, fresh, taken, self._avoided)
            taken.add(call_id)
            arguments = slot.obj if slot.obj is not None else "".join(slot.parts)
            calls.append(
                parse_call(slot.name or "", call_id, arguments, repair=self._repair, cut_at=cut_at)
            )
        text = "".join(self._content)
        # "" rather than null or no key: llama-cpp-python's server rejects both of those
        # on an assistant message with tool calls, and OpenAI accepts "".
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if self._reasoning:
            message[self._reasoning_key] = "".join(self._reasoning)
        refusal = "".join(self._refusal) or None
        if refusal is not None:
            message["refusal"] = refusal  # sent back as the API gave it
        if calls:
            message["tool_calls"] = [
                {
                    "id": call.call_id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in calls
            ]
        reason = FinishReason.TOOL_CALLS if calls else FinishReason.parse(self._raw_reason)
        return Turn(
            message,
            text,
            reason,
            reason_text(self._raw_reason),
            tuple(calls),
            self._usage,
            refusal,
            "".join(self._reasoning),
        )


def describe_body(body: Any) -> str:
    """A short description of a response body the loop cannot read, for its error
    message: a body the SDK could not parse as JSON (an HTML login page) comes as text.

    Example:
        >>> describe_body("<html><body>Sign in</body></html>")
        "a body that is not JSON, starting '<html><body>Sign in</body></html>'"
        >>> print(describe_body({"hello": "world"}))
        JSON starting '{"hello": "world"}'
    """
    if isinstance(body, str):
        return f"a body that is not JSON, starting {body[:_SNIPPET]!r}"
    dump = getattr(body, "model_dump", None)
    # An SDK model built from unexpected JSON keeps that JSON as its extra fields.
    value = dump(mode="json", exclude_none=True, warnings=False) if dump is not None else body
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return f"JSON starting {text[:_SNIPPET]!r}"


def reason_text(value: Any) -> str | None:
    """A provider's raw finish reason as text: one a server sent as other JSON (``5``,
    ``["stop"]``) as its ``str()``, as the span shows it (read as ``OTHER``).

    Example:
        >>> reason_text(["stop"]), reason_text("stop"), reason_text(None)
        ("['stop']", 'stop', None)
    """
    return value if value is None or isinstance(value, str) else str(value)


def malformed(where: str, what: str, value: Any, expected: str) -> LlmError:
    """The error for a response whose ``what`` holds ``value`` where the API has
    ``expected``: named by type only, as the value may quote anything (a secret echoed).

    Example:
        >>> print(malformed("response", "choices", 12345, "a list"))
        the model's response is malformed: choices is int, not a list
    """
    return LlmError(
        f"the model's {where} is malformed: {what} is {type(value).__name__}, not {expected}"
    )


def _error_message(error: Any) -> str:
    if isinstance(error, dict):
        message = error.get("message")
        return str(message) if message else str(error)
    return str(_field(error, "message") or error)


def turn_call_id(
    given: str | None, fresh: str, taken: Collection[str], avoided: Collection[str]
) -> str:
    """The id a call of a turn goes by: ``given``, the server's, or else ``fresh`` (a
    generated ``call_<turn>_<n>``).

    ``given`` is replaced when it is missing, an earlier call's of the turn (``taken``;
    a server gave two calls one id, logged as a warning), an earlier call's of the
    history (``avoided``, see :meth:`TurnBuilder.avoid_ids`), or holds ``~``: the
    library names a call's parts ``<id>~...`` (a code-mode program's calls, an input
    request, an MCP task), and a server's ``c1~0`` would share its id with the program
    call ``c1`` makes. Each call needs its own answer, approval and idempotency key. A
    generated id that another call of the turn already has (a server's ``call_0_1``)
    gets a suffix.

    Example:
        >>> turn_call_id("c1", "call_0_1", {"c0"}, ())
        'c1'
        >>> turn_call_id("c1~0", "call_0_1", {"c1"}, ())
        'call_0_1'
        >>> turn_call_id(None, "call_0_1", {"call_0_1"}, ())
        'call_0_1_1'
    """
    reserved = DERIVED_IDS_RESERVED.get()
    if given and given not in taken and given not in avoided and not (reserved and "~" in given):
        return given
    call_id, suffix = fresh, 0
    while reserved and (call_id in taken or call_id in avoided):
        suffix += 1
        call_id = f"{fresh}_{suffix}"
    if given and given in taken:
        logger.warning("the server gave two tool calls of one turn the id %r", given)
    elif given and given in avoided:
        renamed_call(given, call_id)
    elif given:
        logger.debug(
            "tool call id %r holds '~', which the library keeps for its own ids; the call "
            "is %r here",
            given,
            call_id,
        )
    return call_id


def renamed_call(call_id: str, new_id: str) -> str:
    """``new_id``, for a call whose server-given ``call_id`` an earlier call of the
    history has (see :meth:`TurnBuilder.avoid_ids`); logged at debug level.

    Example:
        >>> renamed_call("0", "call_3_0")
        'call_3_0'
    """
    # Servers that number each response's calls anew do so every turn: no warning.
    logger.debug("tool call id %r is an earlier call's; the call is %r here", call_id, new_id)
    return new_id
