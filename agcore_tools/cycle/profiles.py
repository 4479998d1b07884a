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

OpenAI's (the default, which changes nothing), llama-cpp-python's and LiteLLM's proxy
in front of it are pinned by tests against the real server (``tests/real``), and so is
llama.cpp's llama-server, by opt-in ones (``make test-llama-server``). The others
(Azure, vLLM, SGLang, Ollama, LM Studio, TGI, and Gemini's and Anthropic's
OpenAI-compatible endpoints) come from each server's documentation and source: the
comment above each one names, per field that differs from OpenAI's, where that is
written. Where the sources are silent a field keeps OpenAI's default rather than
a guess. A server without a built-in profile runs with OpenAI's; pass your own
``ServerProfile`` for it.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import re
from collections.abc import Mapping, Sized
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from ..content import CONTENT_KINDS
from ..error import LlmConfigError

__all__ = [
    "ANTHROPIC",
    "AZURE",
    "GEMINI",
    "LITELLM",
    "LLAMA_CPP_PYTHON",
    "LLAMA_SERVER",
    "LM_STUDIO",
    "OLLAMA",
    "OPENAI",
    "PROFILES",
    "SGLANG",
    "TGI",
    "VLLM",
    "Refusal",
    "ServerProfile",
    "check_tool_count",
    "fit_request",
    "fit_responses_request",
    "names_an_option",
    "profile_for_models",
    "profile_for_url",
    "read_refusal",
    "resolve_profile",
    "streams_auto_choice",
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
    the call's message; without it the server behind gets a message with no content),
    and an earlier answer's output ``message`` item as plain assistant text (the bridge
    forwards its ``output_text`` parts as list content, which that server refuses).
    :func:`fit_responses_request` adds it to what is sent, never to the history. With
    ``chain_responses`` the calls go back inside the server's stored response, out of
    the client's reach, so only the default whole ``input`` can carry it."""
    responses_stream_tool_calls: bool = True
    """Whether a streamed Responses request may end in a function call; without it, a
    Responses turn that may call a tool is sent unstreamed."""
    responses_structured_output: StructuredMode | None = None
    """How a bare ``output_type`` asks for structured output on the Responses API; None
    for as :attr:`structured_output` says (see :meth:`output_mode`)."""
    reasoning_field: str | None = None
    """The message field carrying reasoning text (``reasoning_content``), if any."""
    max_tools: int | None = None
    """The most tools one request may offer, where the server documents a limit; None
    for no known limit. A request over it is refused before it is sent (see
    :func:`check_tool_count`), so only a documented limit is set."""
    content_parts: tuple[str, ...] = CONTENT_KINDS
    """The kinds of binary tool results the server takes as message parts: ``"image"``,
    ``"audio"``, ``"file"`` (text always goes). A tool's value of another kind is left
    out, its label in the result's text saying so, instead of failing every later
    request of the conversation."""

    def output_mode(self, api: str) -> StructuredMode:
        """How a bare ``output_type`` asks for structured output on ``api`` (``"chat"``
        or ``"responses"``).

        Example:
            >>> LITELLM.output_mode("chat"), LITELLM.output_mode("responses")
            ('json_object', 'tool')
        """
        if api == "responses" and self.responses_structured_output is not None:
            return self.responses_structured_output
        return self.structured_output

    def __post_init__(self) -> None:
        # A list (from JSON, a Temporal payload) would make the profile unhashable.
        parts = tuple(self.content_parts)
        unknown = [kind for kind in parts if kind not in CONTENT_KINDS]
        if unknown:
            raise LlmConfigError(
                f"ServerProfile.content_parts names {', '.join(map(repr, unknown))}: "
                f"use some of {', '.join(map(repr, CONTENT_KINDS))}"
            )
        object.__setattr__(self, "content_parts", parts)


# OpenAI's API reference, Chat Completions `tools`: "A max of 128 functions are
# supported" (the same for Responses); over it, a 400 array_above_max_length.
OPENAI = ServerProfile("openai", max_tools=128)
"""OpenAI: the default."""

# content_parts: llama_cpp/llama_types.py, ChatCompletionRequestMessageContentPart is
# a text or an image_url part only; a file or input_audio part is a 500 (pinned by
# tests/real).
LLAMA_CPP_PYTHON = ServerProfile(
    "llama-cpp-python",
    structured_output="json_object",
    tool_choice_required=False,
    stream_auto_tool_calls=False,
    null_content_with_tool_calls=False,
    tools_need_tool_choice=True,
    tool_results_in_prompt=False,
    responses_api=False,
    content_parts=("image",),
)
"""llama-cpp-python 0.3's server (``chatml-function-calling``): pinned by ``tests/real``
and the profile table of ``docs/providers.md``."""

LITELLM = dataclasses.replace(
    LLAMA_CPP_PYTHON,
    name="litellm",
    responses_api=True,
    responses_assistant_text=True,
    responses_stream_tool_calls=False,
    responses_structured_output="tool",
)
"""LiteLLM's proxy: its Responses-to-Chat bridge, over the quirks of a local server
behind it (llama-cpp-python's, as ``tests/real`` runs it). A proxy's capabilities are its
backend's, which its model list does not tell, so the profile picked for it by itself
assumes the most limited backend: every request works, at a cost on a capable one
(``json_object`` output, tool turns unstreamed). The bridge passes a Responses
``json_object`` format on without its schema, so there a bare ``output_type`` asks for
the output tool. In front of OpenAI's API, give ``CycleConfig(profile="openai")``."""

# Azure OpenAI serves OpenAI's models with OpenAI's request shape (the openai package's
# AsyncAzureOpenAI): no source read for this profile shows any of these fields
# differing (docs silent), so every one keeps OpenAI's value, the 128-tool limit
# included. A profile of its own so the base URL names the service in the log.
AZURE = ServerProfile("azure", max_tools=128)
"""Azure OpenAI (``*.openai.azure.com``, ``*.services.ai.azure.com``): OpenAI's values."""

# llama.cpp's llama-server (ggml-org/llama.cpp), tools and tool_choice with --jinja, as
# vendored by llama-cpp-python 0.3.36 (build b1-0c1e570), which `make test-llama-server`
# builds and tests/real/test_llama_server_real.py runs:
# - tool_choice_named: tools/server/server-common.cpp reads the field as a string,
#   json_value(body, "tool_choice", std::string("auto")); an object is a type error
#   that falls back to "auto" (logged: "Wrong type supplied for parameter
#   'tool_choice'"), and common/chat.cpp (common_chat_tool_choice_parse_oaicompat)
#   knows only "auto", "none" and "required". Pinned by tests/real.
# - reasoning_field: tools/server/README.md, --reasoning-format deepseek "puts thoughts
#   in `message.reasoning_content`".
# responses_api: tools/server/server.cpp routes POST /v1/responses, converted to a chat
# request (server-chat.cpp, server_chat_convert_responses_to_chatcmpl), stateless: it
# refuses previous_response_id, so leave chain_responses off. Older builds answer 404
# (issue #14702): give those profile=dataclasses.replace(LLAMA_SERVER, responses_api=False).
# structured_output: README, response_format json_schema is constrained by a grammar
# (OpenAI's default); pinned by tests/real. parallel_tool_calls: docs/function-calling.md,
# accepted and off by default. Others: docs silent.
LLAMA_SERVER = ServerProfile(
    "llama-server",
    tool_choice_named=False,
    reasoning_field="reasoning_content",
)
"""llama.cpp's own ``llama-server`` started with ``--jinja``."""

# vLLM (vllm-project/vllm):
# - reasoning_field: docs/features/reasoning_outputs.md, "Reasoning models return an
#   additional `reasoning` field" (it "used to be called `reasoning_content`").
# tool_choice: docs/features/tool_calling.md supports named, "auto", "required" (as of
# 0.8.3) and "none"; "strict" is honoured per tool. Responses API:
# vllm/entrypoints/openai/engine/protocol.py has ResponsesRequest. Others: docs silent.
VLLM = ServerProfile("vllm", reasoning_field="reasoning")
"""vLLM's OpenAI-compatible server (``vllm serve``)."""

# SGLang (sgl-project/sglang):
# - reasoning_field: python/sglang/srt/entrypoints/openai/protocol.py parses reasoning
#   into `reasoning_content` (docs/advanced_features/separate_reasoning).
# Others: docs silent, OpenAI's defaults kept.
SGLANG = ServerProfile("sglang", reasoning_field="reasoning_content")
"""SGLang's OpenAI-compatible server."""

# Ollama (ollama/ollama), docs/api/openai-compatibility.mdx:
# - tool_choice_required, tool_choice_named: `tool_choice` is listed unchecked under the
#   supported request fields of /v1/chat/completions, and openai/openai.go's
#   ChatCompletionRequest has no such field, so any value is ignored.
# - reasoning_field: openai/openai.go, Message.Reasoning is `json:"reasoning"`.
# structured_output: response_format json_schema is supported (openai.go maps its schema
# to `format`). Responses API: /v1/responses since v0.13.3, non-stateful. Others: docs
# silent.
OLLAMA = ServerProfile(
    "ollama",
    tool_choice_required=False,
    tool_choice_named=False,
    reasoning_field="reasoning",
)
"""Ollama's OpenAI-compatible endpoints (``/v1``)."""

# LM Studio (closed source; lmstudio.ai/docs):
# - tool_choice_named: the API changelog (lmstudio.ai/docs/developer/api-changelog)
#   adds `tool_choice` as "auto", "none" or "required" ("required": llama.cpp engine
#   only); a named tool is not among them.
# - reasoning_field: same changelog, gpt-oss reasoning "moves ... into
#   choices.message.reasoning".
# structured_output: lmstudio.ai/docs/advanced/structured-output, json_schema.
# Responses API: POST /v1/responses since 0.3.29. Others: docs silent.
LM_STUDIO = ServerProfile("lm-studio", tool_choice_named=False, reasoning_field="reasoning")
"""LM Studio's OpenAI-compatible server."""

# Hugging Face TGI (huggingface/text-generation-inference):
# - structured_output: router/src/lib.rs, ChatRequest.response_format "NOTE: A request
#   can use `response_format` OR `tools` but not both" (and try_into_generate errors with
#   "Grammar and tools are mutually exclusive"), so the output is asked for as a tool.
# - responses_api: router/src/server.rs routes /v1/chat/completions and /v1/completions,
#   no /v1/responses.
# tool_choice: docs/source/basic_tutorials/using_guidance.md, "auto", "none", "required"
# and a named tool. Others: docs silent.
TGI = ServerProfile("tgi", structured_output="tool", responses_api=False)
"""Text Generation Inference's Messages API."""

# Gemini's OpenAI-compatible endpoint (ai.google.dev/gemini-api/docs/openai, base URL
# generativelanguage.googleapis.com/v1beta/openai/): docs silent on any field here
# differing from OpenAI's, so every one keeps OpenAI's default.
GEMINI = ServerProfile("gemini")
"""Gemini's OpenAI-compatible endpoint (``generativelanguage.googleapis.com/v1beta/openai``)."""

# Anthropic's OpenAI SDK compatibility (docs.anthropic.com/en/api/openai-sdk):
# - structured_output: the request fields table lists `response_format` as "Ignored",
#   so the output is asked for as a tool.
# strict: "The `strict` parameter for function calling is ignored" (accepted, not a
# guarantee), kept. parallel_tool_calls: "Fully supported". reasoning: "the OpenAI SDK
# won't return Claude's detailed thought process", so no field. Others: docs silent.
ANTHROPIC = ServerProfile("anthropic", structured_output="tool")
"""Anthropic's OpenAI SDK compatibility endpoint (``api.anthropic.com/v1``)."""

PROFILES: Mapping[str, ServerProfile] = {
    p.name: p
    for p in (
        OPENAI,
        LLAMA_CPP_PYTHON,
        LITELLM,
        AZURE,
        LLAMA_SERVER,
        VLLM,
        SGLANG,
        OLLAMA,
        LM_STUDIO,
        TGI,
        GEMINI,
        ANTHROPIC,
    )
}
"""The built-in profiles by name, for ``CycleConfig(profile="llama-cpp-python")``."""

_HOSTS = {
    "api.openai.com": OPENAI,
    "generativelanguage.googleapis.com": GEMINI,
    "api.anthropic.com": ANTHROPIC,
}
_HOST_SUFFIXES = {".openai.azure.com": AZURE, ".services.ai.azure.com": AZURE}

# What a server says of itself in its GET /models entries' `owned_by`, read in its
# source: vLLM vllm/entrypoints/openai/engine/protocol.py (ModelCard, owned_by "vllm");
# SGLang python/sglang/srt/entrypoints/openai/protocol.py (ModelCard, owned_by
# "sglang"); llama-server tools/server/server-context.cpp ({"owned_by", "llamacpp"}).
# Every entry must say it. Not read: TGI (owned_by is the model id) and LM Studio
# (closed source, its docs show no listing).
_OWNERS = {"vllm": VLLM, "sglang": SGLANG, "llamacpp": LLAMA_SERVER}


def resolve_profile(profile: ServerProfile | str | None) -> ServerProfile | None:
    """A profile from ``CycleConfig(profile=...)``: a :class:`ServerProfile`, a built-in
    one's name, or None (picked per client).

    Example:
        >>> resolve_profile("llama-cpp-python") is LLAMA_CPP_PYTHON
        True
        >>> resolve_profile("llama")
        Traceback (most recent call last):
        ...
        agcore_tools.error.LlmConfigError: CycleConfig.profile 'llama' is not a built-in profile: use one of 'openai', 'llama-cpp-python', 'litellm', 'azure', 'llama-server', 'vllm', 'sglang', 'ollama', 'lm-studio', 'tgi', 'gemini', 'anthropic', or pass a ServerProfile
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


@functools.lru_cache(maxsize=64)  # asked once per submit* call, with a few URLs
def profile_for_url(base_url: str) -> ServerProfile | None:
    """The profile a base URL tells, or None when it tells nothing (a local port, a
    proxy): the loop then runs with OpenAI's.

    Example:
        >>> profile_for_url("https://api.openai.com/v1").name
        'openai'
        >>> profile_for_url("https://my-resource.openai.azure.com/openai").name
        'azure'
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


_LITELLM_CREATED = 1677610602


def profile_for_models(listing: Any, headers: Mapping[str, str]) -> ServerProfile | None:
    """The profile a server's ``GET /models`` answer tells, or None.

    LiteLLM's proxy marks its answers with ``x-litellm-*`` headers (not its model list,
    as of 1.106), and gives every entry of that list the same ``created``
    (``DEFAULT_MODEL_CREATED_AT_TIME``, 1677610602, in ``litellm/constants.py``;
    OpenAI's own list has one model of that date among many); llama-cpp-python's
    server lists its model as ``owned_by: "me"`` with a ``permissions`` list; vLLM,
    SGLang and llama-server put their own name in every entry's ``owned_by``
    (``"vllm"``, ``"sglang"``, ``"llamacpp"``); Ollama's ``owned_by`` is the model's
    namespace, ``"library"`` for its own models (docs/api/openai-compatibility.mdx).

    Example:
        >>> entry = {"id": "m.gguf", "object": "model", "owned_by": "me", "permissions": []}
        >>> profile_for_models({"object": "list", "data": [entry]}, {}).name
        'llama-cpp-python'
        >>> profile_for_models({"data": []}, {"x-litellm-version": "1.106.12"}).name
        'litellm'
        >>> entry = {"id": "smollm", "created": 1677610602, "owned_by": "openai"}
        >>> profile_for_models({"data": [entry]}, {}).name
        'litellm'
        >>> profile_for_models({"data": [{"id": "Qwen/Qwen3-8B", "owned_by": "vllm"}]}, {}).name
        'vllm'
        >>> profile_for_models({"data": [{"id": "gpt-4o", "owned_by": "openai"}]}, {}) is None
        True
    """
    if any(key.lower().startswith("x-litellm") for key in headers):
        return LITELLM
    data = listing.get("data") if isinstance(listing, Mapping) else None
    entries = [e for e in data if isinstance(e, Mapping)] if isinstance(data, list) else []
    if entries and all(e.get("owned_by") == "me" and "permissions" in e for e in entries):
        return LLAMA_CPP_PYTHON
    if entries and all(e.get("created") == _LITELLM_CREATED for e in entries):
        return LITELLM
    owners = {e.get("owned_by") for e in entries}
    if len(owners) == 1:
        owner = next(iter(owners))
        if isinstance(owner, str) and owner in _OWNERS:
            return _OWNERS[owner]
    if "library" in owners:
        return OLLAMA
    return None


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
