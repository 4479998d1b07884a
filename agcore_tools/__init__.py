"""agcore_tools: a decorator-first tool system for LLM applications.

Turn type-hinted functions into tools with :func:`tool`, collect them in a
:class:`ToolRegistry`, guard them with a :class:`PermissionChecker`, let a model call
them in an automatic loop over the official OpenAI SDK, and bring MCP servers' tools
into the same registry.

Example:
    >>> from agcore_tools import ToolRegistry, tool
    >>> registry = ToolRegistry()
    >>> @registry.tool
    ... def add(a: int, b: int) -> int:
    ...     '''Add two integers.'''
    ...     return a + b
    >>> registry.list_tools()
    ['add']
"""

import importlib
from typing import TYPE_CHECKING, Any

from ._otel import configure_tracing
from ._progress import ToolBreakerChanged, ToolPartialResult, ToolProgress
from ._version import __version__
from .approval import (
    ApprovalDecision,
    ApprovalRequest,
    NeedsApproval,
    ToolApprovalRequested,
    ToolCallOutputs,
)
from .base import BaseTool, CancellationToken, ToolContext
from .content import Audio, File, Image
from .decorator import FunctionTool, tool
from .error import (
    AgcoreError,
    ApprovalError,
    ClientTypeError,
    DefinitionBudgetError,
    InvalidArgumentsError,
    LlmConfigError,
    LlmError,
    LlmUsageError,
    MaxTurnsExceededError,
    McpError,
    McpInputRequiredError,
    McpNotInitializedError,
    McpTimeoutError,
    OutputValidationError,
    PermissionDeniedError,
    ProgramError,
    RunStoppedError,
    SyncCallError,
    ToolConfigError,
    ToolDefinitionError,
    ToolDefinitionWarning,
    ToolError,
    ToolExecutionError,
    ToolIOError,
    ToolNotFoundError,
    ToolNotOfferedError,
    ToolRejectedError,
    ToolTimeoutError,
    ToolUnavailableError,
)
from .pending import InputAnswer, InputRequest, RunningTask, ToolInputRequested
from .permission import Permission, PermissionChecker, PermissionConfig
from .policies import Breaker, RateLimit, ResultCache, ToolPolicy
from .registry import (
    ToolCall,
    ToolEntry,
    ToolInvocation,
    ToolRegistry,
    ToolStats,
    default_registry,
)
from .schema import SchemaContext, SchemaTransform, grammar_safe_schema, portable_schema

# The loop, tool selection and MCP load on first use: most of what `import agcore_tools`
# would otherwise cost is theirs, and a script that only decorates tools never needs them.
_LAZY: dict[str, str] = {
    name: module
    for module, names in (
        ("._ranking", ("Embedder",)),
        ("._selection", ("CodeMode", "Selector", "ToolSearch", "ToolSelection")),
        (
            ".cycle",
            (
                "AssistantTextDelta",
                "ChatResponse",
                "CycleConfig",
                "EventStream",
                "FinishReason",
                "HistoryPolicy",
                "LlmCycle",
                "ReasoningDelta",
                "Reconciliation",
                "RunningTask",
                "StreamEvent",
                "StructuredOutput",
                "SyncEventStream",
                "ToolCost",
                "ToolCosts",
                "ToolExecutionCompleted",
                "ToolExecutionStarted",
                "TrimOldest",
                "TurnComplete",
                "Usage",
            ),
        ),
        (
            ".mcp",
            (
                "McpClient",
                "McpPermissionPolicy",
                "McpRecovery",
                "McpToolInfo",
                "StdioTransport",
                "StreamableHttpTransport",
                "load_mcp_servers",
            ),
        ),
    )
    for name in names
}

if TYPE_CHECKING:
    from ._ranking import Embedder
    from ._selection import CodeMode, Selector, ToolSearch, ToolSelection
    from .cycle import (
        AssistantTextDelta,
        ChatResponse,
        CycleConfig,
        EventStream,
        FinishReason,
        HistoryPolicy,
        LlmCycle,
        ReasoningDelta,
        Reconciliation,
        StreamEvent,
        StructuredOutput,
        SyncEventStream,
        ToolCost,
        ToolCosts,
        ToolExecutionCompleted,
        ToolExecutionStarted,
        TrimOldest,
        TurnComplete,
        Usage,
    )
    from .mcp import (
        McpClient,
        McpPermissionPolicy,
        McpRecovery,
        McpToolInfo,
        StdioTransport,
        StreamableHttpTransport,
        load_mcp_servers,
    )


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agcore_tools' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "AgcoreError",
    "ApprovalDecision",
    "ApprovalError",
    "ApprovalRequest",
    "AssistantTextDelta",
    "Audio",
    "BaseTool",
    "Breaker",
    "CancellationToken",
    "ChatResponse",
    "ClientTypeError",
    "CodeMode",
    "CycleConfig",
    "DefinitionBudgetError",
    "Embedder",
    "EventStream",
    "File",
    "FinishReason",
    "FunctionTool",
    "HistoryPolicy",
    "Image",
    "InputAnswer",
    "InputRequest",
    "InvalidArgumentsError",
    "LlmConfigError",
    "LlmCycle",
    "LlmError",
    "LlmUsageError",
    "MaxTurnsExceededError",
    "McpClient",
    "McpError",
    "McpInputRequiredError",
    "McpNotInitializedError",
    "McpPermissionPolicy",
    "McpRecovery",
    "McpTimeoutError",
    "McpToolInfo",
    "NeedsApproval",
    "OutputValidationError",
    "Permission",
    "PermissionChecker",
    "PermissionConfig",
    "PermissionDeniedError",
    "ProgramError",
    "RateLimit",
    "ReasoningDelta",
    "Reconciliation",
    "ResultCache",
    "RunStoppedError",
    "RunningTask",
    "SchemaContext",
    "SchemaTransform",
    "Selector",
    "StdioTransport",
    "StreamEvent",
    "StreamableHttpTransport",
    "StructuredOutput",
    "SyncCallError",
    "SyncEventStream",
    "ToolApprovalRequested",
    "ToolBreakerChanged",
    "ToolCall",
    "ToolCallOutputs",
    "ToolConfigError",
    "ToolContext",
    "ToolCost",
    "ToolCosts",
    "ToolDefinitionError",
    "ToolDefinitionWarning",
    "ToolEntry",
    "ToolError",
    "ToolExecutionCompleted",
    "ToolExecutionError",
    "ToolExecutionStarted",
    "ToolIOError",
    "ToolInputRequested",
    "ToolInvocation",
    "ToolNotFoundError",
    "ToolNotOfferedError",
    "ToolPartialResult",
    "ToolPolicy",
    "ToolProgress",
    "ToolRegistry",
    "ToolRejectedError",
    "ToolSearch",
    "ToolSelection",
    "ToolStats",
    "ToolTimeoutError",
    "ToolUnavailableError",
    "TrimOldest",
    "TurnComplete",
    "Usage",
    "__version__",
    "configure_tracing",
    "default_registry",
    "grammar_safe_schema",
    "load_mcp_servers",
    "portable_schema",
    "tool",
]
