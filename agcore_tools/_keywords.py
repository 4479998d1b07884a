"""The library's error for a misspelt keyword, with the closest valid one named.

``@tool(timout=5)`` or ``LlmCycle(config, sytem_prompt=...)`` used to raise Python's
bare ``TypeError``, outside :class:`~agcore_tools.AgcoreError`, naming no valid
keyword, while ``registry.tool(timout=5)`` raised a ``ToolConfigError``: one ``except``
could not catch both forms of the same mistake. Every entry point now raises the same
error, through :func:`unknown_keyword`: functions that take ``**options`` call it for
the names they do not know; those with an explicit signature are wrapped by
:func:`checks_keywords` (or their class by :func:`checks_init_keywords`), which turns
Python's binding error into it. A valid call runs as before: the wrapper only looks at
the keywords after a ``TypeError``, and type checkers still see the real signature.
"""

from __future__ import annotations

import difflib
import functools
import inspect
from collections.abc import Callable, Collection, Coroutine, Iterable
from typing import Any, TypeVar, cast

from typing_extensions import ParamSpec

from .error import _UnknownKeywordError

__all__ = [
    "checks_init_keywords",
    "checks_keywords",
    "checks_public_keywords",
    "nearest_keyword",
    "unknown_keyword",
]

P = ParamSpec("P")
R = TypeVar("R")
C = TypeVar("C", bound=type)


def nearest_keyword(name: str, valid: Iterable[str], cutoff: float = 0.6) -> str | None:
    """The keyword of ``valid`` most like ``name``, or None when none is close enough.

    Example:
        >>> nearest_keyword("timout", ["timeout", "tags"])
        'timeout'
        >>> nearest_keyword("colour", ["timeout", "tags"]) is None
        True
    """
    near = difflib.get_close_matches(name, sorted(valid), n=1, cutoff=cutoff)
    return near[0] if near else None


def unknown_keyword(
    called: str,
    name: str,
    valid: Collection[str] = (),
    *,
    near: str | None = None,
    reason: str = "",
    note: str = "",
) -> _UnknownKeywordError:
    """The error for ``name``, a keyword ``called`` does not take (a ``TypeError``, a
    ``ToolConfigError`` and an ``LlmUsageError``).

    It names ``near``, else the keyword of ``valid`` closest to ``name``; with none
    close, it lists ``valid``. ``reason`` says why the keyword is not taken, and
    ``note`` ends the message.

    Example:
        >>> str(unknown_keyword("tool()", "timout", ["timeout", "tags"]))
        "tool() got an unknown keyword 'timout': did you mean timeout=...?"
        >>> str(unknown_keyword("tool()", "colour", ["timeout", "tags"]))
        "tool() got an unknown keyword 'colour'; its keywords are tags, timeout"
    """
    if near is None and valid:
        near = nearest_keyword(name, valid)
    message = f"{called} got an unknown keyword {name!r}"
    if reason:
        message += f": {reason}"
    if near is not None:
        message += f"{'; ' if reason else ': '}did you mean {near}=...?"
    elif valid:
        message += f"; its keywords are {', '.join(sorted(valid))}"
    return _UnknownKeywordError(message + note)


def checks_keywords(func: Callable[P, R]) -> Callable[P, R]:
    """``func``, raising :func:`unknown_keyword`'s error for a keyword it does not take
    instead of Python's bare ``TypeError``. An async function stays one (its error then
    comes when the call is awaited). A function that takes any keyword (``**kwargs``) is
    returned as it is; one that takes none says so (``client.connect(timeout=5)``).

    Example:
        >>> @checks_keywords
        ... def connect(host: str, *, timeout: float = 5.0) -> str:
        ...     return host
        >>> connect("db", timout=1)  # type: ignore[call-arg]
        Traceback (most recent call last):
        ...
        agcore_tools.error._UnknownKeywordError: connect() got an unknown keyword 'timout': did you mean timeout=...?
        >>> @checks_keywords
        ... def ping() -> float:
        ...     return 0.0
        >>> ping(timeout=1)  # type: ignore[call-arg]
        Traceback (most recent call last):
        ...
        agcore_tools.error._UnknownKeywordError: ping() got an unknown keyword 'timeout': it takes no keywords
    """
    parameters = list(inspect.signature(func).parameters.values())
    # Suggested: what a keyword may name (not self, nor a positional-only parameter).
    keywords = frozenset(
        p.name
        for p in parameters
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name not in ("self", "cls")
    )
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return func  # every keyword binds: func checks them
    taken = frozenset(p.name for p in parameters)
    method = bool(parameters) and parameters[0].name == "self"
    name = func.__qualname__.rsplit(".<locals>.", 1)[-1]

    def mistake(args: tuple[Any, ...], given: Iterable[str]) -> _UnknownKeywordError | None:
        # Only a keyword no parameter takes: the call then failed in binding, before
        # func ran, so the TypeError is Python's and not one func raised.
        unknown = next((key for key in given if key not in taken), None)
        if unknown is None:
            return None
        # A method is named by the class the caller used (ToolRegistry, not the mixin
        # that defines it; a subclass by its own name).
        called = f"{type(args[0]).__name__}.{func.__name__}" if method and args else name
        none = "" if keywords else "it takes no keywords"
        return unknown_keyword(
            f"{called.removesuffix('.__init__')}()", unknown, keywords, reason=none
        )

    if inspect.iscoroutinefunction(func):
        start = cast(Callable[..., Coroutine[Any, Any, Any]], func)

        @functools.wraps(func)
        async def checked_async(*args: Any, **kwargs: Any) -> Any:
            try:
                call = start(*args, **kwargs)  # binds; the body runs when awaited
            except TypeError as error:
                refused = mistake(args, kwargs)
                if refused is None:
                    raise
                raise refused from error
            return await call

        return cast(Callable[P, R], checked_async)

    @functools.wraps(func)
    def checked(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except TypeError as error:
            refused = mistake(args, kwargs)
            if refused is None:
                raise
            raise refused from error

    return checked


def checks_init_keywords(cls: C) -> C:
    """``cls``, whose ``__init__`` is wrapped by :func:`checks_keywords`; type checkers
    still see the class as it was.

    Example:
        >>> from dataclasses import dataclass
        >>> @checks_init_keywords
        ... @dataclass
        ... class Limit:
        ...     calls: int = 1
        >>> Limit(cals=2)  # type: ignore[call-arg]
        Traceback (most recent call last):
        ...
        agcore_tools.error._UnknownKeywordError: Limit() got an unknown keyword 'cals': did you mean calls=...?
    """
    cls.__init__ = checks_keywords(cls.__init__)  # type: ignore[misc]
    return cls


def checks_public_keywords(cls: C) -> C:
    """``cls``, whose ``__init__`` and public methods (those its own body defines) are
    wrapped by :func:`checks_keywords`; type checkers still see the class as it was.

    Example:
        >>> @checks_public_keywords
        ... class Chat:
        ...     def send(self, text: str, *, retries: int = 0) -> str:
        ...         return text
        >>> Chat().send("hi", retry=1)  # type: ignore[call-arg]
        Traceback (most recent call last):
        ...
        agcore_tools.error._UnknownKeywordError: Chat.send() got an unknown keyword 'retry': did you mean retries=...?
    """
    for name, value in list(vars(cls).items()):
        if inspect.isfunction(value) and (name == "__init__" or not name.startswith("_")):
            setattr(cls, name, checks_keywords(value))
    return cls
