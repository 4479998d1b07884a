"""A byte proxy on 127.0.0.1 in front of a real HTTP server, for fault tests.

It forwards every TCP connection as is, in the test's event loop, and on request:

- :meth:`FaultProxy.cut_gets` cuts the connections that carry a GET (the Streamable
  HTTP listen stream of a 2025-11-25 session) mid-response, as a proxy's idle timeout
  or a load balancer's restart does: the client sees the body end before it is whole;
- :attr:`FaultProxy.refuse_gets` closes each new GET's connection before the server
  sees it (the client sees the server disconnect without a response).

A connection carries a GET once a chunk the client sent starts with ``GET `` (the
client writes each request in one go, after the last response ended). ``gets`` counts
the GETs seen; :meth:`FaultProxy.wait_gets` waits (an event, bounded) for a count.
"""

from __future__ import annotations

import asyncio
from types import TracebackType

from typing_extensions import Self

__all__ = ["FaultProxy"]


class _Link:
    """One client connection and its upstream twin."""

    def __init__(self, down: asyncio.StreamWriter, up: asyncio.StreamWriter) -> None:
        self.down = down
        self.up = up
        self.get = False

    def cut(self) -> None:
        self.down.close()
        self.up.close()


class FaultProxy:
    """Forwards 127.0.0.1:``port`` (see the module docs); an async context manager."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self.gets = 0
        self.refuse_gets = False
        self._links: set[_Link] = set()
        self._serving: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | None = None
        self._counted = asyncio.Event()

    @property
    def url(self) -> str:
        """The MCP endpoint, through the proxy."""
        return f"http://127.0.0.1:{self.port}/mcp"

    async def __aenter__(self) -> Self:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._server is not None
        self._server.close()
        for link in list(self._links):
            link.cut()
        # A connection accepted while its upstream was still opening is no link yet, so
        # the cut above missed it: its handler is cancelled instead.
        serving = [task for task in self._serving if not task.done()]
        for task in serving:
            task.cancel()
        if serving:
            await asyncio.wait(serving, timeout=10)
        await asyncio.wait_for(self._server.wait_closed(), 10)

    def cut_gets(self) -> int:
        """Cut every connection carrying a GET; how many there were."""
        cut = [link for link in self._links if link.get]
        for link in cut:
            link.cut()
        return len(cut)

    async def wait_gets(self, count: int, seconds: float = 15) -> None:
        """Wait until ``count`` GETs have been seen in all."""

        async def counted() -> None:
            while self.gets < count:
                self._counted.clear()
                await self._counted.wait()

        await asyncio.wait_for(counted(), seconds)

    async def _serve(self, down_r: asyncio.StreamReader, down_w: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._serving.add(task)
        try:
            try:
                up_r, up_w = await asyncio.open_connection("127.0.0.1", self.target_port)
            except OSError:
                down_w.close()
                return
            link = _Link(down_w, up_w)
            self._links.add(link)
            try:
                await asyncio.gather(self._pump(down_r, up_w, link), self._pump(up_r, down_w, None))
            finally:
                self._links.discard(link)
                link.cut()
        except asyncio.CancelledError:
            down_w.close()  # stopped by __aexit__: the handler ends quietly
        finally:
            self._serving.discard(task)

    async def _pump(
        self, source: asyncio.StreamReader, sink: asyncio.StreamWriter, link: _Link | None
    ) -> None:
        try:
            while data := await source.read(65536):
                if link is not None and data.startswith(b"GET "):
                    link.get = True
                    self.gets += 1
                    self._counted.set()
                    if self.refuse_gets:
                        link.cut()
                        return
                sink.write(data)
                await sink.drain()
        except (ConnectionError, OSError):
            pass  # the other side went away (or was cut): the link ends
        finally:
            sink.close()
