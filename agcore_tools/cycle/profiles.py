"""Server profiles: what an OpenAI-compatible server can do, as data the loop reads.

OpenAI-compatible servers differ in what they accept: llama-cpp-python's refuses
``response_format`` of type ``json_schema`` and ``tool_choice: "required"``, cannot
stream an ``"auto"`` tool choice, and leaves tool results out of the model's prompt.
Rather than ``if provider == ...`` branches through the loop, each server's quirks are
one frozen :class:`ServerProfile`, and one function per API, :func:`fit_request` and
:func:`fit_responses_request`, changes a request to fit it. The loop picks the profile: ``CycleConfig(profile=...)``, else what
the client's base URL tells (:func:`profile_for_url`), else what the server's
``GET /models`` answer tells (:func:`profile_for_models`, read once per client), else
OpenAI's; and logs it at INFO.

The built-in profiles hold only what a test here pins, against the real server or a
recording of it: OpenAI's (the default, which changes nothing), llama-cpp-python's
(``tests/real``) and LiteLLM's proxy in front of it. A server without a built-in
profile runs with OpenAI's; pass your own ``ServerProfile`` for it.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from ..error import LlmConfigError

__all__ = [
    "LITELLM",
    "LLAMA_CPP_PYTHON",
    "OPENAI",
    "PROFILES",
    "ServerProfile",
    "fit_request",
    "fit_responses_request",
    "profile_for_models",
    "profile_for_url",
    "resolve_profile",
]

logger = logging.getLogger("agcore_tools.cycle")

StructuredMode = Literal["json_schema", "json_object", "tool"]


@dataclass(frozen=True, slots=True)
class ServerProfile:
    """What one kind of server can do. Every field's default is OpenAI's behaviour.

    Example:
        >>> small = ServerProfile("my-server", tool_choice_required=False)
        >>> small.structured_output, small.tool_choice_required
        ('json_schema', False)
        >>> dataclasses.replace(OPENAI, name="mine").stream_auto_tool_calls
        True
    """

    name: str
    """The profile's name, for logs and errors."""
    structured_output: StructuredMode = "json_schema"
    """How a bare ``output_type`` asks for structured output: native ``json_schema``,
    ``json_object`` with a schema, or the ``final_result`` output tool (see
    :class:`~agcore_tools.StructuredOutput`)."""
    strict_tools: bool = True
    """Whether tool definitions may carry ``"strict": true``."""
    tool_choice_required: bool = True
    """Whether ``tool_choice: "required"`` is accepted; without it, a request with one
    tool names that tool, and one with several sends ``"auto"``."""
    tool_choice_named: bool = True
    """Whether a named ``tool_choice`` is accepted; without it, ``"auto"`` is sent."""
    parallel_tool_calls: bool = True
    """Whether the ``parallel_tool_calls`` option is accepted; without it, it is dropped."""
    stream_auto_tool_calls: bool = True
    """Whether a streamed request may leave the tool choice to the model; without it,
    such a turn is sent unstreamed."""
    null_content_with_tool_calls: bool = True
    """Whether an assistant message with tool calls may have ``content: null`` (the
    loop always sends ``""``, valid everywhere)."""
    tools_need_tool_choice: bool = False
    """Whether the server ignores ``tools`` unless a ``tool_choice`` is sent (so a
    request without one is a plain chat, which streams)."""
    tool_results_in_prompt: bool = True
    """Whether tool results reach the model. Without it, the model cannot see what its
    call returned and calls again on every ``"auto"`` turn, so after a forced first
    request the loop sends no ``tool_choice`` at all ("forced first, then free")."""
    responses_api: bool = True
    """Whether the server speaks the Responses API (``CycleConfig(api="responses")``)."""
    responses_assistant_text: bool = False
    """Whether a Responses follow-up needs ``{"role": "assistant", "content": ""}``
    before its ``function_call`` items (LiteLLM's Responses-to-Chat bridge merges it into
    the call's message; without it the server behind gets a message with no content).
    :func:`fit_responses_request` adds it to what is sent, never to the history. With
    ``chain_responses`` the calls go back inside the server's stored response, out of
    the client's reach, so only the default whole ``input`` can carry it."""
    responses_stream_tool_calls: bool = True
    """Whether a streamed Responses request may end in a function call; without it, a
    Responses turn that may call a tool is sent unstreamed."""
    reasoning_field: str | None = None
    """The message field carrying reasoning text (``reasoning_content``), if any."""
    max_tools: int | None = 128
    """The most tools one request may offer; None for no known limit."""


OPENAI = ServerProfile("openai")
"""OpenAI (and Azure OpenAI): the default."""

LLAMA_CPP_PYTHON = ServerProfile(
    "llama-cpp-python",
    structured_output="json_object",
    tool_choice_required=False,
    stream_auto_tool_calls=False,
    null_content_with_tool_calls=False,
    tools_need_tool_choice=True,
    tool_results_in_prompt=False,
    responses_api=False,
    max_tools=None,
)
"""llama-cpp-python 0.3's server (``chatml-function-calling``): pinned by ``tests/real``
and the README's quirk table."""

LITELLM = dataclasses.replace(
    LLAMA_CPP_PYTHON,
    name="litellm",
    responses_api=True,
    responses_assistant_text=True,
    responses_stream_tool_calls=False,
)
"""LiteLLM's proxy in front of llama-cpp-python, as ``tests/real`` runs it: the server's
quirks, and a Responses-to-Chat bridge."""

PROFILES: Mapping[str, ServerProfile] = {p.name: p for p in (OPENAI, LLAMA_CPP_PYTHON, LITELLM)}
"""The built-in profiles by name, for ``CycleConfig(profile="llama-cpp-python")``."""

_HOSTS = {"api.openai.com": OPENAI}
_HOST_SUFFIXES = {".openai.azure.com": OPENAI}


def resolve_profile(profile: ServerProfile | str | None) -> ServerProfile | None:
    """A profile from ``CycleConfig(profile=...)``: a :class:`ServerProfile`, a built-in
    one's name, or None (picked per client).

    Example:
        >>> resolve_profile("llama-cpp-python") is LLAMA_CPP_PYTHON
        True
        >>> resolve_profile("llama")
        Traceback (most recent call last):
        ...
        agcore_tools.error.LlmConfigError: CycleConfig.profile 'llama' is not a built-in profile: use one of 'openai', 'llama-cpp-python', 'litellm', or pass a ServerProfile
    """
    if profile is None or isinstance(profile, ServerProfile):
        return profile
    if isinstance(profile, str) and profile in PROFILES:
        return PROFILES[profile]
    names = ", ".join(repr(name) for name in PROFILES)
    raise LlmConfigError(
        f"CycleConfig.profile {profile!r} is not a built-in profile: use one of {names}, "
        "or pass a ServerProfile"
    )


def profile_for_url(base_url: str) -> ServerProfile | None:
    """The profile a base URL tells, or None when it tells nothing (a local port, a
    proxy): the loop then runs with OpenAI's.

    Example:
        >>> profile_for_url("https://api.openai.com/v1").name
        'openai'
        >>> profile_for_url("http://127.0.0.1:8000/v1") is None
        True
    """
    host = (urlsplit(base_url).hostname or "").lower()
    found = _HOSTS.get(host)
    if found is not None:
        return found
    for suffix, suffixed in _HOST_SUFFIXES.items():
        if host.endswith(suffix):
            return suffixed
    return None


def profile_for_models(listing: Any, headers: Mapping[str, str]) -> ServerProfile | None:
    """The profile a server's ``GET /models`` answer tells, or None.

    LiteLLM's proxy marks its answers with ``x-litellm-*`` headers; llama-cpp-python's
    server lists its model as ``owned_by: "me"`` with a ``permissions`` list.

    Example:
        >>> entry = {"id": "m.gguf", "object": "model", "owned_by": "me", "permissions": []}
        >>> profile_for_models({"object": "list", "data": [entry]}, {}).name
        'llama-cpp-python'
        >>> profile_for_models({"data": []}, {"x-litellm-version": "1.106.12"}).name
        'litellm'
        >>> profile_for_models({"data": [{"id": "gpt-4o", "owned_by": "openai"}]}, {}) is None
        True
    """
    if any(key.lower().startswith("x-litellm") for key in headers):
        return LITELLM
    data = listing.get("data") if isinstance(listing, Mapping) else None
    entries = [e for e in data if isinstance(e, Mapping)] if isinstance(data, list) else []
    if entries and all(e.get("owned_by") == "me" and "permissions" in e for e in entries):
        return LLAMA_CPP_PYTHON
    return None


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
        >>> params["tool_choice"] = "auto"
        >>> fit_request(params, LLAMA_CPP_PYTHON, stream=True)
        (False, ['streamed "auto" -> unstreamed'])
        >>> fit_request({"tools": []}, OPENAI, stream=True)
        (True, [])
    """
    if profile is OPENAI:
        return stream, []
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
    message already is (LiteLLM's bridge merges the calls into the message before them).
    Without ``responses_stream_tool_calls``, a turn that may call a tool is unstreamed.

    Example:
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
    """
    if profile is OPENAI:
        return stream, []
    changed: list[str] = []
    messages = params.get("messages")
    if profile.responses_assistant_text and isinstance(messages, list):
        groups = 0
        fitted: list[Any] = []
        for message in messages:
            fit, added = _with_assistant_text(message)
            fitted.append(fit)
            groups += added
        if groups:
            params["messages"] = fitted
            changed.append(f'assistant "" before {groups} function_call group(s)')
    if stream and params.get("tools") and not profile.responses_stream_tool_calls:
        choice = params.get("tool_choice")
        if choice != "none" and (choice is not None or not profile.tools_need_tool_choice):
            stream = False
            params.pop("stream", None)
            params.pop("stream_options", None)
            changed.append("streamed tool turn -> unstreamed")
    return stream, changed


_ASSISTANT_TEXT = {"role": "assistant", "content": ""}


def _with_assistant_text(message: Any) -> tuple[Any, int]:
    # The message with the empty assistant message before each run of function_call
    # items that has no assistant message in front, and how many it got.
    if not isinstance(message, Mapping) or message.get("role") != "assistant":
        return message, 0
    response = message.get("response")
    response = dict(response) if isinstance(response, Mapping) else {}
    output = response.get("output")
    if not isinstance(output, list):
        # No response kept (a history from api="chat"): the wire sends the content, if
        # any, then the calls; only calls without content need the empty message.
        calls = message.get("tool_calls")
        if message.get("content") or not isinstance(calls, list) or not calls:
            return message, 0
        output = [_function_call(call) for call in calls]
    items: list[Any] = []
    groups = 0
    for item in output:
        opens = not items or _kind(items[-1]) not in ("function_call", "assistant")
        if opens and _kind(item) == "function_call":
            items.append(dict(_ASSISTANT_TEXT))
            groups += 1
        items.append(item)
    if not groups:
        return message, 0
    return {**message, "response": {**response, "output": items}}, groups


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
