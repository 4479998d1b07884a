"""MCP servers' tools, resources and prompts in agcore_tools, over the official MCP SDK (imported on first use).

Example:
    >>> from agcore_tools.mcp import McpClient, StdioTransport
    >>> McpClient("demo", StdioTransport("python", ["examples/mcp_server.py"]))
    <McpClient 'demo' `python examples/mcp_server.py` not connected>
"""

from ._adapter import McpTool
from ._resources import McpResourceSubscription
from ._tasks import McpTask
from .auth import FileTokenStorage, InMemoryTokenStorage
from .client import McpClient
from .config import load_mcp_servers
from .models import (
    McpCompletion,
    McpLogMessage,
    McpProgress,
    McpPrompt,
    McpPromptInfo,
    McpResourceContents,
    McpResourceInfo,
    McpResourceTemplateInfo,
    McpTaskStatus,
    McpToolInfo,
)
from .policy import McpPermissionPolicy, PermissionPolicy
from .recovery import McpRecovery
from .transport import McpTransport, StdioTransport, StreamableHttpTransport

__all__ = [
    "FileTokenStorage",
    "InMemoryTokenStorage",
    "McpClient",
    "McpCompletion",
    "McpLogMessage",
    "McpPermissionPolicy",
    "McpProgress",
    "McpPrompt",
    "McpPromptInfo",
    "McpRecovery",
    "McpResourceContents",
    "McpResourceInfo",
    "McpResourceSubscription",
    "McpResourceTemplateInfo",
    "McpTask",
    "McpTaskStatus",
    "McpTool",
    "McpToolInfo",
    "McpTransport",
    "PermissionPolicy",
    "StdioTransport",
    "StreamableHttpTransport",
    "load_mcp_servers",
]
