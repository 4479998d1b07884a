"""A script's :class:`Reply` in each wire format: a chat completion, its chunks, a
Responses API response and its server-sent events."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from ._script import Reply

__all__ = [
    "CREATED",
    "prompt_tokens",
    "reply_chunks",
    "reply_json",
    "responses_events",
    "responses_json",
]

CREATED = 1_700_000_000
"""The ``created`` (``created_at``) time of every scripted response and chunk: fixed, so
that a run recorded against the server twice is the same, byte for byte."""


class Settings(Protocol):
    """What the formats read of the server: its model name, chunk size and chunks."""

    model: str
    chunk_chars: int

    def chunk(
        self,
        delta: Mapping[str, Any] | None = None,
        finish_reason: str | None = None,
        **fields: Any,
    ) -> dict[str, Any]: ...


def _calls(ids: Iterator[int], reply: Reply) -> list[dict[str, Any]]:
    calls = []
    for name, arguments, call_id in reply.tool_calls:
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        calls.append(
            {
                "id": call_id if call_id is not None else f"call_{next(ids)}",
                "type": "function",
                "function": {"name": name, "arguments": text},
            }
        )
    return calls


def _finish(reply: Reply) -> str:
    if reply.finish_reason is not None:
        return reply.finish_reason
    return "tool_calls" if reply.tool_calls else "stop"


def prompt_tokens(body: bytes) -> int:
    """The prompt tokens a counting server reports for a request: one per 4 bytes of
    the whole request body as received, rounded up (its own rule, blind to how the
    client counts).

    Example:
        >>> prompt_tokens(b'{"model":"m","messages":[]}')
        7
    """
    return -(-len(body) // 4)


def _usage(reply: Reply, prompt: int | None = None) -> dict[str, int]:
    if reply.usage is not None:
        return dict(reply.usage)
    completion = len(reply.text or "") // 4 + 4 * len(reply.tool_calls) + 1
    prompt = 10 if prompt is None else prompt
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def reply_json(
    server: Settings, ids: Iterator[int], reply: Reply, prompt: int | None = None
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text}
    if reply.reasoning is not None:
        message["reasoning_content"] = reply.reasoning
    if reply.tool_calls:
        message["tool_calls"] = _calls(ids, reply)
    return {
        "id": f"chatcmpl-scripted-{next(ids)}",
        "object": "chat.completion",
        "created": CREATED,
        "model": server.model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": _finish(reply),
                "logprobs": None,
            }
        ],
        "usage": _usage(reply, prompt),
    }


def responses_json(
    server: Settings,
    ids: Iterator[int],
    reply: Reply,
    request: Mapping[str, Any],
    prompt: int | None = None,
) -> dict[str, Any]:
    n = next(ids)
    output: list[dict[str, Any]] = []
    if reply.reasoning is not None:
        reasoning: dict[str, Any] = {
            "type": "reasoning",
            "id": f"rs_scripted_{n}",
            "summary": [{"type": "summary_text", "text": reply.reasoning}],
        }
        if "reasoning.encrypted_content" in (request.get("include") or ()):
            reasoning["encrypted_content"] = f"encrypted:{n}:{reply.reasoning}"
        output.append(reasoning)
    if reply.text is not None:
        text = {"type": "output_text", "text": reply.text, "annotations": []}
        output.append(
            {
                "type": "message",
                "id": f"msg_scripted_{n}",
                "role": "assistant",
                "status": "completed",
                "content": [text],
            }
        )
    output += [
        {
            "type": "function_call",
            "id": f"fc_scripted_{n}_{i}",
            "call_id": call["id"],
            "name": call["function"]["name"],
            "arguments": call["function"]["arguments"],
            "status": "completed",
        }
        for i, call in enumerate(_calls(ids, reply))
    ]
    usage = _usage(reply, prompt)
    given: Mapping[str, Any] = reply.usage or {}
    prompt_details = given.get("prompt_tokens_details") or {}
    completion_details = given.get("completion_tokens_details") or {}
    finish = reply.finish_reason
    incomplete = {"length": "max_output_tokens", "content_filter": "content_filter"}
    # As the API does: a response made in a conversation names it.
    conversation = request.get("conversation")
    if isinstance(conversation, Mapping):
        conversation = conversation.get("id")
    body: dict[str, Any] = {
        "id": f"resp_scripted_{n}",
        "object": "response",
        "created_at": CREATED,
        "model": server.model,
        "status": "incomplete" if finish in incomplete else "completed",
        "incomplete_details": ({"reason": incomplete[finish]} if finish in incomplete else None),
        "output": output,
        "usage": {
            "input_tokens": usage.get("prompt_tokens", 0),
            "output_tokens": usage.get("completion_tokens", 0),
            "total_tokens": usage.get("total_tokens", 0),
            "input_tokens_details": {"cached_tokens": prompt_details.get("cached_tokens", 0)},
            "output_tokens_details": {
                "reasoning_tokens": completion_details.get("reasoning_tokens", 0)
            },
        },
    }
    if isinstance(conversation, str):
        body["conversation"] = {"id": conversation}
    return body


def responses_events(server: Settings, response: dict[str, Any]) -> list[str]:
    """The Responses API's stream of ``response``: one SSE event per step, each
    with its ``event:`` line, text and arguments cut into ``chunk_chars`` pieces.

    Each text or summary part is opened (``content_part.added``,
    ``reasoning_summary_part.added``) before its deltas and closed after them, in
    the API's order, as the OpenAI SDK's ``responses.stream()`` builds its
    snapshot from those events."""
    size = max(1, server.chunk_chars)
    events: list[dict[str, Any]] = []

    def emit(kind: str, **fields: Any) -> None:
        events.append({"type": kind, "sequence_number": len(events), **fields})

    def pieces(text: str) -> list[str]:
        return [text[start : start + size] for start in range(0, len(text), size)]

    emit("response.created", response={**response, "status": "in_progress", "output": []})
    for index, item in enumerate(response["output"]):
        at = {"output_index": index, "item_id": item["id"]}
        kind = item["type"]
        if kind == "reasoning":
            emit("response.output_item.added", output_index=index, item={**item, "summary": []})
            for part, summary in enumerate(item["summary"]):
                on = {**at, "summary_index": part}
                emit("response.reasoning_summary_part.added", **on, part={**summary, "text": ""})
                for delta in pieces(summary["text"]):
                    emit("response.reasoning_summary_text.delta", **on, delta=delta)
                emit("response.reasoning_summary_text.done", **on, text=summary["text"])
                emit("response.reasoning_summary_part.done", **on, part=summary)
        elif kind == "message":
            added = {**item, "status": "in_progress", "content": []}
            emit("response.output_item.added", output_index=index, item=added)
            for part, content in enumerate(item["content"]):
                on = {**at, "content_index": part}
                opened = {**content, "text": "", "annotations": [], "logprobs": []}
                emit("response.content_part.added", **on, part=opened)
                for delta in pieces(content["text"]):
                    emit("response.output_text.delta", **on, delta=delta, logprobs=[])
                emit("response.output_text.done", **on, text=content["text"], logprobs=[])
                emit("response.content_part.done", **on, part=content)
        else:
            added = {**item, "status": "in_progress", "arguments": ""}
            emit("response.output_item.added", output_index=index, item=added)
            for delta in pieces(item["arguments"]):
                emit("response.function_call_arguments.delta", **at, delta=delta)
            emit("response.function_call_arguments.done", **at, arguments=item["arguments"])
        emit("response.output_item.done", output_index=index, item=item)
    emit(f"response.{response['status']}", response=response)
    return [f"event: {e['type']}\ndata: {json.dumps(e)}" for e in events]


def reply_chunks(
    server: Settings,
    ids: Iterator[int],
    reply: Reply,
    include_usage: bool,
    prompt: int | None = None,
) -> list[Any]:
    size = max(1, server.chunk_chars)
    chunks: list[Any] = [server.chunk({"role": "assistant", "content": ""})]
    for key, text in (("reasoning_content", reply.reasoning), ("content", reply.text)):
        for start in range(0, len(text or ""), size):
            chunks.append(server.chunk({key: (text or "")[start : start + size]}))
    for index, call in enumerate(_calls(ids, reply)):
        function = call["function"]
        head = {**call, "index": index, "function": {"name": function["name"], "arguments": ""}}
        chunks.append(server.chunk({"tool_calls": [head]}))
        arguments = function["arguments"]
        for start in range(0, len(arguments), size):
            piece = {"index": index, "function": {"arguments": arguments[start : start + size]}}
            chunks.append(server.chunk({"tool_calls": [piece]}))
    chunks.append(server.chunk({}, _finish(reply)))
    if include_usage:
        chunks.append({**server.chunk(), "choices": [], "usage": _usage(reply, prompt)})
    return chunks
