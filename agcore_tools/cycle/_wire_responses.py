"""The Responses wire: ``responses.create`` over the same loop and the same history.

The history stays in the Chat Completions format (``cycle.messages``), so every part
of the loop that reads it (pending calls, history policies, structured output, the
transcript view) works unchanged. What only the Responses API has rides along on the
assistant message, as plain JSON::

    {"role": "assistant", "content": "...", "tool_calls": [...],
     "response": {"id": "resp_...", "output": [<the response's output items>]}}

Each request converts the history into ``input`` items: an assistant message with a
``response`` sends its output items back as they came (reasoning items, encrypted
content included, stay in front of the calls they preceded), a tool message becomes a
``function_call_output``, and a message without a role is taken as a Responses item
already. A history policy drops whole exchanges, and an assistant message with its
tool messages sits in one exchange, so trimming cannot separate a reasoning item from
its following item nor a ``function_call`` from its output. A saved history resumes
on the Responses API (the ``response`` key is the Responses API's own; the Chat
Completions wire sends assistant messages without it).

The request is first built in the Chat Completions shape, so forced ``tool_choice``
relaxing and structured output stay one implementation; :meth:`ResponsesWire.request`
translates it (tools, ``tool_choice``, ``response_format``) just before sending.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from .._sdk import sdk_field as _field
from ..calls import CUT_CALLS_NOT_REPAIRED, ParsedCall, parse_call
from ..error import LlmError
from ._body import lighten, without_unused_tool_options
from ._stream import Turn, describe_body, renamed_call
from .config import CycleConfig
from .events import AssistantTextDelta, FinishReason, ReasoningDelta, StreamEvent, Usage

__all__ = [
    "ResponsesTurnBuilder",
    "ResponsesWire",
    "fold_output_items",
    "fold_submitted",
    "to_input",
    "to_tool",
]

logger = logging.getLogger("agcore_tools.cycle")

Message = dict[str, Any]
_NO_EVENTS: tuple[StreamEvent, ...] = ()
_ENCRYPTED = "reasoning.encrypted_content"
_TOOL_OPTIONS = ("tool_choice",)  # refused on a request without tools
_LISTS = ("input", "tools")  # sent past the SDK's per-request transform (see _body.py)
_INCOMPLETE = {
    "max_output_tokens": FinishReason.LENGTH,
    "content_filter": FinishReason.CONTENT_FILTER,
}
_REASONING_DELTAS = frozenset(
    {"response.reasoning_summary_text.delta", "response.reasoning_text.delta"}
)


class ResponsesWire:
    """``responses.create``: stateless full ``input`` by default, or ``chain=True`` to
    send only what follows the last response, with ``previous_response_id``."""

    __slots__ = ("chain",)

    name = "responses"

    def __init__(self, chain: bool) -> None:
        self.chain = chain

    def params(
        self,
        config: CycleConfig,
        messages: Sequence[Message],
        tools: list[dict[str, Any]] | None,
        stream: bool,
    ) -> dict[str, Any]:
        """The request's parameters, still in the Chat Completions shape."""
        params = dict(config.request_options)
        params["model"] = config.model
        last = _last_response(messages) if self.chain else None
        if last is not None:
            index, response_id = last
            params["previous_response_id"] = response_id
            params["messages"] = messages[index + 1 :]
        else:
            params["messages"] = config.history.select(messages)
        if tools:
            params["tools"] = tools
        if stream:
            params["stream"] = True
        else:
            params.pop("stream_options", None)  # OpenAI refuses it on an unstreamed request
        return params

    def request(self, requester: Any, params: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """``responses`` (to call ``create`` on) and the parameters translated for it:
        no ``tool_choice`` without tools, the input and tools in ``extra_body``."""
        sent = dict(without_unused_tool_options(params, _TOOL_OPTIONS))
        sent["input"] = to_input(sent.pop("messages"))
        if "tools" in sent:
            sent["tools"] = [to_tool(tool) for tool in sent["tools"]]
        if "tool_choice" in sent:
            sent["tool_choice"] = _tool_choice(sent["tool_choice"])
        response_format = sent.pop("response_format", None)
        if response_format is not None:
            sent["text"] = {**(sent.get("text") or {}), "format": _text_format(response_format)}
        if sent.get("store") is False:
            # Without stored responses, reasoning can only go back encrypted.
            include = list(sent.get("include") or ())
            if _ENCRYPTED not in include:
                sent["include"] = [*include, _ENCRYPTED]
        return requester.responses, lighten(sent, _LISTS)

    def builder(self, turn_tag: str, repair: bool, trace: Any) -> ResponsesTurnBuilder:
        """A fresh assembler of one turn (the tracing one while tracing)."""
        build = ResponsesTurnBuilder if trace is None else trace.responses_builder
        return build(turn_tag, repair=repair)


def _last_response(messages: Sequence[Message]) -> tuple[int, str] | None:
    for index in range(len(messages) - 1, -1, -1):
        response = messages[index].get("response")
        if messages[index].get("role") == "assistant" and isinstance(response, Mapping):
            response_id = response.get("id")
            if isinstance(response_id, str) and response_id:
                return index, response_id
    return None


# -- history -> input ------------------------------------------------------------------


def to_input(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The Responses ``input`` items of a Chat Completions history; a message without a
    role, or with ``"type": "message"``, is a Responses item already and sent as it is.

    Example:
        >>> to_input([
        ...     {"role": "user", "content": "2 + 3?"},
        ...     {"role": "assistant", "content": "", "tool_calls": [{"id": "c1",
        ...      "type": "function", "function": {"name": "add", "arguments": "{}"}}]},
        ...     {"role": "tool", "tool_call_id": "c1", "content": "5"},
        ... ])  # doctest: +NORMALIZE_WHITESPACE
        [{'role': 'user', 'content': '2 + 3?'},
         {'type': 'function_call', 'call_id': 'c1', 'name': 'add', 'arguments': '{}'},
         {'type': 'function_call_output', 'call_id': 'c1', 'output': '5'}]
    """
    items: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        content = message.get("content")
        if role == "tool":
            output = content if isinstance(content, str) else _joined_text(content)
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message.get("tool_call_id"),
                    "output": output,
                }
            )
        elif role is None or message.get("type") == "message":
            # A Responses item already: an output message keeps its id, which ties it
            # to the reasoning item in front of it.
            items.append(dict(message))
        elif role == "assistant":
            items.extend(_assistant_items(message))
        else:
            parts = content if isinstance(content, str) else [_part(p) for p in content or ()]
            items.append({"role": role, "content": parts})
    return items


def _assistant_items(message: Message) -> list[dict[str, Any]]:
    response = message.get("response")
    output = response.get("output") if isinstance(response, Mapping) else None
    if isinstance(output, list):
        # A reasoning item must be followed by the item it preceded; one left last
        # (a response cut at max_output_tokens) would make the request a 400.
        while output and isinstance(output[-1], Mapping) and output[-1].get("type") == "reasoning":
            output = output[:-1]
        return [dict(item) for item in output]
    items: list[dict[str, Any]] = []
    content = message.get("content")
    if content:
        items.append({"role": "assistant", "content": content})
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        items.append(
            {
                "type": "function_call",
                "call_id": call.get("id"),
                "name": function.get("name"),
                "arguments": function.get("arguments") or "",
            }
        )
    return items


def fold_output_items(messages: list[Message]) -> None:
    """Fold the Responses output items that end ``messages`` into one assistant
    message, in place, when they hold a ``function_call``.

    A history an app built with ``responses.create`` ends with its own
    ``response.output`` items (as dicts). The loop finds open calls on assistant
    messages, so the calls become the message's ``tool_calls`` (to be run, or answered
    as declined before a new prompt); the items go back as they came, under
    ``response.output``, as the cycle's own responses do. ``function_call_output``
    items the app added after them, with text output, become tool messages.

    Example:
        >>> history = [{"role": "user", "content": "Weather in Rome?"},
        ...            {"type": "function_call", "call_id": "c1", "name": "weather",
        ...             "arguments": "{}", "id": "fc_1", "status": "completed"}]
        >>> fold_output_items(history)
        >>> history[1]["tool_calls"]
        [{'id': 'c1', 'type': 'function', 'function': {'name': 'weather', 'arguments': '{}'}}]
        >>> to_input(history)[1]["id"]
        'fc_1'
    """
    end = len(messages)
    while end and _is_item(messages[end - 1], "function_call_output"):
        end -= 1
    begin = end
    while begin and _is_output_item(messages[begin - 1]):
        begin -= 1
    items = [dict(item) for item in messages[begin:end]]
    answers = messages[end:]
    calls = [item for item in items if item.get("type") == "function_call"]
    if not calls or not all(isinstance(answer.get("output"), str) for answer in answers):
        return  # nothing open, or an answer a tool message cannot hold: left as they are
    texts = [_text_of(item.get("content")) for item in items if item.get("type") == "message"]
    message: Message = {
        "role": "assistant",
        "content": "".join(texts),
        "tool_calls": [
            {
                "id": call.get("call_id"),
                "type": "function",
                "function": {"name": call.get("name"), "arguments": call.get("arguments")},
            }
            for call in calls
        ],
        "response": {"output": items},
    }
    tools = [
        {"role": "tool", "tool_call_id": answer.get("call_id"), "content": answer["output"]}
        for answer in answers
    ]
    messages[begin:] = [message, *tools]


def fold_submitted(messages: list[Message], added: list[Message]) -> None:
    """:func:`fold_output_items` for a run's history and what its submit call adds to
    it, in place: the ``function_call_output`` items ``added`` begins with are answers
    to the calls that end ``messages``, so the two are folded as one sequence; those
    answers become tool messages heading ``added``.

    Example:
        >>> history = [{"role": "user", "content": "Weather in Rome?"},
        ...            {"type": "function_call", "call_id": "c1", "name": "weather",
        ...             "arguments": "{}"}]
        >>> added = [{"type": "function_call_output", "call_id": "c1", "output": "18 C"}]
        >>> fold_submitted(history, added)
        >>> history[1]["tool_calls"][0]["id"], added
        ('c1', [{'role': 'tool', 'tool_call_id': 'c1', 'content': '18 C'}])
    """
    lead = 0
    while lead < len(added) and _is_item(added[lead], "function_call_output"):
        lead += 1
    if not lead:
        fold_output_items(messages)
        fold_output_items(added)
        return
    messages.extend(added[:lead])
    fold_output_items(messages)
    # One tool message (or the item left as it was) per answer, in order, at the end.
    answers = messages[len(messages) - lead :]
    del messages[len(messages) - lead :]
    rest = added[lead:]
    fold_output_items(rest)
    added[:] = [*answers, *rest]


def _is_item(message: Any, kind: str) -> bool:
    return isinstance(message, Mapping) and "role" not in message and message.get("type") == kind


def _is_output_item(message: Any) -> bool:
    # An item of a response's output: typed, without a role (a call, a reasoning item),
    # or an assistant's output message; not an input item (an answer, a reference).
    if not isinstance(message, Mapping):
        return False
    kind = message.get("type")
    if kind == "message":
        return message.get("role") == "assistant"
    return (
        "role" not in message
        and isinstance(kind, str)
        and not kind.endswith(("_output", "_response"))
        and kind != "item_reference"
    )


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else ()
    return "".join(
        p.get("text", "")
        for p in parts
        if isinstance(p, Mapping) and p.get("type") == "output_text"
    )


def _joined_text(content: Any) -> str:
    parts = content if isinstance(content, list) else ()
    return "".join(p.get("text", "") for p in parts if isinstance(p, Mapping))


def _part(part: Any) -> Any:
    # Chat Completions content parts (attachments included) in their Responses shape.
    if not isinstance(part, Mapping):
        return part
    kind = part.get("type")
    if kind == "text":
        return {"type": "input_text", "text": part.get("text", "")}
    if kind == "image_url":
        image = part.get("image_url") or {}
        return {
            "type": "input_image",
            "image_url": image.get("url"),
            "detail": image.get("detail", "auto"),
        }
    if kind == "file":
        return {"type": "input_file", **(part.get("file") or {})}
    if kind == "input_audio":
        # A Chat history's sound (after a switch of API): Responses messages take none,
        # and one such part would make the whole request a 400.
        return {
            "type": "input_text",
            "text": "[a sound was left out: the Responses API takes no audio]",
        }
    return dict(part)


# -- Chat Completions request shapes -> Responses ----------------------------------------


def to_tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    """The Responses function tool of a Chat Completions tool definition.

    Example:
        >>> to_tool({"type": "function", "function": {"name": "f", "parameters": {}}})
        {'type': 'function', 'strict': False, 'name': 'f', 'parameters': {}}
    """
    function = tool.get("function")
    if tool.get("type") != "function" or not isinstance(function, Mapping):
        return dict(tool)
    # Responses makes function tools strict unless told otherwise; Chat does not.
    return {"type": "function", "strict": False, **function}


def _tool_choice(choice: Any) -> Any:
    if not isinstance(choice, Mapping):
        return choice
    function = choice.get("function")
    if choice.get("type") == "function" and isinstance(function, Mapping):
        return {"type": "function", "name": function.get("name")}
    allowed = choice.get("allowed_tools")
    if choice.get("type") == "allowed_tools" and isinstance(allowed, Mapping):
        tools = [_tool_choice(tool) for tool in allowed.get("tools") or ()]
        return {"type": "allowed_tools", "mode": allowed.get("mode"), "tools": tools}
    return dict(choice)


def _text_format(response_format: Mapping[str, Any]) -> dict[str, Any]:
    schema = response_format.get("json_schema")
    if response_format.get("type") == "json_schema" and isinstance(schema, Mapping):
        return {"type": "json_schema", **schema}
    return dict(response_format)


# -- response -> turn --------------------------------------------------------------------


def usage_of(usage: Any) -> Usage:
    """A Responses ``usage`` object's counts, cached and reasoning tokens included.

    Example:
        >>> usage_of({"input_tokens": 9, "output_tokens": 4, "total_tokens": 13,
        ...           "input_tokens_details": {"cached_tokens": 8},
        ...           "output_tokens_details": {"reasoning_tokens": 3}})
        Usage(prompt_tokens=9, completion_tokens=4, total_tokens=13, cached_tokens=8, reasoning_tokens=3, requests=1, unreported=0)
    """
    prompt = _int(_field(usage, "input_tokens"))
    completion = _int(_field(usage, "output_tokens"))
    total = _int(_field(usage, "total_tokens")) or prompt + completion
    cached = _int(_field(_field(usage, "input_tokens_details"), "cached_tokens"))
    reasoning = _int(_field(_field(usage, "output_tokens_details"), "reasoning_tokens"))
    return Usage(prompt, completion, total, cached, reasoning)


def _int(value: Any) -> int:
    return value if isinstance(value, int) else 0


def _json(value: Any) -> Any:
    # SDK models become the plain JSON the history holds; unset and null fields are
    # left out, as the API does not take some of them back as input.
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", exclude_none=True)
    return dict(value) if isinstance(value, Mapping) else value


class ResponsesTurnBuilder:
    """Accumulates one response (whole, or its stream events) into a :class:`Turn`."""

    __slots__ = (
        "_arguments",
        "_avoided",
        "_items",
        "_repair",
        "_response",
        "_shown",
        "_shown_tool",
        "_turn_tag",
    )

    def __init__(self, turn_tag: str, *, repair: bool = False) -> None:
        self._turn_tag = turn_tag
        self._repair = repair
        self._response: Any = None
        self._items: dict[int, Any] = {}  # by output_index, from the stream
        self._arguments: dict[int, list[str]] = {}
        self._shown_tool: str | None = None
        self._shown: int | None = None  # the output_index of the call shown
        self._avoided: Collection[str] = ()

    def avoid_ids(self, ids: Collection[str]) -> None:
        """Give a call whose server-given id is one of ``ids`` (the history's calls) an
        id of its own (see :meth:`TurnBuilder.avoid_ids`)."""
        self._avoided = ids

    def show_arguments(self, tool_name: str) -> None:
        """Stream the arguments of the turn's first call of ``tool_name`` as
        :class:`AssistantTextDelta` events: they are the answer (structured output's
        ``final_result`` tool), not a call for the loop to run."""
        self._shown_tool = tool_name

    def feed(self, event: Any) -> tuple[StreamEvent, ...] | list[StreamEvent]:
        """Take one stream event; return the text events it carries."""
        kind = _field(event, "type")
        # An empty delta is no event, as on Chat Completions (a first-token timer or a
        # UI line opened on the first delta must not start on nothing).
        if kind == "response.output_text.delta":
            text = _field(event, "delta")
            return [AssistantTextDelta(text)] if isinstance(text, str) and text else _NO_EVENTS
        if kind in _REASONING_DELTAS:
            text = _field(event, "delta")
            return [ReasoningDelta(text)] if isinstance(text, str) and text else _NO_EVENTS
        if kind == "response.function_call_arguments.delta":
            index = _int(_field(event, "output_index"))
            delta = _field(event, "delta") or ""
            self._arguments.setdefault(index, []).append(delta)
            if delta and index == self._shown:
                return [AssistantTextDelta(delta)]
        elif kind in ("response.output_item.added", "response.output_item.done"):
            index = _int(_field(event, "output_index"))
            item = self._items[index] = _json(_field(event, "item"))
            if (
                self._shown is None
                and self._shown_tool is not None
                and isinstance(item, Mapping)
                and item.get("type") == "function_call"
                and item.get("name") == self._shown_tool
            ):
                self._shown = index
        elif kind in ("response.completed", "response.incomplete"):
            self._response = _field(event, "response")
        elif kind == "response.failed":
            raise LlmError(
                f"the model's stream reported an error: {_error(_field(event, 'response'))}"
            )
        elif kind == "error":
            raise LlmError(f"the model's stream reported an error: {_field(event, 'message')}")
        return _NO_EVENTS

    # Read by the tracing hooks (_trace.py), under the names TurnBuilder gives them.
    @property
    def response_id(self) -> str | None:
        """The response's id, None until it is complete."""
        return _field(self._response, "id") or None

    @property
    def response_model(self) -> str | None:
        """The model that answered, None until the response is complete."""
        return _field(self._response, "model") or None

    @property
    def raw_reason(self) -> str | None:
        """``incomplete_details.reason`` or else ``status``, None until complete."""
        response = self._response
        if response is None:
            return None
        reason = _field(_field(response, "incomplete_details"), "reason")
        return str(reason or _field(response, "status") or "") or None

    @property
    def usage(self) -> Usage | None:
        """The response's token counts, None until it is complete."""
        usage = _field(self._response, "usage") if self._response is not None else None
        return usage_of(usage) if usage is not None else None

    def end_stream(self) -> None:
        """Check that the stream, now ended, carried its ``response.completed``."""
        if self._response is None:
            raise LlmError(
                "the model's stream was cut: it ended without response.completed (the "
                "server failed after sending 200, or closed the stream early)"
            )

    def feed_completion(self, response: Any) -> None:
        """Take a whole (non-streamed) response."""
        status = _field(response, "status")
        if status == "failed" or _field(response, "error"):
            raise LlmError(f"the model reported an error: {_error(response)}")
        if status is None and not isinstance(_field(response, "output"), list):
            # A 200 from something else (a captive portal's HTML page, a proxy's JSON):
            # taken as is, it would be an empty answer.
            raise LlmError(
                f"the model's response is not a Responses API response: {describe_body(response)}"
            )
        self._response = response

    def build(self) -> Turn:
        """The assembled turn and its assistant message."""
        response = self._response
        output = [_json(item) for item in _field(response, "output") or ()]
        if not output:  # a bridge that leaves the final output empty: use the stream's
            output = [self._streamed(index) for index in sorted(self._items)]
        texts: list[str] = []
        refusals: list[str] = []
        thoughts: list[str] = []
        calls: list[ParsedCall] = []
        taken: set[str] = set()
        incomplete = _field(_field(response, "incomplete_details"), "reason")
        cut = incomplete == "max_output_tokens" and CUT_CALLS_NOT_REPAIRED.get()
        cut_at = "max_output_tokens" if cut else None
        for item in output:
            kind = item.get("type")
            if kind == "message":
                for part in item.get("content") or ():
                    if part.get("type") == "output_text":
                        texts.append(part.get("text", ""))
                    elif part.get("type") == "refusal":
                        refusals.append(part.get("refusal", ""))
            elif kind == "reasoning":  # what its summary and reasoning text deltas stream
                for key in ("summary", "content"):
                    thoughts.extend(_texts(item.get(key)))
            elif kind == "function_call":
                call_id = item.get("call_id")
                if call_id in taken:
                    # Each call needs its own answer (and approval, and idempotency
                    # key); the item is rewritten too, so its output matches on resend.
                    logger.warning("the server gave two tool calls of one turn the id %r", call_id)
                if not call_id or call_id in taken:
                    item["call_id"] = f"call_{self._turn_tag}_{len(calls)}"
                elif call_id in self._avoided:
                    item["call_id"] = renamed_call(call_id, f"call_{self._turn_tag}_{len(calls)}")
                taken.add(item["call_id"])
                call = parse_call(
                    item.get("name") or "",
                    item["call_id"],
                    item.get("arguments"),
                    repair=self._repair,
                    cut_at=cut_at,
                )
                calls.append(call)
        text = "".join(texts)
        refusal = "".join(refusals) or None
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if refusal is not None:
            # Read like Chat's; the refusal part itself goes back with the output items.
            message["refusal"] = refusal
        if calls:
            message["tool_calls"] = [
                {
                    "id": c.call_id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in calls
            ]
        message["response"] = {"id": _field(response, "id"), "output": output}
        raw = incomplete or _field(response, "status")
        if calls:
            reason = FinishReason.TOOL_CALLS
        elif incomplete is not None:
            reason = _INCOMPLETE.get(incomplete, FinishReason.OTHER)
        else:
            reason = FinishReason.STOP
        usage = _field(response, "usage")
        return Turn(
            message,
            text,
            reason,
            raw,
            tuple(calls),
            usage_of(usage) if usage is not None else None,
            refusal,
            "".join(thoughts),
        )

    def _streamed(self, index: int) -> dict[str, Any]:
        item = dict(self._items[index])
        if item.get("type") == "function_call" and not item.get("arguments"):
            item["arguments"] = "".join(self._arguments.get(index, ()))
        return item


def _texts(parts: Any) -> list[str]:
    # A reasoning item's summary or content parts: their texts.
    listed = parts if isinstance(parts, list) else ()
    return [
        part["text"]
        for part in listed
        if isinstance(part, Mapping) and isinstance(part.get("text"), str)
    ]


def _error(response: Any) -> str:
    error = _field(response, "error")
    message = _field(error, "message") if error is not None else None
    return str(message or error or "no error message")
