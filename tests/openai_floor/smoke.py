"""The cycle's own OpenAI client on the oldest OpenAI SDK pyproject.toml allows.

``make openai-floor`` runs this in a venv of its own with ``openai`` at that floor (an
httpx-based SDK; openai 3 is httpx2-based, as the rest of the suite runs it): the README
quickstart's ``LlmCycle(CycleConfig(...))`` with no client, a sync ``OpenAI`` client's
async twin, ``sharded_http_client``'s and ``Cassette``'s refusals, and a stream
whose connection drops midway (an ``LlmError``, not httpx's own error), each against ``ScriptedChatServer``.
Exits non-zero with a traceback on the first failure.
"""

from __future__ import annotations

import asyncio
import os
import sys

import openai

from agcore_tools import CycleConfig, LlmConfigError, LlmCycle, LlmError, ToolRegistry
from agcore_tools.cycle import sharded_http_client
from agcore_tools.testing import Cassette, CassetteError, Pause, RawStream
from agcore_tools.testing import ScriptedChatServer as S

registry = ToolRegistry()


@registry.tool
def get_weather(city: str) -> dict[str, object]:
    """The current weather in a city.

    Args:
        city: A city name.
    """
    return {"city": city, "celsius": 18}


def script() -> list[object]:
    return [S.reply_tool_calls([("get_weather", {"city": "Paris"})]), S.reply_text("18 C.")]


async def owned_from_env() -> str:
    async with LlmCycle(CycleConfig("m", max_turns=3)) as cycle:
        return (await cycle.submit_with_tools("Weather in Paris?", registry)).text


async def async_twin() -> str:
    async with LlmCycle(CycleConfig("m", max_turns=3), client=openai.OpenAI()) as cycle:
        return (await cycle.submit_with_tools("Weather in Paris?", registry)).text


def dropped_mid_stream(server: S) -> RawStream:
    """Two chunks, then the connection closes without ending the body."""
    first, second = server.chunk({"content": "Hel"}), server.chunk({"content": "lo"})
    return RawStream([first, Pause(0.1), second, Pause(0.1)], done=False, drop_connection=True)


async def stream_failure() -> str:
    """The LlmError's message for a stream whose connection drops (an httpx SDK lets
    httpx's own error through, where openai 3 wraps it)."""
    async with LlmCycle(CycleConfig("m", max_retries=0)) as cycle:
        try:
            await cycle.submit_stream("Hi").collect()
        except LlmError as exc:
            assert exc.__cause__ is not None
            return str(exc)
    raise AssertionError("a dropped stream raised nothing")


def main() -> None:
    major = int(openai.__version__.split(".")[0])
    for case in (owned_from_env, async_twin):
        with S(script()) as server:
            os.environ["OPENAI_BASE_URL"] = server.base_url
            os.environ["OPENAI_API_KEY"] = "sk-floor"
            answer = asyncio.run(asyncio.wait_for(case(), 30))
            assert answer == "18 C.", (case.__name__, answer)
            assert len(server.requests) == 2, (case.__name__, len(server.requests))
    if major < 3:
        try:
            sharded_http_client()
        except LlmConfigError as exc:
            assert "needs openai>=3" in str(exc), exc
        else:
            raise AssertionError("sharded_http_client() accepted an httpx-based SDK")
        # Both the recording and the replaying cassette refuse at once, before a request
        # fails deep in the SDK with a bare AssertionError.
        for cassette in (Cassette(os.devnull, "rewrite"), Cassette.from_interactions([])):
            for make in (cassette.http_client, cassette.client):
                try:
                    make()
                except CassetteError as exc:
                    assert isinstance(exc, ValueError), exc
                    said = f"needs openai>=3 (an httpx2-based client); openai {openai.__version__}"
                    assert said in str(exc), exc
                else:
                    raise AssertionError(f"{make.__qualname__}() accepted an httpx-based SDK")
    with S([]) as server:
        os.environ["OPENAI_BASE_URL"] = server.base_url
        server.add(dropped_mid_stream(server))
        message = asyncio.run(asyncio.wait_for(stream_failure(), 30))
        assert message.startswith("the model's stream failed after 2 chunk(s): "), message
        assert "incomplete chunked read" in message, message
    print(f"openai {openai.__version__} on Python {sys.version.split()[0]}: ok")


if __name__ == "__main__":
    main()
