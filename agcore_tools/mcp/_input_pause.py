"""A server's question (2026-07-28 ``input_required``) kept as a pause, not answered now.

With no ``elicitation_handler`` on the client, a question asked by a tool call made
from the loop pauses the loop (see :mod:`agcore_tools.pending`). ``tools/call`` then
returns an :class:`HeldQuestion` instead of a value; the adapter turns it into
:class:`~agcore_tools.pending.CallPaused`, whose state holds the server's
``requestState`` as the exact string it sent, so the retry, in any process, echoes it
byte for byte (SEP-2322). The answers go back as ``inputResponses`` on a new
``tools/call``; the server runs the call from its start with them.

The round travels in a context variable, set by the adapter around one call, so plain
:meth:`~agcore_tools.McpClient.call_tool` keeps its path and its cost.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from ..pending import CallPaused, InputRequest

__all__ = ["ROUND", "HeldQuestion", "InputRound", "held_question", "responses"]


@dataclass(frozen=True, slots=True)
class InputRound:
    """One ``tools/call`` made by an adapter: whether a question may pause it, and the
    answers and state of the round it resumes (None on a first call)."""

    can_pause: bool
    answers: Mapping[str, Mapping[str, Any]] | None = None
    request_state: str | None = None


ROUND: ContextVar[InputRound | None] = ContextVar("agcore_mcp_input_round", default=None)


@dataclass(frozen=True, slots=True)
class HeldQuestion:
    """A ``tools/call`` answered with questions only the user can answer."""

    requests: dict[str, dict[str, Any]]
    """The server's elicitation params by its keys, as JSON."""
    request_state: str | None
    """The server's ``requestState``, exactly as sent (never re-encoded)."""

    def awaiting(self, call_id: str, tool_name: str, server_name: str) -> CallPaused:
        """The pause for the loop: one :class:`InputRequest` per question."""
        questions = tuple(
            InputRequest(
                f"{call_id}~{key}",
                call_id,
                tool_name,
                str(params.get("message", "")),
                dict(params.get("requestedSchema") or {}),
            )
            for key, params in self.requests.items()
        )
        state = {
            "server": server_name,
            "keys": {f"{call_id}~{key}": key for key in self.requests},
            "request_state": self.request_state,
        }
        return CallPaused(questions, state)


def held_question(result: Any) -> HeldQuestion | None:
    """``result`` (an SDK ``InputRequiredResult``) as a question to hold, when every one
    of its requests is a form elicitation a person can answer later; else None (the
    SDK's own driver answers sampling, roots and URL elicitations as before)."""
    from mcp_types import ElicitRequest, ElicitRequestFormParams

    asked = result.input_requests or {}
    if not asked:
        return None  # a state-only round: the SDK driver backs off and retries
    requests: dict[str, dict[str, Any]] = {}
    for key, request in asked.items():
        if not isinstance(request, ElicitRequest) or not isinstance(
            request.params, ElicitRequestFormParams
        ):
            return None
        requests[key] = request.params.model_dump(by_alias=True, mode="json", exclude_none=True)
    return HeldQuestion(requests, result.request_state)


def responses(state: Mapping[str, Any], answers: Mapping[str, Mapping[str, Any]]) -> InputRound:
    """The round that resumes a held call: the answers keyed by the server's keys."""
    keys: Mapping[str, str] = state.get("keys") or {}
    by_key = {keys[request_id]: dict(answer) for request_id, answer in answers.items()}
    return InputRound(True, by_key, state.get("request_state"))
