"""The Chat Completions wire: the request each turn sends, and the SDK call that sends it.

History items are the Chat Completions messages ``cycle.messages`` holds; the stream
mapping is :class:`~agcore_tools.cycle._stream.TurnBuilder`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ._body import lighten, without_unused_tool_options
from ._given import has_parsed, without_parsed
from ._policy import SAVED_KEYS
from ._stream import TurnBuilder
from ._trace import RunTrace
from .config import CycleConfig

__all__ = ["ChatWire"]

Message = dict[str, Any]

# The API refuses these on a request that offers no tools.
_TOOL_OPTIONS = ("tool_choice", "parallel_tool_calls")
# Plain-JSON lists sent past the SDK's per-request transform (see _body.py).
_LISTS = ("messages", "tools")


class ChatWire:
    """``chat.completions.create``, with the history sent as it is, less the
    Responses API's ``response`` key of its assistant messages, the library's own
    keys on their tool calls (:data:`~agcore_tools.cycle._policy.SAVED_KEYS`) and what
    the SDK's ``parse()`` added to one (:func:`~agcore_tools.cycle._given.without_parsed`)."""

    __slots__ = ()

    name = "chat completion"

    def params(
        self,
        config: CycleConfig,
        messages: Sequence[Message],
        tools: list[dict[str, Any]] | None,
        stream: bool,
    ) -> dict[str, Any]:
        """The request's parameters, in the Chat Completions shape."""
        params = dict(config.request_options)
        params["model"] = config.model
        params["messages"] = [_chat_message(m) for m in config.history.select(messages)]
        if tools:
            params["tools"] = tools
        if stream:
            params["stream"] = True
            params["stream_options"] = _with_usage(params.get("stream_options"))
        else:
            params.pop("stream_options", None)  # OpenAI refuses it on an unstreamed request
        return params

    def request(self, requester: Any, params: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """The SDK resource to call ``create`` on, and the parameters to call it with:
        no tool options without tools, the history and tools in ``extra_body``."""
        sent = without_unused_tool_options(params, _TOOL_OPTIONS)
        choice = sent.get("tool_choice")
        if isinstance(choice, Mapping):
            sent = {**sent, "tool_choice": _chat_tool_choice(choice)}
        return requester.chat.completions, lighten(sent, _LISTS)

    def builder(self, turn_tag: str, repair: bool, trace: RunTrace | None) -> TurnBuilder:
        """A fresh assembler of one turn (the tracing one while tracing)."""
        build = TurnBuilder if trace is None else trace.builder
        return build(turn_tag, repair=repair)


def _with_usage(options: Any) -> Any:
    """A streamed request's ``stream_options``: the app's, with ``include_usage: true``
    added unless the app set ``include_usage`` itself (its ``False`` is kept, and the
    run's usage then reads as unreported). Something that is no mapping but is set is
    left as it is, for the SDK to judge.

    Example:
        >>> _with_usage(None)
        {'include_usage': True}
        >>> _with_usage({"include_obfuscation": False})
        {'include_obfuscation': False, 'include_usage': True}
        >>> _with_usage({"include_usage": False})
        {'include_usage': False}
    """
    if isinstance(options, Mapping):
        return options if "include_usage" in options else {**options, "include_usage": True}
    # Falsy: None, and the SDK's NOT_GIVEN and omit, which mean "not set".
    return options if options else {"include_usage": True}


def _chat_tool_choice(choice: Mapping[str, Any]) -> Any:
    """A ``tool_choice`` given in the Responses shape (``{"type": "function", "name":
    ...}`` or ``"custom"``, an ``allowed_tools`` with ``mode`` and ``tools`` at its top)
    in the Chat Completions shape, which Chat Completions takes only (a 400 "Missing required
    parameter: 'tool_choice.function'"); one in the Chat shape as it is. The Responses
    wire translates the other way.

    Example:
        >>> _chat_tool_choice({"type": "function", "name": "add"})
        {'type': 'function', 'function': {'name': 'add'}}
        >>> _chat_tool_choice({"type": "custom", "name": "grep"})
        {'type': 'custom', 'custom': {'name': 'grep'}}
        >>> _chat_tool_choice({"type": "allowed_tools", "mode": "required",
        ...                   "tools": [{"type": "function", "name": "add"}]})
        {'type': 'allowed_tools', 'allowed_tools': {'mode': 'required', 'tools': [{'type': 'function', 'function': {'name': 'add'}}]}}
    """
    kind = choice.get("type")
    if kind in ("function", "custom") and kind not in choice and "name" in choice:
        return {"type": kind, kind: {"name": choice["name"]}}
    if kind == "allowed_tools" and "allowed_tools" not in choice and "tools" in choice:
        tools = choice.get("tools")
        listed = (
            [_chat_tool_choice(t) if isinstance(t, Mapping) else t for t in tools]
            if isinstance(tools, list)
            else tools
        )
        return {
            "type": "allowed_tools",
            "allowed_tools": {"mode": choice.get("mode"), "tools": listed},
        }
    return choice


def _chat_message(message: Message) -> Message:
    # A history from api="responses" keeps each turn's output items under "response";
    # Chat Completions refuses unknown message keys (a 400). The history keeps it, so
    # the conversation can still go back to the Responses API.
    if message.get("role") != "assistant":
        return message
    if "response" in message:
        message = {key: value for key, value in message.items() if key != "response"}
    if has_parsed(message):
        # An app's chat.completions.parse() answer, its to_dict() put in the history:
        # "parsed" and the calls' "parsed_arguments" repeat what the message says, in
        # keys the API refuses.
        message = without_parsed(message)
    calls = message.get("tool_calls")
    # An open call's saved state and MAC stay in the history, never in a request (an
    # app that answered only some open calls itself sends the others as they are).
    if isinstance(calls, list) and any(
        isinstance(call, dict) and not SAVED_KEYS.isdisjoint(call) for call in calls
    ):
        message = {
            **message,
            "tool_calls": [
                {k: v for k, v in call.items() if k not in SAVED_KEYS}
                if isinstance(call, dict)
                else call
                for call in calls
            ],
        }
    return message
