"""The official filesystem MCP server next to a local tool, in one loop.

Run it with ``python examples/filesystem_mcp.py [folder]`` after ``make node`` (which
installs ``@modelcontextprotocol/server-filesystem`` into ``node_modules``). Without
a folder it makes a sandbox with two notes in a temporary directory. The server can
only reach that folder; the registry's default permission policy lets its read-only
tools run and refuses the ones that write, move or overwrite files.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from _offline import model_client

from agcore_tools import (
    CycleConfig,
    LlmCycle,
    McpClient,
    PermissionChecker,
    PermissionConfig,
    StdioTransport,
    ToolRegistry,
)
from agcore_tools.testing import ScriptedChatServer, ScriptItem

ROOT = Path(__file__).resolve().parents[1]
SERVER = ROOT / "node_modules" / ".bin" / "mcp-server-filesystem"
PROMPT = "Which of my notes mentions a deadline, and how many words is it?"
NOTES = {
    "todo.md": "Send the quarterly report before the Friday deadline.\n",
    "ideas.md": "A tiny garden on the balcony.\nLearn to bake bread.\n",
}


def count_words(text: str) -> int:
    """Count the words of a text (models are bad at counting)."""
    return len(text.split())


def offline_script(folder: Path) -> list[ScriptItem]:
    """List the folder, read both notes at once, count the words of the right one."""
    reply = ScriptedChatServer
    todo, ideas = str(folder / "todo.md"), str(folder / "ideas.md")
    return [
        reply.reply_tool_calls([("fs__list_directory", {"path": str(folder)})]),
        reply.reply_tool_calls(
            [("fs__read_text_file", {"path": todo}), ("fs__read_text_file", {"path": ideas})]
        ),
        reply.reply_tool_calls([("count_words", {"text": NOTES["todo.md"]})]),
        reply.reply_text("todo.md mentions the Friday deadline; it is 8 words long."),
    ]


async def run(folder: Path, prompt: str) -> None:
    checker = PermissionChecker(PermissionConfig())  # read: yes; write and delete: no
    registry = ToolRegistry(checker)
    registry.tool(count_words)

    fs = McpClient("fs", StdioTransport(str(SERVER), [str(folder)]))
    async with model_client("filesystem MCP", offline_script(folder)) as (client, model), fs:
        registry.register_all(fs.into_tools(prefix=True))  # fs__read_text_file, ...
        mcp_tools = registry.find_by_tag("mcp")
        refused = [e.name for e in mcp_tools if not checker.is_allowed(e.permissions)]
        print(f"tools: {len(registry)}, {len(mcp_tools)} from MCP; refused: {', '.join(refused)}")
        cycle = LlmCycle(CycleConfig(model), client=client)
        response = await cycle.submit_with_tools(prompt, registry)

    print(f"user> {prompt}")
    for call in response.invocations:
        print(f"  {call.tool_name}({call.input}) -> {call.output if call.ok else call.error}")
    print(f"assistant> {response.text}")


def main(argv: list[str]) -> None:
    if not SERVER.exists():
        sys.exit(f"{SERVER.relative_to(ROOT)} is missing: run `make node` (or `npm ci`) first")
    prompt = " ".join(argv[1:]) or PROMPT
    if argv:
        asyncio.run(run(Path(argv[0]).resolve(), prompt))
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp).resolve()
        for name, text in NOTES.items():
            (folder / name).write_text(text)
        asyncio.run(run(folder, prompt))


if __name__ == "__main__":
    main(sys.argv[1:])
