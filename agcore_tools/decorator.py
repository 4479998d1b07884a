"""``@tool``: turn a type-hinted function, sync or async, into a registered :class:`BaseTool`.

Example:
    >>> import asyncio
    >>> from agcore_tools import ToolRegistry, tool
    >>> registry = ToolRegistry()
    >>> with registry.as_default():
    ...     @tool(permissions=["network"])
    ...     def get_weather(city: str, unit: str = "C") -> dict:
    ...         '''Current weather for a city.
    ...
    ...         Args:
    ...             city: The city's name, e.g. "Paris".
    ...             unit: "C" or "F".
    ...         '''
    ...         return {"city": city, "temp": 21, "unit": unit}
    >>> get_weather("Paris")  # still a plain function
    {'city': 'Paris', 'temp': 21, 'unit': 'C'}
    >>> asyncio.run(registry.invoke("get_weather", {"city": "Oslo"})).output["city"]
    'Oslo'
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar, cast, overload

from typing_extensions import ParamSpec

from ._function_tool import FunctionTool, ToolDecorator, register_function
from ._keywords import checks_keywords
from ._tool_options import check_registrar
from .approval import NeedsApproval
from .permission import PermissionLike
from .policies import ToolPolicy
from .registry import ToolRegistry, active_registry

__all__ = ["FunctionTool", "tool"]

P = ParamSpec("P")
R = TypeVar("R")


@overload
def tool(
    func: Callable[P, R],
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    permissions: Iterable[PermissionLike] | None = None,
    tags: Iterable[str] | None = None,
    category: str | None = None,
    version: str | None = None,
    timeout: float | None = None,
    strict: bool | None = None,
    needs_approval: NeedsApproval | None = False,
    policy: ToolPolicy | None = None,
    registry: ToolRegistry | None = None,
) -> FunctionTool[P, R]: ...


@overload
def tool(
    func: None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    permissions: Iterable[PermissionLike] | None = None,
    tags: Iterable[str] | None = None,
    category: str | None = None,
    version: str | None = None,
    timeout: float | None = None,
    strict: bool | None = None,
    needs_approval: NeedsApproval | None = False,
    policy: ToolPolicy | None = None,
    registry: ToolRegistry | None = None,
) -> ToolDecorator: ...


@checks_keywords
def tool(
    func: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    permissions: Iterable[PermissionLike] | None = None,
    tags: Iterable[str] | None = None,
    category: str | None = None,
    version: str | None = None,
    timeout: float | None = None,
    strict: bool | None = None,
    needs_approval: NeedsApproval | None = False,
    policy: ToolPolicy | None = None,
    registry: ToolRegistry | None = None,
) -> FunctionTool[..., Any] | ToolDecorator:
    """Make a function a tool and register it; use bare (``@tool``) or with options.

    The tool goes into ``registry`` if given, else the active registry: the one of the
    enclosing ``with registry.as_default():`` block, or :func:`default_registry`.

    A generator function is a tool whose yielded values are preliminary results and
    whose last value is the final one (see :class:`~agcore_tools.ToolPartialResult`).
    Besides functions, ``func`` may be a ``functools.partial`` (its bound arguments are
    left out of the schema), a callable object (described by its ``__call__``
    docstring; name it with ``name=``) or a method, but not a tool (nor a wrapper of
    one): a tool made from it would not keep the tool's permissions and
    ``needs_approval``, so it is refused with a :class:`ToolDefinitionError`; add an
    existing tool to a registry with ``registry.register(tool)``, or decorate
    ``tool.func`` with every option it needs. A method decorated in a class body
    is bound through its instance and registered per instance, with
    ``registry.register(obj.method)``; ``self`` is never in the schema. A pydantic
    model refuses class attributes that are not fields, tools included: give it
    ``model_config = ConfigDict(ignored_types=(FunctionTool,))`` (pydantic reads its
    class body before any hook of the tool's could tell it). Put ``@tool``
    above ``@classmethod`` or ``@staticmethod``: those register when the class is made
    (``@classmethod`` above ``@tool`` raises a :class:`ToolDefinitionError`).

    Args:
        func: The function (when used bare).
        name: Tool name; defaults to the function's name.
        description: Defaults to the docstring's description. Without either, a
            :class:`ToolDefinitionWarning` names the function.
        permissions: Required permissions, as :class:`Permission` or names like ``"read"``.
        tags: Labels for :meth:`ToolRegistry.find_by_tag`; one string is one tag.
        category: A group for :meth:`ToolRegistry.groups`.
        version: A version string recorded in the registry.
        timeout: Seconds the function may run (a positive int or float); past it,
            ``ToolTimeoutError``. With a ``policy``, its wait for a rate turn or a
            concurrency slot counts against them too.
        strict: Offer the tool in OpenAI's strict mode (``True``), never (``False``), or
            as the registry decides (``None``, see ``ToolRegistry(strict=...)``). With
            ``True``, a signature strict mode cannot describe fails here.
        needs_approval: ``True``, or a function (sync or async) of the arguments and
            the context, when a call must wait for the app's approval before it runs
            (see :mod:`agcore_tools.approval`). ``None`` is ``False``; any other value
            (``0``, ``"no"``) is refused with a :class:`ToolConfigError`, as a wrong
            ``tags``, ``permissions`` or ``registry`` is.
        policy: A :class:`~agcore_tools.ToolPolicy`: how many calls may run at once,
            how often, when a failing tool stops being offered, and whether repeats
            come from a cache (see :mod:`agcore_tools.policies`).
        registry: Register here instead of the active registry.

    Example:
        >>> from agcore_tools import ToolRegistry, tool
        >>> registry = ToolRegistry()
        >>> @tool(registry=registry, permissions=["read"], category="files")
        ... def read_text(path: str) -> str:
        ...     '''Read a UTF-8 text file (sync: it runs in a worker thread).'''
        ...     with open(path, encoding="utf-8") as f:
        ...         return f.read()
        >>> registry.groups()["files"][0].name
        'read_text'
        >>> class Notes:
        ...     def __init__(self) -> None:
        ...         self.lines: list[str] = []
        ...
        ...     @tool
        ...     def add_note(self, text: str) -> int:
        ...         '''Add a note; return how many there are.'''
        ...         self.lines.append(text)
        ...         return len(self.lines)
        >>> notes = Notes()
        >>> entry = registry.register(notes.add_note)
        >>> list(entry.tool.parameters["properties"])
        ['text']
        >>> from pydantic import BaseModel, ConfigDict
        >>> from agcore_tools import FunctionTool
        >>> class Calculator(BaseModel):
        ...     model_config = ConfigDict(ignored_types=(FunctionTool,))
        ...     offset: int = 1
        ...
        ...     @tool
        ...     def add_offset(self, x: int) -> int:
        ...         '''Add the offset to x.'''
        ...         return self.offset + x
        >>> registry.register(Calculator(offset=5).add_offset).tool(1)
        6
    """

    if registry is not None:
        check_registrar(registry)  # before any function is made a tool

    def decorate(f: Callable[P, R]) -> FunctionTool[P, R]:
        made = FunctionTool(
            f,
            name=name,
            description=description,
            permissions=permissions,
            tags=tags,
            category=category,
            version=version,
            timeout=timeout,
            strict=strict,
            needs_approval=needs_approval,
            policy=policy,
        )
        return register_function(made, registry, active_registry)

    if func is not None:
        return decorate(func)
    return cast(ToolDecorator, decorate)  # its overloads type what it does
