"""`import agcore_tools` (and its MCP names) must not load the MCP SDK."""

from __future__ import annotations

import subprocess
import sys


def test_mcp_names_import_without_the_sdk() -> None:
    code = (
        "import sys\n"
        "from agcore_tools import McpClient, StdioTransport, load_mcp_servers\n"
        "import agcore_tools.mcp\n"
        "McpClient('x', StdioTransport('server'))\n"
        "load_mcp_servers({'mcpServers': {'a': {'url': 'http://127.0.0.1:1/mcp'}}})\n"
        "print(','.join(m for m in ('mcp', 'mcp_types', 'anyio', 'httpx2', 'openai') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == ""
