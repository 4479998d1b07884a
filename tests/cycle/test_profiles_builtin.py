"""The built-in server profiles: each resolves by name, the hosts and model lists that
name a server pick its profile, and where a profile differs from OpenAI's the request
is fitted to it. The listings below have the shape each server's source builds (cited
in ``agcore_tools/cycle/_profile_detect.py``); the loop's requests go to the scripted
loopback server, and no live server is called.
"""

from __future__ import annotations

import dataclasses

import pytest
from pydantic import BaseModel

from agcore_tools import CycleConfig, LlmConfigError, LlmCycle, ToolRegistry
from agcore_tools.cycle.profiles import (
    ANTHROPIC,
    AZURE,
    GEMINI,
    LITELLM,
    LLAMA_CPP_PYTHON,
    LLAMA_SERVER,
    LM_STUDIO,
    OLLAMA,
    OPENAI,
    PROFILES,
    SGLANG,
    TGI,
    VLLM,
    ServerProfile,
    fit_request,
    profile_for_models,
    profile_for_url,
)

from .conftest import S

ADD = {"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}
MUL = {"type": "function", "function": {"name": "mul", "parameters": {"type": "object"}}}


@pytest.mark.parametrize("name", list(PROFILES))
def test_every_built_in_profile_resolves_by_its_name(name: str) -> None:
    assert CycleConfig("m", profile=name).profile is PROFILES[name]


def test_the_built_in_profiles_have_distinct_names() -> None:
    names = [p.name for p in PROFILES.values()]
    assert len(names) == len(set(names)) == len(PROFILES)
    assert all(isinstance(p, ServerProfile) and key == p.name for key, p in PROFILES.items())


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://generativelanguage.googleapis.com/v1beta/openai/", GEMINI),
        ("https://api.anthropic.com/v1/", ANTHROPIC),
        ("https://my-resource.openai.azure.com/openai/v1", AZURE),
        ("https://my-project.services.ai.azure.com/openai/v1", AZURE),
        ("https://API.OPENAI.COM/v1", OPENAI),
        ("http://localhost:11434/v1", None),
    ],
)
def test_the_base_url_names_the_service(url: str, expected: ServerProfile | None) -> None:
    assert profile_for_url(url) is expected


# vLLM's ModelCard: owned_by "vllm", with root, parent, max_model_len and permission.
VLLM_LISTING = {
    "object": "list",
    "data": [
        {
            "id": "Qwen/Qwen3-8B",
            "object": "model",
            "created": 1767225600,
            "owned_by": "vllm",
            "root": "Qwen/Qwen3-8B",
            "parent": None,
            "max_model_len": 32768,
            "permission": [{"id": "modelperm-1", "object": "model_permission"}],
        }
    ],
}
# SGLang's ModelCard: owned_by "sglang".
SGLANG_LISTING = {
    "object": "list",
    "data": [
        {
            "id": "meta-llama/Llama-3.1-8B-Instruct",
            "object": "model",
            "created": 1767225600,
            "owned_by": "sglang",
            "root": "meta-llama/Llama-3.1-8B-Instruct",
            "max_model_len": 131072,
        }
    ],
}
# llama-server: owned_by "llamacpp" and a "meta" object.
LLAMA_SERVER_LISTING = {
    "object": "list",
    "data": [
        {
            "id": "qwen2.5-7b-instruct-q4_k_m.gguf",
            "object": "model",
            "created": 1767225600,
            "owned_by": "llamacpp",
            "meta": {"vocab_type": 2, "n_vocab": 152064, "n_ctx_train": 32768},
        }
    ],
}
# Ollama: owned_by is the namespace, "library" for its own models.
OLLAMA_LISTING = {
    "object": "list",
    "data": [
        {"id": "llama3.2:latest", "object": "model", "created": 1767225600, "owned_by": "library"},
        {
            "id": "someone/custom:7b",
            "object": "model",
            "created": 1767225600,
            "owned_by": "someone",
        },
    ],
}


@pytest.mark.parametrize(
    ("listing", "expected"),
    [
        (VLLM_LISTING, VLLM),
        (SGLANG_LISTING, SGLANG),
        (LLAMA_SERVER_LISTING, LLAMA_SERVER),
        (OLLAMA_LISTING, OLLAMA),
        (
            {"object": "list", "data": [{"id": "m.gguf", "owned_by": "me", "permissions": []}]},
            LLAMA_CPP_PYTHON,
        ),
        ({"object": "list", "data": [{"id": "gpt-4o", "owned_by": "system"}]}, None),
        # One server's name among others' is not that server's answer.
        ({"data": [{"id": "a", "owned_by": "vllm"}, {"id": "b", "owned_by": "openai"}]}, None),
        ({"data": []}, None),
        ("not json", None),
        # An owned_by that is no string tells nothing (a list of them was a TypeError).
        ({"data": [{"id": "a", "owned_by": ["vllm"]}]}, None),
        (
            {"data": [{"id": "a", "owned_by": {"name": "vllm"}}, {"id": "b", "owned_by": "vllm"}]},
            None,
        ),
    ],
)
def test_the_model_list_names_the_server(listing: object, expected: ServerProfile | None) -> None:
    assert profile_for_models(listing, {}) is expected


def test_litellm_headers_win_over_the_listing_behind_the_proxy() -> None:
    assert profile_for_models(VLLM_LISTING, {"x-litellm-version": "1.80.0"}) is LITELLM


def test_litellm_is_told_by_the_created_it_gives_every_entry() -> None:
    # LiteLLM 1.106's /models, as tests/real's proxy answers it: no x-litellm header.
    entries = [
        {"id": name, "object": "model", "created": 1677610602, "owned_by": "openai"}
        for name in ("smollm", "*")
    ]
    assert profile_for_models({"object": "list", "data": entries}, {}) is LITELLM
    # OpenAI's own list has one model of that date among others of other dates.
    entries.append({"id": "gpt-4o", "object": "model", "created": 1715367049, "owned_by": "system"})
    assert profile_for_models({"object": "list", "data": entries}, {}) is None


def test_ollama_takes_no_tool_choice_so_required_names_the_one_tool_and_a_named_one_is_auto() -> (
    None
):
    params: dict[str, object] = {"tools": [ADD], "tool_choice": "required"}
    assert fit_request(params, OLLAMA, stream=True) == (True, ['tool_choice "required" -> named'])
    assert params["tool_choice"] == {"type": "function", "function": {"name": "add"}}

    params = {"tools": [ADD, MUL], "tool_choice": "required"}
    assert fit_request(params, OLLAMA, stream=True) == (True, ['tool_choice "required" -> "auto"'])
    assert params["tool_choice"] == "auto"

    params = {"tools": [ADD, MUL], "tool_choice": {"type": "function", "function": {"name": "mul"}}}
    assert fit_request(params, OLLAMA, stream=True) == (True, ['named tool_choice -> "auto"'])
    assert params["tool_choice"] == "auto"


def test_llama_server_keeps_required_and_sends_auto_for_a_named_tool() -> None:
    params: dict[str, object] = {"tools": [ADD, MUL], "tool_choice": "required"}
    assert fit_request(params, LLAMA_SERVER, stream=True) == (True, [])
    assert params["tool_choice"] == "required"

    named = {"type": "function", "function": {"name": "add"}}
    params = {"tools": [ADD, MUL], "tool_choice": named}
    assert fit_request(params, OPENAI, stream=True) == (True, [])
    assert fit_request(params, LLAMA_SERVER, stream=True) == (True, ['named tool_choice -> "auto"'])
    assert params["tool_choice"] == "auto"


def test_where_the_new_profiles_differ_from_openai() -> None:
    assert (TGI.structured_output, TGI.responses_api) == ("tool", False)
    assert ANTHROPIC.structured_output == "tool"
    # llama-server's /v1/responses: tests/real/test_llama_server_real.py runs it.
    assert (LLAMA_SERVER.responses_api, LLAMA_SERVER.reasoning_field) == (
        True,
        "reasoning_content",
    )
    assert (VLLM.reasoning_field, SGLANG.reasoning_field) == ("reasoning", "reasoning_content")
    assert (OLLAMA.reasoning_field, LM_STUDIO.reasoning_field) == ("reasoning", "reasoning")
    # Azure and Gemini: no documented difference, so OpenAI's values under their own name,
    # but for the tool limit: OpenAI's API reference documents it, for Azure's API too.
    for same, limit in ((AZURE, 128), (GEMINI, None)):
        fields = {f: getattr(same, f) for f in ServerProfile.__dataclass_fields__}
        assert fields.pop("max_tools") == limit
        assert dataclasses.replace(OPENAI, **fields, max_tools=None) == dataclasses.replace(
            OPENAI, name=same.name, max_tools=None
        )
    # Only a documented limit refuses requests.
    assert [p.name for p in PROFILES.values() if p.max_tools is not None] == ["openai", "azure"]


def test_the_content_parts_a_profile_names_are_checked_and_kept_hashable() -> None:
    assert LLAMA_CPP_PYTHON.content_parts == LITELLM.content_parts == ("image",)
    assert OPENAI.content_parts == ("image", "audio", "file")
    # As a Temporal payload gives it back: a list, kept as a tuple so the profile hashes.
    profile = ServerProfile("mine", content_parts=["image", "file"])  # type: ignore[arg-type]
    assert profile.content_parts == ("image", "file") and hash(profile)
    with pytest.raises(LlmConfigError, match=r"content_parts names 'video': use some of"):
        ServerProfile("mine", content_parts=("image", "video"))


def test_lm_studio_keeps_required_and_sends_auto_for_a_named_tool() -> None:
    params: dict[str, object] = {"tools": [ADD, MUL], "tool_choice": "required"}
    assert fit_request(params, LM_STUDIO, stream=True) == (True, [])
    assert params["tool_choice"] == "required"

    params = {"tools": [ADD, MUL], "tool_choice": {"type": "function", "function": {"name": "mul"}}}
    assert fit_request(params, LM_STUDIO, stream=True) == (True, ['named tool_choice -> "auto"'])
    assert params["tool_choice"] == "auto"


class City(BaseModel):
    name: str
    population: int


@pytest.mark.parametrize("profile", ["tgi", "anthropic"])
async def test_a_bare_output_type_asks_for_the_output_tool_where_response_format_is_not_taken(
    serve, make_cycle, profile
):
    # TGI takes response_format or tools, never both; Anthropic's endpoint ignores it.
    server = serve(S.reply_tool_calls([("final_result", {"name": "Rome", "population": 2})]))
    cycle = make_cycle(server, profile=profile)

    response = await cycle.submit("City?", output_type=City)

    assert response.output == City(name="Rome", population=2)
    request = server.requests[0].json
    assert "response_format" not in request
    assert [tool["function"]["name"] for tool in request["tools"]] == ["final_result"]


@pytest.mark.parametrize("profile", ["tgi"])
async def test_the_responses_api_is_refused_before_any_request_where_the_server_has_none(
    serve, make_cycle, profile
):
    server = serve(S.reply_text("never sent"))
    cycle = make_cycle(server, api="responses", profile=profile)

    with pytest.raises(LlmConfigError, match=rf"the {profile} server has no Responses API"):
        await cycle.submit("Hi")
    assert server.requests == []


async def test_more_tools_than_the_server_takes_are_refused_before_sending(serve) -> None:
    server = serve(S.reply_text("never sent"))
    registry = ToolRegistry()
    for n in range(129):

        def echo(x: int) -> int:
            """Return x."""
            return x

        registry.tool(name=f"tool_{n}")(echo)
    async with server.client() as client:
        cycle = LlmCycle(CycleConfig("m", profile="openai"), client=client)
        with pytest.raises(
            LlmConfigError, match="offers 129 tools, and the openai server"
        ) as caught:
            await cycle.submit_with_tools("hi", registry)
        assert isinstance(caught.value, ValueError)
        assert server.requests == []  # nothing was sent
        # A profile without a known limit sends them all.
        cycle = LlmCycle(CycleConfig("m", profile="llama-cpp-python"), client=client)
        assert (await cycle.submit_with_tools("hi", registry)).text == "never sent"
        assert len(server.requests[0].json["tools"]) == 129
