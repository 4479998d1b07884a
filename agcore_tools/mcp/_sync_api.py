"""An MCP client's synchronous entry points, as a mixin.

Each runs the async method on agcore_tools' own event loop (see ``_sync.py``), where
the session then lives: use one client either with these or with ``await``, not both.
Kept out of :mod:`agcore_tools.mcp.client` so the façade stays a read of the async API;
the mixin reaches the client only through the public methods in :class:`_AsyncClient`.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import Any, Protocol, TypeVar

from typing_extensions import deprecated

from .. import _sync
from .._deprecated import renamed
from .._keywords import checks_public_keywords

__all__ = ["SyncClientMethods"]


class _AsyncClient(Protocol):
    async def connect(self) -> None: ...

    async def close(self) -> None: ...

    async def definitions(self) -> list[dict[str, Any]]: ...

    async def call_tool(
        self, name: str, args: Mapping[str, Any] | None = None, *, timeout: float | None = None
    ) -> Any: ...


_Client = TypeVar("_Client", bound=_AsyncClient)


@checks_public_keywords
class SyncClientMethods:
    """``connect_sync``, ``definitions_sync``, ``call_tool_sync``, ``close_sync`` and
    ``with McpClient(...) as client:``."""

    def connect_sync(self: _AsyncClient) -> None:
        """:meth:`connect` for synchronous code; the session stays open across sync calls."""
        _sync.run(self.connect())

    def definitions_sync(self: _AsyncClient) -> list[dict[str, Any]]:
        """:meth:`definitions` for synchronous code."""
        return _sync.run(self.definitions())

    @deprecated(
        "McpClient.list_tools_sync() is deprecated; use McpClient.definitions_sync()", category=None
    )
    def list_tools_sync(self: _AsyncClient) -> list[dict[str, Any]]:
        """Deprecated: use :meth:`definitions_sync` (same result).

        Example:
            >>> from agcore_tools.mcp import McpClient
            >>> def old_and_new(client: McpClient) -> bool:
            ...     return client.list_tools_sync() == client.definitions_sync()  # warns
        """
        renamed("McpClient.list_tools_sync()", "McpClient.definitions_sync()")
        return _sync.run(self.definitions())

    def call_tool_sync(
        self: _AsyncClient,
        name: str,
        args: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
    ) -> Any:
        """:meth:`call_tool` for synchronous code; Ctrl-C cancels the request on the server."""
        return _sync.run(self.call_tool(name, dict(args) if args else None, timeout=timeout))

    def close_sync(self: _AsyncClient) -> None:
        """:meth:`close` for synchronous code (also called when a ``with`` block ends); at
        interpreter exit, after the library's wind-down stopped the session, it returns
        quietly."""
        _sync.run_close(self.close())

    def __enter__(self: _Client) -> _Client:
        _sync.run(self.connect())
        return self

    def __exit__(
        self: _AsyncClient,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        _sync.run_close(self.close())
