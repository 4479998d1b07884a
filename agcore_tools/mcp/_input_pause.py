"""A server's question to the user kept as a pause of the loop, not answered now.

With no ``elicitation_handler`` on the client, a question asked by a tool call made
from the loop pauses the loop (see :mod:`agcore_tools.pending`): ``tools/call``
returns a :class:`ServerQuestion` instead of a value, and the adapter turns it into
:class:`~agcore_tools.pending.CallPaused`.

- 2026-07-28 (:class:`HeldQuestion`): the server answered ``input_required``. The
  pause's state holds its ``requestState`` as the exact string it sent, so the retry,
  in any process, echoes it byte for byte (SEP-2322); the answers go back as
  ``inputResponses`` on a new ``tools/call``, which the server runs from its start.
- 2025-11-25 (:class:`LiveQuestion`): the question is a request on the connection,
  and the call waits for it. The call goes on running in this process; the answer is
  sent when the app resumes here, within the call's timeout. It cannot outlive
  the connection: a resume in another process tells the model the question was lost.
  Each pause gets a random ``nonce``, kept in its state in the history: the adapter
  finds the live question by it, never by the call id alone, since call ids repeat
  across the conversations that share an adapter (``call_0_0`` in each).

The round travels in a context variable, set by the adapter around one call, so plain
:meth:`~agcore_tools.McpClient.call_tool` keeps its path and its cost.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from .._aio import with_timeout
from ..error import McpError, McpTimeoutError, ToolError
from ..pending import CallPaused, InputRequest
from ._elicitation import LiveQuestions, ParkedQuestion
from ._progress import CALLER, ProgressRelay
from ._results import result_value

logger = logging.getLogger("agcore_tools.mcp")

_SETTLING = 5.0
"""Seconds a resumed question waits for its handler to settle it (one loop step)."""

__all__ = [
    "ROUND",
    "HeldQuestion",
    "InputRound",
    "LiveQuestion",
    "ServerQuestion",
    "first_of",
    "held_question",
    "new_nonce",
    "question_id",
    "responses",
]


def new_nonce() -> str:
    """A fresh random token naming one pause (unguessable, so a history cannot name
    another conversation's live question)."""
    return secrets.token_hex(12)


def question_id(call_id: str | None, key: str, nonce: str) -> str:
    """The request id of the question ``key`` of one pause of ``call_id``: it names the
    pause too, so an answer kept from an earlier question of the same call id (ids
    repeat) answers nothing later.

    Example:
        >>> question_id("c1", "seats", "0123456789abcdef01234567")
        'c1~seats~01234567'
    """
    return f"{call_id or ''}~{key}~{nonce[:8]}"


@dataclass(frozen=True, slots=True)
class InputRound:
    """One ``tools/call`` made by an adapter: whether a question may pause it, the
    answers and state of the round it resumes (None on a first call), and, once sent,
    the call's timeout (``_sending`` sets it), which bounds a 2025-11-25 question's wait
    for its answer."""

    can_pause: bool
    answers: Mapping[str, Mapping[str, Any]] | None = None
    request_state: str | None = None
    limit: float | None = None


ROUND: ContextVar[InputRound | None] = ContextVar("agcore_mcp_input_round", default=None)


class ServerQuestion:
    """What ``tools/call`` returns instead of a value when the loop pauses on a question."""

    __slots__ = ()

    def awaiting(self, call_id: str, tool_name: str, server_name: str, nonce: str) -> CallPaused:
        """The pause for the loop; ``nonce`` (:func:`new_nonce`) names this pause."""
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class HeldQuestion(ServerQuestion):
    """A ``tools/call`` answered (2026-07-28) with questions only the user can answer."""

    requests: dict[str, dict[str, Any]]
    """The server's elicitation params by its keys, as JSON."""
    request_state: str | None
    """The server's ``requestState``, exactly as sent (never re-encoded)."""

    def awaiting(self, call_id: str, tool_name: str, server_name: str, nonce: str) -> CallPaused:
        """The pause for the loop: one :class:`InputRequest` per question."""
        questions = tuple(
            InputRequest(
                question_id(call_id, key, nonce),
                call_id,
                tool_name,
                str(params.get("message", "")),
                dict(params.get("requestedSchema") or {}),
            )
            for key, params in self.requests.items()
        )
        state = {
            "server": server_name,
            "keys": {question_id(call_id, key, nonce): key for key in self.requests},
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


@dataclass(eq=False, slots=True)
class LiveQuestion(ServerQuestion):
    """A question (2025-11-25) parked on the connection while its call runs on."""

    parked: ParkedQuestion
    call: asyncio.Future[Any]
    questions: LiveQuestions
    tool_name: str
    progress: ProgressRelay | None = None
    """Where the call's progress updates go (None: nobody listened when it was made)."""

    def awaiting(self, call_id: str, tool_name: str, server_name: str, nonce: str) -> CallPaused:
        """The pause for the loop; its state says the question lives in this process,
        under ``nonce``."""
        params = self.parked.params
        question = InputRequest(
            question_id(call_id, "ask", nonce),
            call_id,
            tool_name,
            str(params.get("message", "")),
            dict(params.get("requestedSchema") or {}),
        )
        return CallPaused((question,), {"server": server_name, "live": True, "nonce": nonce})

    async def go_on(self, answer: Mapping[str, Any]) -> Any:
        """Send the user's ``answer`` and wait on: the call's value (see ``_results``),
        or its next question. An answer that comes after the question timed out (the
        server got ``cancel``) raises a recoverable :class:`~agcore_tools.McpError`: call
        the tool again. So does a failure of the call (unrecoverable), the connection's
        secrets masked. A question withdrawn meanwhile is not answered (a WARNING says
        the answer was not sent): the server cancelled it (``notifications/cancelled``)
        and its call went on, whose outcome this gives; or the connection ended, and
        the call with it, which raises a recoverable error: call the tool again."""
        from mcp_types import ElicitResult

        if self.progress is not None:
            # Its updates from now on belong to the run that resumed it.
            self.progress.caller = CALLER.get()
        if self.parked.answer.done():
            # Done a step before the handler says why (its time ran out, or withdrawn);
            # bounded, as every wait is, though the handler's next step is at hand.
            await with_timeout(self.parked.settled.wait(), _SETTLING)
        withdrawn = self.parked.answer.done() and not self.parked.timed_out
        if withdrawn:
            logger.warning(
                "MCP server '%s': the question asked during tools/call '%s' (%.200r) was "
                "withdrawn before it was answered (the server cancelled it, or the "
                "connection ended); the answer was not sent",
                self.questions.server_name,
                self.tool_name,
                self.questions.secrets.mask(str(self.parked.params.get("message", ""))),
            )
        elif self.parked.answer.done():
            # The call's timeout came first and the server was told "cancel": this
            # answer cannot reach it, and the model must not read the cancel as the user's.
            raise McpError(
                self.questions.server_name,
                f"the question asked during tools/call '{self.tool_name}' was lost: the "
                f"answer came after the call's timeout ({self.parked.limit:g} s), "
                "and the server was told it was cancelled; call the tool again",
                tool_name=self.tool_name,
                recoverable=True,
                may_have_run=True,
            )
        else:
            self.parked.answer.set_result(ElicitResult.model_validate(dict(answer)))
        secrets = self.questions.secrets  # what the server said may echo a credential
        try:
            outcome = await first_of(
                self.call,
                self.questions,
                self.tool_name,
                self.parked.limit,
                bounded=True,
                progress=self.progress,
            )
        except ToolError:
            raise
        except Exception as exc:  # noqa: BLE001 - the SDK's, raised as an McpError chained from it
            if withdrawn:  # the connection ended, the question and the call with it
                raise McpError(
                    self.questions.server_name,
                    f"the question asked during tools/call '{self.tool_name}' was lost: the "
                    "call ended before it was answered "
                    f"({secrets.mask(str(exc))}); call the tool again",
                    tool_name=self.tool_name,
                    recoverable=True,
                    may_have_run=True,
                ) from secrets.masked(exc)
            raise McpError(
                self.questions.server_name,
                f"tools/call '{self.tool_name}' failed after its question: "
                f"{secrets.mask(str(exc))}",
                tool_name=self.tool_name,
                may_have_run=True,
            ) from secrets.masked(exc)
        if isinstance(outcome, LiveQuestion):
            return outcome
        return result_value(outcome, self.tool_name, hide=secrets.mask)


def _retrieve(call: asyncio.Future[Any]) -> None:
    # A call whose pause was never resumed still ends (its question is cancelled after
    # the timeout); its outcome is read here so nothing is reported as unretrieved.
    if not call.cancelled():
        call.exception()


async def first_of(
    call: asyncio.Future[Any],
    questions: LiveQuestions,
    tool_name: str,
    limit: float | None,
    *,
    bounded: bool,
    progress: ProgressRelay | None = None,
) -> Any:
    """Wait for ``call`` (a running ``tools/call``) to end or to ask a question: its
    ``CallToolResult``, or a :class:`LiveQuestion`. ``limit``: the call's timeout (None:
    the client's), which bounds the wait for the answer to a question it asks, and,
    ``bounded``, this wait (a resumed call; a first call is bounded by its caller's
    watchdog). ``progress``: the call's progress relay, which the question keeps."""
    waiter = questions.arm(limit)
    if limit is None:
        limit = questions.timeout()

    def ended(_: asyncio.Future[Any]) -> None:
        if not waiter.done():
            waiter.set_result(None)  # type: ignore[arg-type]

    call.add_done_callback(ended)
    try:
        if bounded:
            parked = await asyncio.wait_for(asyncio.shield(waiter), limit)
        else:
            parked = await waiter
    except TimeoutError as exc:
        questions.disarm(waiter)
        call.cancel()
        raise McpTimeoutError(
            questions.server_name,
            f"tools/call '{tool_name}' timed out after {limit:g} s",
            tool_name=tool_name,
            may_have_run=True,
        ) from exc
    except BaseException:
        questions.disarm(waiter)
        call.cancel()
        raise
    finally:
        call.remove_done_callback(ended)
    if parked is None:  # the call ended first
        questions.disarm(waiter)
        return call.result()
    call.add_done_callback(_retrieve)
    return LiveQuestion(parked, call, questions, tool_name, progress)
