"""The options ``@tool`` and :class:`~agcore_tools.FunctionTool` take, and their checks.

Each option is checked when the tool is made, with a
:class:`~agcore_tools.ToolConfigError` naming it: a wrong value would otherwise fail
later, at a call or a registration, naming nothing (``needs_approval=0`` was taken as
a function, and every call then waited for an approval).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from typing_extensions import TypedDict

from ._aio import positive_number
from ._keywords import unknown_keyword
from .approval import NeedsApproval
from .base import BaseTool
from .error import ToolConfigError, ToolDefinitionError
from .permission import PermissionLike
from .policies import ToolPolicy

__all__ = [
    "Registrar",
    "ToolOptions",
    "check_definition_options",
    "check_needs_approval",
    "check_not_a_tool",
    "check_option_names",
    "check_registrar",
    "check_timeout",
    "option_items",
]


class Registrar(Protocol):
    """Where a made tool is registered: a :class:`~agcore_tools.ToolRegistry` is one."""

    def register(self, tool: BaseTool) -> Any:
        """Add ``tool``."""
        ...

    def get(self, name: str) -> BaseTool | None:
        """The tool of that name, or None."""
        ...


class ToolOptions(TypedDict, total=False):
    """The keyword options :class:`FunctionTool` takes, for ``**options`` that pass them
    on (``@registry.tool(...)``): a type checker then names a misspelt or mistyped one.
    tests/test_decorator.py checks they match ``FunctionTool``'s and ``@tool``'s."""

    name: str | None
    description: str | None
    permissions: Iterable[PermissionLike] | None
    tags: Iterable[str] | None
    category: str | None
    version: str | None
    timeout: float | None
    strict: bool | None
    needs_approval: NeedsApproval | None
    policy: ToolPolicy | None


def check_timeout(value: object, what: str = "tool timeout") -> None:
    """Refuse a timeout that is not positive seconds or None, with a
    :class:`~agcore_tools.ToolConfigError` naming ``what``.

    A string or a bool would fail later, in a comparison or a wait, naming nothing;
    zero or a negative number would time every call out at once.

    Example:
        >>> check_timeout(2.5)
        >>> check_timeout(-1, "invoke_all() timeout")
        Traceback (most recent call last):
        ...
        agcore_tools.error.ToolConfigError: invoke_all() timeout must be positive seconds (an int or a float) or None, got -1
    """
    if value is not None and not positive_number(value):
        raise ToolConfigError(
            f"{what} must be positive seconds (an int or a float) or None, got {value!r}"
        )


def check_definition_options(name: object, description: object, strict: object) -> None:
    """Refuse a tool's ``name``, ``description`` or ``strict`` of the wrong kind: each
    is None or, in turn, a non-empty string, a string, a bool.

    Example:
        >>> check_definition_options("search", None, True)
        >>> check_definition_options("", None, None)
        Traceback (most recent call last):
        ...
        agcore_tools.error.ToolConfigError: a tool's name must be a non-empty string, got ''
    """
    if name is not None and (not isinstance(name, str) or not name.strip()):
        # "" would silently fall back to the function's name.
        raise ToolConfigError(f"a tool's name must be a non-empty string, got {name!r}")
    # Checked here: the definition would carry them as they are, for the API to refuse.
    if description is not None and not isinstance(description, str):
        raise ToolConfigError(
            f"a tool's description must be a string or None, got {type(description).__name__}"
        )
    if strict is not None and not isinstance(strict, bool):
        raise ToolConfigError(f"a tool's strict must be True, False or None, got {strict!r}")


def check_needs_approval(value: object) -> NeedsApproval:
    """A tool's ``needs_approval``: True, False, or a function; None reads as False.

    Anything else (``0``, ``"no"``, a numpy bool read from a configuration) is refused:
    it would be taken for a function, and every call would wait for an approval.

    Example:
        >>> check_needs_approval(None)
        False
        >>> check_needs_approval("no")
        Traceback (most recent call last):
        ...
        agcore_tools.error.ToolConfigError: a tool's needs_approval must be True, False, None or a function of the arguments and the context, got 'no'
    """
    if value is None:
        return False
    if isinstance(value, bool) or callable(value):
        return value  # a callable: asked with the arguments and the context
    raise ToolConfigError(
        "a tool's needs_approval must be True, False, None or a function of the "
        f"arguments and the context, got {value!r:.60}"
    )


def option_items(value: object, option: str, kinds: tuple[type, ...]) -> tuple[Any, ...]:
    """A tool's ``tags`` or ``permissions``: None, one item, or an iterable of items of
    ``kinds``, as a tuple; anything else is refused naming ``option``. One string is one
    item, not its letters.

    Example:
        >>> option_items("web", "tags", (str,))
        ('web',)
        >>> option_items(5, "tags", (str,))
        Traceback (most recent call last):
        ...
        agcore_tools.error.ToolConfigError: a tool's tags must be a str or an iterable of them, got int
    """
    names = " or ".join(kind.__name__ for kind in kinds)
    if value is None:
        return ()
    if isinstance(value, kinds):
        return (value,)
    if not isinstance(value, Iterable):
        raise ToolConfigError(
            f"a tool's {option} must be a {names} or an iterable of them, "
            f"got {type(value).__name__}"
        )
    items = tuple(value)
    for item in items:
        if not isinstance(item, kinds):
            raise ToolConfigError(
                f"a tool's {option} must be a {names} or an iterable of them, "
                f"got an item of type {type(item).__name__}"
            )
    return items


_OPTIONS = frozenset(ToolOptions.__annotations__)


def check_option_names(options: Iterable[str]) -> None:
    """Refuse ``@registry.tool(...)`` options that ``FunctionTool`` does not take, when
    they are given (not when the function is decorated), naming them and the closest
    valid one. An unknown one is a ``TypeError`` as well as a ``ToolConfigError``, as
    ``tool()``'s is.

    Example:
        >>> check_option_names(["name", "tags"])
        >>> check_option_names(["timout"])
        Traceback (most recent call last):
        ...
        agcore_tools.error._UnknownKeywordError: registry.tool() got an unknown keyword 'timout': did you mean timeout=...?
        >>> check_option_names(["registry"])
        Traceback (most recent call last):
        ...
        agcore_tools.error.ToolConfigError: registry.tool() registers into its own registry and takes no registry=; use tool(registry=...) to register elsewhere
    """
    for option in options:
        if option == "registry":
            raise ToolConfigError(
                "registry.tool() registers into its own registry and takes no registry=; "
                "use tool(registry=...) to register elsewhere"
            )
        if option not in _OPTIONS:
            raise unknown_keyword("registry.tool()", option, _OPTIONS)


def check_registrar(registry: object) -> None:
    """Refuse a ``registry=`` that is not a :class:`~agcore_tools.ToolRegistry` (or
    another :class:`Registrar`), before anything is registered.

    Example:
        >>> check_registrar("main")
        Traceback (most recent call last):
        ...
        agcore_tools.error.ToolConfigError: a tool's registry must be a ToolRegistry (or None for the active one), got str
    """
    if not (
        callable(getattr(registry, "register", None)) and callable(getattr(registry, "get", None))
    ):
        raise ToolConfigError(
            "a tool's registry must be a ToolRegistry (or None for the active one), "
            f"got {type(registry).__name__}"
        )


def check_not_a_tool(func: Callable[..., Any]) -> None:
    """Refuse a tool, or a wrapper of one (``functools.wraps``, a partial), given to
    ``@tool`` as its function: the new tool would take only the options given now.

    Example:
        >>> from agcore_tools.testing import StaticTool
        >>> check_not_a_tool(StaticTool("rm"))
        Traceback (most recent call last):
        ...
        agcore_tools.error.ToolDefinitionError: @tool got tool 'rm', not a function: a tool made from it would not keep its permissions and needs_approval; add the tool as it is with registry.register(tool), or decorate tool.func, giving every option again
    """
    # Before, an alias (a tool put in another registry with .tool(), stacked decorators)
    # dropped the original's permissions and needs_approval, so a denied or
    # approval-gated tool ran under a second name.
    given: object = func
    looked_at = given
    for _ in range(100):  # a __wrapped__ cycle ends here
        if isinstance(looked_at, BaseTool):
            name = getattr(looked_at, "name", None)
            what = f"tool {name!r}" if looked_at is given else f"a wrapper of tool {name!r}"
            raise ToolDefinitionError(
                f"@tool got {what}, not a function: a tool made from it would not keep "
                "its permissions and needs_approval; add the tool as it is with "
                "registry.register(tool), or decorate tool.func, giving every option again",
                tool_name=name if isinstance(name, str) else None,
            )
        if isinstance(looked_at, functools.partial):
            looked_at = looked_at.func
        else:
            looked_at = getattr(looked_at, "__wrapped__", None)
            if looked_at is None:
                return
