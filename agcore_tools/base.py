"""The tool interface (:class:`BaseTool`) and the context every execution receives.

Example:
    >>> class Echo(BaseTool):
    ...     name = "echo"
    ...     description = "Return the text it is given."
    ...     parameters = {"type": "object", "properties": {"text": {"type": "string"}}}
    ...
    ...     async def execute(self, args, ctx):
    ...         return args["text"]
    >>> import asyncio
    >>> asyncio.run(Echo().execute({"text": "hi"}, ToolContext()))
    'hi'
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, Literal

from ._cancel import CancellationToken
from ._context import ToolContext
from ._unicode import scrub, scrub_json
from .permission import Permission
from .policies import ToolPolicy

__all__ = ["BaseTool", "CancellationToken", "ToolContext", "definition_name", "tool_definition"]


class BaseTool(ABC):
    """The interface every tool implements, local or MCP.

    Subclasses set ``name``, ``description``, ``parameters`` and
    ``required_permissions`` as plain class attributes, or in ``__init__`` for values
    computed per instance (``self.name = f"lookup_{table}"``). A property works at run
    time, but type checkers refuse it over these attributes (and declared as properties
    here, they would refuse the class attributes instead).

    Example:
        >>> class Now(BaseTool):
        ...     name = "now"
        ...     description = "The current UNIX time."
        ...     parameters = {"type": "object", "properties": {}}
        ...     required_permissions = ("read",)
        ...
        ...     async def execute(self, args, ctx):
        ...         import time
        ...         return time.time()
        >>> Now().required_permissions
        ('read',)
    """

    name: str
    """Unique name; the model calls the tool by it. Must match ``^[a-zA-Z0-9_-]{1,64}$``."""
    description: str = ""
    """What the tool does; the model reads it to decide when to call the tool."""
    parameters: dict[str, Any] = {"type": "object", "properties": {}}  # noqa: RUF012
    """The JSON Schema of the arguments object."""
    required_permissions: Sequence[Permission | str] = ()
    """Permissions checked before each execution (built-in names or :class:`Permission`).
    Given another value after registration, they hold from the next check on, and a
    registry's definitions and runs follow them."""
    output_schema: dict[str, Any] | None = None
    """The JSON Schema of the value ``execute`` returns, as JSON, or None when unknown.
    Code mode shows it to the model as the function's return type. An MCP tool gives
    its ``outputSchema``; a ``FunctionTool``, its return annotation's schema."""

    tags: Sequence[str] = ()
    """Default tags a registry records when ``register()`` is given none."""
    category: str | None = None
    """Default category a registry records when ``register()`` is given none."""
    version: str | None = None
    """Default version a registry records when ``register()`` is given none."""
    strict: bool | None = None
    """Offer the tool in OpenAI's strict mode (True), never (False), or as the registry
    says (None, the default): see ``ToolRegistry(strict=...)``."""
    policy: ToolPolicy | None = None
    """Default policy (concurrency, rate, breaker, cache) a registry applies to the
    tool's calls; see :mod:`agcore_tools.policies`."""
    timeout: float | None = None
    """Seconds one call of the tool may take, its wait for a policy's turn or slot
    included, or None for no limit of its own. ``execute`` keeps to it (a
    ``FunctionTool`` does); the registry bounds the wait by it."""
    needs_approval: bool | Callable[[dict[str, Any], ToolContext], Any] = False
    """Whether a call waits for the app's approval before it runs: True, or a function
    (sync or async) of the arguments and context that decides per call (see
    :mod:`agcore_tools.approval`)."""
    approval_reason: str | None = None
    """Why calls wait for approval when :attr:`needs_approval` is True, for
    ``ApprovalRequest.reason`` (an MCP tool names its client's policy rule); None reads
    ``needs_approval=True``."""

    @abstractmethod
    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        """Run the tool with JSON arguments and return a JSON-compatible result.

        The result may hold :class:`~agcore_tools.Image`, :class:`~agcore_tools.Audio`
        and :class:`~agcore_tools.File` values; the model receives them as such.

        Raise a :class:`~agcore_tools.ToolError` subclass for expected failures; any
        other exception is wrapped into a ``ToolExecutionError`` by the registry.
        """

    quiet: bool = False
    """True when the tool reports nothing while it runs (no progress, no partial
    results), so the streaming loop need not listen to it. A ``FunctionTool`` sets it
    for an async function that is neither a generator nor given the context (a sync
    one may return a generator, whose values it reports)."""
    uses_context: bool = True
    """False when the tool never reads the context ``execute`` receives. A registry
    running it without a context then passes a shared blank one instead of making a
    fresh one per call. A ``FunctionTool`` says False for an async function that takes
    no context and has no timeout."""
    reads_null_as_default: bool = False
    """True when the tool itself reads ``null`` for an optional argument as "use the
    default", as a ``FunctionTool`` does. Otherwise a registry offering the tool in
    strict mode (where optional properties become nullable) drops such nulls before
    the tool sees them."""

    def check_registrable(self) -> None:
        """Raise a :class:`~agcore_tools.ToolError` when the tool cannot be registered as
        it is; a registry calls it before adding the tool. The default accepts it.

        A ``FunctionTool`` made from a method refuses until it is bound to an instance.

        Example:
            >>> class T(BaseTool):
            ...     name = "t"
            ...     async def execute(self, args, ctx): return None
            >>> T().check_registrable() is None
            True
        """
        return None

    def redefines(self, other: BaseTool) -> bool:
        """Whether this tool may replace ``other``, a registered tool of the same name,
        instead of colliding with it. The default is False: the names collide.

        A ``FunctionTool`` says True for the same function made again (a notebook
        cell run twice), an ``McpTool`` for the same server's tool listed again.

        Example:
            >>> class T(BaseTool):
            ...     name = "t"
            ...     async def execute(self, args, ctx): return None
            >>> T().redefines(T())
            False
        """
        return False

    def check_arguments(self, args: dict[str, Any]) -> None:
        """Raise :class:`~agcore_tools.InvalidArgumentsError` when ``args`` are not
        arguments the tool accepts, without running it (an approval that edits a call's
        arguments is checked with it). The default accepts any: the tool validates its
        arguments itself when it runs.

        Example:
            >>> class T(BaseTool):
            ...     name = "t"
            ...     async def execute(self, args, ctx): return None
            >>> T().check_arguments({"anything": 1}) is None
            True
        """
        return None

    def definition(self) -> dict[str, Any]:
        """The Chat Completions tool param for this tool (see :func:`tool_definition`).

        Example:
            >>> class T(BaseTool):
            ...     name, description = "t", "A tool."
            ...     async def execute(self, args, ctx): return None
            >>> T().definition()["function"]["name"]
            't'
        """
        return tool_definition(self.name, self.description, self.parameters)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {getattr(self, 'name', '?')!r}>"


def tool_definition(
    name: str,
    description: str,
    parameters: dict[str, Any],
    *,
    api: Literal["chat", "responses"] = "chat",
    strict: bool = False,
) -> dict[str, Any]:
    """The function tool param a model request carries, in either API's shape.

    ``api="chat"`` gives the Chat Completions param (``{"type": "function",
    "function": {...}}``, with ``"strict": true`` only when ``strict``);
    ``api="responses"`` gives the flat Responses API function tool, which always
    says ``"strict"``. ``parameters`` is used as given, not copied, unless a string in
    it holds a lone surrogate (a description written with an escape, ``"\\ud800"``):
    as in tool results and the model's output, each becomes U+FFFD, in the description
    too, where it would fail every request to encode.

    Example:
        >>> schema = {"type": "object", "properties": {}}
        >>> tool_definition("now", "The time.", schema)
        {'type': 'function', 'function': {'name': 'now', 'description': 'The time.', 'parameters': {'type': 'object', 'properties': {}}}}
        >>> tool_definition("now", "The time.", schema, api="responses", strict=True)["strict"]
        True
        >>> tool_definition("now", "The time\\ud800.", schema)["function"]["description"]
        'The time\ufffd.'
    """
    # A subclass's description of another type is sent as it was.
    described: Any = description
    description = scrub(described) if isinstance(described, str) else described
    parameters = scrub_json(parameters)
    if api == "responses":
        return {
            "type": "function",
            "name": name,
            "description": description,
            "parameters": parameters,
            "strict": strict,
        }
    function: dict[str, Any] = {"name": name, "description": description, "parameters": parameters}
    if strict:
        function["strict"] = True
    return {"type": "function", "function": function}


def definition_name(definition: dict[str, Any]) -> str:
    """The tool name of a definition :func:`tool_definition` made, in either API's shape.

    Example:
        >>> definition_name(tool_definition("now", "The time.", {}, api="responses"))
        'now'
        >>> definition_name(tool_definition("now", "The time.", {}))
        'now'
    """
    function = definition.get("function")
    source = function if isinstance(function, dict) else definition
    return str(source.get("name", ""))
