"""cycle/_wire.py: a streamed request, read through the SDK with its chunks as plain dicts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from openai import APIError

from agcore_tools.cycle._wire import close_stream, open_stream
from agcore_tools.testing import RawStream, ScriptedChatServer

S = ScriptedChatServer


async def test_the_stream_yields_the_chunks_as_dicts_not_sdk_models(
    serve: Callable[..., ScriptedChatServer],
) -> None:
    server = serve(S.reply_tool_calls([("add", {"a": 1})], text="Adding."), chunk_chars=4)
    async with server.client(timeout=10.0) as client:
        params = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
        response, first = await open_stream(client.chat.completions, params)
        chunks: list[Any] = [first]
        try:
            async for chunk in response:
                chunks.append(chunk)
        finally:
            await close_stream(response)
    # No ChatCompletionChunk is built: the loop reads each chunk's few fields once.
    assert {type(chunk) for chunk in chunks} == {dict}
    deltas = [c["choices"][0]["delta"] for c in chunks if c.get("choices")]
    assert "".join(d.get("content") or "" for d in deltas) == "Adding."
    arguments = "".join(
        call["function"].get("arguments") or ""
        for d in deltas
        for call in d.get("tool_calls") or ()
    )
    assert arguments == '{"a": 1}'
    assert server.requests[0].headers["x-stainless-raw-response"] == "true"


async def test_an_error_event_in_the_stream_is_still_the_sdks_api_error(
    serve: Callable[..., ScriptedChatServer],
) -> None:
    server = serve()
    server.add(
        RawStream(
            [server.chunk({"content": "Hel"}), {"error": {"message": "overloaded"}}], done=False
        )
    )
    async with server.client(timeout=10.0) as client:
        params = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
        response, first = await open_stream(client.chat.completions, params)
        try:
            with pytest.raises(APIError, match="overloaded"):
                async for _ in response:
                    pass
        finally:
            await close_stream(response)
    assert first["choices"][0]["delta"]["content"] == "Hel"
