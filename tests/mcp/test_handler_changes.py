"""A sampling, elicitation or roots handler set on a connected client: read when the
server's request comes, so one replaced answers from then on; a capability the client
did not advertise when connecting takes effect at the next connection, with a WARNING.
Against the fixture server over stdio and Streamable HTTP."""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import mcp_types as types
import pytest

from agcore_tools import McpClient, ToolConfigError, ToolError
from agcore_tools.error import McpUsageError

from .conftest import fixture_stdio

pytestmark = pytest.mark.timeout(60)


def _elicit(answer: str) -> Any:
    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"answer": answer})

    return elicit


def _sample(text: str) -> Any:
    async def sample(ctx: Any, params: types.CreateMessageRequestParams) -> Any:
        content = types.TextContent(type="text", text=text)
        return types.CreateMessageResult(role="assistant", content=content, model="stub")

    return sample


def _roots(uri: str) -> Any:
    async def roots(ctx: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=uri)])

    return roots


async def test_a_handler_replaced_while_connected_answers_the_next_request(
    make_client: Any,
) -> None:
    # Each was read once, when connecting: the one replaced went on answering.
    client = make_client(
        protocol="legacy",
        sampling_handler=_sample("first"),
        elicitation_handler=_elicit("blue"),
        roots_handler=_roots("file:///srv/first"),
    )
    async with client:
        assert await client.call_tool("sample", {"prompt": "hi"}) == "first"
        client.sampling_handler = _sample("second")
        client.elicitation_handler = _elicit("green")
        client.roots_handler = _roots("file:///srv/second")
        assert await client.call_tool("sample", {"prompt": "hi"}) == "second"
        assert await client.call_tool("ask", {"question": "colour?"}) == "accept: green"
        assert await client.call_tool("roots") == "file:///srv/second"


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_an_elicitation_handler_set_after_connect_answers_at_once(
    make_client: Any, protocol: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Elicitation is always advertised; the question was declined until a new connection.
    caplog.set_level(logging.WARNING, logger="agcore_tools.mcp")
    async with make_client(protocol=protocol) as client:
        client.elicitation_handler = _elicit("blue")
        said = await client.call_tool("ask_each_era", {"question": "colour?"})
        assert said == "accept: blue"
        assert not caplog.records
        client.elicitation_handler = None  # declined again, as with none at connect
        with contextlib.suppress(ToolError):  # the fixture's 2025-era tool fails on it
            await client.call_tool("ask_each_era", {"question": "colour?"})
    assert "('colour?'); declined: the McpClient has no elicitation_handler" in caplog.text


async def test_a_sampling_handler_set_while_connected_without_one_warns_and_waits(
    make_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # Sampling and roots are advertised when connecting, only then: silently ignored
    # before, it now says so, and works from the next connection.
    caplog.set_level(logging.WARNING, logger="agcore_tools.mcp")
    client = make_client(protocol="legacy")
    async with client:
        assert '"sampling"' not in await client.call_tool("capabilities")
        client.sampling_handler = _sample("sampled!")
        client.roots_handler = _roots("file:///srv/project")
    assert [r.getMessage() for r in caplog.records] == [
        f"MCP server 'fixture': {what} set while connected without one; the server was "
        f"told when connecting that this client answers no {request}, so it takes effect "
        "at the next connection (close() and connect())"
        for what, request in (
            ("sampling_handler", "sampling/createMessage"),
            ("roots_handler", "roots/list"),
        )
    ]
    caplog.clear()
    async with client:
        assert await client.call_tool("sample", {"prompt": "hi"}) == "sampled!"
        assert await client.call_tool("roots") == "file:///srv/project"
        client.sampling_handler = _sample("again")  # advertised now: no warning
    assert not caplog.records


async def test_a_handler_removed_while_connected_is_refused_by_name(make_client: Any) -> None:
    client = make_client(protocol="legacy", roots_handler=_roots("file:///srv/project"))
    async with client:
        client.roots_handler = None
        with pytest.raises(ToolError, match="the client no longer has a roots_handler"):
            await client.call_tool("roots")


def test_a_handler_set_later_is_checked_as_one_given_at_construction() -> None:
    # Only the constructor checked: a string set later failed at each server request.
    client = McpClient("x", fixture_stdio())
    with pytest.raises(ToolConfigError, match="sampling_handler must be a function of"):
        client.sampling_handler = "ask the model"  # type: ignore[assignment]
    assert client.sampling_handler is None


async def test_roots_changes_of_a_handler_set_while_connected_without_one_are_refused(
    make_client: Any,
) -> None:
    # The server was told when connecting that this client has no roots; the
    # notification of a change to roots it never had was sent all the same.
    client = make_client(protocol="legacy")
    async with client:
        client.roots_handler = _roots("file:///srv/project")
        with pytest.raises(McpUsageError, match="told when connecting that this client has no"):
            await client.notify_roots_changed()
        assert await client.call_tool("roots_changed_count") == "0"
    async with client:  # declared from this connection on
        assert await client.notify_roots_changed() is True
