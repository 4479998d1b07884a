"""The cycle's own OpenAI client on the oldest OpenAI SDK pyproject.toml allows.

``make openai-floor`` runs this in a venv of its own with ``openai`` at that floor (an
httpx-based SDK; openai 3 is httpx2-based, as the rest of the suite runs it): the README
quickstart's ``LlmCycle(CycleConfig(...))`` with no client, a sync ``OpenAI`` client's
async twin, and ``sharded_http_client``'s refusal, each against ``ScriptedChatServer``.
Exits non-zero with a traceback on the first failure.
"""

from __future__ import annotations

import asyncio
import os
import sys

import openai

from agcore_tools import CycleConfig, LlmConfigError, LlmCycle, ToolRegistry
from agcore_tools.cycle import sharded_http_client
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
    print(f"openai {openai.__version__} on Python {sys.version.split()[0]}: ok")


if __name__ == "__main__":
    main()
