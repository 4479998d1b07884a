"""What an :class:`~agcore_tools.McpClient` without an ``elicitation_handler`` answers.

A server may ask the user for input in the middle of a tool call (``elicitation/create``).
With no handler the client still advertises elicitation. A question to a call the loop
made, that can pause, is held for the app (:class:`LiveQuestions`); any other is
declined, so the server's tool sees a plain "the user declined" instead of a protocol
error, and the app's log says what was asked (the connection's secrets masked) and how
to answer it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .._aio import with_timeout
from ._stderr import SentSecrets

__all__ = ["LiveQuestions", "ParkedQuestion", "declining_handler"]

logger = logging.getLogger("agcore_tools.mcp")


def declining_handler(server_name: str, hide: Callable[[str], str] = str) -> Any:
    """An SDK elicitation callback that declines every request, logging why (the
    question as ``hide`` shows it: the connection's secrets masked, as in the server's
    own log messages).

    Example:
        >>> import asyncio
        >>> from mcp_types import ElicitRequestFormParams
        >>> decline = declining_handler("demo")
        >>> schema = {"type": "object", "properties": {}}
        >>> params = ElicitRequestFormParams(message="Your name?", requested_schema=schema)
        >>> asyncio.run(decline(None, params)).action
        'decline'
    """

    async def decline(context: Any, params: Any) -> Any:
        from mcp_types import ElicitResult

        logger.warning(
            "MCP server '%s' asked for user input (%.200r); declined: the McpClient has no "
            "elicitation_handler (pass McpClient(elicitation_handler=...) to answer)",
            server_name,
            hide(str(getattr(params, "message", ""))),
        )
        return ElicitResult(action="decline")

    return decline


@dataclass(slots=True)
class ParkedQuestion:
    """A form question a server asked on the connection, and where its answer goes."""

    params: dict[str, Any]
    """The ``elicitation/create`` params, as JSON (message, requestedSchema)."""
    answer: asyncio.Future[Any]
    """Set to the SDK ``ElicitResult`` to answer the server."""
    limit: float
    """Seconds the answer may take, and then the call to go on: its call's timeout."""
    timed_out: bool = False
    """Whether the answer's time ran out (the server was told ``cancel``). An
    :attr:`answer` done otherwise was withdrawn: the server cancelled its request
    (``notifications/cancelled``), or the connection ended."""
    settled: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once the handler has settled the question (answered, timed out or
    withdrawn): :attr:`answer` is done a loop step before :attr:`timed_out` is set."""


class LiveQuestions:
    """The elicitation callback of a client with no ``elicitation_handler``.

    On 2025-11-25 a question is a request the server sends on the connection while its
    tool call waits. When exactly one call that can pause (a call the loop made, see
    :mod:`._input_pause`) is running on the connection, the question is parked for it
    and the loop pauses; the answer is sent when the app resumes, in this process,
    within that call's timeout (its ``timeout=``, else the client's ``timeout()`` when
    it was made). Otherwise (no such call, or several, since the wire does not say
    which call asked) it is declined, as before.
    """

    def __init__(
        self, server_name: str, timeout: Callable[[], float], secrets: SentSecrets
    ) -> None:
        self.server_name = server_name
        self.timeout = timeout
        """The client's timeout now: the bound of a call that armed with none of its own."""
        self.secrets = secrets
        """The connection's secrets, masked in the errors of a call that asked."""
        # Each armed call's timeout (None: the client's), by the future its question goes to.
        self._armed: dict[asyncio.Future[ParkedQuestion], float | None] = {}
        self._decline = declining_handler(server_name, secrets.mask)
        self._held = 0  # questions parked for a paused call, not yet settled

    def arm(self, limit: float | None = None) -> asyncio.Future[ParkedQuestion]:
        """A future that gets the next question, while the caller's call runs; ``limit``:
        the call's timeout, which bounds the wait for the answer (None: the client's)."""
        waiter: asyncio.Future[ParkedQuestion] = asyncio.get_running_loop().create_future()
        self._armed[waiter] = limit
        return waiter

    def disarm(self, waiter: asyncio.Future[ParkedQuestion]) -> None:
        """Stop waiting for a question (the call ended or was cancelled)."""
        self._armed.pop(waiter, None)
        waiter.cancel()

    async def handler(self, context: Any, params: Any) -> Any:
        """The SDK callback: park the question for the one call that can pause."""
        from mcp_types import ElicitRequestFormParams, ElicitResult

        armed = [w for w in self._armed if not w.done()]
        if len(armed) != 1 or not isinstance(params, ElicitRequestFormParams):
            if len(armed) > 1:
                logger.warning(
                    "MCP server '%s' asked a question while %d calls that can pause ran; "
                    "2025-11-25 does not say which call asked, so it is declined",
                    self.server_name,
                    len(armed),
                )
            elif not armed and self._held:
                # From the paused call (which holds one question at a time) or from one
                # that cannot pause: the wire does not say, so the warning names both.
                logger.warning(
                    "MCP server '%s' asked a question (%.200r) while a paused call waits "
                    "for the answer to another; declined: a paused call holds one question "
                    "at a time, 2025-11-25 does not say which call asked, and the McpClient "
                    "has no elicitation_handler to answer it",
                    self.server_name,
                    self.secrets.mask(str(getattr(params, "message", ""))),
                )
                return ElicitResult(action="decline")
            return await self._decline(context, params)
        waiter = armed[0]
        limit = self._armed.pop(waiter)
        if limit is None:
            limit = self.timeout()
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        asked = params.model_dump(by_alias=True, mode="json", exclude_none=True)
        parked = ParkedQuestion(asked, answer, limit)
        waiter.set_result(parked)
        self._held += 1
        try:
            # Bounded as the call that asked is: its timeout= may be longer or shorter
            # than the client's.
            return await with_timeout(answer, limit)
        except TimeoutError:
            parked.timed_out = True
            logger.warning(
                "MCP server '%s': no answer to its question (%.200r) within %g s (its "
                "call's timeout); cancelled",
                self.server_name,
                self.secrets.mask(str(asked.get("message", ""))),
                limit,
            )
            return ElicitResult(action="cancel")
        finally:
            self._held -= 1
            parked.settled.set()
