"""A long ``tools/list`` answer is vetted a slice of tools at a time, the event loop
turning between two slices; what it keeps and leaves out is what the tool-by-tool check
finds.

Before, the answer was checked whole on the loop, in the task that reads the server's
messages (94 ms for the 1,477 recorded tools), and tool by tool, still without a turn of
the loop, when any tool failed. The stream here is an anyio memory stream; the answer
goes through the session's read stream as a server's does (``_streams``); what a real
server's long answer gives is in ``test_malformed_tools``.
"""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import mcp_types
import pytest
from mcp.shared.message import SessionMessage

from agcore_tools.mcp._streams import _WatchedReadStream
from agcore_tools.mcp._tool_vetting import SLICE, ToolListVetting, vet

from .conftest import assert_no_stray_tasks, loop_turns_during

MODERN = {"resultType": "complete", "ttlMs": 60000, "cacheScope": "private"}
ERAS = {"2025-11-25": {}, "2026-07-28": MODERN}
SLICES = 10
BAD = {"name": "bad_schema", "inputSchema": "object"}


def tools(count: int) -> list[dict[str, Any]]:
    schema = {"type": "object", "properties": {"text": {"type": "string"}}}
    return [{"name": f"tool_{i}", "inputSchema": schema} for i in range(count)]


async def read_counting_turns(
    version: str, answer: dict[str, Any]
) -> tuple[SessionMessage | Exception, int]:
    """``answer`` read through the session's read stream while a ``tools/list`` request
    waits for it, and how many times another task ran while it was read."""
    vetting = ToolListVetting("long", lambda: version)
    vetting.sent(1)
    send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](1)

    async def ended() -> None:
        pass

    stream = _WatchedReadStream(receive, ended, vetting)
    message = mcp_types.JSONRPCResponse(jsonrpc="2.0", id=1, result=answer)
    async with send, stream:
        await send.send(SessionMessage(message))
        return await loop_turns_during(stream.receive)


def tools_read(item: SessionMessage | Exception) -> list[Any]:
    assert isinstance(item, SessionMessage)
    assert isinstance(item.message, mcp_types.JSONRPCResponse)
    listed: list[Any] = item.message.result["tools"]
    return listed


@pytest.mark.parametrize("version", ERAS)
async def test_a_long_valid_answer_lets_other_tasks_run_between_its_slices(version: str) -> None:
    listed = tools(SLICES * SLICE + 5)
    item, turns = await read_counting_turns(version, {"tools": listed, **ERAS[version]})
    assert tools_read(item) is listed  # passed on as it came
    # One turn after each slice but the last (the memory stream may add one).
    assert turns >= SLICES
    await assert_no_stray_tasks()


@pytest.mark.parametrize("version", ERAS)
async def test_a_long_answer_with_malformed_tools_leaves_out_the_same_ones_in_slices(
    version: str,
) -> None:
    listed: list[Any] = tools(SLICES * SLICE)
    places = [0, SLICE - 1, SLICE, 5 * SLICE + 7, len(listed)]  # slice edges, the end
    for place in reversed(places):
        listed.insert(place, {**BAD, "name": f"bad_{place}"})
    answer = {"tools": listed, **ERAS[version]}

    item, turns = await read_counting_turns(version, answer)

    assert turns >= SLICES
    expected = [tool for tool in listed if not tool["name"].startswith("bad_")]
    assert tools_read(item) == expected
    vetted = vet(answer, version)
    assert vetted is not None
    kept, left_out = vetted
    assert kept == expected
    # Each at its place in the whole answer, as checked alone.
    assert [(t.index, t.name, t.where) for t in left_out] == [
        (p + n, f"bad_{p}", f"tools[{p + n}].inputSchema") for n, p in enumerate(places)
    ]


@pytest.mark.parametrize("version", ERAS)
async def test_a_long_answer_malformed_as_a_whole_is_passed_on_as_it_came(version: str) -> None:
    # nextCursor must be a string: the SDK fails the answer, naming it.
    listed = tools(3 * SLICE)
    listed.append(BAD)
    answer = {"tools": listed, "nextCursor": 5, **ERAS[version]}
    item, _ = await read_counting_turns(version, answer)
    assert tools_read(item) is listed
    assert vet(answer, version) is None
