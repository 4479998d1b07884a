"""The ids of the tool calls a run generates, read from the history alone.

Apart from the loop (``_run``) because they are a rule of their own, which a Temporal
workflow's replay depends on: a resumed history's calls and the new ones keep distinct
ids (and so distinct idempotency keys), and a call whose server-given id an earlier
call has gets one of its own. Reading nothing but the history, a saved and resumed
history, and a replay, give each call the id it had. The two switches are the
workflow's, set from ``workflow.patched`` for runs begun before each rule.
"""

from __future__ import annotations

import re
from contextvars import ContextVar
from typing import Any

__all__ = ["IDS_PAST_HISTORY", "UNIQUE_CALL_IDS", "call_ids", "first_free_tag"]

Message = dict[str, Any]

IDS_PAST_HISTORY: ContextVar[bool] = ContextVar("agcore_tools_ids_past_history", default=True)
"""Whether a run moves its generated ids past the history's (:func:`first_free_tag`).
False only in a Temporal workflow run that a 0.2.0 worker began, replayed and going on
after an upgrade: 0.2.0 went on from the cycle's own count, and the run's recorded
approvals answer the ids it made then (the workflow sets it from ``workflow.patched``;
the cycle knows nothing of Temporal)."""


def first_free_tag(messages: list[Message], floor: int) -> int:
    """The first tag, from ``floor`` on, that no generated tool call id in ``messages``
    (``call_{tag}_{n}``) has: a resumed history's calls and the new ones keep distinct
    ids, and so distinct idempotency keys. Read from the history alone, so a replay
    (Temporal's) generates the same ids.

    Example:
        >>> history = [{"role": "tool", "tool_call_id": "call_0_0", "content": "ok"},
        ...            {"role": "assistant", "content": "", "tool_calls": [{"id": "call_3_1"}]}]
        >>> first_free_tag(history, 0), first_free_tag(history, 7), first_free_tag([], 2)
        (4, 7, 2)
    """
    tag = floor
    for message in messages:
        ids = [message.get("tool_call_id")]
        calls = message.get("tool_calls")
        if isinstance(calls, list):
            ids += [call.get("id") for call in calls if isinstance(call, dict)]
        for call_id in ids:
            generated = _GENERATED_ID.fullmatch(call_id) if isinstance(call_id, str) else None
            if generated is not None and int(generated[1]) >= tag:
                tag = int(generated[1]) + 1
    return tag


_GENERATED_ID = re.compile(r"call_([0-9]+)_[0-9]+")

UNIQUE_CALL_IDS: ContextVar[bool] = ContextVar("agcore_tools_unique_call_ids", default=True)
"""Whether a call whose server-given id an earlier call of the history has gets an id
of its own (:func:`call_ids`). False only in a Temporal workflow run begun before that
(the workflow sets it from ``workflow.patched``)."""


def call_ids(messages: list[Message]) -> set[str]:
    """Every tool call id in ``messages``: of assistant messages' calls, of tool
    messages, and of Responses items. A new turn's call with one of them gets an id of
    its own: a server that numbers each response's calls from "0" again would give a
    new call an earlier call's id, and with it its idempotency key (the run id and the
    call id), so a payment API would take the second charge for a retry of the first.
    Read from the history alone, so a saved and resumed history, and a replay
    (Temporal's), give each call the id it had.

    Example:
        >>> history = [{"role": "assistant", "content": "", "tool_calls": [{"id": "0"}]},
        ...            {"role": "tool", "tool_call_id": "0", "content": "ok"},
        ...            {"type": "function_call_output", "call_id": "fc_1", "output": "ok"}]
        >>> sorted(call_ids(history))
        ['0', 'fc_1']
    """
    found: set[str] = set()
    for message in messages:
        for key in ("tool_call_id", "call_id"):
            value = message.get(key)
            if isinstance(value, str):
                found.add(value)
        calls = message.get("tool_calls")
        if isinstance(calls, list):
            found.update(
                call["id"]
                for call in calls
                if isinstance(call, dict) and isinstance(call.get("id"), str)
            )
    return found
