"""Fitting a request to a server's profile: before it is sent (:func:`fit_request`,
:func:`fit_responses_request`, :func:`check_tool_count`), and after the server refused
it (:func:`read_refusal`, which says what to fall back to).

Its own module because this is where the profile's fields become changes to a request;
the profiles themselves (:mod:`._profile`, :mod:`._builtin_profiles`) are only data.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sized
from dataclasses import dataclass
from typing import Any

from ..error import LlmConfigError
from ._builtin_profiles import OPENAI
from ._profile import ServerProfile, StructuredMode

__all__ = [
    "Refusal",
    "check_tool_count",
    "fit_request",
    "fit_responses_request",
    "names_an_option",
    "read_refusal",
    "streams_auto_choice",
]


@dataclass(frozen=True, slots=True)
class Refusal:
    """What a server refused, read from its error: the capability, the mode the loop
    falls back to, and the profile that says so.

    Example:
        >>> refusal = read_refusal("Error code: 400 - tool_choice 'required' is not supported",
        ...                        OPENAI, {"tool_choice": "required", "tools": [{}, {}]}, False)
        >>> refusal.capability, refusal.fallback, refusal.profile.tool_choice_required
        ('tool_choice "required"', '"auto"', False)
    """

    capability: str
    fallback: str
    profile: ServerProfile


_STATUS = re.compile(r"Error code: (\d{3})")
_REFUSING_STATUSES = frozenset({400, 422, 500})
_NEXT_OUTPUT_MODE: Mapping[str, StructuredMode] = {
    "json_schema": "json_object",
    "json_object": "tool",
}


_OPTIONS = ("response_format", "tool_choice", "parallel_tool_calls")


def names_an_option(error: str) -> bool:
    """Whether an error's text names a request option some servers refuse.

    Example:
        >>> names_an_option("Error code: 500 - ('body', 'response_format', 'type')")
        True
    """
    return any(option in error for option in _OPTIONS)


def read_refusal(
    error: str, profile: ServerProfile, params: Mapping[str, Any], stream: bool
) -> Refusal | None:
    """The capability a failed request's error names, and what to fall back to; None
    when the error names none of what the request used (it stays an error).

    A 400, 422 or 500 whose body names ``response_format``, ``strict``, ``tool_choice``
    or ``parallel_tool_calls``, where the request sent it; or a streamed request with
    the model free to call tools whose event stream was cut before anything arrived
    (llama-cpp-python fails that way; a 200 that is no event stream at all, an HTML
    page, is another error). A stream cut midway is a real failure.

    Example:
        >>> body = "Error code: 500 - ('body', 'response_format', 'type') ... 'json_object'"
        >>> params = {"response_format": {"type": "json_schema"}}
        >>> read_refusal(body, OPENAI, params, False).fallback
        'json_object'
        >>> read_refusal("Error code: 500 - out of memory", OPENAI, params, False) is None
        True
    """
    if "stream was cut before anything arrived" in error:
        if streams_auto_choice(params, stream):
            adapted = dataclasses.replace(profile, stream_auto_tool_calls=False)
            return Refusal('streamed "auto" tool choice', "unstreamed", adapted)
        return None
    status = _STATUS.search(error)
    if status is None or int(status.group(1)) not in _REFUSING_STATUSES:
        return None
    response_format = params.get("response_format")
    if "response_format" in error and isinstance(response_format, Mapping):
        mode = _NEXT_OUTPUT_MODE.get(str(response_format.get("type")))
        if mode is not None:
            adapted = dataclasses.replace(profile, structured_output=mode)
            return Refusal(f"response_format {response_format.get('type')!r}", mode, adapted)
    tools = params.get("tools") or []
    choice = params.get("tool_choice")
    if "tool_choice" in error and choice == "required" and profile.tool_choice_required:
        adapted = dataclasses.replace(profile, tool_choice_required=False)
        return Refusal('tool_choice "required"', "named" if len(tools) == 1 else '"auto"', adapted)
    if "tool_choice" in error and isinstance(choice, Mapping) and profile.tool_choice_named:
        adapted = dataclasses.replace(profile, tool_choice_named=False)
        return Refusal("a named tool_choice", '"auto"', adapted)
    if "strict" in error and profile.strict_tools and any(_strict(tool) for tool in tools):
        return Refusal(
            "strict tools", "non-strict", dataclasses.replace(profile, strict_tools=False)
        )
    if "parallel_tool_calls" in error and "parallel_tool_calls" in params:
        adapted = dataclasses.replace(profile, parallel_tool_calls=False)
        return Refusal("parallel_tool_calls", "left out", adapted)
    return None


def streams_auto_choice(params: Mapping[str, Any], stream: bool) -> bool:
    """Whether a request streams with the model free to call its tools (``"auto"``, or
    no ``tool_choice``): llama-cpp-python fails such a stream after its 200.

    Example:
        >>> streams_auto_choice({"tools": [{}], "tool_choice": "auto"}, True)
        True
        >>> streams_auto_choice({"tools": [{}], "tool_choice": "none"}, True)
        False
    """
    return stream and bool(params.get("tools")) and params.get("tool_choice") in (None, "auto")


def check_tool_count(tools: Sized, profile: ServerProfile) -> None:
    """Refuse a request offering more tools than ``profile.max_tools``, before it is sent.

    OpenAI answers more than 128 with a 400 (``array_above_max_length``) that no fallback
    can help: the request must offer fewer.

    Example:
        >>> check_tool_count(range(128), OPENAI)
        >>> check_tool_count(range(129), OPENAI)
        Traceback (most recent call last):
        ...
        agcore_tools.error.LlmConfigError: this request offers 129 tools, and the openai server takes at most 128 per request (its server profile's max_tools): offer fewer with submit_with_tools(select=...) or a ToolSearch (docs/guides/tool-selection.md)
    """
    limit = profile.max_tools
    if limit is not None and len(tools) > limit:
        raise LlmConfigError(
            f"this request offers {len(tools)} tools, and the {profile.name} server takes at "
            f"most {limit} per request (its server profile's max_tools): offer fewer with "
            "submit_with_tools(select=...) or a ToolSearch (docs/guides/tool-selection.md)"
        )


def fit_request(
    params: dict[str, Any], profile: ServerProfile, stream: bool
) -> tuple[bool, list[str]]:
    """Change a Chat Completions request in place to what ``profile`` accepts; return
    whether to stream it and what was changed, for the log.

    Example:
        >>> params = {"tools": [{"type": "function", "function": {"name": "f"}}],
        ...           "tool_choice": "required", "parallel_tool_calls": False}
        >>> fit_request(params, ServerProfile("s", tool_choice_required=False,
        ...                                   parallel_tool_calls=False), stream=True)
        (True, ['tool_choice "required" -> named', 'parallel_tool_calls dropped'])
        >>> params["tool_choice"]
        {'type': 'function', 'function': {'name': 'f'}}
        >>> from agcore_tools.cycle.profiles import LLAMA_CPP_PYTHON
        >>> params["tool_choice"] = "auto"
        >>> fit_request(params, LLAMA_CPP_PYTHON, stream=True)
        (False, ['streamed "auto" -> unstreamed'])
        >>> fit_request({"tools": []}, OPENAI, stream=True)
        (True, [])
    """
    if profile is OPENAI:
        return stream, []
    changed = _fit_tool_choice(params, profile)
    tools = params.get("tools") or []
    if not profile.parallel_tool_calls and params.pop("parallel_tool_calls", None) is not None:
        changed.append("parallel_tool_calls dropped")
    if not profile.strict_tools and any(_strict(tool) for tool in tools):
        params["tools"] = [_without_strict(tool) for tool in tools]
        changed.append("strict tools -> non-strict")
    if stream and tools and not profile.stream_auto_tool_calls:
        choice = params.get("tool_choice")
        if choice == "auto" or (choice is None and not profile.tools_need_tool_choice):
            stream = False
            params.pop("stream", None)
            params.pop("stream_options", None)
            changed.append('streamed "auto" -> unstreamed')
    return stream, changed


def fit_responses_request(
    params: dict[str, Any], profile: ServerProfile, stream: bool
) -> tuple[bool, list[str]]:
    """Change a Responses request, still in the Chat Completions shape the loop builds
    it in (``messages``), in place to what ``profile`` accepts; return whether to stream
    it and what was changed, for the log. The history's messages are copied where
    changed, never edited.

    With ``responses_assistant_text``, an assistant message's ``function_call`` items get
    ``{"role": "assistant", "content": ""}`` right before them, unless an assistant
    message already is (LiteLLM's bridge merges the calls into the message before them),
    and its output ``message`` items are sent as ``{"role": "assistant", "content":
    text}`` (the bridge passes their ``output_text`` parts on as list content, which a
    server behind it, llama-cpp-python's, refuses).
    Without ``responses_stream_tool_calls``, a turn that may call a tool is unstreamed.
    ``tool_choice`` is fitted as :func:`fit_request` fits it (LiteLLM's bridge answers
    ``"required"`` with a 500): the Responses wire then sends a named choice in its own
    shape.

    Example:
        >>> from agcore_tools.cycle.profiles import LITELLM
        >>> weather = {"type": "function", "function": {"name": "weather"}}
        >>> params = {"messages": [], "tools": [weather], "tool_choice": "required"}
        >>> fit_responses_request(params, LITELLM, stream=False)
        (False, ['tool_choice "required" -> named'])
        >>> params["tool_choice"]
        {'type': 'function', 'function': {'name': 'weather'}}
        >>> call = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
        >>> turn = {"role": "assistant", "content": "", "response": {"output": [call]}}
        >>> params = {"messages": [{"role": "user", "content": "hi"}, turn],
        ...           "tools": [], "stream": True}
        >>> fit_responses_request(params, LITELLM, stream=True)
        (True, ['assistant "" before 1 function_call group(s)'])
        >>> params["messages"][1]["response"]["output"][0]
        {'role': 'assistant', 'content': ''}
        >>> turn["response"]["output"] == [call]  # the history's message is untouched
        True
        >>> fit_responses_request(params, OPENAI, stream=True)
        (True, [])
        >>> said = {"type": "message", "role": "assistant",
        ...         "content": [{"type": "output_text", "text": "Hello!", "annotations": []}]}
        >>> params = {"messages": [{"role": "assistant", "content": "Hello!",
        ...                         "response": {"output": [said]}}]}
        >>> fit_responses_request(params, LITELLM, stream=False)
        (False, ['1 assistant message item(s) -> text content'])
        >>> params["messages"][0]["response"]["output"]
        [{'role': 'assistant', 'content': 'Hello!'}]
    """
    if profile is OPENAI:
        return stream, []
    changed = _fit_tool_choice(params, profile)
    messages = params.get("messages")
    if profile.responses_assistant_text and isinstance(messages, list):
        groups = texts = 0
        fitted: list[Any] = []
        for message in messages:
            fit, added, flattened = _with_assistant_text(message)
            fitted.append(fit)
            groups += added
            texts += flattened
        if groups or texts:
            params["messages"] = fitted
        if texts:
            changed.append(f"{texts} assistant message item(s) -> text content")
        if groups:
            changed.append(f'assistant "" before {groups} function_call group(s)')
    if stream and params.get("tools") and not profile.responses_stream_tool_calls:
        choice = params.get("tool_choice")
        if choice != "none" and (choice is not None or not profile.tools_need_tool_choice):
            stream = False
            params.pop("stream", None)
            params.pop("stream_options", None)
            changed.append("streamed tool turn -> unstreamed")
    return stream, changed


def _fit_tool_choice(params: dict[str, Any], profile: ServerProfile) -> list[str]:
    # Both APIs: the request is still in the Chat Completions shape here, and the
    # Responses wire turns a named choice into its own shape when it sends it.
    changed: list[str] = []
    tools = params.get("tools") or []
    choice = params.get("tool_choice")
    if choice == "required" and not profile.tool_choice_required:
        if len(tools) == 1:
            name = tools[0].get("function", {}).get("name")
            params["tool_choice"] = {"type": "function", "function": {"name": name}}
            changed.append('tool_choice "required" -> named')
        else:
            params["tool_choice"] = "auto"
            changed.append('tool_choice "required" -> "auto"')
    elif isinstance(choice, Mapping) and not profile.tool_choice_named:
        params["tool_choice"] = "auto"
        changed.append('named tool_choice -> "auto"')
    return changed


_ASSISTANT_TEXT = {"role": "assistant", "content": ""}


def _with_assistant_text(message: Any) -> tuple[Any, int, int]:
    # The message with its output message items as plain assistant text (the bridge
    # passes their list of output_text parts on as list content, which the server
    # behind refuses), and the empty assistant message before each run of
    # function_call items that has no assistant message in front; how many of each.
    if not isinstance(message, Mapping) or message.get("role") != "assistant":
        return message, 0, 0
    response = message.get("response")
    response = dict(response) if isinstance(response, Mapping) else {}
    output = response.get("output")
    if not isinstance(output, list):
        # No response kept (a history from api="chat"): the wire sends the content, if
        # any, then the calls; only calls without content need the empty message.
        calls = message.get("tool_calls")
        if message.get("content") or not isinstance(calls, list) or not calls:
            return message, 0, 0
        output = [_function_call(call) for call in calls]
    items: list[Any] = []
    groups = texts = 0
    for item in output:
        opens = not items or _kind(items[-1]) not in ("function_call", "assistant")
        if opens and _kind(item) == "function_call":
            items.append(dict(_ASSISTANT_TEXT))
            groups += 1
        if _kind(item) == "assistant" and isinstance(item.get("content"), list):
            item = {"role": "assistant", "content": _output_text(item["content"])}
            texts += 1
        items.append(item)
    if not groups and not texts:
        return message, 0, 0
    return {**message, "response": {**response, "output": items}}, groups, texts


def _output_text(parts: list[Any]) -> str:
    # An output message's text: its output_text parts, and a refusal's words.
    texts = []
    for part in parts:
        if isinstance(part, Mapping):
            text = part.get("text") if part.get("type") == "output_text" else part.get("refusal")
            if isinstance(text, str):
                texts.append(text)
    return "".join(texts)


def _function_call(call: Mapping[str, Any]) -> dict[str, Any]:
    function = call.get("function") or {}
    return {
        "type": "function_call",
        "call_id": call.get("id"),
        "name": function.get("name"),
        "arguments": function.get("arguments") or "",
    }


def _kind(item: Any) -> str | None:
    # "function_call", "assistant" for an assistant message item, else its type or role.
    if not isinstance(item, Mapping):
        return None
    if item.get("role") == "assistant":
        return "assistant"
    kind = item.get("type")
    return kind if isinstance(kind, str) else None


def _strict(tool: Mapping[str, Any]) -> bool:
    function = tool.get("function")
    return isinstance(function, Mapping) and function.get("strict") is True


def _without_strict(tool: dict[str, Any]) -> dict[str, Any]:
    function = tool.get("function")
    if not isinstance(function, Mapping) or "strict" not in function:
        return tool
    return {**tool, "function": {k: v for k, v in function.items() if k != "strict"}}
