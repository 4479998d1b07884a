"""A registry's circuit breaker over an MCP server's tools, against a real server."""

from __future__ import annotations

import sys
from pathlib import Path

from agcore_tools import (
    Breaker,
    McpClient,
    McpError,
    StdioTransport,
    ToolPolicy,
    ToolRegistry,
    ToolUnavailableError,
)

from .conftest import FIXTURE

# Runs the fixture server while the gate file exists; without it, exits at once, as a
# server whose host or config went away does on every restart.
GATED = """
import os, runpy, sys
if not os.path.exists(sys.argv[1]):
    sys.exit(1)
sys.argv = sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


async def test_a_server_that_is_down_opens_the_breaker_of_its_tools(tmp_path: Path) -> None:
    # Its calls were never sent (may_have_run=False), so none counted: the breaker never
    # opened, and the dead server's tools stayed offered, each call failing at once.
    gate, script = tmp_path / "up", tmp_path / "gated.py"
    gate.touch()
    script.write_text(GATED)
    transport = StdioTransport(sys.executable, [str(script), str(gate), str(FIXTURE)])
    async with McpClient("fixture", transport, timeout=15) as client:
        registry = ToolRegistry()
        registry.register_all(client.into_tools())
        policy = ToolPolicy(breaker=Breaker(failures=2, window=60.0, cool_down=60.0))
        registry.set_policy(policy, category="mcp:fixture")
        [first] = await registry.invoke_all([("echo", {"text": "hi"})])
        assert first.output == "hi"
        gate.unlink()
        [died] = await registry.invoke_all([("die", {})])
        assert isinstance(died.error, McpError) and died.may_have_run is True
        failed = []
        for _ in range(2):
            [call] = await registry.invoke_all([("echo", {"text": "again"})])
            failed.append(call)
        assert all(isinstance(c.error, McpError) and c.may_have_run is False for c in failed)
        assert registry.unavailable_tools() == ["echo"]
        offered = [d["function"]["name"] for d in registry.definitions()]
        assert "echo" not in offered and "word_count" in offered
        [refused] = await registry.invoke_all([("echo", {"text": "again"})])
        assert isinstance(refused.error, ToolUnavailableError)


async def test_a_call_the_server_refuses_unrun_does_not_count(tmp_path: Path) -> None:
    # The model's wrong arguments, refused by a server that is up, say nothing of it.
    async with McpClient("fixture", StdioTransport(sys.executable, [str(FIXTURE)])) as client:
        registry = ToolRegistry()
        registry.register_all(client.into_tools())
        registry.set_policy(ToolPolicy(breaker=Breaker(failures=1)), category="mcp:fixture")
        [vault] = await registry.invoke_all([("open_vault", {"vault": "Nowhere"})])
        assert isinstance(vault.error, McpError) and vault.may_have_run is False
        assert registry.unavailable_tools() == []
