"""The former home of :mod:`agcore_tools.calls`, kept so that old imports work."""

from .calls import (
    ParsedCall,
    aborted_text,
    error_text,
    iter_invocations,
    model_result,
    model_text,
    parse_call,
    preflight,
    result_text,
    run_tool_calls,
    truncate_utf8,
    unknown_tool_error,
)

__all__ = [
    "ParsedCall",
    "aborted_text",
    "error_text",
    "iter_invocations",
    "model_result",
    "model_text",
    "parse_call",
    "preflight",
    "result_text",
    "run_tool_calls",
    "truncate_utf8",
    "unknown_tool_error",
]
