"""Code-mode programs that pause for approval, and their resume, in the loop's history.

A ``run_python`` program that waits for a call needing approval returns
:class:`~agcore_tools._code_mode.ProgramPaused`. The loop then leaves the
``run_python`` call open, as it does a direct call waiting for approval, and stores the
program's state on that call in the history (``tool_calls[i]["program_state"]``), so
``json.dumps(cycle.messages)`` stays all an app saves. With ``CycleConfig(approval_key=)``
the state carries an HMAC, and a resume refuses a state that was changed. A resume
takes the app's answers for the program's calls, checks them as it checks answers to
direct calls, and hands the state and the answers to the call. The state is removed
from the history once the call is answered, so it is never sent to a model.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from .._code_mode import (
    PROGRAM_STATE,
    RUN_PYTHON,
    ProgramPaused,
    RunPythonTool,
    inner_call_id,
)
from ..approval import ApprovalDecision, ApprovalRequest
from ..calls import ParsedCall, apply_answers
from ..error import ApprovalError, LlmConfigError
from ..registry import ToolRegistry
from ._approval import Gate
from ._policy import is_answer

__all__ = [
    "check_signed",
    "hold_paused",
    "last_tool_calls",
    "prepare_resume",
    "resume_programs",
    "state_mac",
]

Message = dict[str, Any]


def state_mac(key: bytes, state: Mapping[str, Any]) -> str:
    body = {k: v for k, v in state.items() if k != "mac"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).hexdigest()


def check_signed(key: bytes | None, state: Mapping[str, Any], what: str, tool_name: str) -> None:
    """Refuse (:class:`ApprovalError`) a paused ``state`` whose signature under ``key``
    is missing or wrong: it was changed in the history. ``what`` names it."""
    if key is not None and not hmac.compare_digest(
        str(state.get("mac", "")), state_mac(key, state)
    ):
        raise ApprovalError(
            f"{what} has a missing or wrong signature: its state in the history was changed",
            tool_name=tool_name,
        )


def last_tool_calls(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The raw calls of the last assistant message, when only its answers (a tool
    message, or a Responses ``function_call_output`` item an app put in the history as
    it was) and attachment messages follow it; else none."""
    for message in reversed(messages):
        if message.get("role") == "assistant":
            return [c for c in message.get("tool_calls") or () if isinstance(c, dict)]
        if not is_answer(message) and message.get("role") != "user":
            break
    return []


def hold_paused(
    messages: Sequence[Message],
    call: ParsedCall,
    paused: ProgramPaused,
    gate: Gate,
    key: bytes | None,
) -> None:
    """Leave ``call`` open with its program's state, and its requests waiting."""
    state = dict(paused.state)
    if key is not None:
        state["mac"] = state_mac(key, state)
    for raw in last_tool_calls(messages):
        if raw.get("id") == call.call_id:
            raw[PROGRAM_STATE] = state
    requests = [r.signed(key) if key is not None else r for r in paused.requests]
    gate.hold(call.call_id, requests)


def resume_programs(
    messages: Sequence[Message],
    calls: Sequence[ParsedCall],
    registry: ToolRegistry,
    gate: Gate,
    key: bytes | None,
) -> list[ParsedCall]:
    """Prepare each open ``run_python`` call of a paused program to go on from its
    state, with the app's answers to its calls (checked: :class:`ApprovalError`
    otherwise). The calls themselves are returned unchanged."""
    states = {
        c.get("id"): c[PROGRAM_STATE] for c in last_tool_calls(messages) if PROGRAM_STATE in c
    }
    _check_states_kept(calls, states, gate)
    if not states:
        return list(calls)
    tool = registry.get(RUN_PYTHON)
    if not isinstance(tool, RunPythonTool):
        raise LlmConfigError(
            "the history holds a code-mode program paused for approval; resume it with "
            "submit_with_tools(None, registry, select=CodeMode(), approvals=[...])"
        )
    paused: list[tuple[ParsedCall, Mapping[str, Any], list[str]]] = []
    for call in calls:
        state = states.get(call.call_id)
        if state is None or call.args is None:
            continue
        if isinstance(state, Mapping):  # else _waiting refuses it as malformed
            check_signed(key, state, f"the paused program of call '{call.call_id}'", RUN_PYTHON)
        waiting = [inner_call_id(call.call_id, w["id"]) for w in _waiting(call, state)]
        paused.append((call, state, waiting))
    _check_answered(calls, paused, gate)
    for call, state, waiting in paused:
        prepare_resume(call, state, gate.take(waiting), tool, key)
    return list(calls)


def _check_states_kept(calls: Sequence[ParsedCall], states: Mapping[Any, Any], gate: Gate) -> None:
    """Refuse answers to a program's calls (``<id>~<n>``) when the history lost that
    program's state: the call would start the program again, re-running every call it
    made before the pause. A store that keeps only a tool call's standard fields does
    this."""
    stateless = {c.call_id for c in calls if c.name == RUN_PYTHON and c.call_id not in states}
    for call_id in gate.answered:
        outer, tilde, number = call_id.rpartition("~")
        if tilde and number.isdigit() and outer in stateless:
            raise ApprovalError(
                f"call '{call_id}' belongs to the paused program of call '{outer}', whose "
                f"state is missing from the history (its tool call has no '{PROGRAM_STATE}' "
                "key): save and load cycle.messages whole, as JSON"
            )


def _waiting(call: ParsedCall, state: Any) -> list[dict[str, Any]]:
    """The calls ``state`` waits for; :class:`ApprovalError` naming the key when the
    state in the history is malformed (an app's bug, a store that cut it short, or an
    edit an ``approval_key`` would refuse), before any of its calls runs."""
    waiting = state.get("waiting") if isinstance(state, Mapping) else None
    if not isinstance(waiting, list) or not all(_is_waiting_call(w) for w in waiting):
        _malformed(call, "'waiting' is missing or not a list of calls (id, tool, arguments)")
    for key, (required, fits, what) in _STATE_KEYS.items():
        if key not in state:
            if required:
                _malformed(call, f"'{key}' is missing")
        elif not fits(state[key]):
            _malformed(call, f"'{key}' is not {what}")
    return list(waiting)


def _malformed(call: ParsedCall, why: str) -> NoReturn:
    raise ApprovalError(
        f"the paused program of call '{call.call_id}' has a malformed state in the history: {why}",
        tool_name=RUN_PYTHON,
    )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_base64(value: Any) -> bool:
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, TypeError, ValueError):
        return False
    return isinstance(value, str) and bool(value)


def _is_done(value: Any) -> bool:
    """The results a program has not received yet: call number -> its value or error."""
    return isinstance(value, dict) and all(
        isinstance(number, str)
        and number.isascii()
        and number.isdigit()
        and isinstance(entry, dict)
        and (
            "value" in entry
            or (
                isinstance(entry.get("error"), list)
                and len(entry["error"]) == 2
                and all(isinstance(part, str) for part in entry["error"])
            )
        )
        for number, entry in value.items()
    )


def _is_numbers(value: Any) -> bool:
    return isinstance(value, list) and all(map(_is_int, value))


def _is_texts(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(line, str) for line in value)


def _is_text(value: Any) -> bool:
    return isinstance(value, str)


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool)


_STATE_KEYS = {
    # key: (required, check, what it must be); "ran", "calls", "awaited" and "edited" are absent
    # from the states of earlier versions.
    "snapshot": (True, _is_base64, "the program's snapshot (base64 text)"),
    "pending": (True, _is_numbers, "a list of call numbers"),
    "done": (True, _is_done, "an object of results by call number ({value} or {error})"),
    "printed": (False, _is_text, "text"),
    "dropped": (False, _is_bool, "true or false"),
    "ran": (False, _is_texts, "a list of texts"),
    "calls": (False, _is_int, "a number of calls"),
    "awaited": (False, _is_numbers, "a list of call numbers"),
    "edited": (False, _is_texts, "a list of texts"),
}


def _is_waiting_call(entry: Any) -> bool:
    return (
        isinstance(entry, dict)
        and isinstance(entry.get("id"), int)
        and isinstance(entry.get("tool"), str)
        and isinstance(entry.get("arguments"), dict)
    )


def _check_answered(
    calls: Sequence[ParsedCall],
    paused: Sequence[tuple[ParsedCall, Mapping[str, Any], list[str]]],
    gate: Gate,
) -> None:
    """Refuse an approval naming no call that can be answered: a paused program's own
    call is not one; the calls its program waits for are."""
    programs = {call.call_id for call, _, _ in paused}
    answerable = [c.call_id for c in calls if c.call_id not in programs]
    answerable += [inner for _, _, waiting in paused for inner in waiting]
    for call_id in gate.answered:
        if call_id not in answerable:
            listed = ", ".join(f"'{i}'" for i in answerable) or "none"
            raise ApprovalError(
                f"no call '{call_id}' is awaiting approval (the open calls are: {listed})"
            )


def prepare_resume(
    call: ParsedCall,
    state: Mapping[str, Any],
    answers: Mapping[str, ApprovalDecision],
    tool: RunPythonTool,
    key: bytes | None,
) -> None:
    """Have ``tool``'s next run of ``call`` go on from its paused program's ``state``,
    with the ``answers`` to the program's calls, checked as answers to direct calls
    are (:class:`ApprovalError`)."""
    waiting = {inner_call_id(call.call_id, w["id"]): w for w in state["waiting"]}
    inner = [
        ParsedCall(i, w["tool"], json.dumps(w["arguments"]), dict(w["arguments"]))
        for i, w in waiting.items()
    ]
    requests = [ApprovalRequest(c.call_id, c.name, c.args or {}, "") for c in inner]
    runnable, _ = apply_answers(tool.table, inner, requests, answers, key)
    given: dict[str, Any] = {}
    for answered in runnable:
        number = str(waiting[answered.call_id]["id"])
        if answered.error is not None:
            given[number] = {"declined": str(answered.error)}
        else:
            given[number] = {"run": answered.args}
    tool.resume_next(call.call_id, {"state": dict(state), "answers": given})
