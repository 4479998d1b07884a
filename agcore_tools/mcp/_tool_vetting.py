"""A ``tools/list`` answer with malformed tools, read without them, so that the server's
other tools stay usable.

The MCP SDK checks a ``tools/list`` answer whole, against the negotiated version's
schema (``ClientSession.send_request``, whatever result type it is asked for): one tool
with a malformed field (an ``inputSchema`` that is no object, a ``name`` that is no
string, an annotation of the wrong type) fails the answer, and a server with one such
tool among 40 was unusable. Listing the tools some other way would not do: the SDK's
``call_tool`` checks each result against the output schema its own ``list_tools``
cached for the tool (on 2026-07-28 it also mirrors arguments into the headers that
listing declared), and lists again, whole, when the tool called is not cached there.

So the answers to ``tools/list`` requests are vetted on the session's streams (see
``_streams``), before the SDK reads them, whoever sent the request: when an answer
fails the SDK's checks, each of its tools is checked as the SDK checks a page holding
that tool alone, and those that fail are taken out. The SDK then reads a valid answer,
and caches what it needs of its tools as usual. An answer whose ``tools`` is no list,
or whose other members are malformed, is left as it came, for the SDK to fail naming
what is wrong, as before.

What was left out goes to the :class:`Listing` of the tool cache's fetch that sent the
request (:data:`LISTING`, a context variable that the write stream reads in the
sender's task); the tool cache logs it, and fails the list when no tool is left. What
the SDK's own lists (before a call to a tool it has not cached) leave out is logged at
DEBUG: the tool cache's lists have said it.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable, Generator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from ._error_text import location, quoted, server_word
from ._matching import coerce_id

if TYPE_CHECKING:
    from mcp.shared.message import SessionMessage

__all__ = ["LISTING", "SLICE", "Listing", "MalformedTool", "ToolListVetting", "vet"]

logger = logging.getLogger("agcore_tools.mcp")

_FOLLOWED = 64
"""``tools/list`` requests followed at most: one abandoned on a 2026-07-28 session (its
caller timed out; no cancel is sent) is never answered, and the oldest is forgotten."""


@dataclass(frozen=True, slots=True)
class MalformedTool:
    """A tool left out of a ``tools/list`` answer, with what is wrong with it; its
    ``name``, ``where`` and ``reason`` are shown as the server's words are (masked,
    escaped, cut).

    Example:
        >>> str(MalformedTool(1, "odd", "tools[1].inputSchema", "Input should be a valid dictionary"))
        "'odd' (tools[1].inputSchema: Input should be a valid dictionary)"
        >>> str(MalformedTool(0, None, "tools[0].name", "Field required", page=2))
        'a tool without a valid name (tools[0].name on page 2: Field required)'
    """

    index: int
    """Its place on its page, from 0."""
    name: str | None
    """Its name, when that is a string."""
    where: str
    """Where on its page the (first) fault is: ``tools[1].inputSchema``."""
    reason: str
    """What is wrong there, and how many more faults the tool has."""
    page: int = 1
    """The page of the list it was on, from 1 (0 for a list the SDK sent itself)."""
    error: ValidationError | None = None
    """pydantic's whole report, on a page holding the tool alone."""

    @property
    def place(self) -> str:
        """:attr:`where`, and its page after the first."""
        return f"{self.where} on page {self.page}" if self.page > 1 else self.where

    def __str__(self) -> str:
        named = f"'{self.name}'" if self.name is not None else "a tool without a valid name"
        return f"{named} ({self.place}: {self.reason})"


LISTING: ContextVar[Listing | None] = ContextVar("agcore_mcp_tool_listing", default=None)
"""The listing that the ``tools/list`` requests sent in this context are for."""


class Listing:
    """What one walk over the pages of ``tools/list`` left out."""

    __slots__ = ("malformed", "pages")

    def __init__(self) -> None:
        self.pages = 0
        """Pages answered so far."""
        self.malformed: list[MalformedTool] = []
        """The tools left out, in the order listed."""


SLICE = 64
"""Tools checked at most between two turns of the event loop: a slice of the largest
recorded servers' tools takes about 2 ms (``docs/benchmarks.md``)."""

_Vetted = tuple[list[Any], list[MalformedTool]] | None


def vet(
    result: Mapping[str, Any], version: str, mask: Callable[[str], str] = str, page: int = 1
) -> _Vetted:
    """The tools of ``result`` (a ``tools/list`` answer of a ``version`` session) that
    pass the SDK's checks and those that do not, shown with ``mask``; None when the
    answer is to be left as it came: it passes, or it is malformed as a whole.

    :meth:`ToolListVetting.received` does the same work in slices of :data:`SLICE`
    tools, letting the event loop run between them.

    Example:
        >>> good = {"name": "echo", "inputSchema": {"type": "object"}}
        >>> vet({"tools": [good]}, "2025-11-25") is None
        True
        >>> kept, left_out = vet({"tools": [good, {"name": "odd"}]}, "2025-11-25")
        >>> [tool["name"] for tool in kept], [str(tool) for tool in left_out]
        (['echo'], ["'odd' (tools[1].inputSchema: Field required)"])
        >>> vet({"tools": "none"}, "2025-11-25") is None
        True
    """
    steps = _vetting(result, version, mask, page)
    while True:
        try:
            next(steps)
        except StopIteration as done:
            vetted: _Vetted = done.value
            return vetted


def _vetting(
    result: Mapping[str, Any], version: str, mask: Callable[[str], str], page: int
) -> Generator[None, None, _Vetted]:
    """:func:`vet`, pausing (a ``yield``) after each :data:`SLICE` tools checked.

    The SDK's checks of a list are its checks of each tool and of the answer's other
    members (no rule spans two tools), so the answer is checked a slice at a time, each
    slice with those members: an answer all valid is checked once, as the SDK checks
    it; a slice that fails is checked tool by tool."""
    import mcp_types
    from mcp_types import methods

    tools = result.get("tools")
    if not isinstance(tools, list) or ("tools/list", version) not in methods.SERVER_RESULTS:
        return None
    rest = {key: value for key, value in result.items() if key != "tools"}
    ttl = rest.get("ttlMs")
    if isinstance(ttl, (int, float)) and not isinstance(ttl, bool) and ttl < 0:
        rest["ttlMs"] = 0  # as the SDK floors it before its checks (a 2026-07-28 SHOULD)
    wire = _wire_check(version)
    sdk_model = mcp_types.ListToolsResult.model_validate

    def check(listed: list[Any]) -> None:
        # What ClientSession.send_request checks: the version's wire schema
        # (methods.validate_server_result, without the dump it makes of what passed),
        # then the SDK's own model (whose other members were checked on the wire schema).
        wire({**rest, "tools": listed}, by_name=False)
        sdk_model({"tools": listed}, by_name=False)

    kept: list[Any] = []
    left_out: list[MalformedTool] = []
    rest_valid = False
    for start in range(0, len(tools), SLICE):
        if start:
            yield
        part = tools[start : start + SLICE]
        try:
            check(part)
        except ValidationError:
            pass  # some tool is malformed, or the rest of the answer: which is found below
        else:
            kept.extend(part)
            rest_valid = True
            continue
        if not rest_valid:
            try:
                check([])
            except ValidationError:
                return None
            rest_valid = True
        for index, tool in enumerate(part, start):
            try:
                check([tool])
            except ValidationError as exc:
                left_out.append(_malformed(index, tool, exc, mask, page))
            else:
                kept.append(tool)
    return (kept, left_out) if left_out else None


@functools.cache
def _wire_check(version: str) -> Callable[..., Any]:
    """The validation of ``version``'s wire schema for a ``tools/list`` answer."""
    from mcp_types import methods
    from pydantic import TypeAdapter

    row: Any = methods.SERVER_RESULTS[("tools/list", version)]
    return TypeAdapter(row).validate_python


def _malformed(
    index: int, tool: Any, exc: ValidationError, mask: Callable[[str], str], page: int
) -> MalformedTool:
    name = tool.get("name") if isinstance(tool, dict) else None
    errors = exc.errors(include_url=False, include_context=False, include_input=False)
    first = errors[0]
    # The error is on a page holding the tool alone: tools[0], renumbered to its place.
    steps = first["loc"][2:] if first["loc"][:2] == ("tools", 0) else first["loc"]
    more = len(errors) - 1
    tail = f" (and {more} more error{'s' if more > 1 else ''})" if more else ""
    return MalformedTool(
        index,
        server_word(mask(name)) if isinstance(name, str) else None,
        quoted(location(("tools", index, *steps)), mask),
        quoted(f"{first['msg']}{tail}", mask),
        page,
        # Kept while the list is the last one: its frames (this page's data) are not.
        exc.with_traceback(None),
    )


class ToolListVetting:
    """The answers to one connection's ``tools/list`` requests, vetted (see :func:`vet`)
    before the SDK reads them: the write stream calls :meth:`sent` and
    :meth:`cancelled`, the read stream :meth:`received` while :attr:`waiting` has any.

    ``version`` tells the session's protocol version (None before the handshake: its
    answers are left alone); ``mask`` hides the connection's secrets in what is shown.

    Example:
        >>> vetting = ToolListVetting("demo", lambda: "2025-11-25")
        >>> vetting.sent(7)
        >>> list(vetting.waiting)
        [7]
        >>> vetting.cancelled({"requestId": "7"})
        >>> vetting.waiting
        {}
    """

    __slots__ = (
        "_answers",
        "_mask",
        "_response",
        "_server_name",
        "_turn",
        "_version",
        "waiting",
    )

    def __init__(
        self,
        server_name: str,
        version: Callable[[], str | None],
        mask: Callable[[str], str] = str,
    ) -> None:
        import anyio.lowlevel
        import mcp_types

        self._server_name = server_name
        self._turn = anyio.lowlevel.checkpoint
        self._version = version
        self._mask = mask
        self._response = mcp_types.JSONRPCResponse
        self._answers = (mcp_types.JSONRPCResponse, mcp_types.JSONRPCError)
        self.waiting: dict[Any, Listing | None] = {}
        """The ``tools/list`` requests not answered yet, by id (``coerce_id``), each with
        the listing it is for (None: the SDK's own)."""

    def sent(self, request_id: Any) -> None:
        """A ``tools/list`` request with ``request_id`` is being sent (in its sender's task)."""
        waiting = self.waiting
        waiting[coerce_id(request_id)] = LISTING.get()
        if len(waiting) > _FOLLOWED:
            del waiting[next(iter(waiting))]

    def cancelled(self, params: Mapping[str, Any] | None) -> None:
        """A ``notifications/cancelled`` with ``params`` is being sent: its request's
        answer, if it still comes, is not read."""
        if self.waiting and params is not None:
            self.waiting.pop(coerce_id(params.get("requestId")), None)

    async def received(self, item: SessionMessage | Exception) -> SessionMessage | Exception:
        """``item``, read from the server; an answer to a ``tools/list`` request without
        its malformed tools. A long answer is vetted in slices of :data:`SLICE` tools,
        with a turn of the event loop between two (see :func:`vet`)."""
        if isinstance(item, Exception):
            return item
        message = item.message
        if not isinstance(message, self._answers):
            return item
        key = coerce_id(message.id)
        if key not in self.waiting:
            return item
        listing = self.waiting.pop(key)
        version = self._version()
        if not isinstance(message, self._response) or version is None:
            return item
        page = 0
        if listing is not None:
            listing.pages += 1
            page = listing.pages
        steps = _vetting(message.result, version, self._mask, page)
        while True:
            try:
                next(steps)
            except StopIteration as done:
                vetted: _Vetted = done.value
                break
            await self._turn()
        if vetted is None:
            return item
        kept, left_out = vetted
        if listing is not None:
            listing.malformed.extend(left_out)
        else:
            for tool in left_out:
                logger.debug(
                    "MCP server '%s': tools/list (sent by the MCP SDK): left out the "
                    "malformed tool %s",
                    self._server_name,
                    tool,
                )
        answer = message.model_copy(update={"result": {**message.result, "tools": kept}})
        return dataclasses.replace(item, message=answer)
