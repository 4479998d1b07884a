"""What a registry offers the model: its tool definitions, built once per revision,
and the revision that says when to build them again; the base of
:class:`~agcore_tools.ToolRegistry`.

Kept out of :mod:`agcore_tools.registry` so the registry stays a read of
registration, discovery and policies. The definitions are built from the registry's
:class:`~agcore_tools._table.ToolTable` (its entries and permission checker), its
schema transforms and its policies' open breakers, which the registry hands over
when it is made.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, overload

from ._keywords import checks_keywords
from ._offer import copied_definitions, offered_definition, offered_entries
from ._policy_book import PolicyBook
from ._records import permission_edit
from ._table import ToolTable
from .base import definition_name
from .error import ToolConfigError
from .permission import PermissionChecker
from .schema import SchemaTransform

if TYPE_CHECKING:
    # Types only: `import agcore_tools` loads no openai (tests/test_package.py).
    from openai.types.chat import ChatCompletionToolParam
    from openai.types.responses import FunctionToolParam

__all__ = ["RegistryDefinitions", "shared_definitions"]


class RegistryDefinitions:
    """A registry's tool definitions for model requests and its revision."""

    def __init__(
        self, table: ToolTable, transforms: tuple[SchemaTransform, ...], policies: PolicyBook
    ) -> None:
        self._table = table
        self._schema_transforms = transforms
        self._policies = policies
        # Each api's definitions, with the revision and checker they were built for.
        self._definitions: dict[str, tuple[int, PermissionChecker | None, list[Any]]] = {}
        self._revision = 0
        self._edit_seen = permission_edit()
        self._hidden_logged: set[frozenset[str]] = set()

    @property
    def revision(self) -> int:
        """A number that changes whenever this registry's tools, their policies or its
        permission checker change, or a tool's ``required_permissions`` is given another
        value: whoever keeps something built from the registry (a run's tool list)
        compares it to know when to build it again.

        Example:
            >>> from agcore_tools import ToolRegistry
            >>> from agcore_tools.testing import StaticTool
            >>> registry = ToolRegistry()
            >>> before = registry.revision
            >>> _ = registry.register(StaticTool("example"))
            >>> registry.revision == before
            False
        """
        self._reread_permissions()
        return self._revision

    def _reread_permissions(self) -> None:
        # A tool's permissions changed after registration (a config step, a notebook
        # cell): the checks before each call read them live (ToolEntry.
        # declared_permissions); what was built from the old ones is built again.
        for entry in list(self._table.entries.values()):  # a copy: others may add meanwhile
            entry.reread_permissions()
        edit = permission_edit()
        if edit != self._edit_seen:
            self._edit_seen = edit
            self._changed()

    def _changed(self) -> None:
        self._definitions.clear()
        self._revision += 1

    @overload
    def definitions(
        self, api: Literal["chat"] = "chat", *, unavailable: bool = False
    ) -> list[ChatCompletionToolParam]: ...

    @overload
    def definitions(
        self, api: Literal["responses"], *, unavailable: bool = False
    ) -> list[FunctionToolParam]: ...

    @overload
    def definitions(
        self, api: Literal["chat", "responses"], *, unavailable: bool = False
    ) -> list[Any]: ...

    @checks_keywords
    def definitions(
        self, api: Literal["chat", "responses"] = "chat", *, unavailable: bool = False
    ) -> list[Any]:
        """Tool params for a model request, in registration order.

        ``api="chat"`` (default) gives Chat Completions params
        (``{"type": "function", "function": {...}}``); ``api="responses"`` gives the
        flat Responses API function tools; type checkers see the OpenAI SDK's
        ``ChatCompletionToolParam`` and ``FunctionToolParam``, which the ``tools=`` of
        ``create()`` takes (their keys are optional or nullable to a type checker: to
        inspect a schema, read :meth:`ToolEntry.strict_parameters`, ``entry.tool.parameters``
        or a tool's ``definition()``, plain dicts). Tools the registry's permission checker
        refuses are left out: offering the model a tool it may not run only wastes
        tokens and ends the loop when the model calls it
        (:meth:`ToolRegistry.list_tools` still lists every tool). They are logged, once
        per set of tools, with the rule. So are tools whose circuit breaker is open (see
        :meth:`ToolRegistry.unavailable_tools`), unless ``unavailable=True``: tool
        selection keeps them in a run's tools and leaves them out of each request while
        their breaker is open. The registry's ``schema_transforms`` run on each tool's
        parameters first.

        A tool whose :attr:`ToolEntry.strict` is set is offered in OpenAI's strict mode
        (``"strict": true``): every object closed, every property required, optional
        ones nullable (a ``null`` then means "use the default"), and only the keywords
        strict mode accepts. A schema it cannot describe (``typing.Any``, a
        ``dict[str, ...]``) is offered non-strict, with a logged warning naming the tool.

        Example:
            >>> from agcore_tools import ToolRegistry
            >>> from agcore_tools.testing import StaticTool
            >>> registry = ToolRegistry(strict=True)
            >>> _ = registry.register(StaticTool("example"))
            >>> registry.definitions()[0]["function"]["name"]
            'example'
            >>> flat = registry.definitions(api="responses")[0]
            >>> flat["name"], flat["strict"]
            ('example', True)
            >>> registry.entries()[0].strict_parameters()  # the parameters offered
            {'type': 'object', 'properties': {}, 'additionalProperties': False, 'required': []}
        """
        # A copy: a caller editing a definition must not change later requests.
        return copied_definitions(self._built(api, unavailable))

    def _built(self, api: Literal["chat", "responses"], unavailable: bool) -> list[dict[str, Any]]:
        """The definitions as kept, shared by every caller: see :func:`shared_definitions`."""
        table = self._table
        # Read before the entries: a tool another thread registers while this builds
        # moves the revision on, so the list built without it is never served after.
        revision = self.revision
        # A view's checker is its registry's, which can change without it knowing.
        checker = table.checker
        kept = self._definitions.get(api)
        if kept is not None and kept[0] == revision and kept[1] is checker:
            cached = kept[2]
        else:
            if api not in ("chat", "responses"):
                raise ToolConfigError(f"unknown api {api!r}: expected 'chat' or 'responses'")
            entries = list(table.entries.values())  # one copy: others may add meanwhile
            offered = offered_entries(entries, checker, self._hidden_logged, table.unchecked)
            transforms = self._schema_transforms
            cached = [offered_definition(e, transforms, api) for e in offered]
            self._definitions[api] = (revision, checker, cached)
        if self._policies.breakers and not unavailable:
            hidden = set(self._policies.open_breakers())
            if hidden:
                cached = [d for d in cached if definition_name(d) not in hidden]
        return cached


def shared_definitions(
    registry: RegistryDefinitions,
    api: Literal["chat", "responses"] = "chat",
    *,
    unavailable: bool = False,
) -> list[dict[str, Any]]:
    """:meth:`ToolRegistry.definitions` as the registry keeps them, not copied: the same
    objects for every caller until the registry changes. For the library's runs, which
    share them (see :mod:`agcore_tools._snapshot`): read them, copy what a request sends,
    and never hand them to an app, whose edit would reach every later request.

    Copying 10,000 definitions per run made hundreds of thousands of objects, enough to
    set off a full garbage collection, which froze every thread for over a second.

    Example:
        >>> from agcore_tools import ToolRegistry
        >>> from agcore_tools.testing import StaticTool
        >>> registry = ToolRegistry()
        >>> _ = registry.register(StaticTool("example"))
        >>> shared_definitions(registry) == registry.definitions()
        True
        >>> shared_definitions(registry)[0] is shared_definitions(registry)[0]
        True
    """
    return registry._built(api, unavailable)
