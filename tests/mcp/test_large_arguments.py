"""Large arguments checked against an MCP tool's input schema: the search for problems
stops past 1,000 of them, and arguments holding more than 1,000 values are checked in a
worker thread, off the event loop.

Before, an array of 100,000 bad items was checked to its end on the loop: 3.4 s, to
list 20 problems and count 99,980 more; a valid one took half a second, on the loop too.
"""

from __future__ import annotations

from typing import Any

import pytest

from agcore_tools import InvalidArgumentsError, McpClient, McpToolInfo, StdioTransport, ToolContext
from agcore_tools.mcp import McpTool
from agcore_tools.schema._validate import PROBLEMS_SOUGHT

from .conftest import assert_no_stray_tasks, loop_turns_during

SCHEMA = {
    "type": "object",
    "properties": {"ids": {"type": "array", "items": {"type": "integer"}}},
    "required": ["ids"],
}
NOT_AN_INTEGER = "'x' is not of type 'integer'"


def purge() -> McpTool:
    info = McpToolInfo("purge", input_schema=SCHEMA)
    return McpTool(McpClient("demo", StdioTransport("unused")), info, "demo__purge", [])


def test_an_array_of_100_000_bad_items_is_refused_after_the_first_problems_found() -> None:
    with pytest.raises(InvalidArgumentsError) as refused:
        purge().check_arguments({"ids": ["x"] * 100_000})
    errors = refused.value.errors
    assert errors[:20] == [(f"ids/{i}", NOT_AN_INTEGER) for i in range(20)]
    more = PROBLEMS_SOUGHT + 1 - 20
    assert errors[20:] == [("...", f"at least {more} more problems not listed")]
    # jsonschema's best_match among those found (the last sibling of the same depth)
    # first, then the others up to 20 in all, then how many more.
    others = "; ".join(f"ids/{i}: {NOT_AN_INTEGER}" for i in range(19))
    assert refused.value.reason == (
        f"ids/{PROBLEMS_SOUGHT}: {NOT_AN_INTEGER}; {others}; and at least {more} more"
    )
    assert refused.value.redacted.endswith("ids/1000: the 'type' rule failed")


def test_as_many_problems_as_are_sought_are_all_counted() -> None:
    with pytest.raises(InvalidArgumentsError) as refused:
        purge().check_arguments({"ids": ["x"] * PROBLEMS_SOUGHT})
    assert refused.value.errors[20:] == [
        ("...", f"{PROBLEMS_SOUGHT - 20} more problems not listed")
    ]


async def turns_while_refused(args: dict[str, Any]) -> int:
    """How many times another task ran while the tool refused ``args``, whose last item
    is the only bad one."""

    async def refuse() -> InvalidArgumentsError:
        with pytest.raises(InvalidArgumentsError) as refused:
            await purge().execute(args, ToolContext())
        return refused.value

    refusal, during = await loop_turns_during(refuse)
    assert refusal.errors == [(f"ids/{len(args['ids']) - 1}", NOT_AN_INTEGER)]
    return during


async def test_large_arguments_are_checked_off_the_event_loop() -> None:
    # 5,001 values, all checked: the loop runs other tasks meanwhile.
    assert await turns_while_refused({"ids": [*range(5000), "x"]}) >= 1
    await assert_no_stray_tasks()


async def test_small_arguments_are_checked_on_the_loop_at_once() -> None:
    # Up to 1,000 values (a few ms) the check costs no thread: nothing else runs.
    assert await turns_while_refused({"ids": [*range(998), "x"]}) == 0
