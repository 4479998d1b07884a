"""The Responses API's answer, a whole response or its stream events, assembled into
the loop's :class:`~._stream.Turn`.

Its own module because it is the other half of the Responses wire:
:mod:`._wire_responses` builds the request from the history, and this reads what comes
back into the assistant message the history keeps, with the response's output items
under ``response`` for the next request to send back as they came.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from .._sdk import sdk_field as _field
from ..calls import CUT_CALLS_NOT_REPAIRED, ParsedCall, parse_call
from ..error import LlmError
from ._stream import (
    DERIVED_IDS_RESERVED,
    Turn,
    describe_body,
    malformed,
    reason_text,
    turn_call_id,
)
from .events import AssistantTextDelta, FinishReason, ReasoningDelta, StreamEvent, Usage

__all__ = ["ResponsesTurnBuilder", "usage_of"]

_NO_EVENTS: tuple[StreamEvent, ...] = ()
_INCOMPLETE = {
    "max_output_tokens": FinishReason.LENGTH,
    "content_filter": FinishReason.CONTENT_FILTER,
}
_UNFINISHED = frozenset({"queued", "in_progress"})
_PART_TEXT = {"output_text": "text", "refusal": "refusal"}  # a message part's text, by type
# A reasoning item streams two texts, each rebuilt into its own field when a bridge
# leaves the final output empty: the summary, and the raw reasoning (gpt-oss, vLLM).
_REASONING_DELTAS = {
    "response.reasoning_summary_text.delta": "summary",
    "response.reasoning_text.delta": "content",
}
_REASONING_DONE = {
    "response.reasoning_summary_text.done": "summary",
    "response.reasoning_text.done": "content",
}
_REASONING_PART = {"summary": "summary_text", "content": "reasoning_text"}


def usage_of(usage: Any) -> Usage:
    """A Responses ``usage`` object's counts, cached and reasoning tokens included.

    Example:
        >>> usage_of({"input_tokens": 9, "output_tokens": 4, "total_tokens": 13,
        ...           "input_tokens_details": {"cached_tokens": 8},
        ...           "output_tokens_details": {"reasoning_tokens": 3}})
        Usage(prompt_tokens=9, completion_tokens=4, total_tokens=13, cached_tokens=8, reasoning_tokens=3, requests=1, unreported=0)
    """
    prompt = _int(_field(usage, "input_tokens"))
    completion = _int(_field(usage, "output_tokens"))
    total = _int(_field(usage, "total_tokens")) or prompt + completion
    cached = _int(_field(_field(usage, "input_tokens_details"), "cached_tokens"))
    reasoning = _int(_field(_field(usage, "output_tokens_details"), "reasoning_tokens"))
    return Usage(prompt, completion, total, cached, reasoning)


def _int(value: Any) -> int:
    return value if isinstance(value, int) else 0


def _json(value: Any) -> Any:
    # SDK models become the plain JSON the history holds; unset and null fields are
    # left out, as the API does not take some of them back as input.
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", exclude_none=True, warnings=False)
    return dict(value) if isinstance(value, Mapping) else value


class ResponsesTurnBuilder:
    """Accumulates one response (whole, or its stream events) into a :class:`Turn`."""

    __slots__ = (
        "_arguments",
        "_avoided",
        "_items",
        "_repair",
        "_response",
        "_said",
        "_shown",
        "_shown_tool",
        "_turn_tag",
    )

    def __init__(self, turn_tag: str, *, repair: bool = False) -> None:
        self._turn_tag = turn_tag
        self._repair = repair
        self._response: Any = None
        self._items: dict[int, Any] = {}  # by output_index, from the stream
        self._arguments: dict[int, list[str]] = {}
        # What the text, reasoning and argument events said, by output_index, kind
        # ("text", "summary", "content", "arguments") and part (content_index or summary_index):
        # a bridge that leaves the final output empty (and its items bare) has the
        # turn only there.
        self._said: dict[tuple[int, str], dict[int, list[str]]] = {}
        self._shown_tool: str | None = None
        self._shown: int | None = None  # the output_index of the call shown
        self._avoided: Collection[str] = ()

    def avoid_ids(self, ids: Collection[str]) -> None:
        """Give a call whose server-given id is one of ``ids`` (the history's calls) an
        id of its own (see :meth:`TurnBuilder.avoid_ids`)."""
        self._avoided = ids

    def show_arguments(self, tool_name: str) -> None:
        """Stream the arguments of the turn's first call of ``tool_name`` as
        :class:`AssistantTextDelta` events: they are the answer (structured output's
        ``final_result`` tool), not a call for the loop to run."""
        self._shown_tool = tool_name

    def feed(self, event: Any) -> tuple[StreamEvent, ...] | list[StreamEvent]:
        """Take one stream event; return the text events it carries."""
        kind = _field(event, "type")
        if kind is not None and not isinstance(kind, str):  # an event with none is skipped
            raise malformed("stream", "an event's type", kind, "a string")
        # An empty delta is no event, as on Chat Completions (a first-token timer or a
        # UI line opened on the first delta must not start on nothing).
        if kind == "response.output_text.delta":
            text = _field(event, "delta")
            self._note(event, "text", text)
            return [AssistantTextDelta(text)] if isinstance(text, str) and text else _NO_EVENTS
        if kind in _REASONING_DELTAS:
            text = _field(event, "delta")
            self._note(event, _REASONING_DELTAS[kind], text)
            return [ReasoningDelta(text)] if isinstance(text, str) and text else _NO_EVENTS
        if kind == "response.output_text.done":  # the whole text: it wins over the deltas
            self._note(event, "text", _field(event, "text"), whole=True)
        elif kind in _REASONING_DONE:
            self._note(event, _REASONING_DONE[kind], _field(event, "text"), whole=True)
        elif kind == "response.function_call_arguments.done":
            self._note(event, "arguments", _field(event, "arguments"), whole=True)
        if kind == "response.function_call_arguments.delta":
            index = _int(_field(event, "output_index"))
            delta = _field(event, "delta") or ""
            self._arguments.setdefault(index, []).append(delta)
            if delta and index == self._shown:
                return [AssistantTextDelta(delta)]
        elif kind in ("response.output_item.added", "response.output_item.done"):
            index = _int(_field(event, "output_index"))
            item = self._items[index] = _json(_field(event, "item"))
            if (
                self._shown is None
                and self._shown_tool is not None
                and isinstance(item, Mapping)
                and item.get("type") == "function_call"
                and item.get("name") == self._shown_tool
            ):
                self._shown = index
        elif kind in ("response.completed", "response.incomplete"):
            self._response = _field(event, "response")
        elif kind == "response.failed":
            raise LlmError(
                f"the model's stream reported an error: {_error(_field(event, 'response'))}"
            )
        elif kind == "error":
            raise LlmError(f"the model's stream reported an error: {_field(event, 'message')}")
        return _NO_EVENTS

    def _note(self, event: Any, kind: str, text: Any, *, whole: bool = False) -> None:
        if not isinstance(text, str):
            return
        parts = self._said.setdefault((_int(_field(event, "output_index")), kind), {})
        part = _field(event, "content_index")
        if part is None:
            part = _field(event, "summary_index")
        said = parts.setdefault(part if isinstance(part, int) else 0, [])
        if whole:
            said[:] = [text]
        else:
            said.append(text)

    def _told(self, index: int, kind: str) -> str | None:
        """What the events told of output item ``index``'s ``kind``, its parts in
        order, or None if they told nothing."""
        parts = self._parts(index, kind)
        return None if parts is None else "".join(parts)

    def _parts(self, index: int, kind: str) -> list[str] | None:
        """The texts of output item ``index``'s ``kind``, one per part, in order."""
        parts = self._said.get((index, kind))
        if parts is None:
            return None
        return ["".join(parts[part]) for part in sorted(parts)]

    # Read by the tracing hooks (_trace.py), under the names TurnBuilder gives them.
    @property
    def response_id(self) -> str | None:
        """The response's id, None until it is complete."""
        return _field(self._response, "id") or None

    @property
    def response_model(self) -> str | None:
        """The model that answered, None until the response is complete."""
        return _field(self._response, "model") or None

    @property
    def raw_reason(self) -> str | None:
        """``incomplete_details.reason`` or else ``status``, None until complete."""
        response = self._response
        if response is None:
            return None
        reason = _field(_field(response, "incomplete_details"), "reason")
        return str(reason or _field(response, "status") or "") or None

    @property
    def usage(self) -> Usage | None:
        """The response's token counts, None until it is complete."""
        usage = _field(self._response, "usage") if self._response is not None else None
        return usage_of(usage) if usage is not None else None

    def end_stream(self) -> None:
        """Check that the stream, now ended, carried its ``response.completed``."""
        if self._response is None:
            raise LlmError(
                "the model's stream was cut: it ended without response.completed (the "
                "server failed after sending 200, or closed the stream early)"
            )

    def feed_completion(self, response: Any) -> None:
        """Take a whole (non-streamed) response."""
        status = _field(response, "status")
        if status is not None and not isinstance(status, str):
            raise malformed("response", "status", status, "a string")
        if status == "failed" or _field(response, "error"):
            raise LlmError(f"the model reported an error: {_error(response)}")
        if status in _UNFINISHED and not _field(response, "output"):
            # A background response (background=True) answers at once, before its output.
            raise LlmError(
                f"the model's response {_field(response, 'id')!r} is still {status!r}, with "
                "no output to go on from (a background response): stream the run "
                "(submit_stream*) with background=True, or drop background=True"
            )
        if status is None and not isinstance(_field(response, "output"), list):
            # A 200 from something else (a captive portal's HTML page, a proxy's JSON):
            # taken as is, it would be an empty answer.
            raise LlmError(
                f"the model's response is not a Responses API response: {describe_body(response)}"
            )
        self._response = response

    def build(self) -> Turn:
        """The assembled turn and its assistant message."""
        response = self._response
        given = _field(response, "output")
        if given and not isinstance(given, list):
            raise malformed("response", "output", given, "a list")
        output = [_json(item) for item in given or ()]
        if not output:  # a bridge that leaves the final output empty: use the stream's
            indexes = {*self._items, *(index for index, kind in self._said if kind == "text")}
            output = [self._streamed(index) for index in sorted(indexes)]
        for position, item in enumerate(output):
            _check_item(item, position)
        texts: list[str] = []
        refusals: list[str] = []
        thoughts: list[str] = []
        calls: list[ParsedCall] = []
        taken: set[str] = set()
        server_ids: dict[str, str] = {}  # a call's own id -> the id the server gave it
        incomplete = _field(_field(response, "incomplete_details"), "reason")
        cut = incomplete == "max_output_tokens" and CUT_CALLS_NOT_REPAIRED.get()
        cut_at = "max_output_tokens" if cut else None
        for item in output:
            kind = item.get("type")
            if kind == "message":
                for part in item.get("content") or ():
                    if part.get("type") == "output_text":
                        texts.append(part.get("text") or "")
                    elif part.get("type") == "refusal":
                        refusals.append(part.get("refusal") or "")
            elif kind == "reasoning":  # what its summary and reasoning text deltas stream
                for key in ("summary", "content"):
                    thoughts.extend(_texts(item.get(key)))
            elif kind == "function_call":
                given = item.get("call_id")
                fresh = f"call_{self._turn_tag}_{len(calls)}"
                if given and not isinstance(given, str) and not DERIVED_IDS_RESERVED.get():
                    # A Temporal run begun before kept such an id when it was unique.
                    unique = given not in taken and given not in self._avoided
                    item["call_id"] = given if unique else fresh
                else:  # rewritten in the item too, so that its output matches on resend
                    item["call_id"] = turn_call_id(
                        given if isinstance(given, str) else None, fresh, taken, self._avoided
                    )
                taken.add(item["call_id"])
                if isinstance(given, str) and item["call_id"] != given:
                    server_ids[item["call_id"]] = given
                call = parse_call(
                    item.get("name") or "",
                    item["call_id"],
                    item.get("arguments"),
                    repair=self._repair,
                    cut_at=cut_at,
                )
                calls.append(call)
        text = "".join(texts)
        refusal = "".join(refusals) or None
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if refusal is not None:
            # Read like Chat's; the refusal part itself goes back with the output items.
            message["refusal"] = refusal
        if calls:
            message["tool_calls"] = [
                {
                    "id": c.call_id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in calls
            ]
        message["response"] = {"id": _field(response, "id"), "output": output}
        conversation = _field(_field(response, "conversation"), "id")
        if isinstance(conversation, str):
            # Which conversation holds this response's items (see ResponsesWire.params).
            message["response"]["conversation"] = conversation
        if server_ids:
            # A chained request answers the calls of the response the server stored,
            # which knows them by its own ids (see ResponsesWire.params).
            message["response"]["call_ids"] = server_ids
        raw = reason_text(incomplete or _field(response, "status"))
        if calls:
            reason = FinishReason.TOOL_CALLS
        elif incomplete is not None:
            # A reason that is no string reads as OTHER, as on Chat (FinishReason.parse).
            known = isinstance(incomplete, str) and incomplete in _INCOMPLETE
            reason = _INCOMPLETE[incomplete] if known else FinishReason.OTHER
        else:
            reason = FinishReason.STOP
        usage = _field(response, "usage")
        return Turn(
            message,
            text,
            reason,
            raw,
            tuple(calls),
            usage_of(usage) if usage is not None else None,
            refusal,
            "".join(thoughts),
        )

    def _streamed(self, index: int) -> dict[str, Any]:
        """Output item ``index`` as the stream told it: its item event's, completed
        from the text, reasoning and argument events where the item is bare."""
        found = self._items.get(index)
        item = dict(found) if isinstance(found, Mapping) else {}
        kind = item.get("type")
        if not item:  # text with no item event at all
            item = {"type": "message", "role": "assistant", "content": []}
            kind = "message"
        if kind == "function_call" and not item.get("arguments"):
            told = self._told(index, "arguments")
            item["arguments"] = told if told else "".join(self._arguments.get(index, []))
        elif kind == "message" and not item.get("content"):
            text = self._told(index, "text")
            if text is not None:
                item["content"] = [{"type": "output_text", "text": text, "annotations": []}]
        elif kind == "reasoning":
            for field, part in _REASONING_PART.items():
                texts = self._parts(index, field)
                if not item.get(field) and texts is not None:
                    item[field] = [{"type": part, "text": text} for text in texts]
            item.setdefault("summary", [])  # required on an input item, even with none
        return item


def _check_item(item: Any, position: int) -> None:
    """Refuse output item ``item`` (at ``position``) where its shape is not the API's:
    read as is, it would fail deep in the loop with a TypeError."""
    where = f"output[{position}]"
    if not isinstance(item, Mapping):
        raise malformed("response", where, item, "an object")
    kind = item.get("type")
    if kind == "message":
        content = item.get("content")
        if content is not None and not isinstance(content, list):
            raise malformed("response", f"{where}.content", content, "a list")
        for index, part in enumerate(content or ()):
            if not isinstance(part, Mapping):
                raise malformed("response", f"{where}.content[{index}]", part, "an object")
            kind = part.get("type")  # another type's keys are not read
            key = _PART_TEXT.get(kind) if isinstance(kind, str) else None
            value = part.get(key) if key is not None else None
            if value is not None and not isinstance(value, str):
                raise malformed("response", f"{where}.content[{index}].{key}", value, "a string")
    elif kind == "function_call":
        # A call_id that is no string is replaced (build); a name cannot be.
        name = item.get("name")
        if name is not None and not isinstance(name, str):
            raise malformed("response", f"{where}.name", name, "a string")


def _texts(parts: Any) -> list[str]:
    # A reasoning item's summary or content parts: their texts.
    listed = parts if isinstance(parts, list) else ()
    return [
        part["text"]
        for part in listed
        if isinstance(part, Mapping) and isinstance(part.get("text"), str)
    ]


def _error(response: Any) -> str:
    error = _field(response, "error")
    message = _field(error, "message") if error is not None else None
    return str(message or error or "no error message")
