"""The MCP side of a cassette: tool lists and tool calls, recorded and replayed.

The seam is the client's tool surface, which is all a registry's MCP adapters use
(:class:`~agcore_tools.mcp.McpTool` calls ``call_tool`` on whatever ``ToolCaller`` it
was given): :class:`CassetteMcpClient` stands where an :class:`~agcore_tools.McpClient`
stood. Recording, it passes every call to the real client and writes down the tool
list and each ``tools/call`` (tool name, arguments, value or error); replaying, it
answers from the cassette and starts no server.
"""

from __future__ import annotations

import base64
import collections
import json
import logging
from collections.abc import Collection, Mapping
from dataclasses import asdict
from types import TracebackType
from typing import Any

from typing_extensions import Self

from ..base import BaseTool
from ..content import CONTENT_TYPES, Audio, File, Image
from ..error import (
    CassetteError,
    CassetteMismatchError,
    McpError,
    McpNotInitializedError,
    McpTimeoutError,
    ToolError,
    ToolExecutionError,
    _CassetteConfigError,
)
from ..mcp import McpClient
from ..mcp._adapter import make_adapters, prefix_for
from ..mcp._tools import definition
from ..mcp.models import McpToolInfo
from ..mcp.policy import PermissionPolicy
from ._diff import first_difference, json_path
from ._tape_http import HttpTape

__all__ = ["CassetteMcpClient", "McpTape"]

logger = logging.getLogger("agcore_tools.testing")

_SHOWN_ARGS = 200  # characters of an unrecorded call's arguments (as JSON) in its error


def _key(server: str, tool: str, args: Any) -> str:
    return json.dumps([server, tool, args], sort_keys=True, default=str)


def encode_value(value: Any, tool: str) -> Any:
    """A tool's value as JSON: images, audio and files as tagged base64, wherever they
    are (an embedded resource's blob is one inside its typed JSON)."""
    if isinstance(value, CONTENT_TYPES):
        kind = type(value).__name__.lower()
        tagged = {f"${kind}": base64.b64encode(value.data).decode(), "media_type": value.media_type}
        if isinstance(value, File):
            tagged["filename"] = value.filename
        return tagged
    if isinstance(value, list):
        return [encode_value(item, tool) for item in value]
    if isinstance(value, dict):
        return {key: encode_value(item, tool) for key, item in value.items()}
    try:
        json.dumps(value)
    except (TypeError, ValueError) as exc:
        raise CassetteError(
            f"cannot record the result of MCP tool '{tool}': {type(value).__name__} is not JSON"
        ) from exc
    return value


def decode_value(value: Any) -> Any:
    """The value :func:`encode_value` kept."""
    if isinstance(value, dict) and "media_type" in value:
        if "$image" in value:
            return Image(base64.b64decode(value["$image"]), value["media_type"])
        if "$audio" in value:
            return Audio(base64.b64decode(value["$audio"]), value["media_type"])
        if "$file" in value:
            data = base64.b64decode(value["$file"])
            return File(data, value["media_type"], value["filename"])
    if isinstance(value, list):
        return [decode_value(item) for item in value]
    if isinstance(value, dict):
        return {key: decode_value(item) for key, item in value.items()}
    return value


_MCP_ERRORS: dict[str, type[McpError]] = {
    kind.__name__: kind for kind in (McpError, McpTimeoutError, McpNotInitializedError)
}
"""The MCP errors a replay raises as their own class; any other as an ``McpError``."""


def encode_error(exc: McpError) -> dict[str, Any]:
    """An MCP error as JSON: its class and message, and the fields the loop (and a
    breaker: ``by_caller``, kept only when true) reads."""
    encoded = {
        "type": type(exc).__name__,
        "message": str(exc),
        "reason": exc.reason,
        "recoverable": exc.is_recoverable(),
        "may_have_run": exc.may_have_run,
        "status_code": exc.status_code,
        "retry_after": exc.retry_after,
    }
    if isinstance(exc, McpNotInitializedError) and exc.by_caller:
        encoded["by_caller"] = True
    return encoded


def decode_error(server: str, tool: str, error: Mapping[str, Any]) -> ToolError:
    """The error a recorded ``tools/call`` raised, rebuilt from what was kept of it."""
    message = str(error["message"])
    if error.get("type") == "ToolExecutionError":
        return ToolExecutionError(tool, message)
    kind = _MCP_ERRORS.get(str(error.get("type")), McpError)
    if "reason" not in error:  # a cassette from before the fields were kept
        return kind(server, message.removeprefix(f"MCP server '{server}': "), tool_name=tool)
    rebuilt = kind(server, str(error["reason"]), tool_name=tool)
    rebuilt.args = (message,)  # as recorded, with what it said of whether the call ran
    rebuilt.recoverable = bool(error["recoverable"])
    rebuilt.may_have_run = error["may_have_run"]
    rebuilt.status_code = error["status_code"]
    rebuilt.retry_after = error["retry_after"]
    if isinstance(rebuilt, McpNotInitializedError):
        rebuilt.by_caller = bool(error.get("by_caller"))
    return rebuilt


class McpTape:
    """The MCP interactions of a cassette, and which tool calls were replayed."""

    def __init__(self, interactions: list[dict[str, Any]], http: HttpTape) -> None:
        self.interactions = interactions
        """The cassette's list (HTTP and MCP interactions), shared."""
        self.http = http
        """The cassette's HTTP tape: which model requests were replayed, for
        :meth:`tools`."""
        self.mismatch: CassetteMismatchError | None = None
        """The first call the cassette could not answer, if any."""
        self._calls: list[dict[str, Any]] = []
        self._queues: dict[str, collections.deque[int]] = {}  # indexes into _calls
        self._played: set[int] = set()
        self._http_at: list[int] = []  # where each HTTP interaction is in the list
        self._call_at: list[int] = []  # where each tools/call is
        self.rewind()

    def rewind(self) -> None:
        """Start replaying from the first recorded call again."""
        self._http_at = [p for p, i in enumerate(self.interactions) if i.get("kind") == "http"]
        self._call_at = [
            p
            for p, i in enumerate(self.interactions)
            if i.get("kind") == "mcp" and i["method"] == "tools/call"
        ]
        self._calls = [self.interactions[p] for p in self._call_at]
        self._queues = collections.defaultdict(collections.deque)
        for index, call in enumerate(self._calls):
            self._queues[_key(call["server"], call["tool"], call["arguments"])].append(index)
        self._played = set()

    def record(self, interaction: dict[str, Any]) -> None:
        """Add an interaction."""
        self.interactions.append({"kind": "mcp", **interaction})

    def tools(self, server: str) -> list[dict[str, Any]]:
        """The tool list of ``server`` at the point the replay has reached, as it was
        then while recording: the last one recorded before the first model request or
        tool call recorded after the last one replayed (so a list that changed between
        two turns replays turn by turn); the server's first list if none was recorded
        that early."""
        lists = [
            (position, interaction)
            for position, interaction in enumerate(self.interactions)
            if interaction.get("kind") == "mcp"
            and interaction.get("server") == server
            and interaction["method"] == "tools/list"
        ]
        if not lists:
            raise CassetteError(f"the cassette holds no tool list of MCP server '{server}'")
        reached = self._reached()
        current = lists[0][1]
        for position, interaction in lists:
            if position < reached:
                current = interaction
        tools: list[dict[str, Any]] = current["tools"]
        return tools

    def _reached(self) -> int:
        """Where in the list the replay stands: the position of the first model request
        or tool call after the last one replayed (the list's end when none is left)."""
        played = [self._http_at[i] for i in self.http.played()]
        played += [self._call_at[i] for i in self._played]
        last = max(played, default=-1)
        later = [p for p in self._http_at + self._call_at if p > last]
        return min(later, default=len(self.interactions))

    def unplayed(self) -> list[tuple[int, dict[str, Any]]]:
        """The recorded tool calls no replayed call asked for: their indexes (among the
        calls, from 0) and the calls."""
        return [(i, call) for i, call in enumerate(self._calls) if i not in self._played]

    def call(self, server: str, tool: str, args: Any) -> dict[str, Any]:
        """The recorded outcome of calling ``tool`` with ``args`` (in recorded order)."""
        queue = self._queues.get(_key(server, tool, args))
        if queue:
            # By index: two calls recorded alike are equal dicts, but each plays once.
            index = queue.popleft()
            self._played.add(index)
            return self._calls[index]
        # Arguments with a scrubbed secret: the first unplayed call they match.
        for index, call in enumerate(self._calls):
            same = call["server"] == server and call["tool"] == tool
            if same and index not in self._played and not first_difference(call["arguments"], args):
                self._played.add(index)
                self._queues[_key(server, tool, call["arguments"])].remove(index)
                return call
        error = self._unrecorded(server, tool, args)
        if self.mismatch is None:
            self.mismatch = error
        logger.error("replay: %s", error)
        raise error

    def _unrecorded(self, server: str, tool: str, args: Any) -> CassetteMismatchError:
        for index, call in enumerate(self._calls):
            if index in self._played or call["server"] != server or call["tool"] != tool:
                continue
            found = first_difference(call["arguments"], args, ["arguments"])
            if found is not None:
                path, old, new = found
                return CassetteMismatchError(index, json_path(path), old, new, subject="MCP call")
        shown = json.dumps(args, sort_keys=True, default=str)
        if len(shown) > _SHOWN_ARGS:  # a whole document as an argument, say
            shown = f"{shown[: _SHOWN_ARGS - 3]}... ({len(shown)} characters)"
        return CassetteMismatchError(
            len(self._calls),
            "tool",
            None,
            tool,
            message=f"MCP call of tool '{tool}' on server '{server}' with arguments "
            f"{shown} is not in the cassette",
        )


class CassetteMcpClient(McpClient):
    """An :class:`~agcore_tools.McpClient` that records to or replays from a cassette;
    :meth:`Cassette.mcp <agcore_tools.testing.Cassette.mcp>` makes one.

    It is an ``McpClient`` (so code typed against one takes it) whose tool surface goes
    through the cassette: ``async with``, :meth:`connect`, :meth:`close`,
    :meth:`definitions`, :meth:`refresh_tools`, :meth:`tool_infos`, :meth:`call_tool`
    and :meth:`into_tools` (whose adapters call tools through it), and the ``*_sync``
    methods, which call those. Recording, each is passed to the real
    client (:attr:`client`) and written down; replaying, nothing is started and the
    answers come from the cassette. A failed call replays as the error it raised: its
    class (``McpError``, ``McpTimeoutError``, ``McpNotInitializedError``; any other
    ``McpError`` as an ``McpError``), message, ``recoverable``, ``may_have_run``,
    ``status_code`` and ``retry_after``. A ``tools/call`` is matched by tool name and
    arguments, in recorded order; one the cassette does not hold raises
    :class:`~agcore_tools.testing.CassetteMismatchError` (the loop turns it into an error
    result, and the cassette raises it again when it closes). MCP tasks, resources,
    prompts and the rest of ``McpClient`` are not recorded: on this client they raise
    :class:`~agcore_tools.McpNotInitializedError`, as on a client never connected, and
    ``into_tools(tasks=...)`` raises :class:`~agcore_tools.testing.CassetteError`
    (a ``ValueError`` too).

    Example:
        >>> import asyncio
        >>> from agcore_tools import McpClient, StdioTransport, ToolRegistry
        >>> from agcore_tools.testing import Cassette
        >>> cassette = Cassette.from_interactions([
        ...     {"kind": "mcp", "server": "demo", "method": "tools/list",
        ...      "tools": [{"name": "capital_of", "description": "A capital.",
        ...                 "input_schema": {"type": "object", "properties": {
        ...                     "country": {"type": "string"}}}}]},
        ...     {"kind": "mcp", "server": "demo", "method": "tools/call",
        ...      "tool": "capital_of", "arguments": {"country": "Japan"}, "result": "Tokyo"},
        ...     {"kind": "mcp", "server": "demo", "method": "tools/call",
        ...      "tool": "capital_of", "arguments": {"country": "Japan"}, "result": "Tokyo"},
        ... ])
        >>> demo = cassette.mcp(McpClient("demo", StdioTransport("never-started")))
        >>> async def main() -> None:
        ...     async with demo:
        ...         print([d["function"]["name"] for d in await demo.definitions()])
        ...         print((await demo.tool_infos())[0].description)
        ...         try:
        ...             await demo.call_tool("capital_of", {"country": "Peru"})
        ...         except Exception as exc:
        ...             print(exc)
        ...         registry = ToolRegistry()
        ...         registry.register_all(demo.into_tools(prefix=True))
        ...         print((await registry.invoke("demo__capital_of", {"country": "Japan"})).output)
        >>> asyncio.run(main())
        ['capital_of']
        A capital.
        MCP call 0 differs at arguments.country: recorded 'Japan', got 'Peru'
        Tokyo
        >>> demo.server_name, demo.recording, demo.timeout, isinstance(demo, McpClient)
        ('demo', False, 30.0, True)
        >>> type(demo.permission_policy).__name__  # the real client's, for into_tools()
        'McpPermissionPolicy'

        Without ``async with``: :meth:`connect` reads the tool list, :meth:`close` ends
        (recording, both go to the real client):

        >>> async def plain() -> int:
        ...     await demo.connect()
        ...     try:
        ...         return len(await demo.refresh_tools())
        ...     finally:
        ...         await demo.close()
        >>> asyncio.run(plain())
        1

        From synchronous code, as with an ``McpClient``:

        >>> demo.connect_sync()
        >>> demo.connected, [d["function"]["name"] for d in demo.definitions_sync()]
        (True, ['capital_of'])
        >>> demo.call_tool_sync("capital_of", {"country": "Japan"})
        'Tokyo'
        >>> demo.close_sync()
        >>> demo.connected
        False
    """

    def __init__(self, tape: McpTape, client: McpClient, *, recording: bool) -> None:
        self.client = client
        """The real client: used while recording, never connected while replaying."""
        self.recording = recording
        """Whether calls go to the real server (and are recorded)."""
        self._tape = tape
        self._infos: list[McpToolInfo] | None = None
        self._listed: list[dict[str, Any]] | None = None  # replaying: _infos' recorded list
        self._open = False  # replaying: between connect() and close()
        # An McpClient of its own too, so that code typed against McpClient takes it.
        # Never connected, and without recovery, its own session starts nothing: what
        # this class does not override fails as on a client never connected.
        super().__init__(
            client.server_name,
            client.transport,
            timeout=client.timeout,
            tools_ttl=client.tools_ttl,
            permission_policy=client.permission_policy,
            recovery=None,
        )

    @property
    def timeout(self) -> float:
        """The real client's per-request timeout; settable (it sets the real client's)."""
        return self.client.timeout

    @timeout.setter
    def timeout(self, timeout: float) -> None:
        self.client.timeout = timeout

    @property
    def permission_policy(self) -> PermissionPolicy:
        """The real client's permission policy, which :meth:`into_tools` applies;
        settable (it sets the real client's)."""
        return self.client.permission_policy

    @permission_policy.setter
    def permission_policy(self, policy: PermissionPolicy) -> None:
        self.client.permission_policy = policy

    @property
    def connected(self) -> bool:
        """Recording, whether the real client is connected; replaying, whether
        :meth:`connect` was called since the last :meth:`close`."""
        return self.client.connected if self.recording else self._open

    async def connect(self) -> None:
        """Recording: connect the real client and record its tool list. Replaying: read
        the tool list from the cassette."""
        if self.recording:
            await self.client.connect()
        await self.tool_infos()
        self._open = True

    async def close(self) -> None:
        """Recording: close the real client. Replaying: nothing to close."""
        self._open = False
        if self.recording:
            await self.client.close()

    async def __aenter__(self) -> Self:
        await self.connect()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def tool_infos(self) -> list[McpToolInfo]:
        """The server's tools (recorded from, or replayed as, its ``tools/list``).

        Recording, a list that differs from the last one is written down; replaying,
        the list the server had at the same point of the recording (the last recorded
        before the next model request or tool call), so each turn gets its own."""
        if self.recording:
            infos = await self.client.tool_infos()
            if infos != self._infos:
                self._tape.record(
                    {
                        "server": self.server_name,
                        "method": "tools/list",
                        "tools": [_info_json(info) for info in infos],
                    }
                )
            self._infos = infos
            return infos
        tools = self._tape.tools(self.server_name)
        if self._infos is None or tools is not self._listed:
            self._infos = [_info(tool) for tool in tools]
            self._listed = tools
        return self._infos

    async def definitions(self) -> list[dict[str, Any]]:
        """The tools as Chat Completions tool params, like :meth:`McpClient.definitions`."""
        return [definition(info) for info in await self.tool_infos() if not info.app_only]

    async def refresh_tools(self) -> list[dict[str, Any]]:
        """Recording: re-read the real server's tool list (recorded if it changed).
        Replaying: the cassette's, as :meth:`definitions` gives it."""
        if self.recording:
            await self.client.refresh_tools()
        return await self.definitions()

    async def call_tool(
        self, name: str, args: Mapping[str, Any] | None = None, *, timeout: float | None = None
    ) -> Any:
        """Call a tool: on the server, recording its value or error; or from the cassette."""
        arguments = dict(args or {})
        if not self.recording:
            call = self._tape.call(self.server_name, name, arguments)
            if "error" in call:
                raise decode_error(self.server_name, name, call["error"])
            return decode_value(call["result"])
        entry: dict[str, Any] = {
            "server": self.server_name,
            "method": "tools/call",
            "tool": name,
            "arguments": arguments,
        }
        try:
            value = await self.client.call_tool(name, args, timeout=timeout)
        except ToolExecutionError as exc:
            reason = getattr(exc, "reason", None)
            message = reason if isinstance(reason, str) else exc.message
            self._tape.record(
                {**entry, "error": {"type": "ToolExecutionError", "message": message}}
            )
            raise
        except McpError as exc:
            self._tape.record({**entry, "error": encode_error(exc)})
            raise
        self._tape.record({**entry, "result": encode_value(value, name)})
        return value

    def into_tools(
        self,
        *,
        prefix: bool | str = False,
        policy: PermissionPolicy | None = None,
        tasks: bool | Collection[str] = False,
        task_wait: float | None = None,
    ) -> list[BaseTool]:
        """Adapters for the tools, as :meth:`McpClient.into_tools` makes them, calling
        through this client. Needs the tool list: :meth:`connect` first. MCP tasks are
        not recorded: ``tasks`` other than False raises ``CassetteError`` (a
        ``ValueError`` too), and ``task_wait`` is unused."""
        if tasks is not False:
            raise _CassetteConfigError(
                f"MCP server '{self.server_name}': a cassette does not record MCP tasks; "
                "call into_tools() without tasks= in tests that use one"
            )
        if self._infos is None:
            raise CassetteError(
                f"MCP server '{self.server_name}': no tool list yet; connect() first"
            )
        name = prefix_for(self.server_name, prefix)
        chosen = policy or self.permission_policy
        return make_adapters(self, self._infos, name, chosen)

    def __repr__(self) -> str:
        mode = "recording" if self.recording else "replaying"
        return f"<CassetteMcpClient {self.server_name!r} {mode}>"


def _info_json(info: McpToolInfo) -> dict[str, Any]:
    data = asdict(info)
    return {k: v for k, v in data.items() if v not in (None, {}, "") or k == "name"}


def _info(data: Mapping[str, Any]) -> McpToolInfo:
    return McpToolInfo(**data)
