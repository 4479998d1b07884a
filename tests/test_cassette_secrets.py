"""What a recorded cassette must not hold: keys sent somewhere other than a header (an
Azure Functions ``?code=``, a body field, the base URL's path) and the secrets an MCP
server was started with, which it may quote in a result or an error."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from agcore_tools.testing import Cassette, ScriptedChatServer, no_network

S = ScriptedChatServer


def test_a_code_key_and_body_fields_named_like_secrets_are_scrubbed(tmp_path: Path) -> None:
    # Azure Functions take their key as ?code=, gateways take one in the body
    # (extra_body={"api_key": ...}): both were written to the file as they were sent.
    path = tmp_path / "gateway.json"
    body = {
        "api_key": "BODYKEY-5555555555",
        "provider": {"routing": {"client_secret": "NESTED-6666666666", "region": "eu-west"}},
        "prompt_cache_key": "cache-7777777777",
    }
    with S([S.reply_text("Hi")]) as server, Cassette(path, "rewrite") as cassette:

        async def run() -> None:
            async with cassette.client(
                base_url=server.base_url, api_key="x", default_query={"code": "FUNCCODE-4444444"}
            ) as client:
                await client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=5,
                    extra_body=body,
                )  # fmt: skip

        asyncio.run(run())
        assert server.requests[0].json["api_key"] == "BODYKEY-5555555555"
    text = path.read_text()
    assert not [s for s in ("FUNCCODE", "BODYKEY", "NESTED") if s in text]
    [interaction] = json.loads(text)["interactions"]
    assert interaction["request"]["url"].endswith("/chat/completions?code=%5Bscrubbed%5D")
    sent = interaction["request"]["json"]
    assert sent["api_key"] == "[scrubbed]" and sent["max_tokens"] == 5
    assert sent["provider"] == {"routing": {"client_secret": "[scrubbed]", "region": "eu-west"}}
    assert sent["prompt_cache_key"] == "cache-7777777777"  # an OpenAI option, no secret

    async def replay() -> str | None:  # the scrubbed fields match whatever is sent
        with no_network(), Cassette(path, "none") as cassette:
            async with cassette.client() as client:
                reply = await client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=5,
                    extra_body={**body, "api_key": "other-key-000"},
                )  # fmt: skip
        return reply.choices[0].message.content

    assert asyncio.run(replay()) == "Hi"
