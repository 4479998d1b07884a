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

The answer is read back into the history by :class:`ResponsesTurnBuilder`, in
``_responses_turn.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from typing import Any

from ..error import LlmConfigError
from ._body import lighten, without_unused_tool_options
from ._config_checks import conversation_id
from ._given import without_parsed
from ._responses_turn import ResponsesTurnBuilder
from .config import CycleConfig

__all__ = [
    "CONVERSATION_TAIL",
    "ResponsesTurnBuilder",
    "ResponsesWire",
    "fold_output_items",
    "fold_submitted",
    "to_input",
    "to_tool",
]

Message = dict[str, Any]
_ENCRYPTED = "reasoning.encrypted_content"
_TOOL_OPTIONS = ("tool_choice",)  # refused on a request without tools
_LISTS = ("input", "tools")  # sent past the SDK's per-request transform (see _body.py)

CONVERSATION_TAIL: ContextVar[bool] = ContextVar("agcore_tools_conversation_tail", default=True)
"""Whether a request with a ``conversation`` option sends only what follows the last
response. False only in a Temporal workflow run begun before that (its
``workflow.patched``): such a run sent the whole history, and goes on so."""


class ResponsesWire:
    """``responses.create``: stateless full ``input`` by default, or ``chain=True`` to
    send only what follows the last response, with ``previous_response_id``; with a
    ``conversation`` option, only what follows the last response too (the server
    prepends the conversation's items)."""

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
        # A conversation (conversation="conv_...") holds every earlier request's items
        # and prepends them to the next: the whole history again is each item twice,
        # which OpenAI refuses ("Duplicate item found with id ..."). It holds only what
        # went through it, so only a response it names marks where its items end: a
        # history made without it (a stateless cycle's, another conversation's) goes
        # whole, or its turns would be lost without a word.
        conversation = conversation_id(params)
        if self.chain:
            last = _last_response(messages)
        elif conversation is not None and CONVERSATION_TAIL.get():
            last = _last_response(messages, conversation)
        else:
            last = None
        if last is not None:
            index, response_id = last
            if self.chain:
                params["previous_response_id"] = response_id
            params["messages"] = _with_server_ids(messages[index], messages[index + 1 :])
        else:
            params["messages"] = config.history.select(messages)
        if tools:
            params["tools"] = tools
        if stream:
            params["stream"] = True
        else:
            params.pop("stream_options", None)  # OpenAI refuses it on an unstreamed request
        return params

    @staticmethod
    def check_background(
        params: Mapping[str, Any],
        stream: bool,
        fitted_by: str | None = None,
        *,
        durable: bool = False,
    ) -> None:
        """Refuse an unstreamed ``background=True`` request: its answer is a queued
        response with no output, which the loop would take for an empty answer while the
        work went on, billed, unread. ``fitted_by`` names the server profile that made a
        streamed turn unstreamed, if one did; ``durable`` says the request is a Temporal
        run's, which the ``agcore.model_request`` activity never streams.

        Example:
            >>> ResponsesWire.check_background({"background": True}, stream=True)
            >>> ResponsesWire.check_background({"background": True}, stream=False)
            Traceback (most recent call last):
            ...
            agcore_tools.error.LlmConfigError: CycleConfig(background=True) needs a streamed run: unstreamed, a background response comes back queued, with no output for the loop to go on from, and this run is not streamed; call submit_stream() or submit_stream_with_tools(), or drop background=True
        """
        if stream or not params.get("background"):
            return
        if durable:
            raise LlmConfigError(
                "CycleConfig(background=True) needs a streamed run: unstreamed, a background "
                "response comes back queued, with no output for the loop to go on from, and "
                "a Temporal run's model requests are never streamed; drop background=True"
            )
        why = (
            f"the {fitted_by} server profile sends this turn unstreamed (it cannot stream "
            "tool calls)"
            if fitted_by
            else "this run is not streamed"
        )
        raise LlmConfigError(
            "CycleConfig(background=True) needs a streamed run: unstreamed, a background "
            f"response comes back queued, with no output for the loop to go on from, and "
            f"{why}; call submit_stream() or submit_stream_with_tools()"
            f"{' with a profile that streams tool calls' if fitted_by else ''}, or drop "
            "background=True"
        )

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


def _last_response(
    messages: Sequence[Message], conversation: str | None = None
) -> tuple[int, str] | None:
    """The index and id of the last response in ``messages`` (with ``conversation``,
    the last one that conversation holds)."""
    for index in range(len(messages) - 1, -1, -1):
        response = messages[index].get("response")
        if messages[index].get("role") == "assistant" and isinstance(response, Mapping):
            response_id = response.get("id")
            held = conversation is None or response.get("conversation") == conversation
            if isinstance(response_id, str) and response_id and held:
                return index, response_id
    return None


def _with_server_ids(turn: Message, following: Sequence[Message]) -> list[Message]:
    """``following`` with each answer to a call of ``turn`` the loop gave an id of its
    own (the server repeated one) under the server's id: a chained request's answers
    go into the response the server stored, which knows only its ids."""
    server_ids = turn["response"].get("call_ids")
    if not isinstance(server_ids, Mapping) or not server_ids:
        return list(following)
    answers: list[Message] = []
    for message in following:
        key = "tool_call_id" if message.get("role") == "tool" else "call_id"
        own = message.get(key)
        if isinstance(own, str) and own in server_ids:
            message = {**message, key: server_ids[own]}
        answers.append(message)
    return answers


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
            # to the reasoning item in front of it. What the SDK's parse() added to it
            # (an app's response.output of responses.parse()) the API refuses.
            items.append(without_parsed(message))
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
        return [without_parsed(item) for item in output]
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
    items the app added after them become tool messages, but for those whose output
    is no text (a list of parts, an image's), which follow as they came and answer
    their calls all the same.

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
    if not calls:
        return
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
        if isinstance(answer.get("output"), str)
        else answer
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
    kind = choice.get("type")
    named = choice.get(kind) if kind in ("function", "custom") else None
    if isinstance(named, Mapping):  # {"type": "function", "function": {"name": ...}}
        return {"type": kind, "name": named.get("name")}
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
