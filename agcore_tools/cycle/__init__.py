"""The automatic tool loop over the official OpenAI SDK: :class:`LlmCycle` and friends.

Example:
    >>> from agcore_tools.cycle import CycleConfig, FinishReason
    >>> CycleConfig("gpt-4o-mini").max_turns
    10
    >>> FinishReason.parse("stop")
    <FinishReason.STOP: 'stop'>
"""

from ._costs import Reconciliation, ToolCosts
from .config import CycleConfig, Limits, Retries
from .cycle import EventStream, LlmCycle
from .events import (
    AssistantTextDelta,
    ChatResponse,
    FinishReason,
    ReasoningDelta,
    StreamEvent,
    ToolCost,
    ToolExecutionCompleted,
    ToolExecutionStarted,
    ToolPartialResult,
    ToolProgress,
    TurnComplete,
    Usage,
)
from .history import HistoryPolicy, TrimOldest, split_exchanges
from .output import StructuredOutput
from .requester import OpenAIRequester, Requester, TurnRequest
from .sync import SyncEventStream
from .transport import sharded_http_client

__all__ = [
    "AssistantTextDelta",
    "ChatResponse",
    "CycleConfig",
    "EventStream",
    "FinishReason",
    "HistoryPolicy",
    "Limits",
    "LlmCycle",
    "OpenAIRequester",
    "ReasoningDelta",
    "Reconciliation",
    "Requester",
    "Retries",
    "StreamEvent",
    "StructuredOutput",
    "SyncEventStream",
    "ToolCost",
    "ToolCosts",
    "ToolExecutionCompleted",
    "ToolExecutionStarted",
    "ToolPartialResult",
    "ToolProgress",
    "TrimOldest",
    "TurnComplete",
    "TurnRequest",
    "Usage",
    "sharded_http_client",
    "split_exchanges",
]
