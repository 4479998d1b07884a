"""Calls paused on a question to the user, and their resume, in the loop's history.

A tool that asks the user something (an MCP server's input request, with no
``elicitation_handler`` to answer it) returns :class:`~agcore_tools.pending.CallPaused`.
The loop then leaves the call open, as it does a call waiting for approval, and stores
the questions and the tool's state on that call in the history
(``tool_calls[i]["paused_call"]``), signed with ``CycleConfig(approval_key=)`` when there
is one. A resume takes the app's answers (:class:`~agcore_tools.InputAnswer`), checks
them against the questions' schemas, and hands state and answers to the tool's
``resume_next``; the call then runs again, and is not asked for approval a second time
(it was approved before it ran). The state is removed once the call is answered.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from typing import Any, NoReturn

from ..calls import ParsedCall
from ..error import ApprovalError, LlmConfigError
from ..pending import (
    PAUSED_CALL,
    CallPaused,
    InputAnswer,
    InputRequest,
    ResumableTool,
    RunningTask,
    check_content,
)
from ..registry import ToolRegistry
from ._approval import Gate
from ._programs import check_signed, last_tool_calls, state_mac

__all__ = ["hold_call", "prepare_call_resume", "resume_calls"]

Message = dict[str, Any]


def hold_call(
    messages: Sequence[Message],
    call: ParsedCall,
    paused: CallPaused,
    gate: Gate,
    key: bytes | None,
) -> None:
    """Leave ``call`` open with its questions and state, and the questions waiting."""
    held: dict[str, Any] = {
        "state": paused.state,
        "requests": [
            {"kind": "task" if isinstance(r, RunningTask) else "input", **asdict(r)}
            for r in paused.requests
        ],
    }
    for raw in last_tool_calls(messages):
        if raw.get("id") != call.call_id:
            continue
        function = raw.get("function")
        given = function.get("arguments") if isinstance(function, Mapping) else None
        if call.args is not None and call.arguments != given:
            # An approval edited them: the history keeps the model's, and the call goes
            # on (an MCP server's input_required asks again) with those that ran.
            held["arguments"] = call.args
        if key is not None:
            held["mac"] = state_mac(key, held)
        raw[PAUSED_CALL] = held
    gate.hold(call.call_id, paused.requests)


def resume_calls(
    messages: Sequence[Message],
    calls: Sequence[ParsedCall],
    registry: ToolRegistry,
    gate: Gate,
    key: bytes | None,
) -> tuple[list[ParsedCall], set[str]]:
    """The calls to run now, and the ids of those that go on from a pause.

    An open call whose questions all have answers (or that waits for a task only) is
    prepared to go on (its tool's ``resume_next``); one with no answers stays open and
    waiting; one with some is refused (:class:`ApprovalError`: an answer would be lost).
    """
    held = {c.get("id"): c[PAUSED_CALL] for c in last_tool_calls(messages) if PAUSED_CALL in c}
    if not held:
        gate.check_inputs_used()
        return list(calls), set()
    to_run: list[ParsedCall] = []
    resumed: set[str] = set()
    for call in calls:
        saved = held.get(call.call_id)
        if saved is None:
            to_run.append(call)
            continue
        state, items, ran_with = _saved(call, saved, key)
        if ran_with is not None:  # the arguments an approval edited the call into
            call = replace(call, arguments=json.dumps(ran_with, ensure_ascii=False), args=ran_with)
        questions = [r for r in items if isinstance(r, InputRequest)]
        answers = gate.take_inputs(r.request_id for r in questions)
        if questions and not answers:
            if call.call_id in gate.answered:
                raise ApprovalError(
                    f"call '{call.call_id}' waits for the answer to its question "
                    f"'{questions[0].request_id}', not for approval: answer it with the "
                    "InputRequest's accept(), decline() or cancel()",
                    tool_name=call.name,
                )
            gate.hold(call.call_id, items)
            continue
        missing = [r.request_id for r in questions if r.request_id not in answers]
        if missing:
            raise ApprovalError(
                f"call '{call.call_id}' asked {len(questions)} questions; answer them all "
                f"together (no answer to {', '.join(missing)})",
                tool_name=call.name,
            )
        prepare_call_resume(call, registry, state, questions, answers)
        to_run.append(call)
        resumed.add(call.call_id)
    gate.check_inputs_used()
    return to_run, resumed


def _saved(
    call: ParsedCall, saved: Any, key: bytes | None
) -> tuple[Mapping[str, Any], list[InputRequest | RunningTask], dict[str, Any] | None]:
    """The state and the requests the history saved for ``call``, checked against its
    signature under ``key``; :class:`ApprovalError` naming what is wrong when it is
    malformed (an app's bug, a store that cut it short, or an edit an ``approval_key``
    would refuse), before anything runs."""
    if not isinstance(saved, Mapping):
        _malformed(call, "it is not an object")
    check_signed(key, saved, f"the paused call '{call.call_id}'", call.name)
    state = saved.get("state")
    if not isinstance(state, Mapping):
        _malformed(call, "'state' is missing or not an object")
    requests = saved.get("requests")
    if not isinstance(requests, list):
        _malformed(call, "'requests' is missing or not a list")
    ran_with = saved.get("arguments")  # absent when no approval edited the call
    if ran_with is not None and not isinstance(ran_with, dict):
        _malformed(call, "'arguments' is not an object")
    return state, [_item(call, raw) for raw in requests], ran_with


# Each field a saved request holds, and the types it may have ("kind" says which).
_FIELDS: dict[str, dict[str, tuple[type, ...]]] = {
    "input": {
        "request_id": (str,),
        "call_id": (str,),
        "tool_name": (str,),
        "message": (str,),
        "requested_schema": (dict,),
    },
    "task": {
        "request_id": (str,),
        "call_id": (str,),
        "tool_name": (str,),
        "server": (str,),
        "task_id": (str,),
        "status": (str,),
        "message": (str, type(None)),
    },
}


def _item(call: ParsedCall, raw: Any) -> InputRequest | RunningTask:
    kind = raw.get("kind") if isinstance(raw, Mapping) else None
    if not isinstance(kind, str) or kind not in _FIELDS:
        _malformed(call, "a request is not an object whose 'kind' is 'input' or 'task'")
    fields = {k: v for k, v in raw.items() if k != "kind"}
    types = _FIELDS[kind]
    for name, value in fields.items():
        if name not in types or not isinstance(value, types[name]):
            _malformed(call, f"a request's {name!r} is not one of its fields or has the wrong type")
    missing = [name for name in types if name not in fields and name != "requested_schema"]
    if kind == "task" and "message" in missing:
        missing.remove("message")
    if missing:
        _malformed(call, f"a request lacks {', '.join(repr(name) for name in missing)}")
    return RunningTask(**fields) if kind == "task" else InputRequest(**fields)


def _malformed(call: ParsedCall, why: str) -> NoReturn:
    raise ApprovalError(
        f"the paused call '{call.call_id}' has a malformed state in the history: {why}",
        tool_name=call.name,
    )


def prepare_call_resume(
    call: ParsedCall,
    registry: ToolRegistry,
    state: Mapping[str, Any],
    requests: Sequence[InputRequest],
    answers: Mapping[str, InputAnswer],
) -> None:
    """Have the tool's next run of ``call`` go on from ``state`` with the ``answers``,
    each checked against its question (:class:`ApprovalError`)."""
    tool = registry.get(call.name)
    if not isinstance(tool, ResumableTool):
        raise LlmConfigError(
            f"the history holds call '{call.call_id}' paused on a question, but the "
            f"registry's tool '{call.name}' cannot resume it; resume with the registry "
            "that made it"
        )
    given: dict[str, Any] = {}
    for request in requests:
        answer = answers[request.request_id]
        if answer.call_id != call.call_id:
            raise ApprovalError(
                f"the answer to input request '{request.request_id}' names call "
                f"'{answer.call_id}', not '{call.call_id}'",
                tool_name=call.name,
            )
        if answer.action not in ("accept", "decline", "cancel"):
            raise ApprovalError(
                f"the answer to input request '{request.request_id}' has the action "
                f"{answer.action!r}; use accept, decline or cancel",
                tool_name=call.name,
            )
        content = None
        if answer.action == "accept":
            # Checked again here: an answer rebuilt from JSON skipped InputRequest.accept.
            content = check_content(
                request.request_id, request.requested_schema, answer.content or {}
            )
        given[request.request_id] = {"action": answer.action, "content": content}
    tool.resume_next(call.call_id, {"state": dict(state), "answers": given})
