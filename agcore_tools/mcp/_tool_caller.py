"""What sends a ``tools/call`` on a connection, in both eras, and where a question
to the user turns into a pause (see :mod:`._input_pause`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ._elicitation import LiveQuestions
from ._input_pause import ROUND, first_of, held_question
from ._protocol import is_modern

if TYPE_CHECKING:
    from mcp import Client
    from mcp.client.session import ClientSession
    from mcp_types import RequestParamsMeta

__all__ = ["tool_caller"]


def tool_caller(client: Client, questions: LiveQuestions, pausable: Callable[[], bool]) -> Any:
    """What sends a ``tools/call``: the session's ``call_tool``, which both eras share.

    The SDK client's ``call_tool`` adds what only 2026-07-28 sessions use: the
    input_required rounds (sampling, elicitation and roots on that wire) and the
    HEADER_MISMATCH re-list. Both are rare, and its layers cost every call (about 1 %
    of a stdio call's client CPU, docs/benchmarks.md), so on 2026-07-28 a call goes
    to the session, and only an answer needing them is handed to the SDK client.
    With no elicitation handler when the call is made (``pausable()``), a question a person must answer is
    returned to a caller that can pause (an adapter in the loop, see
    :mod:`._input_pause`): a :class:`HeldQuestion`, whose resumed round carries its
    answers, or on 2025-11-25 a :class:`LiveQuestion`.
    """
    session = client.session
    if not is_modern(client):
        return _legacy_caller(session, questions, pausable)
    from mcp.shared.exceptions import MCPError
    from mcp_types import HEADER_MISMATCH, CallToolResult, ElicitResult

    async def call_tool(
        name: str,
        arguments: dict[str, Any],
        *,
        read_timeout_seconds: float,
        progress_callback: Any,
        meta: RequestParamsMeta | None,
    ) -> Any:
        round_ = ROUND.get()
        answers: dict[str, Any] | None = None
        state: str | None = None
        if round_ is not None and round_.answers is not None:
            answers = {k: ElicitResult.model_validate(a) for k, a in round_.answers.items()}
            state = round_.request_state
        try:
            result = await session.call_tool(
                name,
                arguments,
                read_timeout_seconds=read_timeout_seconds,
                progress_callback=progress_callback,
                meta=meta,
                input_responses=answers,
                request_state=state,
                allow_input_required=True,
            )
        except MCPError as exc:
            if exc.code != HEADER_MISMATCH:
                raise
        else:
            if isinstance(result, CallToolResult):
                return result
            if round_ is not None and round_.can_pause and pausable():
                held = held_question(result)
                if held is not None:
                    return held
        # input_required, or a stale listing: the SDK client sends the call again and
        # drives the rounds or re-lists. The server ran the call only up to its question
        # (it runs it afresh each round) or not at all (a mismatch is refused unrun).
        return await client.call_tool(
            name,
            arguments,
            read_timeout_seconds=read_timeout_seconds,
            progress_callback=progress_callback,
            meta=meta,
        )

    return call_tool


def _legacy_caller(
    session: ClientSession, questions: LiveQuestions, pausable: Callable[[], bool]
) -> Any:
    """2025-11-25 with no elicitation handler (``pausable()``, when the call is made): a
    call the loop made runs as a task, so a question the server asks on the connection
    can pause the loop while it waits."""

    async def call_tool(
        name: str,
        arguments: dict[str, Any],
        *,
        read_timeout_seconds: float,
        progress_callback: Any,
        meta: RequestParamsMeta | None,
    ) -> Any:
        sending = session.call_tool(
            name,
            arguments,
            read_timeout_seconds=read_timeout_seconds,
            progress_callback=progress_callback,
            meta=meta,
        )
        round_ = ROUND.get()
        if round_ is None or not round_.can_pause or not pausable():
            return await sending
        call = asyncio.ensure_future(sending)
        return await first_of(
            call, questions, name, round_.limit, bounded=False, progress=progress_callback
        )

    return call_tool
