"""Where code mode's programs run: the Monty sandbox, driven one segment at a time.

Why segments: a program's tool calls must run outside the sandbox (through the
registry, or as Temporal activities), and a program may pause for days. So the sandbox
runs a program until it *waits* for calls, and reports the calls it made on the way
and the ones it waits for: a :class:`Segment`. The caller runs the calls and resumes
with their results. Every call is answered with a future, so the program reaches its
``await`` with all of its calls known, and ``asyncio.gather`` runs them at once.

:class:`ProgramSandbox` is the seam: :class:`MontySandbox` keeps a Monty worker alive
between segments; ``agcore_tools.temporal`` runs each segment as an activity, from the
snapshot the last one dumped. Nothing here imports the registry or the loop.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import importlib
import importlib.util
import keyword
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic_core import to_jsonable_python

from ._exit_grace import exit_grace
from .error import ApprovalError, LlmConfigError, ProgramError, ToolExecutionError

__all__ = [
    "DEFAULT_LIMITS",
    "MAX_PRINTED",
    "OWN_LIMITS",
    "Functions",
    "MontySandbox",
    "ProgramSandbox",
    "Segment",
    "require_monty",
    "suspensions_for",
    "turn_deadline",
    "with_printed",
]

RUN_PYTHON = "run_python"

OWN_LIMITS = frozenset({"max_calls"})
"""The limits of ``CodeMode(limits=...)`` that are not Monty's: ``max_calls``, the tool
calls one program may make, is counted by the loop across the program's stretches and
pauses (Monty's own count restarts at every restore), and never reaches Monty."""


def suspensions_for(calls: int | None) -> int:
    """Monty's ``max_suspensions`` behind a limit of ``calls`` tool calls, so that it
    never stops a program first: an awaited call suspends twice (the call, then its
    result), and an import or an unknown name once more.

    Example:
        >>> suspensions_for(500)
        1100
    """
    return 2**31 - 1 if calls is None else 2 * calls + 100


DEFAULT_LIMITS: dict[str, Any] = {
    "max_memory": 64 * 1024 * 1024,
    "max_feed_duration_secs": 10.0,
    "max_calls": 500,
    "max_suspensions": suspensions_for(500),
    "max_recursion_depth": 200,
}
"""A program's limits unless ``CodeMode(limits=...)`` says otherwise: Monty
``ResourceLimits``, and ``max_calls`` (see :data:`OWN_LIMITS`). Execution time counts
only while the program runs, never while a tool does."""

MAX_PRINTED = 1024 * 1024
"""Characters of a program's printed output kept; the rest is dropped, and the result
says so (the loop's ``max_result_bytes`` cuts the text further)."""

WORKER_DEADLINE = 30.0
"""Seconds Monty's pool waits for its worker at start and for one turn of the sandbox
before killing it: a backstop behind the program's own ``limits`` (see
:func:`turn_deadline`)."""


def turn_deadline(limits: Mapping[str, Any]) -> float:
    """Seconds Monty's pool gives one turn of the sandbox before it kills the worker:
    :data:`WORKER_DEADLINE`, or, when the program's own time limit is longer, a little
    more than that, so that the limit stops the program first (the model then reads
    a ``TimeoutError``).

    Example:
        >>> turn_deadline({"max_feed_duration_secs": 10.0}), turn_deadline({"max_feed_duration_secs": 120})
        (30.0, 125.0)
    """
    own = [
        float(value)
        for key in ("max_feed_duration_secs", "max_turn_duration_secs")
        if isinstance(value := limits.get(key), (int, float))
    ]
    return max(WORKER_DEADLINE, min(own) + 5.0) if own else WORKER_DEADLINE


_NO_SYSTEM = (
    "the sandbox has no file system, network, environment or processes; "
    "use the functions listed in run_python's description"
)

_SLEEPS = frozenset({"asyncio.sleep", "time.sleep", "system.async_sleep", "system.sleep"})
# Waiting would need a timer beside the program's calls (and a durable one on
# Temporal); a program has nothing to wait for, as each call's await waits for its result.
_NO_SLEEP = (
    "the sandbox cannot sleep: asyncio.sleep() with a delay and time.sleep() are not "
    "supported (awaiting a function already waits for its result)"
)

Functions = Mapping[str, tuple[str, Sequence[str], Sequence[str]]]
"""A program's functions: identifier -> (the tool it calls, its parameters in order,
the required ones)."""


def require_monty() -> Any:
    """The ``pydantic_monty`` module, or :class:`LlmConfigError` naming the extra."""
    if importlib.util.find_spec("pydantic_monty") is None:
        raise LlmConfigError(
            "CodeMode runs programs in the Monty sandbox, from the pydantic-monty package: "
            "pip install 'agcore-tools[code]'"
        )
    return importlib.import_module("pydantic_monty")


@dataclass
class Segment:
    """What a program did until it waited for calls, or ended.

    Example:
        >>> Segment([(1, "get_order", {"order_id": 3})], [1]).finished
        False
    """

    calls: list[tuple[int, str, dict[str, Any]]]
    """The tool calls the program made: (number, tool name, arguments)."""
    pending: list[int] | None
    """The numbers of the calls it waits for; None once it has ended."""
    output: Any = None
    """The program's value once it has ended (its last expression, or ``result``)."""
    printed: str = ""
    """What it printed during the segment."""
    dropped: bool = False
    """True when its printed output passed :data:`MAX_PRINTED` and the rest was dropped."""
    snapshot: str | None = field(default=None, repr=False)
    """The suspended program (base64), when the sandbox dumped it with the segment."""

    @property
    def finished(self) -> bool:
        """Whether the program has ended."""
        return self.pending is None


class ProgramSandbox(Protocol):
    """Runs one program, one :class:`Segment` at a time. Used as an async context.

    ``start`` runs a program; ``restore`` goes back to a dumped one (waiting for the
    calls ``pending`` lists); ``resume`` delivers results (``{"return_value": v}``, or
    ``{"exc_type": name, "message": text}``) by call number; ``snapshot`` dumps the
    waiting program (base64). A program that raised, or broke a limit, raises
    :class:`~agcore_tools.ProgramError` with the traceback.
    """

    async def __aenter__(self) -> ProgramSandbox: ...

    async def __aexit__(self, *exc: object) -> None: ...

    async def start(self, code: str) -> Segment: ...

    async def restore(self, code: str, snapshot: str, pending: list[int]) -> Segment: ...

    async def resume(self, results: Mapping[int, Mapping[str, Any]]) -> Segment: ...

    async def snapshot(self) -> str: ...


def named_arguments(
    function: str,
    order: Sequence[str],
    required: Sequence[str],
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
) -> dict[str, Any]:
    """A call's positional and keyword arguments as the tool's argument object. An
    optional parameter given None is left out: the listing shows ``= None`` for "the
    tool's default", and a tool may refuse a ``null``.

    Example:
        >>> named_arguments("f", ["a", "b", "c"], ["a"], (1,), {"b": 2, "c": None})
        {'a': 1, 'b': 2}
    """
    if len(args) > len(order):
        raise TypeError(f"{function}() takes {len(order)} arguments but {len(args)} were given")
    named = dict(zip(order, args, strict=False))
    for key, value in kwargs.items():
        if key in named:
            raise TypeError(f"{function}() got multiple values for argument '{key}'")
        named[key] = value
    return {k: v for k, v in named.items() if v is not None or k in required}


class MontySandbox:
    """A program in a Monty worker process of its own, kept between segments.

    Example:
        >>> MontySandbox({}, DEFAULT_LIMITS).limits["max_memory"]
        67108864
    """

    def __init__(self, functions: Functions, limits: Mapping[str, Any]) -> None:
        self.functions = dict(functions)
        """The tools the program may call, by function name."""
        self.limits = {k: v for k, v in limits.items() if k not in OWN_LIMITS}
        """Monty ``ResourceLimits``."""
        self._stack = contextlib.AsyncExitStack()
        self._session: Any = None
        self._waiting: Any = None  # the FutureSnapshot the program waits at
        self._code = ""
        self._printed: list[str] = []
        self._kept = 0
        self._dropped = False
        self._as_values: set[str] = set()  # tool functions the program read as values

    async def __aenter__(self) -> MontySandbox:
        monty = self._monty = require_monty()
        async with contextlib.AsyncExitStack() as stack:
            exit_grace.opened()
            stack.callback(exit_grace.closed)
            pool = await stack.enter_async_context(
                monty.AsyncMonty(
                    min_processes=1,
                    max_processes=1,
                    checkout_timeout=WORKER_DEADLINE,
                    request_timeout=turn_deadline(self.limits),
                )
            )
            checkout = pool.checkout(script_name="program.py", limits=self.limits)
            self._session = await stack.enter_async_context(checkout)
            self._stack = stack.pop_all()
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            await self._stack.aclose()
        finally:
            # A program that stopped while waiting (paused, timed out, cancelled) left its
            # snapshot here, holding self._print: a cycle through Monty's Rust objects,
            # which gc cannot see, so it would keep this sandbox alive for good.
            self._waiting = None
            self._session = None
            self._printed = []

    async def start(self, code: str) -> Segment:
        """Run ``code`` until it waits for calls or ends."""
        self._code = code
        return await self._guard(self._session.feed_start(code, print_callback=self._print))

    async def restore(self, code: str, snapshot: str, pending: list[int]) -> Segment:
        """Load a dumped program; it waits for the calls it waited for. A snapshot that
        cannot be loaded is no failure of the program's: :class:`~agcore_tools.ApprovalError`
        (unrecoverable), for the app that resumes it."""
        self._code = code
        monty = self._monty
        try:
            state = base64.b64decode(snapshot, validate=True)
            loaded = await self._session.load_snapshot(state, print_callback=self._print)
        except (binascii.Error, ValueError, monty.MontyError) as exc:
            cause = " ".join(f"{type(exc).__name__}: {exc}".split())
            error = ApprovalError(
                f"the paused program cannot be loaded from its snapshot ({cause})",
                tool_name=RUN_PYTHON,
            )
            error.recoverable = False
            raise error from exc
        try:
            return await self._drive(loaded)
        except monty.MontyError as exc:
            raise self._failed(exc) from exc

    async def resume(self, results: Mapping[int, Mapping[str, Any]]) -> Segment:
        """Deliver ``results`` to the waiting program and run it to its next wait."""
        waiting, self._waiting = self._waiting, None
        if waiting is None:
            raise ToolExecutionError(RUN_PYTHON, "the program is not waiting for any call")
        return await self._guard(waiting.resume(dict(results)))

    async def snapshot(self) -> str:
        """The waiting program, dumped (base64); :class:`~agcore_tools.ProgramError`
        when it cannot be (a program holding much of its heap: the dump needs more)."""
        if self._waiting is None:
            raise ToolExecutionError(RUN_PYTHON, "the program is not waiting for any call")
        try:
            dumped = self._waiting.dump()
        except self._monty.MontyError as exc:
            cause = " ".join(str(exc).split()) or type(exc).__name__
            reason = (
                f"the program's state is too large to save while it waits for approval ({cause}); "
                "keep less data in variables before a call that needs approval"
            )
            raise ProgramError(reason, reason) from exc
        return base64.b64encode(dumped).decode("ascii")

    async def _guard(self, step: Any) -> Segment:
        try:
            return await self._drive(await step)
        except self._monty.MontyError as exc:
            raise self._failed(exc) from exc

    def _failed(self, exc: BaseException) -> ProgramError:
        report = _failure(self._monty, exc)
        for name in self._as_values:
            # Monty's NameError says the listed function is not defined: the model would
            # hunt for a misspelling.
            report = report.replace(f"NameError: name '{name}' is not defined", _as_value(name))
        printed, _ = self._take()  # what the failing stretch printed: the model reads it
        reason = report.strip().splitlines()[-1]
        return ProgramError(reason, with_printed(printed, report))

    async def _drive(self, snapshot: Any) -> Segment:
        monty = self._monty
        calls: list[tuple[int, str, dict[str, Any]]] = []
        while True:
            if isinstance(snapshot, monty.MontyComplete):
                return Segment(calls, None, await self._value(snapshot.output), *self._take())
            if isinstance(snapshot, monty.AsyncFutureSnapshot):
                self._waiting = snapshot
                return Segment(calls, list(snapshot.pending_call_ids), None, *self._take())
            if isinstance(snapshot, monty.AsyncFunctionSnapshot):
                snapshot = await snapshot.resume(self._answer(snapshot, calls))
            else:  # a name the program never defined, read but not called
                if snapshot.variable_name in self.functions:  # a tool's, as a value
                    self._as_values.add(snapshot.variable_name)
                snapshot = await snapshot.resume()

    def _answer(self, snapshot: Any, calls: list[tuple[int, str, dict[str, Any]]]) -> Any:
        name = snapshot.function_name
        if snapshot.is_os_function:
            if name == "import":
                module = snapshot.args[0] if snapshot.args else "?"
                message = f"No module named '{module}' in the sandbox"
                return {"exc_type": "ModuleNotFoundError", "message": message}
            if name in _SLEEPS:
                return {"exc_type": "NotImplementedError", "message": _NO_SLEEP}
            return {"exc_type": "PermissionError", "message": _NO_SYSTEM}
        known = self.functions.get(name)
        if known is None:
            message = f"name '{name}' is not defined (the tools are listed in run_python's description)"  # fmt: skip
            return {"exc_type": "NameError", "message": message}
        tool, order, required = known
        try:
            args = named_arguments(name, order, required, snapshot.args, snapshot.kwargs)
        except TypeError as exc:
            return {"exc_type": "TypeError", "message": str(exc)}
        calls.append((snapshot.call_id, tool, to_jsonable_python(args, fallback=str)))
        return {"future": ...}

    async def _value(self, value: Any) -> Any:
        if value is None and re.search(
            r"^\s*result\s*(?::[^=\n]*)?=(?!=)", self._code, re.MULTILINE
        ):
            with contextlib.suppress(self._monty.MontyError):  # no `result` after all
                value = await self._session.feed_run("result")
        if isinstance(value, str) and len(value) > MAX_PRINTED:
            # Cut as printed output is: the loop would convert and dump it whole, on the
            # event loop, to keep the first max_result_bytes.
            dropped = len(value) - MAX_PRINTED
            value = f"{value[:MAX_PRINTED]}[... {dropped} more characters dropped]"
        try:
            try:
                return to_jsonable_python(value, fallback=repr)
            except ValueError:  # bytes that are no UTF-8 text (UnicodeDecodeError)
                return to_jsonable_python(_binary_as_text(value), fallback=repr)
        except (ValueError, TypeError, OverflowError, RecursionError) as exc:
            printed, _ = self._take()  # kept for the model, as a failed program's are
            reason = f"the program's value cannot be returned: {type(exc).__name__}: {exc}"
            reason = " ".join(reason.split())
            raise ProgramError(reason, with_printed(printed, reason)) from exc

    def _print(self, stream: str, text: str) -> None:
        room = MAX_PRINTED - self._kept
        if len(text) > room:
            text, self._dropped = text[: max(room, 0)], True
        if text:
            self._printed.append(text)
            self._kept += len(text)

    def _take(self) -> tuple[str, bool]:
        printed, self._printed = "".join(self._printed), []
        return printed, self._dropped


def _binary_as_text(value: Any) -> Any:
    """``value`` with its bytes as text, as a tool's reach a program: decoded, or, when
    they are no UTF-8, a text naming them.

    Example:
        >>> _binary_as_text({"ok": b"hi", "raw": (b"\\xff\\x00",)})
        {'ok': 'hi', 'raw': ['[2 bytes of binary data: return bytes.hex() or base64 text instead]']}
    """
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return f"[{len(value)} bytes of binary data: return bytes.hex() or base64 text instead]"  # fmt: skip
    if isinstance(value, dict):
        return {
            _binary_as_text(key) if isinstance(key, bytes) else key: _binary_as_text(item)
            for key, item in value.items()
        }
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_binary_as_text(item) for item in value]
    return value


PRINTED = "The program printed:\n"
"""The heading of a failed program's printed output in its report."""


def with_printed(printed: str, report: str) -> str:
    """A failed program's ``report`` with what it ``printed`` before, under one heading
    (a report from the sandbox may already start with the output of its last stretch).

    Example:
        >>> inner = with_printed("step 2\\n", "ZeroDivisionError")
        >>> print(with_printed("step 1\\n", inner))
        The program printed:
        step 1
        step 2
        ZeroDivisionError
    """
    if report.startswith(PRINTED):
        return PRINTED + printed + report[len(PRINTED) :]
    if not printed.strip("\n"):
        return report
    return PRINTED + printed.rstrip("\n") + "\n" + report


def _as_value(name: str) -> str:
    """What a program that used tool function ``name`` as a value is told.

    Example:
        >>> _as_value("get_user").split(":")[:2]
        ['NameError', ' get_user is a tool function']
    """
    return (
        f"NameError: {name} is a tool function: call it where you use it, `await {name}(...)` "
        f"(or `asyncio.gather(*[{name}(x) for x in xs])`); it cannot be stored in a variable "
        "or a dict, or passed as a value"
    )


_SUSPENSIONS = re.compile(r"^(RuntimeError: suspension limit \d+ exceeded)$", re.MULTILINE)


def _failure(monty: Any, exc: BaseException) -> str:
    if isinstance(exc, (monty.MontyRuntimeError, monty.MontySyntaxError)):
        # Monty's word, which the model was never told: what it counts, and where.
        return _SUSPENSIONS.sub(
            r"\1 (CodeMode limits' max_suspensions: each call, awaited result and import counts)",
            str(exc.display()),
        )
    if isinstance(exc, monty.MontyCrashedError):
        return f"the sandbox stopped the program: {exc}"
    return f"the program failed: {exc}"


_MODULES = frozenset(
    [
        "asyncio",
        "base64",
        "binascii",
        "bisect",
        "collections",
        "copy",
        "csv",
        "dataclasses",
        "datetime",
        "decimal",
        "functools",
        "hashlib",
        "itertools",
        "json",
        "math",
        "os",
        "pathlib",
        "posixpath",
        "random",
        "re",
        "sys",
        "time",
        "tomllib",
        "typing",
        "unicodedata",
    ]
)
"""The modules a program can import (Monty 1.4): a tool's function must not shadow one."""

_BUILTINS = frozenset({
    "ArithmeticError", "AssertionError", "AttributeError", "BaseException",
    "Ellipsis", "Exception", "False", "FileExistsError", "FileNotFoundError",
    "ImportError", "IndexError", "IsADirectoryError", "KeyError",
    "KeyboardInterrupt", "LookupError", "MemoryError", "ModuleNotFoundError",
    "NameError", "None", "NotADirectoryError", "NotImplemented",
    "NotImplementedError", "OSError", "OverflowError", "PermissionError",
    "RecursionError", "RuntimeError", "StopIteration", "SyntaxError", "SystemExit",
    "TimeoutError", "True", "TypeError", "UnboundLocalError", "UnicodeDecodeError",
    "UnicodeEncodeError", "ValueError", "ZeroDivisionError", "abs", "all", "any",
    "bin", "bool", "bytes", "chr", "complex", "dict", "divmod", "enumerate", "eval",
    "exec", "filter", "float", "format", "frozenset", "getattr", "hasattr", "hash",
    "hex", "id", "int", "isinstance", "iter", "len", "list", "locals", "map", "max",
    "min", "next", "object", "oct", "open", "ord", "pow", "print", "property",
    "range", "repr", "reversed", "round", "set", "setattr", "slice", "sorted",
    "str", "sum", "tuple", "type", "zip",
})  # fmt: skip
"""The builtin functions and types the sandbox defines itself (Monty 1.4, found by
running a program naming each of CPython's): a name among them never reaches a tool.
Fixed here, not read from this process's ``builtins``, which depends on how Python was
started (``-S`` drops ``help``); and the builtins Monty lacks (``dir``, ``help``,
``input``) stay tools' names, as programs paused by earlier versions call them."""

_GLOBALS = frozenset(
    {"__annotations__", "__debug__", "__doc__", "__file__", "__name__", "__package__", "__spec__"}
)
"""The module globals a program finds defined (Monty 1.6, found by calling each of
CPython's): a call of one reaches its value (``'str' object is not callable``)."""

RESERVED = frozenset(_BUILTINS | _MODULES | _GLOBALS | {"result"})
"""Names a tool's function does not take: the sandbox's builtins, its modules and
globals, and ``result``. Else the program's call would reach the builtin (``await
list(...)``) or the global (``await __name__(...)``), not the tool."""


def valid_identifier(name: str, taken: set[str]) -> str:
    """``name`` as a Python identifier not in ``taken`` (which it joins), nor a keyword
    or a name in :data:`RESERVED` (those get a trailing underscore).

    Example:
        >>> valid_identifier("github__list-issues", set()), valid_identifier("class", set())
        ('github__list_issues', 'class_')
        >>> valid_identifier("list", set()), valid_identifier("json", set())
        ('list_', 'json_')
    """
    base = re.sub(r"\W", "_", name) or "tool"
    if base[0].isdigit():
        base = f"_{base}"
    if keyword.iskeyword(base) or base in RESERVED:
        base = f"{base}_"
    candidate, n = base, 2
    while candidate in taken:
        candidate, n = f"{base}_{n}", n + 1
    taken.add(candidate)
    return candidate
