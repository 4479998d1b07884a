"""Cassettes in the runs a new user makes: clients of several providers, assertions on
what a replay sent, saving over a good cassette, hand-edited files."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agcore_tools import CycleConfig, LlmCycle, McpClient, ToolRegistry
from agcore_tools.testing import (
    Cassette,
    CassetteError,
    CassetteMismatchError,
    RawStream,
    ScriptedChatServer,
    no_network,
)

from ._replay_runs import ROOT
from .mcp.conftest import fixture_stdio

S = ScriptedChatServer


async def _ask(client: Any, model: str, question: str) -> str:
    reply = await client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": question}]
    )
    return str(reply.choices[0].message.content)


async def test_clients_of_two_providers_replay_against_their_own_base_urls(
    tmp_path: Path,
) -> None:
    # The cassette kept the last client's base URL and replayed every client against it:
    # the router's request went to /api/v1 and failed at "model: recorded 'big', got 'small'".
    path = tmp_path / "two.json"

    async def run(cassette: Cassette, **providers: dict[str, str]) -> tuple[str, str]:
        async with (
            cassette.client(**providers.get("small", {})) as router,
            cassette.client(**providers.get("big", {})) as main,
        ):
            return await _ask(router, "small", "route?"), await _ask(main, "big", "answer?")

    with (
        S([S.reply_text("to-big")]) as first,
        S([S.reply_text("42")]) as second,
        Cassette(path, "rewrite") as cassette,
    ):
        other = second.base_url.replace("/v1", "/api/v1")  # as https://openrouter.ai/api/v1
        recorded = await run(
            cassette,
            small={"base_url": first.base_url, "api_key": "k1"},
            big={"base_url": other, "api_key": "k2"},
        )
    assert recorded == ("to-big", "42")
    data = json.loads(path.read_text())
    assert [url.rsplit(":", 1)[1].partition("/")[2] for url in data["base_urls"]] == [
        "v1",
        "api/v1",
    ]
    with no_network(), Cassette(path, "none") as cassette:
        assert await run(cassette) == recorded
        cassette.rewind()
        assert await run(cassette) == recorded


async def test_a_request_replayed_against_another_base_url_is_told_so() -> None:
    def chat(url: str, model: str) -> dict[str, Any]:
        return {
            "kind": "http",
            "request": {"method": "POST", "url": f"{url}/chat/completions",
                        "json": {"messages": [{"role": "user", "content": "hi"}], "model": model}},
            "response": {"status": 200, "json": {}},
        }  # fmt: skip

    cassette = Cassette.from_interactions(
        [chat("http://a.example/v1", "small"), chat("http://b.example/api/v1", "big")]
    )
    async with cassette.client() as client:  # against the first request's base URL
        with pytest.raises(CassetteMismatchError) as caught:
            await _ask(client, "big", "hi")
    assert str(caught.value) == (
        "request 1 was recorded as 'POST /api/v1/chat/completions' and replayed as "
        "'POST /v1/chat/completions': the client's base URL differs from the recording's"
    )


def _customer_registry(ssn: str) -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool
    def customer(id: int) -> dict[str, str]:
        """Look a customer up."""
        return {"name": "Ann", "ssn": ssn}

    return registry


async def test_cassette_sent_holds_what_a_replay_sent_the_model(tmp_path: Path) -> None:
    # Only the recording's bodies were kept: a replay's tool results, which may differ,
    # could not be asserted on, and cassette.requests showed the recording's instead.
    path = tmp_path / "customer.json"

    async def run(cassette: Cassette, registry: ToolRegistry, **options: Any) -> None:
        async with cassette.client(**options) as client:
            cycle = LlmCycle(CycleConfig("m"), client=client)
            await cycle.submit_with_tools("Who is customer 7?", registry)

    script = [S.reply_tool_calls([("customer", {"id": 7})]), S.reply_text("Ann.")]
    with S(script) as server, Cassette(path, "rewrite") as cassette:
        await run(
            cassette, _customer_registry("123-45-6789"), base_url=server.base_url, api_key="k"
        )
        assert cassette.sent == cassette.requests and len(cassette.sent) == 3
    with no_network(), Cassette(path, "none") as cassette:
        assert cassette.sent == []
        await run(cassette, _customer_registry("[redacted]"))  # the tool redacts now
        assert len(cassette.sent) == 3
        sent = cassette.sent[2]["messages"][-1]["content"]
        assert sent == '{"name":"Ann","ssn":"[redacted]"}'
        assert "123-45-6789" not in json.dumps(cassette.sent)
        assert "123-45-6789" in cassette.requests[2]["messages"][-1]["content"]  # recorded
    cassette.rewind()
    assert cassette.sent == []


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


async def test_a_stream_splitting_an_emoji_saves_over_a_good_cassette_and_replays(
    tmp_path: Path,
) -> None:
    # Each half of the emoji's surrogate pair came escaped in its own chunk: the save
    # failed to encode the lone halves, after emptying the good cassette already there.
    path = tmp_path / "emoji.json"

    async def run(cassette: Cassette, **options: Any) -> Any:
        async with cassette.client(**options) as client:
            cycle = LlmCycle(CycleConfig("m"), client=client)
            async with cycle.submit_stream_with_tools("hi", []) as events:
                async for _ in events:
                    pass
        return cycle.messages[-1]["content"]

    with S([S.reply_text("Hi")]) as server, Cassette(path, "rewrite") as cassette:
        await run(cassette, base_url=server.base_url, api_key="k")
    split = S()
    split.add(
        RawStream(
            [
                split.chunk({"role": "assistant", "content": "Hi "}),
                split.chunk({"content": "\ud83d"}),
                split.chunk({"content": "\ude00"}),
                split.chunk({}, "stop"),
            ]
        )
    )
    with split, Cassette(path, "rewrite") as cassette:  # recorded again
        assert await run(cassette, base_url=split.base_url, api_key="k") == "Hi 😀"
    assert "\\ud83d" in path.read_text(encoding="utf-8")
    assert _names(tmp_path) == ["emoji.json"]  # nothing left beside it
    with no_network(), Cassette(path, "none") as cassette:
        assert await run(cassette) == "Hi 😀"


SAVE_PAST_A_SIZE_LIMIT = """
import resource, signal, sys
from agcore_tools.testing import Cassette, CassetteError

cassette = Cassette(sys.argv[1], "rewrite")
cassette.interactions.append({"kind": "note", "text": "x" * 10_000})
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
try:
    cassette.save()
except CassetteError as exc:
    print(type(exc.__cause__).__name__, exc)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")
def test_a_save_that_fails_leaves_the_cassette_that_was_there(tmp_path: Path) -> None:
    # The file was truncated before it was written: a failed save emptied a good cassette.
    path = tmp_path / "good.json"
    path.write_text('{"version": 1, "interactions": []}\n')
    done = subprocess.run(
        [sys.executable, "-c", SAVE_PAST_A_SIZE_LIMIT, str(path)],
        capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert done.stdout.startswith(f"OSError cassette {path} cannot be written: "), done
    assert path.read_text() == '{"version": 1, "interactions": []}\n'
    assert _names(tmp_path) == ["good.json"]


def _loopback_socketpair(
    family: int = socket.AF_INET, type: int = socket.SOCK_STREAM, proto: int = 0
) -> tuple[socket.socket, socket.socket]:
    """socket.socketpair() where the platform has none (Windows), as CPython's
    Lib/socket.py makes it (before 3.12's _fallback_socketpair): a loopback connection
    to a listener of its own."""
    listener = socket.socket(family, type, proto)
    try:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        client = socket.socket(family, type, proto)
        try:
            client.setblocking(False)
            with contextlib.suppress(BlockingIOError, InterruptedError):
                client.connect(listener.getsockname()[:2])
            client.setblocking(True)
            server, _ = listener.accept()
        except BaseException:
            client.close()
            raise
    finally:
        listener.close()
    return server, client


def test_no_network_lets_an_event_loop_make_its_socketpair_where_it_is_emulated(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # On Windows every event loop's self-pipe is such a loopback connection: no_network()
    # refused it, so a replay could not even start asyncio.run().
    fallback = getattr(socket, "_fallback_socketpair", _loopback_socketpair)
    monkeypatch.setattr(socket, "socketpair", fallback)  # the stdlib's, as on Windows

    async def replayed() -> str:
        return "replayed"

    with no_network() as guard:
        assert asyncio.run(replayed()) == "replayed"
    assert guard.attempts == []
    with pytest.raises(CassetteError, match="while the network is blocked"), no_network():
        socket.create_connection(("127.0.0.1", 9), timeout=1)  # any other: still refused


def _hand_edited() -> dict[str, Any]:
    return {
        "version": 1,
        "base_url": "http://model/v1",
        "interactions": [
            {"kind": "mcp", "server": "demo", "method": "tools/list", "tools": [{"name": "t"}]},
            {"kind": "http",
             "request": {"method": "POST", "url": "http://model/v1/chat/completions",
                         "json": {"model": "m"}},
             "response": {"status": 200, "headers": {"content-type": "application/json"},
                          "json": {}}},
            {"kind": "mcp", "server": "demo", "method": "tools/call", "tool": "t",
             "arguments": {}, "result": "ok"},
        ],
    }  # fmt: skip


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (lambda d: d["interactions"][1].update(req=d["interactions"][1].pop("request")),
         'interactions[1] has no "request"'),
        (lambda d: d["interactions"][1]["request"].pop("method"),
         'interactions[1].request has no "method"'),
        (lambda d: d.update(interactions={"a": 1}), "interactions must be a list, got dict"),
        (lambda d: d["interactions"][2].pop("method"), 'interactions[2] has no "method"'),
        (lambda d: d["interactions"][1]["response"].update(status="200"),
         "interactions[1].response.status must be an integer, got str"),
        (lambda d: d["interactions"][2].pop("result"),
         'interactions[2] has no "result" or "error"'),
        (lambda d: d["interactions"][0]["tools"][0].update(input_shema={}),
         'interactions[0].tools[0] has a field "input_shema" a tool does not have'),
        (lambda d: d["interactions"][1].update(kind="htp"),
         'interactions[1].kind must be "http" or "mcp", got \'htp\''),
        # A bare binascii.Error when the replay decoded it.
        (lambda d: d["interactions"][1]["response"].update(base64="abc"),
         "interactions[1].response.base64 is not base64 (Incorrect padding)"),
    ],
    ids=["request", "method", "interactions", "mcp-method", "status", "result", "tool", "kind",
         "base64"],
)  # fmt: skip
def test_a_hand_edited_cassette_with_a_broken_field_names_the_file_and_the_field(
    tmp_path: Path, edit: Any, said: str
) -> None:
    # The replay failed with a bare KeyError, AttributeError or TypeError naming neither.
    data = _hand_edited()
    edit(data)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(data))
    with pytest.raises(CassetteError) as caught:
        Cassette(path, "none")
    assert str(caught.value) == (
        f"cassette {path}: {said} (record the cassette again, or mend the file)"
    )
    if isinstance(data["interactions"], list):
        with pytest.raises(CassetteError) as caught:
            Cassette.from_interactions(data["interactions"])
        assert str(caught.value).startswith(f"Cassette.from_interactions(): {said}")


async def test_a_tool_list_that_changed_while_recording_replays_turn_by_turn(
    tmp_path: Path,
) -> None:
    # Each turn offered the tools the server listed then; a replay gave every turn the
    # last list (with 'greet' in it), so the first request differed at its tools.
    path = tmp_path / "changed.json"

    async def run(cassette: Cassette, **options: Any) -> list[list[str]]:
        offered = []
        mcp = cassette.mcp(McpClient("fx", fixture_stdio()))
        async with mcp, cassette.client(**options) as client:
            messages: list[Any] = [{"role": "user", "content": "add a tool, then greet"}]
            for _ in range(2):
                tools = await mcp.definitions()
                offered.append(sorted(t["function"]["name"] for t in tools))
                reply = await client.chat.completions.create(
                    model="m", messages=messages, tools=tools
                )
                message = reply.choices[0].message
                messages.append(message.model_dump(exclude_none=True))
                for call in message.tool_calls or []:
                    args = json.loads(call.function.arguments)
                    result = await mcp.call_tool(call.function.name, args)
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
                    await mcp.refresh_tools()  # the server said its list changed
        return offered

    script = [S.reply_tool_calls([("add_tool", {"name": "greet"}, "c1")]), S.reply_text("ok")]
    with S(script) as server, Cassette(path, "rewrite") as cassette:
        recorded = await run(cassette, base_url=server.base_url, api_key="sk-unused")
    assert "greet" not in recorded[0] and "greet" in recorded[1]

    with no_network(), Cassette(path, "none") as cassette:
        assert await run(cassette) == recorded
