"""The requests of :class:`~agcore_tools.McpClient` beyond tools, as a mixin: resources
(and their subscriptions), prompts, completion, ping, the log level, roots, and the
tools that let a model read resources and get prompts.

Kept out of :mod:`agcore_tools.mcp.client`, which holds the client's settings and its
lifecycle, so each module reads as one job: each method hands its request to its
module (``_resources``, ``_prompts``, ``_utilities``, ``_protocol_tools``), which sends
it through the session. The mixin reaches the client through the attributes it
declares, which :class:`~agcore_tools.McpClient` sets.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .._keywords import checks_public_keywords
from ..base import BaseTool
from . import _prompts, _protocol_tools, _resources, _utilities, models
from ._adapter import prefix_for
from ._requests import offers
from ._session import Session
from .policy import PermissionPolicy

__all__ = ["ProtocolClientMethods"]


@checks_public_keywords
class ProtocolClientMethods:
    """Resources, prompts, completion, ``ping``, ``set_log_level``,
    ``notify_roots_changed``, ``resource_reader_tool`` and ``prompt_tool`` of
    :class:`~agcore_tools.McpClient`."""

    server_name: str
    permission_policy: PermissionPolicy
    _session: Session

    @property
    def instructions(self) -> str | None:
        """The server's instructions for using it (for a system prompt), while connected."""
        client = self._session.client
        return client.instructions if client is not None else None

    async def list_resources(self) -> list[models.McpResourceInfo]:
        """The server's resources, every page followed (fetched on each call)."""
        return await _resources.list_resources(self._session)

    async def list_resource_templates(self) -> list[models.McpResourceTemplateInfo]:
        """The server's resource templates (URI patterns), every page followed."""
        return await _resources.list_resource_templates(self._session)

    async def read_resource(self, uri: str) -> list[models.McpResourceContents]:
        """The parts (text or blob) of the resource at ``uri``; fails like :meth:`call_tool`."""
        return await _resources.read_resource(self._session, uri)

    def subscribe_resource(self, uri: str) -> _resources.McpResourceSubscription:
        """Updates of the resource at ``uri``: ``async with`` it, then iterate it.

        Example:
            >>> async def watch(client: McpClient) -> None:
            ...     async with client.subscribe_resource("file:///todo.txt") as updates:
            ...         async for uri in updates:  # each time the server says it changed
            ...             print((await client.read_resource(uri))[0].text)
        """
        return _resources.McpResourceSubscription(self, uri, self._session)

    async def list_prompts(self) -> list[models.McpPromptInfo]:
        """The server's prompts, every page followed."""
        return await _prompts.list_prompts(self._session)

    async def get_prompt(
        self, name: str, arguments: Mapping[str, str] | None = None
    ) -> models.McpPrompt:
        """The prompt ``name``, filled in by the server with ``arguments``."""
        return await _prompts.get_prompt(self._session, name, arguments)

    async def complete(
        self,
        argument: str,
        value: str,
        *,
        prompt: str | None = None,
        resource_template: str | None = None,
        context: Mapping[str, str] | None = None,
    ) -> models.McpCompletion:
        """Suggestions for ``argument`` of a ``prompt`` or a ``resource_template`` (give
        one), given its ``value`` so far and the arguments already chosen (``context``)."""
        return await _prompts.complete(
            self._session, argument, value, prompt, resource_template, context
        )

    async def ping(self) -> float:
        """Seconds for one round trip (``server/discover`` on 2026-07-28, which has no ping)."""
        return await _utilities.ping(self._session)

    async def set_log_level(self, level: str) -> None:
        """Ask for server log messages at ``level`` and above (``logging/setLevel``; on
        2026-07-28, sent with each later request). Later connections use it too.

        Example:
            >>> async def quiet(client: McpClient) -> None:
            ...     await client.set_log_level("error")
        """
        await _utilities.set_log_level(self._session, level)

    async def notify_roots_changed(self) -> bool:
        """Tell the server ``roots_handler`` now answers differently; False when there is
        nothing to send (2026-07-28 servers ask for the roots each time).

        Example:
            >>> async def moved(client: McpClient) -> None:
            ...     await client.notify_roots_changed()
        """
        return await _utilities.notify_roots_changed(self._session)

    def resource_reader_tool(
        self, *, prefix: bool | str = False, policy: PermissionPolicy | None = None
    ) -> BaseTool:
        """A ``read_resource`` tool, so a model can read resources, such as the
        ``resource_link`` parts tools return (``prefix``, ``policy`` as for :meth:`into_tools`).
        Made for a connected server that offers no resources, it logs a warning."""
        return _protocol_tools.resource_reader_tool(
            self,
            prefix_for(self.server_name, prefix),
            policy or self.permission_policy,
            offered=offers(self._session, "resources"),
        )

    def prompt_tool(
        self,
        *,
        prefix: bool | str = False,
        policy: PermissionPolicy | None = None,
        prompts: Sequence[models.McpPromptInfo] | None = None,
    ) -> BaseTool:
        """A ``get_prompt`` tool, so a model can get the server's prompts (``prefix``,
        ``policy`` as for :meth:`into_tools`). Made for a connected server that offers
        no prompts, it logs a warning. Given ``prompts=await client.list_prompts()``,
        it names them and their arguments to the model (make it again when they change).

        Example:
            >>> async def prompts(client: McpClient) -> BaseTool:
            ...     return client.prompt_tool(prefix=True, prompts=await client.list_prompts())
        """
        return _protocol_tools.prompt_tool(
            self,
            prefix_for(self.server_name, prefix),
            policy or self.permission_policy,
            offered=offers(self._session, "prompts"),
            prompts=prompts,
        )
