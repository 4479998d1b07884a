"""MCP servers' tools in agcore_tools, over the official MCP SDK (imported on first use).

Example:
    >>> from agcore_tools.mcp import McpClient, StdioTransport
    >>> McpClient("demo", StdioTransport("python", ["examples/mcp_server.py"]))
    <McpClient 'demo' `python examples/mcp_server.py` not connected>
"""

from ._adapter import McpTool
from .client import McpClient
from .config import load_mcp_servers
from .models import McpLogMessage, McpProgress, McpToolInfo
from .policy import McpPermissionPolicy, PermissionPolicy
from .recovery import McpRecovery
from .transport import McpTransport, StdioTransport, StreamableHttpTransport

__all__ = [
    "McpClient",
    "McpLogMessage",
    "McpPermissionPolicy",
    "McpProgress",
    "McpRecovery",
    "McpTool",
    "McpToolInfo",
    "McpTransport",
    "PermissionPolicy",
    "StdioTransport",
    "StreamableHttpTransport",
    "load_mcp_servers",
]
