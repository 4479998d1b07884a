"""The loop's policies: forced ``tool_choice``, unknown tools, and calls left unanswered.

Pure functions over the config, the registry and the history, kept out of
:mod:`agcore_tools.cycle.cycle` so the loop itself stays a short read.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import hmac
import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._attachments import is_attachments_message
from .._code_mode import PROGRAM_STATE, RUN_PYTHON
from .._retry_feedback import is_feedback_message
from .._table import LISTED_TOOLS
from .._unicode import scrub, scrub_json
from ..calls import ParsedCall, aborted_text, parse_call, refusal, unknown_tool_error
from ..error import ApprovalError, LlmConfigError, ToolNotOfferedError
from ..pending import PAUSED_CALL
from ..registry import ToolRegistry
from ._stream import Turn
from .profiles import OPENAI, ServerProfile

__all__ = [
    "FREE",
    "OPEN_CALL_MAC",
    "SAVED_KEYS",
    "HistoryMark",
    "answer_unanswered",
    "answered_id",
    "check_open_calls",
    "check_open_tools",
    "check_tool_choice",
    "clean_turn",
    "drop_program_states",
    "forced_choice_served",
    "is_answer",
    "mark_history",
    "mark_unknown",
    "open_call_mac",
    "relaxed_tool_choice",
    "tidy_answers",
    "tool_message",
    "unanswered_calls",
]

Message = dict[str, Any]


OPEN_CALL_MAC = "open_call_mac"
"""The key of a tool call's :func:`open_call_mac` in the history, while it is open."""

SAVED_KEYS = frozenset({PROGRAM_STATE, PAUSED_CALL, OPEN_CALL_MAC})
"""What the history keeps on an open tool call, removed once the call is answered and
never sent to a model (the Chat Completions wire leaves them out of every request)."""


FREE: Any = object()
"""What :func:`relaxed_tool_choice` returns to send no ``tool_choice`` at all."""


def relaxed_tool_choice(options: Mapping[str, Any], profile: ServerProfile = OPENAI) -> Any:
    """The ``tool_choice`` to send once a forced one has served, or None to keep it.

    ``"required"`` and a named tool become ``"auto"``; an ``allowed_tools`` choice in
    ``"required"`` mode keeps its list of tools in ``"auto"`` mode. On a server whose
    model never sees tool results (``ServerProfile.tool_results_in_prompt``), ``"auto"``
    would call the tool again on every turn, so any choice the first request made,
    ``"auto"`` included, is dropped instead (:data:`FREE`): forced first, then free.

    Example:
        >>> relaxed_tool_choice({"tool_choice": {"type": "function", "function": {"name": "f"}}})
        'auto'
        >>> relaxed_tool_choice({"tool_choice": "auto"}) is None
        True
        >>> from agcore_tools.cycle.profiles import LLAMA_CPP_PYTHON
        >>> relaxed_tool_choice({"tool_choice": "required"}, LLAMA_CPP_PYTHON) is FREE
        True
        >>> allowed = {"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": []}}
        >>> relaxed_tool_choice({"tool_choice": allowed})
        {'type': 'allowed_tools', 'allowed_tools': {'mode': 'auto', 'tools': []}}
        >>> allowed = {"type": "allowed_tools", "mode": "required", "tools": []}  # Responses
        >>> relaxed_tool_choice({"tool_choice": allowed})
        {'type': 'allowed_tools', 'mode': 'auto', 'tools': []}
    """
    choice = options.get("tool_choice")
    if not profile.tool_results_in_prompt and choice is not None and choice != "none":
        return FREE
    return _relaxed(choice)


def check_tool_choice(params: Mapping[str, Any]) -> None:
    """Refuse (:class:`~agcore_tools.LlmConfigError`) a request whose ``tool_choice``
    names a function it does not offer, before it is sent: a server answers that with
    an error (llama-cpp-python's is a 500, retried as any 500), never with the call.
    So is one that forces a custom tool, in either API's shape: the loop offers none.
    A request without tools sends no ``tool_choice`` at all.

    Example:
        >>> tools = [{"type": "function", "function": {"name": "get_weather"}}]
        >>> check_tool_choice({"tools": tools, "tool_choice": "required"})
        >>> check_tool_choice({"tools": tools, "tool_choice": {"type": "function", "name": "get_wether"}})
        Traceback (most recent call last):
        ...
        agcore_tools.error.LlmConfigError: tool_choice names 'get_wether', which this request does not offer (did you mean 'get_weather'?): the tools offered are get_weather; name one of them, or offer it (submit_with_tools' registry, its select=)
        >>> check_tool_choice({"tools": tools, "tool_choice": {"type": "custom", "name": "get_weather"}})
        Traceback (most recent call last):
        ...
        agcore_tools.error.LlmConfigError: tool_choice forces the custom tool 'get_weather', but the loop offers function tools only (a registry's), never a custom one, so the API would refuse the request: force a function tool instead, {'type': 'function', 'name': 'get_weather'}
    """
    tools = params.get("tools")
    choice = params.get("tool_choice")
    custom = _custom(choice)
    if tools and custom is not None:
        tool, named = (
            (f"the custom tool {custom!r}", repr(custom)) if custom else ("a custom tool", "...")
        )
        raise LlmConfigError(
            f"tool_choice forces {tool}, but the loop offers function tools only (a "
            "registry's), never a custom one, so the API would refuse the request: force a "
            f"function tool instead, {{'type': 'function', 'name': {named}}}"
        )
    name = _chosen(choice)
    if not tools or name is None:
        return
    offered = [n for n in map(_tool_name, tools) if n is not None]
    if name in offered:
        return
    close = difflib.get_close_matches(name, offered, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    listed = (
        f"the tools offered are {', '.join(offered)}"
        if len(offered) <= LISTED_TOOLS
        else f"{len(offered)} tools are offered"
    )
    raise LlmConfigError(
        f"tool_choice names {name!r}, which this request does not offer{hint}: {listed}; "
        "name one of them, or offer it (submit_with_tools' registry, its select=)"
    )


def _chosen(choice: Any) -> str | None:
    # The function a named tool_choice forces, in the Chat or the Responses shape.
    if not isinstance(choice, Mapping) or choice.get("type") != "function":
        return None
    function = choice.get("function")
    name = function.get("name") if isinstance(function, Mapping) else choice.get("name")
    return name if isinstance(name, str) else None


def _custom(choice: Any) -> str | None:
    # The custom tool a tool_choice forces, in the Chat or the Responses shape: None
    # when it forces none, "" when it names none.
    if not isinstance(choice, Mapping) or choice.get("type") != "custom":
        return None
    custom = choice.get("custom")
    name = custom.get("name") if isinstance(custom, Mapping) else choice.get("name")
    return name if isinstance(name, str) else ""


def _tool_name(tool: Any) -> str | None:
    if not isinstance(tool, Mapping):
        return None
    function = tool.get("function")
    name = function.get("name") if isinstance(function, Mapping) else tool.get("name")
    return name if isinstance(name, str) else None


def forced_choice_served(messages: Sequence[Message]) -> bool:
    """Whether the current exchange, the history since its last user message, already
    holds a tool turn: a forced ``tool_choice`` has then served, and a run that goes on
    with it (a resume after an approval, after ``max_turns``, after an error) sends the
    relaxed choice from its first request. Forcing it again would make the model call the
    tool once more on every resume. The images a tool returned come in a user message of
    their own; that one belongs to the tool turn, not to a new prompt, as does the one
    asking again for a structured answer that failed its schema.

    Example:
        >>> prompt = {"role": "user", "content": "Refund order 7"}
        >>> turn = {"role": "assistant", "content": None, "tool_calls": [{"id": "c1"}]}
        >>> answer = {"role": "tool", "tool_call_id": "c1", "content": "done"}
        >>> forced_choice_served([prompt]), forced_choice_served([prompt, turn, answer])
        (False, True)
        >>> forced_choice_served([prompt, turn, answer, {"role": "user", "content": "And 8?"}])
        False
    """
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        role = message.get("role")
        if role == "assistant" and message.get("tool_calls"):
            return True
        if role == "user" and (index == 0 or not _added_by_loop(message, messages[index - 1])):
            return False
    return False


def _added_by_loop(message: Message, previous: Message) -> bool:
    # A user message the loop adds within a run: a tool result's images, or the retry
    # of a structured answer. Neither is a new prompt.
    return is_attachments_message(message, previous) or is_feedback_message(message, previous)


def _relaxed(choice: Any) -> Any:
    if choice == "required":
        return "auto"
    if not isinstance(choice, Mapping):
        return None  # "auto", "none", or not set
    if choice.get("type") == "allowed_tools":
        allowed = choice.get("allowed_tools")
        if isinstance(allowed, Mapping):  # the Chat Completions shape
            if allowed.get("mode") != "required":
                return None
            return {**choice, "allowed_tools": {**allowed, "mode": "auto"}}
        # The Responses shape: mode and tools on the choice itself.
        return {**choice, "mode": "auto"} if choice.get("mode") == "required" else None
    return "auto"  # a named function or custom tool


def mark_unknown(
    registry: ToolRegistry, calls: Sequence[ParsedCall], *, unoffered_only: bool = False
) -> tuple[ParsedCall, ...]:
    """``calls``, each call to an unregistered tool carrying the error the model reads.

    Such a call never runs; its result is the error text, which lists the tools offered
    (``CycleConfig(unknown_tool="tell_model")``). With ``unoffered_only``,
    only calls to tools the run has and does not offer are marked (their
    :class:`~agcore_tools.ToolNotOfferedError` says how to reach them); whatever
    ``unknown_tool`` says, the model can fix those. A call to a registered tool that a
    run's view leaves out because the permission checker refuses it is not marked: the
    loop refuses it (see ``calls._run.preflight``).

    Example:
        >>> registry = ToolRegistry()
        >>> [call] = mark_unknown(registry, [parse_call("serch", "c1", "{}")])
        >>> str(call.error)
        "tool 'serch' is not registered: the tools offered are: none"
    """
    marked: list[ParsedCall] = []
    table = registry.tool_table
    for call in calls:
        # A tool the run leaves out because the checker refuses it is no unknown tool:
        # preflight refuses its call, as without tool selection.
        if call.name not in registry and refusal(table, call.name) is None:
            error = unknown_tool_error(table, call.name)
            if not unoffered_only or isinstance(error, ToolNotOfferedError):
                call = dataclasses.replace(call, error=error)
        marked.append(call)
    return tuple(marked)


def clean_turn(turn: Turn) -> Turn:
    """``turn`` with lone surrogates in its message and text replaced, so the history
    it joins always encodes as UTF-8."""
    message, text, reasoning = scrub_json(turn.message), scrub(turn.text), scrub(turn.reasoning)
    refusal = scrub(turn.refusal) if turn.refusal is not None else None
    if (
        message is turn.message
        and text is turn.text
        and refusal is turn.refusal
        and reasoning is turn.reasoning
    ):
        return turn
    return dataclasses.replace(
        turn, message=message, text=text, refusal=refusal, reasoning=reasoning
    )


def tool_message(call: ParsedCall, text: str) -> Message:
    """The tool message answering ``call``.

    Example:
        >>> tool_message(parse_call("add", "c1", "{}"), "3")
        {'role': 'tool', 'tool_call_id': 'c1', 'content': '3'}
    """
    return {"role": "tool", "tool_call_id": call.call_id, "content": text}


def _open_calls(messages: Sequence[Message], start: int = 0) -> list[dict[str, Any]]:
    # The last assistant message since `start`, if only tool messages follow it, and
    # those of its raw calls that no tool message answers.
    for index in range(len(messages) - 1, start - 1, -1):
        message = messages[index]
        role = message.get("role")
        if is_answer(message):
            continue
        # The images a sibling call returned follow the turn's tool messages; a call
        # still waiting belongs to the turn all the same.
        if index > 0 and is_attachments_message(message, messages[index - 1]):
            continue
        if role != "assistant":
            break
        answered = {answered_id(m) for m in messages[index + 1 :]}
        # Without an id, no tool message could answer a call anyway.
        return [
            call
            for call in message.get("tool_calls") or ()
            if isinstance(call, dict)
            and isinstance(call.get("id"), str)
            and call["id"] not in answered
        ]
    return []


def answered_id(message: Message) -> Any:
    """The id of the call ``message`` answers, or None when it is no answer: a tool
    message, or a Responses ``function_call_output`` item an app put in the history as
    it was (its output no tool message can hold, such as a list of parts).

    Example:
        >>> answered_id({"role": "tool", "tool_call_id": "c1", "content": "5"})
        'c1'
        >>> answered_id({"type": "function_call_output", "call_id": "c2", "output": []})
        'c2'
        >>> answered_id({"role": "user", "content": "hi"}) is None
        True
    """
    if message.get("role") == "tool":
        return message.get("tool_call_id")
    if "role" not in message and message.get("type") == "function_call_output":
        return message.get("call_id")
    return None


def is_answer(message: Message) -> bool:
    """Whether ``message`` answers a call (see :func:`answered_id`)."""
    return message.get("role") == "tool" or answered_id(message) is not None


def _function(call: Mapping[str, Any]) -> tuple[str, Any]:
    function = call.get("function")
    function = function if isinstance(function, Mapping) else {}
    name = function.get("name")
    return (name if isinstance(name, str) else ""), function.get("arguments")


def _pending(messages: Sequence[Message], start: int = 0) -> list[ParsedCall]:
    calls = []
    for call in _open_calls(messages, start):
        name, arguments = _function(call)
        calls.append(parse_call(name, call["id"], arguments))
    return calls


def open_call_mac(key: bytes, call: Mapping[str, Any]) -> str:
    """The HMAC-SHA256 (hex) under ``key`` of a raw tool call's id, tool name and
    arguments text, stored on a call a run leaves open (:data:`OPEN_CALL_MAC`).

    Example:
        >>> call = {"id": "c1", "function": {"name": "pay", "arguments": "{}"}}
        >>> len(open_call_mac(b"k", call))
        64
    """
    name, arguments = _function(call)
    # A label of its own: this MAC can never pass for an approval's signature.
    text = json.dumps(["open call", call.get("id"), name, arguments], ensure_ascii=False)
    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).hexdigest()


def check_open_calls(messages: Sequence[Message], key: bytes | None) -> None:
    """Refuse (:class:`ApprovalError`) to resume an open call whose :func:`open_call_mac`
    is missing or wrong: its tool or arguments were changed in the history after the
    run left it open, or no run with this key left it open.

    Without a ``key``, refuse an open call that carries one all the same: a run with a
    key left it open, so a resume without it (a missing setting) would trust whatever
    the history now says instead of failing closed.
    """
    for call in _open_calls(messages):
        if key is None:
            if OPEN_CALL_MAC in call:
                raise ApprovalError(
                    f"the open call '{call['id']}' was left open under an approval_key "
                    f"(it carries {OPEN_CALL_MAC}), but this run has none to check it: "
                    "resume with CycleConfig(approval_key=...)",
                    tool_name=_function(call)[0] or None,
                )
            continue
        if not hmac.compare_digest(str(call.get(OPEN_CALL_MAC, "")), open_call_mac(key, call)):
            name, _ = _function(call)
            raise ApprovalError(
                f"the open call '{call['id']}' has a missing or wrong signature: its tool "
                "or arguments were changed in the history after the run paused, or no run "
                "with this approval_key left it open",
                tool_name=name or None,
            )


def check_open_tools(registry: ToolRegistry, calls: Sequence[ParsedCall]) -> None:
    """Refuse (:class:`~agcore_tools.LlmConfigError`) to resume open ``calls`` to a tool
    ``registry`` lacks, before anything is written. Such a call may be one a paused run
    left waiting for approval, in a process whose registry lacks its tool (an MCP server
    that failed to connect): answered as unknown, the request would be gone for good
    and the model would read that the call failed. A new prompt moves on instead.

    Example:
        >>> check_open_tools(ToolRegistry(), [parse_call("pay", "c1", "{}")])
        Traceback (most recent call last):
        ...
        agcore_tools.error.LlmConfigError: the open call 'c1' is to tool 'pay', which the registry lacks: resume with a registry that has it (the call may be waiting for approval, so the history is left as it was), or send a new prompt to move on (the call is then answered as not run)
    """
    for call in calls:
        # A paused program's call says itself how to resume (select=CodeMode()).
        if call.name not in registry and call.name != RUN_PYTHON:
            raise LlmConfigError(
                f"the open call '{call.call_id}' is to tool '{call.name}', which the registry "
                "lacks: resume with a registry that has it (the call may be waiting for "
                "approval, so the history is left as it was), or send a new prompt to move "
                "on (the call is then answered as not run)"
            )


def open_raw_calls(messages: Sequence[Message]) -> dict[str, dict[str, Any]]:
    """The raw calls of the history's last assistant message that no answer follows,
    by id: what the history saved on each (a paused program's state, a paused call's).

    Example:
        >>> call = {"id": "c1", "function": {"name": "add", "arguments": "{}"}}
        >>> list(open_raw_calls([{"role": "assistant", "tool_calls": [call]}]))
        ['c1']
    """
    return {call["id"]: call for call in _open_calls(messages)}


def unanswered_calls(messages: Sequence[Message]) -> list[ParsedCall]:
    """The calls of the history's last assistant message that have no tool message yet.

    Example:
        >>> call = {"id": "c1", "type": "function",
        ...         "function": {"name": "add", "arguments": '{"a": 1}'}}
        >>> [c.call_id for c in unanswered_calls(
        ...     [{"role": "assistant", "content": None, "tool_calls": [call]}])]
        ['c1']
    """
    return _pending(messages)


def answer_unanswered(
    messages: list[Message],
    start: int,
    reason: str,
    keep: Collection[str] = (),
    key: bytes | None = None,
) -> None:
    """Give each unanswered call of the last assistant message since ``start`` a tool
    message saying it was aborted, so the history stays valid for the API; the calls in
    ``keep`` (waiting for approval) stay open, for a resume to answer, each signed with
    ``key`` (:func:`open_call_mac`) when there is one."""
    for call in _pending(messages, start):
        if call.call_id not in keep:
            messages.append(tool_message(call, aborted_text(call, reason)))
    if key is not None:
        # Only calls of this run's own turn: one a resume found open was checked then,
        # and one a resume refused must not be signed as it now reads.
        for raw in _open_calls(messages, start):
            raw[OPEN_CALL_MAC] = open_call_mac(key, raw)
    tidy_answers(messages)
    drop_program_states(messages)


def tidy_answers(messages: list[Message]) -> None:
    """Put the tool messages after the last assistant message back in its calls' order,
    ahead of the attachment messages: answers given on a resume come after the ones
    given before the pause, and tool messages must directly follow their calls.

    Example:
        >>> calls = [{"id": "c1"}, {"id": "c2"}]
        >>> attached = {"role": "user", "content": [{"type": "text", "text": "..."}]}
        >>> history = [{"role": "assistant", "tool_calls": calls},
        ...            {"role": "tool", "tool_call_id": "c2"}, attached,
        ...            {"role": "tool", "tool_call_id": "c1"}]
        >>> tidy_answers(history)
        >>> [m.get("tool_call_id", m["role"]) for m in history]
        ['assistant', 'c1', 'c2', 'user']
    """
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") == "assistant":
            break
    else:
        return
    order = {call.get("id"): n for n, call in enumerate(message.get("tool_calls") or ())}
    tail = messages[index + 1 :]
    tools = sorted(filter(is_answer, tail), key=lambda m: order.get(answered_id(m), len(order)))
    messages[index + 1 :] = tools + [m for m in tail if not is_answer(m)]


@dataclass(frozen=True)
class HistoryMark:
    """The history's last turn as a run found it (:func:`mark_history`): a run refused
    before its first request was sent gives it back unchanged (:meth:`restore`)."""

    start: int
    """The index of the last assistant message (the history's length when none)."""
    tail: list[Message]
    """The messages from ``start`` on, as they were."""
    calls: list[tuple[dict[str, Any], dict[str, Any]]]
    """Each raw call of that assistant message, with a copy of its keys: answering an
    open call drops its saved state and signature (:func:`drop_program_states`)."""

    def restore(self, messages: list[Message]) -> None:
        """Put ``messages`` back as they were when marked."""
        messages[self.start :] = self.tail
        for raw, saved in self.calls:
            raw.clear()
            raw.update(saved)


def mark_history(messages: Sequence[Message]) -> HistoryMark:
    """What a new prompt may change in ``messages`` before its first request is sent:
    the messages from the last assistant message on (the calls it left open get
    declined, and their answers put in order) and that message's calls.

    Example:
        >>> call = {"id": "c1", "function": {"name": "pay", "arguments": "{}"}, "x": 1}
        >>> history = [{"role": "assistant", "content": "", "tool_calls": [call]}]
        >>> mark = mark_history(history)
        >>> history.append({"role": "tool", "tool_call_id": "c1", "content": "declined"})
        >>> del call["x"]
        >>> mark.restore(history)
        >>> len(history), call["x"]
        (1, 1)
    """
    last = next(
        (i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "assistant"),
        len(messages),
    )
    calls = messages[last].get("tool_calls") if last < len(messages) else None
    saved = (
        [(raw, dict(raw)) for raw in calls if isinstance(raw, dict)]
        if isinstance(calls, list)
        else []
    )
    return HistoryMark(last, list(messages[last:]), saved)


def drop_program_states(messages: Sequence[Message]) -> None:
    """Remove the paused states (a program's, a question's) and open-call signatures
    of the last assistant message's answered calls: they are never sent to a model."""
    last = next(
        (i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "assistant"),
        None,
    )
    if last is None:
        return
    calls = list(messages[last].get("tool_calls") or ())
    if not any(isinstance(c, dict) and not SAVED_KEYS.isdisjoint(c) for c in calls):
        return
    # Only the tool messages after that assistant message answer its calls: ids repeat
    # across turns (a server's, or those generated for servers that send none).
    answered = {answered_id(m) for m in messages[last + 1 :] if is_answer(m)}
    for raw in calls:
        if isinstance(raw, dict) and raw.get("id") in answered:
            for saved in SAVED_KEYS:
                raw.pop(saved, None)
