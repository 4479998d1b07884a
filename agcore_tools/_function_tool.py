"""The tool a type-hinted function becomes: :class:`FunctionTool`.

It validates arguments against the function's pydantic schema (read as ``_validation``
says) and calls the function, a sync one in a worker thread; ``_tool_result`` makes what
it returns (or a generator's values, as partial results) the tool's JSON-compatible
result. ``@tool`` (in ``decorator``) makes one and registers it; this module knows
nothing of registries beyond :class:`Registrar`.
"""

from __future__ import annotations

import copy
import functools
import inspect
import types
import warnings
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any, Generic, Literal, Protocol, TypeVar, cast, overload

from pydantic import ValidationError
from typing_extensions import ParamSpec

from ._binding import TakesClass, TakesReceiver
from ._function_run import Calling, call_function, call_within
from ._invalid_args import invalid_arguments, unknown_keys_error
from ._keywords import checks_init_keywords
from ._origin import Origin, caller_stacklevel, interactive_run
from ._returns import return_schema
from ._tool_options import (
    Registrar,
    ToolOptions,
    check_definition_options,
    check_needs_approval,
    check_not_a_tool,
    check_timeout,
    option_items,
)
from ._tool_result import PLAIN_JSON, jsonable_async
from ._validation import takes_json, validated_arguments
from .approval import NeedsApproval
from .base import BaseTool, ToolContext, tool_definition
from .error import (
    ToolConfigError,
    ToolDefinitionError,
    ToolDefinitionWarning,
    ToolError,
    ToolExecutionError,
)
from .permission import Permission, PermissionLike
from .policies import ToolPolicy
from .schema import function_schema, strict_parameters

__all__ = [
    "FunctionTool",
    "Registrar",
    "ToolDecorator",
    "ToolOptions",
    "check_timeout",
    "register_function",
]

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")
P2 = ParamSpec("P2")
R2 = TypeVar("R2")


_NO_PROBLEMS: list[tuple[str, str]] = []  # shared, never changed: no allocation per call


class ToolDecorator(Protocol):
    """What ``@tool(...)`` and ``@registry.tool(...)`` with options return: a decorator.

    Type checkers see ``@tool`` above ``@classmethod`` as applied to the function,
    ``cls`` included; :meth:`FunctionTool.__get__` drops ``cls`` where the tool is
    looked up on its class (or an instance of it), as it does at run time.
    """

    def __call__(self, func: Callable[P, R], /) -> FunctionTool[P, R]:
        """Make ``func`` a tool."""
        ...


@checks_init_keywords
class FunctionTool(BaseTool, Generic[P, R]):
    """A :class:`BaseTool` built from a type-hinted function; ``@tool`` returns one.

    Calling it calls the function unchanged. ``execute`` validates the arguments
    against the function's pydantic schema, runs a sync function in a worker
    thread, and turns the return value into JSON-compatible data as pydantic's
    ``to_jsonable_python`` does (keeping :class:`~agcore_tools.Image`,
    :class:`~agcore_tools.Audio` and :class:`~agcore_tools.File` values, and reading
    raw image bytes as an ``Image``). Iterators, dict views (``d.values()``) and
    ``range`` become lists, and numpy scalars and arrays (any value with a ``tolist()``
    or ``item()`` method) Python numbers and lists; a value still of no JSON type fails
    the call with a :class:`ToolExecutionError` that names its type and where it is
    (``result['stats'][0]``).

    A sync function that returns a coroutine (a plain decorator around an async
    function) has that coroutine awaited on the loop, as an async function's. One that
    returns a generator has it drained as a generator function's is when it wraps a
    generator function (a plain ``functools.wraps`` decorator) or is annotated to
    return an ``Iterator`` or a ``Generator``; any other generator it returns (a
    generator expression) is its result, listed whole, as ``map()``'s is. A sync
    function's result is made JSON in its thread, so a lazy iterator it returns, or a
    large result, does not hold up the loop; an async function's (or generator's) large
    result is made JSON in a worker thread too, a small one on the loop.

    Past its timeout a sync function's thread runs on (threads cannot be stopped from
    outside): give it a :class:`ToolContext` parameter and return once ``ctx.cancelled``
    is true.

    A generator function (async, or sync in a worker thread) reports each value it
    yields as a :class:`~agcore_tools.ToolPartialResult`; the last value is the result.

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

    reads_null_as_default = True
    """A null for an optional argument means its default: the argument plan drops it."""

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
        strict: bool | None = None,
        needs_approval: NeedsApproval | None = False,
        policy: ToolPolicy | None = None,
    ) -> None:
        method: bool | None = None
        binding: Literal["instance", "class"] | None = None
        in_class_body = isinstance(func, (staticmethod, classmethod))
        if isinstance(func, staticmethod):
            func, method = func.__func__, False
        elif isinstance(func, classmethod):
            func, method, binding = func.__func__, True, "class"
        if not callable(func):
            raise ToolDefinitionError(f"@tool needs a function, got {type(func).__name__}")
        check_not_a_tool(func)
        check_timeout(timeout)
        check_definition_options(name, description, strict)
        required = Permission.parse_all(option_items(permissions, "permissions", (str, Permission)))
        tag_items = option_items(tags, "tags", (str,))
        approval = check_needs_approval(needs_approval)
        schema = function_schema(func, name=name, description=description, method=method)
        takes = inspect.signature(func).parameters if method is None and schema.method else {}
        if next(iter(takes), None) == "cls":
            # classmethod(tool): the tool never sees its class, so nothing registers it.
            raise ToolDefinitionError(
                f"cannot make tool '{schema.name}': {func.__qualname__} takes cls, so "
                "@classmethod is above @tool, which makes a tool never registered; put @tool "
                "above @classmethod (or name an instance method's first parameter self)",
                tool_name=schema.name,
            )
        if inspect.isroutine(func):
            functools.update_wrapper(self, func)
        else:  # a callable object or a partial: do not copy its attributes onto the tool
            functools.update_wrapper(self, func, updated=())
        self.func: Callable[P, R] = func
        """The original function."""
        self.name = schema.name
        self.description = schema.description
        self.parameters = schema.parameters
        self.required_permissions = required
        self.tags: tuple[str, ...] = tag_items
        self.category = category
        self.version = version
        self._timeout = timeout
        self.strict = strict
        self.needs_approval = approval
        if policy is not None and not isinstance(policy, ToolPolicy):
            raise ToolConfigError(f"policy must be a ToolPolicy, got {type(policy).__name__}")
        self.policy = policy
        self._model = schema.model
        self._as_json = takes_json(schema.model)  # a strict model takes JSON as JSON
        self._plan = schema.plan
        self._context_param = schema.context_param
        self._positional_only = schema.positional_only
        self._renamed = schema.renamed
        self._returns = schema.returns
        self._output: dict[str, Any] | None = None
        self._output_made = False  # made on first read: code mode alone reads it
        self._calling = calling = Calling.of(func, schema.returns)
        # Neither a generator nor given the context: it can report nothing while it
        # runs, so the streaming loop need not listen (see cycle/_tool_stream.py). Only
        # an async one: a sync function may return an async generator (a plain wrapper
        # around one), whose values are reported as it is drained (_function_run).
        self.quiet = calling.streams is None and self._context_param is None and calling.is_async
        # An async function that is not a generator and takes no positional-only
        # parameter runs straight from execute() (see there).
        self._direct = calling.is_async and calling.streams is None and not self._positional_only
        self._plain_args = self._plan is None and not self._renamed
        self.timeout = timeout  # also sets uses_context
        self._origin = Origin.of(func)
        self._binding = binding or ("instance" if schema.method else None)
        self._attribute: str | None = None
        self._bound_from: FunctionTool[..., Any] | None = None
        """The method tool this one is bound from, on its receiver (see __get__)."""
        self._in_class_body = in_class_body
        self._register_into: Registrar | None = None
        if strict:
            _, why = strict_parameters(self.parameters)
            if why is not None:
                raise ToolDefinitionError(
                    f"cannot make tool '{self.name}' strict: {why}; pass strict=False, or "
                    "give the parameter a type strict mode can describe"
                )
        if not self.description and description is None:
            qualname = self._origin.qualname
            where = f" ({qualname})" if qualname and qualname != self.name else ""
            warnings.warn(
                f"tool '{self.name}'{where} has no docstring, so the model gets no "
                "description; add one, or pass description=",
                ToolDefinitionWarning,
                stacklevel=caller_stacklevel(),
            )

    @property
    def timeout(self) -> float | None:
        """Seconds the function may run before it is cancelled; None for no limit. In
        a registry, a call's wait for its policy's rate turn or concurrency slot counts
        against them.

        Example:
            >>> async def slow() -> None:
            ...     '''Take a while.'''
            >>> tool = FunctionTool(slow)
            >>> tool.timeout, tool.uses_context
            (None, False)
            >>> tool.timeout = 2.5
            >>> tool.timeout, tool.uses_context
            (2.5, True)
        """
        return self._timeout

    @timeout.setter
    def timeout(self, value: float | None) -> None:
        check_timeout(value)
        self._timeout = value
        # Only the direct path (see execute()) leaves the context unread.
        self.uses_context = not (self._direct and self._context_param is None and value is None)

    @property
    def output_schema(self) -> dict[str, Any] | None:
        """The JSON Schema of the function's result (see :func:`return_schema`), made
        on first read; None for a generator, whose result is its last value. Set it to
        show code mode another shape.

        Example:
            >>> def tags(limit: int) -> list[str]:
            ...     '''The most used tags.'''
            ...     return []
            >>> FunctionTool(tags).output_schema
            {'items': {'type': 'string'}, 'type': 'array'}
        """
        if not self._output_made:
            streams = self._calling.streams is not None
            self._output = None if streams else return_schema(self._returns, self.name)
            self._output_made = True
        return self._output

    @output_schema.setter
    def output_schema(self, value: dict[str, Any] | None) -> None:
        self._output, self._output_made = value, True

    def definition(self) -> dict[str, Any]:
        """The Chat Completions tool param; with ``strict=True``, in strict form.

        Example:
            >>> def forecast(city: str, days: int = 3) -> str:
            ...     '''Weather forecast for a city.'''
            ...     return city
            >>> function = FunctionTool(forecast, strict=True).definition()["function"]
            >>> function["strict"], function["parameters"]["required"]
            (True, ['city', 'days'])
            >>> function["parameters"]["properties"]["days"]
            {'anyOf': [{'type': 'integer'}, {'type': 'null'}]}
        """
        if self.strict:
            parameters, _ = strict_parameters(self.parameters)
            if parameters is not None:  # always: __init__ refused a strict tool without
                return tool_definition(self.name, self.description, parameters, strict=True)
        return tool_definition(self.name, self.description, self.parameters)

    def __set_name__(self, owner: type, name: str) -> None:
        self._attribute = name
        registry, self._register_into = self._register_into, None
        if registry is not None:  # a classmethod or staticmethod tool: its class exists now
            registry.register(self.__get__(None, owner))

    # A type checker passes @tool the function under @classmethod with cls, so a
    # classmethod tool's type takes cls; the first overload drops it where the class is
    # known. Only there: at the decorator a first parameter typed Any fits type[T] too.
    @overload
    def __get__(
        self: TakesClass[T, P2, R2], instance: T | None, owner: type[T]
    ) -> FunctionTool[P2, R2]: ...

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> FunctionTool[P, R]: ...

    @overload
    def __get__(
        self: TakesReceiver[T, P2, R2], instance: T, owner: type | None = None
    ) -> FunctionTool[P2, R2]: ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> FunctionTool[P, R]: ...

    def __get__(self, instance: object | None, owner: type | None = None) -> FunctionTool[..., Any]:
        """A method tool, looked up on an instance (or a classmethod tool on its class),
        is bound to it, as a function is; any other tool is itself."""
        if self._binding is None or (instance is None and self._binding == "instance"):
            return self
        receiver = instance if self._binding == "instance" else (owner or type(instance))
        bound = copy.copy(self)
        bound.func = cast("Callable[P, R]", types.MethodType(self.func, receiver))
        bound._binding = None
        bound._bound_from = self
        bound._origin = replace(self._origin, target=bound.func, run=interactive_run())
        # Not cached on the instance: a copy of it would run on the original, and
        # pickling it would fail. Each lookup is a new tool, equal to the others.
        return bound

    @property
    def bound_from(self) -> FunctionTool[..., Any] | None:
        """The method tool this one is, looked up on its instance (or a classmethod tool
        on its class, the receiver being ``func.__self__``); None for any other tool.

        Example:
            >>> class Notes:
            ...     @FunctionTool
            ...     def add(self, text: str) -> str:
            ...         "Add a note."
            ...         return text
            >>> Notes().add.bound_from is Notes.add, Notes.add.bound_from
            (True, None)
        """
        return self._bound_from

    def __eq__(self, other: object) -> bool:
        """A method tool looked up twice on one instance (or a classmethod tool on one
        class) is two equal tools, as a method looked up twice is two equal bound
        methods; any other tool equals only itself.

        Example:
            >>> class Notes:
            ...     @FunctionTool
            ...     def add(self, text: str) -> str:
            ...         "Add a note."
            ...         return text
            >>> notes = Notes()
            >>> notes.add == notes.add, notes.add == Notes().add
            (True, False)
        """
        if not isinstance(other, FunctionTool):
            return NotImplemented
        if self is other:
            return True
        return (
            self._bound_from is not None
            and self._bound_from is other._bound_from
            and bool(self.func == other.func)  # the same function on the same receiver
        )

    def __hash__(self) -> int:
        return hash(self.func) if self._bound_from is not None else id(self)

    def check_registrable(self) -> None:
        """Refuse a method tool that is not bound to an instance yet (see
        :meth:`BaseTool.check_registrable`).

        Example:
            >>> class Notes:
            ...     def add(self, text: str) -> str:
            ...         '''Add a note.'''
            ...         return text
            >>> FunctionTool(Notes.add).check_registrable()
            Traceback (most recent call last):
            ...
            agcore_tools.error.ToolDefinitionError: cannot register tool 'add': Notes.add is a method and needs its instance; register an instance's tool: registry.register(obj.add)
            >>> FunctionTool(Notes().add).check_registrable() is None
            True
        """
        if self._binding == "instance":
            raise ToolDefinitionError(
                f"cannot register tool '{self.name}': {self._origin.qualname} is a method and "
                f"needs its instance; register an instance's tool: "
                f"registry.register(obj.{self._attribute or self.func.__name__})",
                tool_name=self.name,
            )

    def redefines(self, other: BaseTool) -> bool:
        """True for the same function made into a tool again: a notebook cell run twice,
        a module reloaded (see :meth:`BaseTool.redefines`).

        Example:
            >>> def ping() -> str:
            ...     '''Answer pong.'''
            ...     return "pong"
            >>> FunctionTool(ping).redefines(FunctionTool(ping))
            True
        """
        return isinstance(other, FunctionTool) and self._origin.redefines(other._origin)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Call the original function, exactly as if it were not decorated."""
        return self.func(*args, **kwargs)

    def check_arguments(self, args: dict[str, Any]) -> None:
        """Validate ``args`` against the function's schema without running it; raises
        :class:`InvalidArgumentsError` naming each bad field.

        Example:
            >>> def add(a: int, b: int) -> int:
            ...     '''Add two integers.'''
            ...     return a + b
            >>> FunctionTool(add).check_arguments({"a": 1})
            Traceback (most recent call last):
            ...
            agcore_tools.error.InvalidArgumentsError: tool 'add' got invalid arguments: b: Field required
        """
        self._arguments(dict(args))

    def _arguments(self, args: dict[str, Any]) -> dict[str, Any]:
        unknown: list[tuple[str, str]] = _NO_PROBLEMS
        if self._plan is not None:
            args, unknown = self._plan.apply(args)
        try:
            validated = validated_arguments(self._model, args, self._as_json)
        except ValidationError as exc:
            raise invalid_arguments(self.name, exc, unknown) from exc
        if unknown:
            raise unknown_keys_error(self.name, unknown)
        # The fresh model instance is dropped, so its field dict can be the kwargs as is.
        kwargs = validated.__dict__
        if self._renamed:
            for field_name, param in self._renamed:
                kwargs[param] = kwargs.pop(field_name)
        return kwargs

    async def _run(self, kwargs: dict[str, Any], ctx: ToolContext) -> Any:
        args = [kwargs.pop(p) for p in self._positional_only] if self._positional_only else ()
        make = functools.partial(self.func, *args, **kwargs)
        return await call_function(self.name, make, ctx, self._calling)

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
        if self._direct and self._timeout is None:
            # The common case, without the layers below: a plain async function.
            if self._plain_args:  # _arguments() inlined: no plan, no renamed field
                try:
                    kwargs = validated_arguments(self._model, args, self._as_json).__dict__
                except ValidationError as exc:
                    raise invalid_arguments(self.name, exc, _NO_PROBLEMS) from exc
            else:
                kwargs = self._arguments(args)
            if self._context_param is not None:
                kwargs[self._context_param] = ctx
            try:
                result = await self.func(**kwargs)  # type: ignore[call-arg,misc]
            except ToolError:
                raise
            except Exception as exc:
                raise ToolExecutionError(self.name, f"{type(exc).__name__}: {exc}") from exc
            return result if type(result) in PLAIN_JSON else await jsonable_async(self.name, result)
        kwargs = self._arguments(args)
        if not self._calling.is_async:
            ctx.bind_loop()  # the worker thread's reports hop onto this loop
        if self.timeout is None:
            if self._context_param is not None:
                kwargs[self._context_param] = ctx
            return await self._run(kwargs, ctx)
        # A child context lets a sync function in its thread see the timeout without
        # cancelling the caller's own token.
        local_ctx = ctx.for_call(ctx.call_id)
        if self._context_param is not None:
            kwargs[self._context_param] = local_ctx
        on_loop = self._calling.on_loop
        return await call_within(
            self.name, self._run(kwargs, local_ctx), self.timeout, local_ctx, on_loop=on_loop
        )

    def __repr__(self) -> str:
        return f"<FunctionTool {self.name!r}>"


def register_function(
    built: FunctionTool[P, R],
    registry: Registrar | None,
    active: Callable[[], Registrar] | None = None,
) -> FunctionTool[P, R]:
    """Register a tool ``@tool`` just made: into ``registry``, else into ``active()``.

    A method tool made in a class body has no instance yet and is returned
    unregistered; a classmethod or staticmethod tool is registered by
    ``__set_name__``, once its class exists; a name already taken is refused here.
    """
    if built._binding == "instance":
        if registry is not None:
            raise ToolDefinitionError(
                f"cannot register tool '{built.name}': {built._origin.qualname} is a method, "
                "and in the class body it has no instance yet; decorate it with @tool, then "
                f"register each instance's tool: registry.register(obj.{built.func.__name__})",
                tool_name=built.name,
            )
        return built
    if registry is None:
        assert active is not None, "register_function() needs a registry or active"
        registry = active()
    if built._in_class_body:
        # Registered by __set_name__, once its class exists; but a name already taken is
        # refused here, on the user's line: raised from __set_name__, Python < 3.12
        # reports it as a bare RuntimeError.
        existing = registry.get(built.name)
        if existing is not None and not built.redefines(existing):
            raise ToolConfigError(
                f"cannot register tool '{built.name}' ({built._origin.qualname}): a tool of "
                f"that name is already registered ({existing!r}); unregister it first or "
                "choose another name",
                tool_name=built.name,
            )
        built._register_into = registry
    else:
        registry.register(built)
    return built
