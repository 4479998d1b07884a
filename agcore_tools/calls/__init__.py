"""Model tool calls: parse them, screen them for approval, run them, and render what
the model reads back.

Shared by :class:`~agcore_tools.LlmCycle` and :meth:`ToolRegistry.run_tool_calls`, so
both parse arguments, word errors and cut long results the same way. Everything here
works over a registry's :class:`~agcore_tools._table.ToolTable` (its entries and
permission checker, see :attr:`ToolRegistry.tool_table`) and runs calls through
``_execute``: ``calls/`` never imports the registry, and a call never turns back up
into it.
"""

from .._records import ParsedCall
from .._text import result_text, truncate_utf8
from ._approval import (
    CHECKS_TOGETHER,
    EDITS_NOTED,
    answer_list,
    answers_by_id,
    apply_answers,
    approval_requests,
    check_answer,
    edit_notes,
    rule_verdict,
    screen_calls,
)
from ._parse import (
    CUT_CALLS_NOT_REPAIRED,
    NON_FINITE_REFUSED,
    loads_finite,
    non_finite,
    not_a_number,
    parse_call,
)
from ._render import (
    RENDER_OFF_LOOP,
    aborted_text,
    error_text,
    model_result,
    model_result_off_loop,
    model_text,
)
from ._run import (
    check_tool_calls,
    iter_invocations,
    preflight,
    refusal,
    run_tool_calls,
    unknown_tool_error,
)

__all__ = [
    "CHECKS_TOGETHER",
    "CUT_CALLS_NOT_REPAIRED",
    "EDITS_NOTED",
    "NON_FINITE_REFUSED",
    "RENDER_OFF_LOOP",
    "ParsedCall",
    "aborted_text",
    "answer_list",
    "answers_by_id",
    "apply_answers",
    "approval_requests",
    "check_answer",
    "check_tool_calls",
    "edit_notes",
    "error_text",
    "iter_invocations",
    "loads_finite",
    "model_result",
    "model_result_off_loop",
    "model_text",
    "non_finite",
    "not_a_number",
    "parse_call",
    "preflight",
    "refusal",
    "result_text",
    "rule_verdict",
    "run_tool_calls",
    "screen_calls",
    "truncate_utf8",
    "unknown_tool_error",
]
