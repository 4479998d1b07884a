"""The messages an app gives a cycle, checked before they reach the history.

``submit_messages`` takes dicts, and the OpenAI SDK's own message objects (an app's
loop often appends ``completion.choices[0].message`` as it is), read as their dicts.
``cycle.messages`` is the app's to fill, too; it is checked once as a run starts, so a
wrong entry is an error naming it, not an ``AttributeError`` deep in the loop.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableSequence, Sequence
from typing import Any

from pydantic import BaseModel

from .._unicode import scrub_json
from ..error import LlmUsageError

__all__ = ["ROLES", "check_history", "given_messages", "has_parsed", "kind", "without_parsed"]

Message = dict[str, Any]

ROLES = ("system", "developer", "user", "assistant", "tool", "function")
"""The roles a Chat Completions message may have."""


def kind(value: object) -> str:
    """What the caller passed, for an error message, with the fix for a function that
    is not a tool yet.

    Example:
        >>> kind(print)
        "builtin_function_or_method 'print' (decorate it with @tool)"
        >>> kind([])
        'list'
    """
    name = getattr(value, "__qualname__", None)
    if callable(value) and isinstance(name, str) and not isinstance(value, type):
        return f"{type(value).__name__} {name!r} (decorate it with @tool)"
    return type(value).__name__


def given_messages(messages: object, api: str, method: str) -> list[Message]:
    """``messages`` as new dicts for the history, each checked, with every lone surrogate
    in their text replaced by U+FFFD (no request can encode one); an SDK message object
    (a pydantic model) is read as its ``to_dict()``, with ``content`` ``""`` next to
    tool calls (the one shape every server takes back).

    Anything else raises :class:`~agcore_tools.error.LlmUsageError` (a ``TypeError``)
    naming ``method`` and the message's index.

    Example:
        >>> from openai.types.chat import ChatCompletionMessage
        >>> message = ChatCompletionMessage.model_validate({"role": "assistant",
        ...     "content": None, "tool_calls": [{"id": "c1", "type": "function",
        ...     "function": {"name": "add", "arguments": "{}"}}]})
        >>> given_messages([message], "chat", "submit_messages")[0]["content"]
        ''
        >>> given_messages([("user", "hi")], "chat", "submit_messages")
        Traceback (most recent call last):
        ...
        agcore_tools.error.LlmUsageError: submit_messages() takes messages as dicts, got tuple at index 0
    """
    # Checked here: a string or a dict was read as pairs (a bare ValueError), and a
    # message without a known role was sent for the server to refuse.
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Iterable):
        one = " (put one message in a list)" if isinstance(messages, Mapping) else ""
        raise LlmUsageError(
            f"{method}() takes a list of messages (dicts with a role), got "
            f"{kind(messages)}{one}; to send a prompt, call submit()"
        )
    added: list[Message] = []
    for index, message in enumerate(messages):
        if isinstance(message, BaseModel):
            message = _as_dict(message)
        if not isinstance(message, Mapping):
            raise LlmUsageError(
                f"{method}() takes messages as dicts, got {kind(message)} at index {index}"
                f"{_NESTED if isinstance(message, list) else ''}"
            )
        role = message.get("role")
        # On the Responses API a typed item without a role is sent as the item it is.
        item = role is None and api == "responses" and isinstance(message.get("type"), str)
        if role not in ROLES and not item:
            got = f"role {role!r}" if role is not None else "no role"
            kind_of = message.get("type")
            hint = (
                f" (a Responses API item of type {kind_of!r}, such as response.output "
                "holds: use CycleConfig(api='responses') for such a history)"
                if role is None and _is_item_type(kind_of)
                else ""
            )
            raise LlmUsageError(
                f"{method}() got a message with {got} at index {index}: a message's role is "
                f"one of {', '.join(ROLES)}{hint}"
            )
        added.append(scrub_json(_with_calls_read(message) or dict(message)))
    return added


# history.append(response.output), or of run_tool_calls()'s messages: a list in a list.
_NESTED = (
    " (a list inside the list: extend the history with it, history += response.output, "
    "rather than append it)"
)


def _with_calls_read(message: Mapping[str, Any]) -> dict[str, Any] | None:
    """``message`` with the SDK's tool call objects in its ``tool_calls`` read as dicts,
    or None when it holds none: apps build ``{"role": "assistant", "tool_calls":
    message.tool_calls}`` around the SDK's objects (the SDK's create() takes them), and
    the loop reads calls as dicts only (an open one would go unseen and unanswered)."""
    calls = message.get("tool_calls")
    if not isinstance(calls, list) or all(type(call) is dict for call in calls):
        return None
    if not any(isinstance(call, BaseModel) for call in calls):
        return None
    return {**message, "tool_calls": [_call_read(call) for call in calls]}


def _call_read(call: Any) -> Any:
    if not isinstance(call, BaseModel):
        return call
    data = _as_dict(call)
    function = data.get("function") if isinstance(data, dict) else None
    if isinstance(function, Mapping):
        data["function"] = _without(function)
    return data


def _as_dict(model: BaseModel) -> Any:
    # The SDK's to_dict() leaves out the fields the server did not send.
    to_dict = getattr(model, "to_dict", None)
    data: Any = (
        to_dict(mode="json")
        if callable(to_dict)
        else model.model_dump(mode="json", by_alias=True, exclude_unset=True)
    )
    if isinstance(data, dict):
        data = without_parsed(data)
        if data.get("tool_calls") and data.get("content") is None:
            # llama-cpp-python's server answers 500 to a null content.
            data["content"] = ""
    return data


# What the SDK's parse() helpers add to the objects they return (the answer and the
# arguments read into the caller's types), and no API takes back: OpenAI refuses a
# Responses item holding one ("Unknown parameter: 'input[2].parsed_arguments'").
_PARSED = ("parsed", "parsed_arguments")


def without_parsed(message: Mapping[str, Any]) -> dict[str, Any]:
    """``message`` (a Chat Completions message or a Responses item, as a dict) less what
    the SDK's ``parse()`` helpers added to it: ``parsed`` on a message and on its
    ``output_text`` parts, ``parsed_arguments`` on a call (a Responses
    ``function_call``, or a Chat call's ``function``), and a ``tool_calls`` of None.

    Example:
        >>> without_parsed({"type": "function_call", "call_id": "c1", "name": "add",
        ...                 "arguments": '{"a": 1}', "parsed_arguments": {"a": 1}})
        {'type': 'function_call', 'call_id': 'c1', 'name': 'add', 'arguments': '{"a": 1}'}
        >>> without_parsed({"role": "assistant", "content": "{}", "tool_calls": None,
        ...                 "parsed": {}})
        {'role': 'assistant', 'content': '{}'}
    """
    data = {k: v for k, v in message.items() if k not in _PARSED}
    if "tool_calls" in data and data["tool_calls"] is None:
        del data["tool_calls"]
    calls = data.get("tool_calls")
    if isinstance(calls, list):
        data["tool_calls"] = [
            {**call, "function": _without(call["function"])}
            if isinstance(call, Mapping) and isinstance(call.get("function"), Mapping)
            else call
            for call in calls
        ]
    content = data.get("content")
    if isinstance(content, list):
        data["content"] = [
            _without(part) if isinstance(part, Mapping) else part for part in content
        ]
    return data


def has_parsed(message: Mapping[str, Any]) -> bool:
    """Whether ``message`` holds something :func:`without_parsed` leaves out.

    Example:
        >>> has_parsed({"role": "assistant", "content": "{}", "parsed": {}})
        True
        >>> has_parsed({"role": "assistant", "content": "{}"})
        False
    """
    if any(key in message for key in _PARSED):
        return True
    calls = message.get("tool_calls", ())
    if calls is None:
        return True
    content = message.get("content")
    parts = [
        *(calls if isinstance(calls, list) else ()),
        *(content if isinstance(content, list) else ()),
    ]
    for part in parts:
        if not isinstance(part, Mapping):
            continue
        inner = part.get("function")
        if any(key in part for key in _PARSED) or (
            isinstance(inner, Mapping) and any(key in inner for key in _PARSED)
        ):
            return True
    return False


def _without(value: Mapping[str, Any]) -> Any:
    if not any(key in value for key in _PARSED):
        return value
    return {k: v for k, v in value.items() if k not in _PARSED}


def check_history(messages: Sequence[Any]) -> None:
    """Refuse a history holding anything but dicts (mappings), naming the first such
    entry and the fix, with an :class:`~agcore_tools.error.LlmUsageError`. A message
    whose ``tool_calls`` hold the SDK's call objects (``{"role": "assistant",
    "tool_calls": message.tool_calls}``) is replaced by one holding their dicts.

    Example:
        >>> check_history([{"role": "user", "content": "hi"}, "hello"])
        Traceback (most recent call last):
        ...
        agcore_tools.error.LlmUsageError: cycle.messages[1] is a str, not a dict: the history holds messages as dicts (with a role), so put {"role": ..., "content": ...} there
    """
    for index, message in enumerate(messages):
        if isinstance(message, Mapping):
            read = _with_calls_read(message) if "tool_calls" in message else None
            if read is not None and isinstance(messages, MutableSequence):
                messages[index] = read
        else:
            if isinstance(message, BaseModel):
                fix = (
                    'put message.to_dict() there (with "content": "" next to tool calls), '
                    "or hand such messages to submit_messages(), which reads them so"
                )
            elif isinstance(message, list):  # cycle.messages.append(messages)
                fix = "extend the history with a list of messages rather than append it"
            else:
                fix = 'put {"role": ..., "content": ...} there'

            raise LlmUsageError(
                f"cycle.messages[{index}] is a {kind(message)}, not a dict: the history "
                f"holds messages as dicts (with a role), so {fix}"
            )


def _is_item_type(kind: object) -> bool:
    """Whether ``kind`` names a Responses API item (not a content part such as ``text``).

    Example:
        >>> [_is_item_type(k) for k in ("function_call", "web_search_call", "text", None)]
        [True, True, False, False]
    """
    return isinstance(kind, str) and (
        kind in ("message", "reasoning", "item_reference", "compaction")
        or kind.endswith(("_call", "_call_output", "_output"))
    )
