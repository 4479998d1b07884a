"""What a recorded cassette must not hold: keys sent somewhere other than a header (an
Azure Functions ``?code=``, a body field, the base URL's path) and the secrets an MCP
server was started with, which it may quote in a result or an error."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import httpx2
from openai import AsyncOpenAI

from agcore_tools import McpClient, StreamableHttpTransport, ToolExecutionError
from agcore_tools.testing import Cassette, ScriptedChatServer, no_network

from .mcp.conftest import HttpServer, fixture_stdio

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


def test_a_key_in_the_base_urls_path_is_scrubbed_and_the_run_still_replays(
    tmp_path: Path,
) -> None:
    # Gateways that take the key in the path (https://gw/v1/<key>/...): the API key used
    # there too is scrubbed on its own; another token needs secrets=[...]. The drop-in
    # replay, which sends the real path, did not find the scrubbed one.
    key, token = "sk-PATHKEY-0123456789", "PATHTOKEN-6666666666"
    path = tmp_path / "path.json"

    def base(server_url: str) -> str:
        return f"{server_url}/{key}/{token}"

    async def run(cassette: Cassette, base_url: str) -> str | None:
        client = AsyncOpenAI(
            base_url=base_url, api_key=key, http_client=cassette.http_client(), max_retries=0
        )
        async with client:
            reply = await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}]
            )
        return reply.choices[0].message.content

    with S([S.reply_text("Hi")]) as server, Cassette(path, "rewrite", secrets=[token]) as cassette:
        assert asyncio.run(run(cassette, base(server.base_url))) == "Hi"
        assert server.requests[0].path == f"/v1/{key}/{token}/chat/completions"
    text = path.read_text()
    assert key not in text and token not in text
    [interaction] = json.loads(text)["interactions"]
    assert interaction["request"]["url"].endswith("/v1/[scrubbed]/[scrubbed]/chat/completions")

    async def replay() -> str | None:
        with no_network(), Cassette(path, "none") as cassette:
            return await run(cassette, base("http://gw.example/v1"))

    assert asyncio.run(replay()) == "Hi"


def test_what_an_mcp_servers_transport_hides_is_scrubbed_from_the_file(tmp_path: Path) -> None:
    # A server quoting the token it was given (in an error, a result) wrote it to the
    # cassette: its env values, command-line secrets and header values were not scrubbed.
    env_token, arg_token, header_token = "ENVTOKEN-1111111111", "ARGTOKEN-22222222", "HDR-333333333"
    path = tmp_path / "mcp.json"
    stdio = McpClient(
        "fx", fixture_stdio(f"--print-stderr=--api-key={arg_token}", env={"API_TOKEN": env_token})
    )

    async def run(cassette: Cassette, http_url: str) -> list[str]:
        seen = []
        async with cassette.mcp(stdio) as fx:
            seen.append(json.dumps(await fx.call_tool("environment")))
            seen.append(await fx.call_tool("echo", {"text": f"given {arg_token}"}))
        headers = {"Authorization": f"Bearer {header_token}"}
        http = McpClient("web", StreamableHttpTransport(http_url, headers))
        async with cassette.mcp(http) as web:
            seen.append(await web.call_tool("whoami"))
            try:
                await web.call_tool("fail", {"message": f"upstream 401: {header_token}"})
            except ToolExecutionError as exc:
                seen.append(str(exc))  # the client masks it: the recording has it
        return seen

    server = HttpServer()
    try:
        with Cassette(path, "rewrite") as cassette:
            seen = asyncio.run(run(cassette, server.url))
    finally:
        server.stop()
    assert env_token in seen[0] and arg_token in seen[1] and header_token in seen[2]
    assert seen[3].endswith("upstream 401: ***")
    text = path.read_text()
    assert not [s for s in (env_token, arg_token, header_token) if s in text]

    with no_network(), Cassette(path, "none") as cassette:
        replayed = asyncio.run(run(cassette, "http://127.0.0.1:9/mcp"))
    assert "[scrubbed]" in replayed[0] and replayed[1] == "given [scrubbed]"
    assert replayed[2] == "signed in with [scrubbed]"
    assert replayed[3] == seen[3]  # a failed call replays as the error it raised


def test_a_webhook_url_and_a_private_value_in_an_mcp_servers_env_are_scrubbed(
    tmp_path: Path,
) -> None:
    # StdioTransport.describe() hides SLACK_WEBHOOK_URL (a webhook's URL is its own
    # credential) and a name holding PRIVATE, but the cassette wrote both to the file
    # when the server quoted its environment.
    webhook = "https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXX"
    private = "priv-4444444444"
    env = {"SLACK_WEBHOOK_URL": webhook, "SERVICE_PRIVATE_ID": private, "NODE_ENV": "production"}
    path = tmp_path / "webhook.json"

    async def run(cassette: Cassette) -> object:
        async with cassette.mcp(McpClient("fx", fixture_stdio(env=env))) as fx:
            return await fx.call_tool("environment")

    with Cassette(path, "rewrite") as cassette:
        seen = asyncio.run(run(cassette))
    assert isinstance(seen, dict) and seen["SLACK_WEBHOOK_URL"] == webhook
    text = path.read_text()
    assert webhook not in text and private not in text
    assert "production" in text  # an ordinary value stays
    with no_network(), Cassette(path, "none") as cassette:
        replayed = asyncio.run(run(cassette))
    assert isinstance(replayed, dict)
    assert replayed["SLACK_WEBHOOK_URL"] == replayed["SERVICE_PRIVATE_ID"] == "[scrubbed]"


def test_hook_and_private_folders_in_an_mcp_servers_env_stay_and_their_secrets_go(
    tmp_path: Path,
) -> None:
    # Every name holding HOOK or PRIVATE was a secret: GIT_HOOKS_PATH's folder was
    # scrubbed from the whole file, so a tool's result naming a hook script replayed as
    # "[scrubbed]/pre-commit". Folders stay; what is a secret is still scrubbed.
    places = {
        "GIT_HOOKS_PATH": "/work/repo/.githooks",
        "HOOKS_DIR": "/srv/app/hook-scripts",
        "PRIVATE_DIR": "/home/app/private-files",
    }
    secrets = {"SLACK_HOOK_URL": "https://hooks.example/T1/B1/hook-secret-1111",
               "DISCORD_WEBHOOK": "https://discord.example/api/webhooks/2222/hook-secret-2222",
               "WEBHOOK_PATH": "/hooks/catch/3333333/hook-secret-3333",
               "GITLAB_PRIVATE_TOKEN": "glpat-private-4444", "SERVICE_PRIVATE_ID": "priv-55555555",
               "PRE_COMMIT_HOOK": "hook-value-66666666",
               # A webhook's URL path is its credential, though the name ends in PATH.
               "SLACK_HOOK_PATH": "/services/T0/B0/hook-secret-7777",
               "PRIVATE_LINK_PATH": "/s/private-share-8888"}  # fmt: skip
    path = tmp_path / "places.json"

    async def run(cassette: Cassette) -> object:
        async with cassette.mcp(McpClient("fx", fixture_stdio(env={**places, **secrets}))) as fx:
            return await fx.call_tool("environment")

    with Cassette(path, "rewrite") as cassette:
        seen = asyncio.run(run(cassette))
    assert isinstance(seen, dict)
    text = path.read_text()
    for name, value in secrets.items():
        assert seen[name] == value and value not in text, name
    with no_network(), Cassette(path, "none") as cassette:
        replayed = asyncio.run(run(cassette))
    assert isinstance(replayed, dict)
    assert {name: replayed[name] for name in places} == places
    assert {replayed[name] for name in secrets} == {"[scrubbed]"}


def test_an_mcp_servers_ordinary_env_and_header_values_stay_in_the_file_as_recorded(
    tmp_path: Path,
) -> None:
    # Every env and header value of a wrapped client was scrubbed from the whole file,
    # dict keys included: NODE_ENV=production turned the model's "deploy to production
    # now" into "deploy to [scrubbed] now" on replay. Only secret-named ones are now.
    env_token, header_token = "ENVTOKEN-1111111111", "HDR-333333333"
    path = tmp_path / "ordinary.json"
    stdio = McpClient("fx", fixture_stdio(env={"NODE_ENV": "production", "API_TOKEN": env_token}))
    headers = {
        "Accept": "application/json, text/event-stream",
        "X-Deployment": "production-eu-west",
        "Authorization": f"Bearer {header_token}",
    }

    async def run(cassette: Cassette, base_url: str, http_url: str) -> list[object]:
        seen: list[object] = []
        options = {"base_url": base_url, "api_key": "x"} if cassette.recording else {}
        async with cassette.client(**options) as client:
            reply = await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}]
            )
            seen.append(reply.choices[0].message.content)
            stream = await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "again"}], stream=True
            )
            seen.append(
                "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
            )
        async with cassette.mcp(stdio) as fx:
            environment = await fx.call_tool("environment")
            assert isinstance(environment, dict)
            seen.append([environment["NODE_ENV"], environment["API_TOKEN"]])
            seen.append(await fx.call_tool("weather", {"city": "Lima"}))
        http = McpClient("web", StreamableHttpTransport(http_url, headers))
        async with cassette.mcp(http) as web:
            seen.append(await web.call_tool("echo", {"text": "region production-eu-west"}))
            seen.append(await web.call_tool("echo", {"text": f"given {header_token}"}))
        return seen

    server = HttpServer()
    script = [S.reply_text("deploy to production now"), S.reply_text("streamed production")]
    try:
        with S(script) as model, Cassette(path, "rewrite", secrets=["temperature"]) as cassette:
            recorded = asyncio.run(run(cassette, model.base_url, server.url))
    finally:
        server.stop()
    assert recorded == [
        "deploy to production now",
        "streamed production",
        ["production", env_token],
        {"city": "Lima", "temperature": 21.5},
        "region production-eu-west",
        f"given {header_token}",
    ]
    text = path.read_text()
    assert env_token not in text and header_token not in text
    assert "application/json" in text and "text/event-stream" in text  # the content types

    with no_network(), Cassette(path, "none") as cassette:
        replayed = asyncio.run(run(cassette, "unused", "http://127.0.0.1:9/mcp"))
    assert replayed == [
        *recorded[:2],
        ["production", "[scrubbed]"],
        {"city": "Lima", "temperature": 21.5},  # a key named as a secret stays a key
        "region production-eu-west",
        "given [scrubbed]",
    ]


class FixedToken(httpx2.Auth):
    """An ``auth=`` that puts its token on every request (as an OAuth provider does
    once signed in): no setting of the transport holds it."""

    def __init__(self, token: str) -> None:
        self.token = token

    def auth_flow(self, request: httpx2.Request) -> Iterator[httpx2.Request]:
        request.headers["Authorization"] = f"Bearer {self.token}"
        yield request


def test_the_token_of_an_mcp_auth_flow_is_scrubbed_from_the_file(tmp_path: Path) -> None:
    # Only the transport's own secrets (its headers=) were scrubbed: a server quoting
    # the token an auth= flow put on its requests wrote it to the cassette.
    token = "AUTHFLOW-4444444444"
    path = tmp_path / "auth.json"

    async def run(cassette: Cassette, url: str) -> list[object]:
        client = McpClient("web", StreamableHttpTransport(url, auth=FixedToken(token)))
        async with cassette.mcp(client) as web:
            return [await web.call_tool("whoami"), await web.call_tool("echo", {"text": "hi"})]

    server = HttpServer()
    try:
        with Cassette(path, "rewrite") as cassette:
            recorded = asyncio.run(run(cassette, server.url))
    finally:
        server.stop()
    assert recorded == [f"signed in with Bearer {token}", "hi"]
    assert token not in path.read_text()

    with no_network(), Cassette(path, "none") as cassette:
        replayed = asyncio.run(run(cassette, "http://127.0.0.1:9/mcp"))
    assert replayed == ["signed in with [scrubbed]", "hi"]  # the whole header value
