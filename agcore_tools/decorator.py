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

import functools
import inspect
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from pydantic import ValidationError
from pydantic_core import to_jsonable_python
from typing_extensions import ParamSpec

from ._aio import run_sync, with_timeout
from ._schema import function_schema
from .base import BaseTool, ToolContext
from .error import InvalidArgumentsError, ToolError, ToolExecutionError, ToolTimeoutError
from .permission import Permission, PermissionLike

if TYPE_CHECKING:
    from .registry import ToolRegistry

__all__ = ["FunctionTool", "tool"]

P = ParamSpec("P")
R = TypeVar("R")

_PLAIN_JSON = (str, int, float, bool, type(None))


def _to_json(value: Any) -> Any:
    if isinstance(value, _PLAIN_JSON):
        return value
    return to_jsonable_python(value)


def _describe_validation_error(exc: ValidationError) -> tuple[str, list[tuple[str, str]]]:
    problems: list[tuple[str, str]] = []
    for err in exc.errors(include_url=False):
        field = ".".join(str(part) for part in err["loc"]) or "(arguments)"
        message = err["msg"]
        if err["type"] != "missing" and "input" in err and err["type"] != "extra_forbidden":
            message = f"{message} (got {err['input']!r:.80})"
        problems.append((field, message))
    return "; ".join(f"{field}: {message}" for field, message in problems), problems


class FunctionTool(BaseTool, Generic[P, R]):
    """A :class:`BaseTool` built from a type-hinted function; ``@tool`` returns one.

    Calling it calls the function unchanged. ``execute`` validates the arguments
    against the function's pydantic schema, runs a sync function in a worker
    thread, and turns the return value into JSON-compatible data.

    Past its timeout a sync function's thread runs on (threads cannot be stopped from
    outside): give it a :class:`ToolContext` parameter and return once ``ctx.cancelled``
    is true.

    Example:
        >>> def shout(text: str) -> str:
        ...     '''Upper-case the text.'''
        ...     return text.upper()
        >>> t = FunctionTool(shout)  # not registered anywhere
        >>> t.name, t.description, t("hi")
        ('shout', 'Upper-case the text.', 'HI')
        >>> t.parameters["required"]
        ['text']
    """

    def __init__(
        self,
        func: Callable[P, R],
        *,
        name: str | None = None,
        description: str | None = None,
        permissions: Iterable[PermissionLike] | None = None,
        tags: Iterable[str] | None = None,
        category: str | None = None,
        version: str | None = None,
        timeout: float | None = None,
    ) -> None:
        if not callable(func):
            raise ToolError(f"@tool needs a function, got {type(func).__name__}")
        if inspect.isasyncgenfunction(func) or inspect.isgeneratorfunction(func):
            raise ToolError(
                f"cannot make tool '{getattr(func, '__name__', func)}': generator functions "
                "are not supported; return the whole result instead"
            )
        if timeout is not None and timeout <= 0:
            raise ToolError(f"tool timeout must be positive, got {timeout!r}")
        schema = function_schema(func, name=name, description=description)
        functools.update_wrapper(self, func)
        self.func = func
        """The original function."""
        self.name = schema.name
        self.description = schema.description
        self.parameters = schema.parameters
        self.required_permissions = Permission.parse_all(permissions)
        self.tags = tuple(tags or ())
        self.category = category
        self.version = version
        self.timeout = timeout
        """Seconds the function may run before it is cancelled; None for no limit."""
        self._model = schema.model
        self._context_param = schema.context_param
        self._positional_only = schema.positional_only
        self._renamed = schema.renamed
        call = getattr(func, "__call__", None)  # noqa: B004 - async callable objects
        self._is_async = inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(call)
        self._redefinition_key = (
            getattr(func, "__module__", None) or "",
            getattr(func, "__qualname__", None) or schema.name,
        )

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Call the original function, exactly as if it were not decorated."""
        return self.func(*args, **kwargs)

    def _arguments(self, args: dict[str, Any]) -> dict[str, Any]:
        try:
            validated = self._model.model_validate(args)
        except ValidationError as exc:
            reason, problems = _describe_validation_error(exc)
            raise InvalidArgumentsError(self.name, reason, errors=problems) from exc
        # The fresh model instance is dropped, so its field dict can be the kwargs as is.
        kwargs = validated.__dict__
        if self._renamed:
            for field_name, param in self._renamed:
                kwargs[param] = kwargs.pop(field_name)
        return kwargs

    def _start(self, kwargs: dict[str, Any]) -> Awaitable[Any]:
        # The call's awaitable: the function's own coroutine, or its run in a worker thread.
        args = [kwargs.pop(p) for p in self._positional_only] if self._positional_only else ()
        if self._is_async:
            return self.func(*args, **kwargs)  # type: ignore[return-value]
        return run_sync(self.func, *args, **kwargs)

    def _jsonable(self, result: Any) -> Any:
        try:
            return _to_json(result)
        except Exception as exc:
            raise ToolExecutionError(
                self.name, f"returned a {type(result).__name__}, which is not JSON-compatible"
            ) from exc

    async def _run(self, kwargs: dict[str, Any]) -> Any:
        try:
            result = await self._start(kwargs)
        except ToolError:
            raise
        except Exception as exc:
            raise ToolExecutionError(self.name, f"{type(exc).__name__}: {exc}") from exc
        return self._jsonable(result)

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        """Validate ``args``, run the function, return its JSON-compatible result.

        Raises :class:`InvalidArgumentsError` naming each bad field,
        :class:`ToolTimeoutError` past ``timeout``, and :class:`ToolExecutionError`
        (original exception as ``__cause__``) when the function raises.

        Example:
            >>> import asyncio
            >>> def add(a: int, b: int) -> int:
            ...     '''Add two integers.'''
            ...     return a + b
            >>> add_tool = FunctionTool(add)
            >>> asyncio.run(add_tool.execute({"a": 2, "b": "3"}, ToolContext()))  # "3" is coerced
            5
            >>> asyncio.run(add_tool.execute({"a": 2}, ToolContext()))
            Traceback (most recent call last):
            ...
            agcore_tools.error.InvalidArgumentsError: tool 'add' got invalid arguments: b: Field required
        """
        kwargs = self._arguments(args)
        if self.timeout is None:
            if self._context_param is not None:
                kwargs[self._context_param] = ctx
            return await self._run(kwargs)
        # A child context lets a sync function in its thread see the timeout without
        # cancelling the caller's own token.
        local_ctx = ctx.for_call(ctx.call_id)
        if self._context_param is not None:
            kwargs[self._context_param] = local_ctx
        try:
            return await with_timeout(self._run(kwargs), self.timeout)
        except TimeoutError as exc:
            local_ctx.cancellation.cancel()
            raise ToolTimeoutError(self.name, self.timeout) from exc

    def __repr__(self) -> str:
        return f"<FunctionTool {self.name!r}>"


@overload
def tool(func: Callable[P, R], /) -> FunctionTool[P, R]: ...


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
    registry: ToolRegistry | None = None,
) -> Callable[[Callable[P, R]], FunctionTool[P, R]]: ...


def tool(
    func: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    permissions: Iterable[PermissionLike] | None = None,
    tags: Iterable[str] | None = None,
    category: str | None = None,
    version: str | None = None,
    timeout: float | None = None,
    registry: ToolRegistry | None = None,
) -> FunctionTool[P, R] | Callable[[Callable[P, R]], FunctionTool[P, R]]:
    """Make a function a tool and register it; use bare (``@tool``) or with options.

    The tool goes into ``registry`` if given, else the active registry: the one of the
    enclosing ``with registry.as_default():`` block, or :func:`default_registry`.

    Args:
        func: The function (when used bare).
        name: Tool name; defaults to the function's name.
        description: Defaults to the docstring's description.
        permissions: Required permissions, as :class:`Permission` or names like ``"read"``.
        tags: Labels for :meth:`ToolRegistry.find_by_tag`.
        category: A group for :meth:`ToolRegistry.groups`.
        version: A version string recorded in the registry.
        timeout: Seconds the function may run; past it, ``ToolTimeoutError``.
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
    """

    def decorate(f: Callable[P, R]) -> FunctionTool[P, R]:
        built = FunctionTool(
            f,
            name=name,
            description=description,
            permissions=permissions,
            tags=tags,
            category=category,
            version=version,
            timeout=timeout,
        )
        if registry is not None:
            registry.register(built)
        else:
            from .registry import active_registry

            active_registry().register(built)
        return built

    if func is not None:
        return decorate(func)
    return decorate
