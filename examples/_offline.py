"""What every example shares: a real model when ``OPENAI_API_KEY`` is set, else a
bundled scripted one, and a first line of output that says which.

- With ``OPENAI_API_KEY`` set, the examples talk to that provider: ``OPENAI_BASE_URL``
  picks an OpenAI-compatible server (DeepSeek, Qwen, Ollama, vLLM, ...) and
  ``AGCORE_MODEL`` the model (default ``gpt-4o-mini``).
- Without it, :class:`agcore_tools.testing.ScriptedChatServer` plays the model on a
  loopback port, answering from the example's script.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Iterable

from openai import AsyncOpenAI

from agcore_tools.testing import ScriptedChatServer, ScriptItem


@contextlib.asynccontextmanager
async def model_client(
    title: str, offline_script: Iterable[ScriptItem]
) -> AsyncIterator[tuple[AsyncOpenAI, str]]:
    """An OpenAI client and a model name, from the environment or the scripted server.

    Prints ``"<title>: talking to ..."`` or ``"<title>: OFFLINE - ..."`` first.
    """
    if os.environ.get("OPENAI_API_KEY"):
        model = os.environ.get("AGCORE_MODEL", "gpt-4o-mini")
        where = os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1")
        print(f"{title}: talking to {where} with model {model}.")
        async with AsyncOpenAI() as client:
            yield client, model
        return
    print(
        f"{title}: OFFLINE - no OPENAI_API_KEY is set, so a bundled scripted server plays "
        "the model (set OPENAI_API_KEY, and optionally OPENAI_BASE_URL and AGCORE_MODEL, "
        "to use a real one)."
    )
    server = ScriptedChatServer(offline_script, chunk_chars=6)
    async with server, server.client() as client:
        yield client, server.model
