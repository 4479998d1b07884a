"""The built-in server profiles, by name.

Its own module because it is mostly provenance: the comment above each profile names,
per field that differs from OpenAI's, where the server's documentation or source says
so, and that reads best with nothing else in between. :func:`resolve_profile` turns a
``CycleConfig(profile=...)`` name into one of them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from ..error import LlmConfigError
from ._profile import ServerProfile

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
    "resolve_profile",
]

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
