from __future__ import annotations

import pytest

from agcore_tools import ToolContext, ToolError, ToolInvocation, ToolRegistry
from agcore_tools._display import html_table, markdown_table, short


def test_cells_are_escaped_and_bounded() -> None:
    table = markdown_table(["a"], [["x|y\nz"], ["w" * 500]])
    assert "x\\|y z" in table
    assert max(len(line) for line in table.splitlines()) < 140
    assert "&lt;b&gt;" in html_table(["h"], [["<b>"]])
    assert short({"k": "中文"}) == '{"k": "中文"}'


async def test_registry_and_invocation_render_for_notebooks() -> None:
    registry = ToolRegistry()

    @registry.tool(permissions=["read"], tags=["fs"], category="files")
    def read(path: str) -> str:
        """Read a file."""
        return "content"

    await registry.invoke("read", {"path": "/x"}, ToolContext(call_id="c9"))
    md = registry._repr_markdown_()
    assert "| name | description | permissions | tags | category | calls | failures |" in md
    assert "| read | Read a file. | read | fs | files | 1 | 0 |" in md
    assert "<td>read</td>" in registry._repr_html_()

    inv = await registry.invoke("read", {"path": "/x"})
    assert "| output | content |" in inv._repr_markdown_()
    failed = ToolInvocation("read", {}, error=ToolError("disk on fire"))
    assert "failed" in failed._repr_markdown_() and "disk on fire" in failed._repr_html_()


async def test_chat_response_and_transcript_render_a_real_loop() -> None:
    from agcore_tools import CycleConfig, LlmCycle
    from agcore_tools.testing import ScriptedChatServer as S

    registry = ToolRegistry()

    @registry.tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @registry.tool
    def explode() -> str:
        """Always fails."""
        raise ValueError("bad <input>")

    script = [
        S.reply_tool_calls([("add", {"a": 2, "b": 3}, "c1"), ("explode", {}, "c2")], text="a|b"),
        S.reply_text("It is **5**.\nDone.", usage={"prompt_tokens": 7, "completion_tokens": 3}),
    ]
    async with S(script) as server:
        client = server.client(timeout=10.0)
        cycle = LlmCycle(CycleConfig("m"), client=client, system_prompt="Be brief.")
        try:
            response = await cycle.submit_with_tools("What is 2 + 3?", registry)
        finally:
            await client.close()

    md = response._repr_markdown_()
    assert md.startswith("**ChatResponse** (stop, 2 turns)")
    assert "> It is **5**.\n> Done." in md  # the answer's Markdown renders
    assert "| stop reason | stop |" in md
    usage = response.usage
    assert f"| usage | {usage.total_tokens} tokens ({usage.prompt_tokens} prompt + " in md
    assert "over 2 request(s)" in md
    assert '| add | {"a": 2, "b": 3} | 5 |' in md
    assert "| explode | {} | error: tool 'explode' failed: ValueError: bad &lt;input&gt; |" in md
    html_view = response._repr_html_()
    assert "<strong>ChatResponse</strong> (stop, 2 turns)" in html_view
    assert "It is **5**.\nDone." in html_view and "&lt;input&gt;" in html_view
    assert "<input>" not in html_view

    transcript = cycle._repr_markdown_()
    assert transcript.startswith("**LlmCycle — m, 6 message(s)**")
    assert "| 0 | system | Be brief. |" in transcript
    assert "| 1 | user | What is 2 + 3? |" in transcript
    assert '| 2 | assistant | a\\|b → add({"a": 2, "b": 3}) [c1] → explode({}) [c2] |' in transcript
    assert "| 3 | tool | add [c1] → 5 |" in transcript
    assert "| 4 | tool | explode [c2] → Error: tool 'explode' failed:" in transcript
    assert "| 5 | assistant | It is **5**. Done. |" in transcript
    assert "<td>tool</td><td>add [c1] → 5</td>" in cycle._repr_html_()


def test_chat_response_shows_calls_nobody_ran_and_missing_text() -> None:
    from agcore_tools import ChatResponse, FinishReason, Usage

    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c7", "type": "function", "function": {"name": "f", "arguments": '{"x":1}'}}
        ],
    }
    response = ChatResponse(message, "", FinishReason.TOOL_CALLS, Usage(5, 2, 7, cached_tokens=4))
    md = response._repr_markdown_()
    assert "*(no text)*" in md
    assert '| tool calls requested | f({"x":1}) [c7] |' in md
    assert "| usage | 7 tokens (5 prompt + 2 completion) over 1 request(s); 4 cached |" in md
    assert "**Tool calls**" not in md  # nothing was executed
    assert "<em>(no text)</em>" in response._repr_html_()


def test_transcript_cuts_long_cells_and_old_messages() -> None:
    from openai import AsyncOpenAI

    from agcore_tools import CycleConfig, LlmCycle
    from agcore_tools._display import MAX_ROWS

    cycle = LlmCycle(CycleConfig("m"), client=AsyncOpenAI(api_key="unused"))
    cycle.messages.append({"role": "user", "content": "x" * 1000})
    cycle.messages.append(
        {"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image_url"}]}
    )
    md = cycle._repr_markdown_()
    long_row = next(line for line in md.splitlines() if line.startswith("| 0 |"))
    assert long_row.endswith("… |") and len(long_row) < 300
    assert "| 1 | user | look [image_url] |" in md

    cycle.messages[:] = [{"role": "user", "content": f"m{i}"} for i in range(MAX_ROWS + 5)]
    md = cycle._repr_markdown_()
    assert f"{MAX_ROWS + 5} message(s), the first 5 not shown" in md
    assert "| 4 | user | m4 |" not in md and f"| {MAX_ROWS + 4} | user | m{MAX_ROWS + 4} |" in md


def test_free_text_is_escaped_and_bounded() -> None:
    from agcore_tools._display import clip, html_text, markdown_quote

    assert markdown_quote("<script>\n\n*hi*") == "> &lt;script&gt;\n>\n> *hi*"
    assert clip("abcdef", 4) == "abcd… (2 more characters)"
    assert html_text("<b>") == '<pre style="white-space: pre-wrap">&lt;b&gt;</pre>'


def test_chat_response_says_when_usage_was_not_reported() -> None:
    # A request whose response had no usage is not a measured zero.
    from agcore_tools import ChatResponse, FinishReason, Usage

    message = {"role": "assistant", "content": "Hi"}

    def usage_row(usage: Usage) -> str:
        md = ChatResponse(message, "Hi", FinishReason.STOP, usage)._repr_markdown_()
        return next(line for line in md.splitlines() if line.startswith("| usage |"))

    unreported = Usage(unreported=1)
    assert usage_row(unreported) == "| usage | no usage reported by its 1 request(s) |"
    assert usage_row(Usage(5, 2, 7) + unreported) == (
        "| usage | 7 tokens (5 prompt + 2 completion) over 2 request(s); "
        "only 1 of 2 reported usage |"
    )


def test_plain_text_view_of_a_large_invocation_and_response_is_bounded() -> None:
    # IPython stores the text/plain view next to the tables in the notebook file: a
    # tool's 5 MB output must not land there whole (the dataclass repr would put it).
    pretty = pytest.importorskip("IPython.lib.pretty")
    from agcore_tools import ChatResponse, FinishReason

    registry = ToolRegistry()

    @registry.tool
    def big() -> str:
        """A large output."""
        return "x" * 5_000_000

    inv = registry.invoke_sync("big", {})
    text = pretty.pretty(inv)
    assert len(text) < 3000, len(text)
    assert text.startswith("ToolInvocation(tool_name='big', input={}, output='xxx")
    assert "(4999002 more characters)" in text and "may_have_run=True" in text
    response = ChatResponse(
        {"role": "assistant", "content": "y" * 2_000_000},
        "y" * 2_000_000,
        FinishReason.STOP,
        invocations=(inv,),
    )
    text = pretty.pretty(response)
    assert len(text) < 20_000, len(text)
    assert "finish_reason=<FinishReason.STOP: 'stop'>" in text
    assert len(repr(inv)) > 5_000_000  # repr() itself stays the whole value
