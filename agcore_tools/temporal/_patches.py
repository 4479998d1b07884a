"""The ``workflow.patched`` ids of :class:`~agcore_tools.temporal.ToolLoopWorkflow`.

Where an earlier worker already acted differently (took an approve signal, handled a
cancellation), a newer worker replaying the run's history acts as the earlier one did,
else the history would not replay (tests/temporal/histories/v0.2.0-*.json): runs in
flight across an upgrade, and queries of finished runs. What comes after the upgrade
takes the new behaviour. When no run an earlier version touched is left, deprecate
them (``workflow.deprecate_patch``), then drop them.
"""

from __future__ import annotations

__all__ = [
    "APPROVALS_ADD_UP",
    "CALLS_LIMITED",
    "CALLS_PER_TURN_LIMITED",
    "CANCEL_ENDS_RUN",
    "CHECKS_TOGETHER",
    "CONVERSATION_TAIL",
    "CUT_CALLS_NOT_REPAIRED",
    "DERIVED_IDS_RESERVED",
    "EDITS_NOTED",
    "IDS_PAST_HISTORY",
    "NON_FINITE_REFUSED",
    "OFFERED_LISTED",
    "PERMISSIONS_PER_QUEUE",
    "PERMISSION_NAMES_NORMALISED",
    "REQUESTS_AS_TEXT",
    "UNAWAITED_CALLS_FAIL",
    "UNIQUE_CALL_IDS",
    "UNOFFERED_CHOICE_REFUSED",
    "WRAPPED_AGAIN",
]

APPROVALS_ADD_UP = "agcore-approvals-add-up"
"""Answers add up across signals; a misfit one is dropped (0.2.0: the last signal's
answers applied as they were, and a misfit one failed the run)."""
CANCEL_ENDS_RUN = "agcore-cancelled-run-ends-canceled"
"""A cancelled activity ends the run CANCELED (0.2.0: read as the tool's or the model
request's failure, and the loop went on)."""
IDS_PAST_HISTORY = "agcore-ids-past-history"
"""Tool call ids the loop generates (for a server that sends none) start past the input
history's (0.2.0: from call_0_0 again, so a saved history's ids came back, and the
run's approve signals answered those)."""
UNAWAITED_CALLS_FAIL = "agcore-unawaited-calls-fail"
"""A code-mode program that ends with tool calls it never awaited fails, telling the
model to await them (0.2.0: it ended as it was, its output holding ``<coroutine ...>``,
and the calls still running were cancelled)."""
PERMISSIONS_PER_QUEUE = "agcore-permissions-per-queue"
"""Each tool follows the permission policy of the task queue that describes it (before:
the run's own queue's policy held for the tools of ``tool_task_queues`` too, so their
queue's ``PermissionConfig.ask`` let their calls run unasked)."""
REQUESTS_AS_TEXT = "agcore-requests-as-text"
"""A model request's parameters but its history go to the activity as JSON text too,
in the order the loop made them, and each tool call asks for its result as JSON text
(``ToolCallInput.as_text``) (before: as JSON values only, which Temporal's converter
writes with sorted keys, so the tools' schemas and results reached the model with
their keys sorted). The tools' description is read from its JSON text wherever the
recorded payload has it, which needs no patch: a payload recorded before has none, and
reads as it did."""
CALLS_LIMITED = "agcore-program-calls-limited"
"""A code-mode program's tool calls are counted against ``CodeMode`` limits'
``max_calls`` across its steps (before: only Monty's ``max_suspensions``, which
restarted at every step, so a program's calls were not bounded)."""
CHECKS_TOGETHER = "agcore-approval-checks-together"
"""The ``needs_approval`` functions of a turn's calls (an activity each) run at the same
time (before: one after another, each activity scheduled once the one before ended)."""
CUT_CALLS_NOT_REPAIRED = "agcore-cut-calls-not-repaired"
"""A tool call of a turn cut at the output token limit is never repaired: one whose
arguments do not parse is answered with an error naming the limit (before: with
``repair_arguments=True``, its arguments were closed and the tool ran with its defaults
for the arguments never written)."""
UNIQUE_CALL_IDS = "agcore-call-ids-unique-in-history"
"""A tool call whose server-given id an earlier call of the history has (a server that
numbers each response's calls from "0" again) gets an id of its own, and so its own
idempotency key (before: the two calls shared one id and one key)."""
DERIVED_IDS_RESERVED = "agcore-derived-call-ids-reserved"
"""A tool call whose server-given id holds ``~`` gets an id of its own, so that it
never shares one with a code-mode program's call (``<id>~<n>``), and a generated id
never repeats another call's of the turn (before: a server's ``c1~0`` kept its id, and
two pending approvals shared it with the call the program ``c1`` made)."""
PERMISSION_NAMES_NORMALISED = "agcore-permission-names-normalised"
"""The custom permission names the workers describe are read as ``Permission.custom``
reads them: in lower case, without surrounding spaces (before: as recorded, so a tool's
``mcp:GitHub`` and a policy's ``mcp:github`` did not match)."""
UNOFFERED_CHOICE_REFUSED = "agcore-unoffered-choice-refused"
"""A request whose ``tool_choice`` names a tool it does not offer (a typo, a tool a
``select=`` left out), or forces a custom tool, fails the run before the model request
is scheduled (before: the ``agcore.model_request`` activity ran and the server's error
failed the run)."""
NON_FINITE_REFUSED = "agcore-non-finite-arguments-refused"
"""A model's tool call whose arguments hold ``NaN``, ``Infinity``, ``-Infinity`` or a
number past a float's range (a code-mode program's call too, and an approval's edited
arguments) is answered with an ``InvalidArgumentsError`` naming the argument, and
neither asks for approval nor runs (before: Python's ``json`` read them as floats, a
``needs_approval`` rule comparing them said no, and ``agcore.call_tool`` ran)."""
OFFERED_LISTED = "agcore-unknown-tool-lists-offered"
"""An unknown tool's error (``unknown_tool="tell_model"``, or the ``LlmError`` of
``"raise"``) lists only the tools the permissions allow, as the requests offer them
(before: every registered tool, a denied one too, which the model then called and its
refusal failed the run). Only the text the model reads changes, which a replay does not
check: gated so that a run's history, and its ``messages`` query, keep what the model
read."""
CALLS_PER_TURN_LIMITED = "agcore-tool-calls-per-turn-limited"
"""The tool calls of one model answer past ``Limits.max_tool_calls_per_turn`` (128 by
default) are answered "not run" and schedule no ``agcore.call_tool`` (before: every
call of the answer ran, as an activity each)."""
WRAPPED_AGAIN = "agcore-mcp-plain-values-unwrapped"
"""A plain value an MCP server wraps as ``{"result": v}`` (FastMCP, the MCP Python SDK)
reaches the model as ``v`` (``ToolCallInput.unwraps``), and a code-mode program as the
``{"result": v}`` its listing promises (before: the activity returned the object, and
the model read it as JSON)."""
EDITS_NOTED = "agcore-edited-calls-noted"
"""The result of a call an approval edited begins with a note of the arguments it ran
with (and a code-mode program's output, with a note of each of its calls an approval
edited), and a prompt that goes on past a paused program's call lists the calls that
ran (before: the result alone, and "declined" alone). Only the text the model reads
changes, which a replay does not check: gated so that a run's history, and its
``messages`` query, keep what the model read (tests/temporal/histories/v0.2.0-reject-edit.json)."""
CONVERSATION_TAIL = "agcore-conversation-sends-what-follows"
"""A Responses API request with a ``conversation`` option sends only what follows the
last response, as the server prepends the conversation's items (before: the whole
history, each earlier item twice, which OpenAI refuses with "Duplicate item found").
Only the ``agcore.model_request`` input changes, which a replay does not check: gated so
that a run's requests, and the payload size check made on them, stay as they ran."""
