"""Code mode: the model writes one Python program that calls many tools, run in Monty.

Why: one JSON call per model turn sends every intermediate result through the context
and costs a turn per dependent step. A program keeps intermediate results in its own
variables, and ten dependent calls take one turn. The sandbox is Monty
(``pydantic-monty``, the ``code`` extra): a Python subset run in a worker process,
with no file system, network or environment, and resource limits. It suspends at
every call to a name the program did not define; this module answers those calls
with the registry's tools, each through :func:`~agcore_tools._execute.as_completed`,
so argument validation, permissions, timeouts, stats, progress and spans are those of
a direct call.

Every tool call is answered with a future: the program ``await``s it, and
``asyncio.gather`` runs several at once. A call that needs approval is not run; the
program goes on until it waits for that call, and then pauses: the calls already
running finish, and the whole state (Monty's snapshot, the results not yet delivered,
the calls waiting and the output printed) becomes :class:`ProgramPaused`, plain JSON
that the loop stores in the history on the open ``run_python`` call. A resume in any
process loads the snapshot and delivers the answers: calls made before the pause are
never run again.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import importlib
import importlib.util
import json
import keyword
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_core import to_jsonable_python

from ._execute import ToolTable, as_completed
from ._records import ParsedCall, ToolCall, ToolInvocation
from .approval import ApprovalRequest
from .base import BaseTool, ToolContext
from .calls import approval_requests
from .error import LlmConfigError, ToolError, ToolExecutionError

__all__ = [
    "PROGRAM_STATE",
    "RESUME",
    "RUN_PYTHON",
    "ProgramPaused",
    "RunPythonTool",
    "inner_call_id",
    "python_signatures",
    "require_monty",
]

logger = logging.getLogger("agcore_tools.code_mode")

RUN_PYTHON = "run_python"
RESUME = "__resume__"
"""The argument through which the loop hands a paused program its state and answers."""
PROGRAM_STATE = "program_state"
"""The key of a paused program's state on its open ``run_python`` call in the history."""

DEFAULT_LIMITS: dict[str, Any] = {
    "max_memory": 64 * 1024 * 1024,
    "max_feed_duration_secs": 10.0,
    "max_suspensions": 500,
    "max_recursion_depth": 200,
}
"""Monty ``ResourceLimits`` for a program unless ``CodeMode(limits=...)`` says otherwise:
execution time counts only while the program runs, never while a tool does."""

MAX_PRINTED = 1024 * 1024
"""Characters of a program's printed output kept; the rest is dropped, and the result
says so (the loop's ``max_result_bytes`` cuts the text further)."""
WORKER_DEADLINE = 30.0
"""Seconds Monty's pool waits for its worker at start and for one turn of the sandbox
before killing it: a backstop behind the program's own ``limits``."""

_NO_SYSTEM = (
    "the sandbox has no file system, network, environment or processes; "
    "use the functions listed in run_python's description"
)


def require_monty() -> Any:
    """The ``pydantic_monty`` module, or :class:`LlmConfigError` naming the extra."""
    if importlib.util.find_spec("pydantic_monty") is None:
        raise LlmConfigError(
            "CodeMode runs programs in the Monty sandbox, from the pydantic-monty package: "
            "pip install 'agcore-tools[code]'"
        )
    return importlib.import_module("pydantic_monty")


def inner_call_id(outer: str, number: int) -> str:
    """The id of a program's ``number``-th tool call, inside the model's call ``outer``.

    Example:
        >>> inner_call_id("call_7", 3)
        'call_7~3'
    """
    return f"{outer}~{number}"


@dataclass(frozen=True)
class ProgramPaused:
    """What ``run_python`` returns when its program waits for approvals: the requests
    (ids from :func:`inner_call_id`, not yet signed) and the state to resume from."""

    requests: tuple[ApprovalRequest, ...]
    state: dict[str, Any]


# -- what the model reads: tools as Python functions --------------------------------

_TYPES = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "null": "None"}


def _annotation(schema: Any) -> str:
    if not isinstance(schema, Mapping):
        return "Any"
    if "enum" in schema and isinstance(schema["enum"], list):
        return f"Literal[{', '.join(repr(v) for v in schema['enum'])}]"
    for union in ("anyOf", "oneOf"):
        if isinstance(schema.get(union), list):
            return " | ".join(dict.fromkeys(_annotation(s) for s in schema[union]))
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(_annotation({**schema, "type": k}) for k in kind)
    if kind == "array":
        return f"list[{_annotation(schema.get('items'))}]"
    if kind == "object":
        return "dict[str, Any]"
    return _TYPES.get(kind, "Any") if isinstance(kind, str) else "Any"


def _identifier(name: str, taken: set[str]) -> str:
    base = re.sub(r"\W", "_", name) or "tool"
    if base[0].isdigit():
        base = f"_{base}"
    if keyword.iskeyword(base) or base in ("asyncio", "print", "result"):
        base = f"{base}_"
    candidate, n = base, 2
    while candidate in taken:
        candidate, n = f"{base}_{n}", n + 1
    taken.add(candidate)
    return candidate


def _parameters(definition: Mapping[str, Any]) -> tuple[list[str], Mapping[str, Any], set[str]]:
    schema = definition.get("parameters") or {}
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    return list(properties), properties, required


def _stub(function: str, definition: Mapping[str, Any]) -> str:
    names, properties, required = _parameters(definition)
    plain = all(n.isidentifier() and not keyword.iskeyword(n) for n in names)
    if plain:
        ordered = sorted(names, key=lambda n: n not in required)  # required first
        params = [
            f"{n}: {_annotation(properties[n])}" + ("" if n in required else " = None")
            for n in ordered
        ]
        signature = ", ".join(params)
    else:
        keys = ", ".join(f"{n!r}: {_annotation(properties[n])}" for n in names)
        signature = f"**arguments: Any  # keys {{{keys}}}"
    doc = " ".join(str(definition.get("description") or "").split())
    if len(doc) > 400:
        doc = doc[:397] + "..."
    doc = doc.replace('"""', "'''")
    return f'async def {function}({signature}) -> Any:\n    """{doc}"""'


def python_signatures(definitions: Sequence[Mapping[str, Any]]) -> tuple[str, dict[str, str]]:
    """Stubs of ``definitions`` (Chat Completions form) as async Python functions, and
    each function's tool name. Names become valid, distinct identifiers.

    Example:
        >>> text, names = python_signatures([{"function": {
        ...     "name": "github__list-issues", "description": "List issues.",
        ...     "parameters": {"type": "object", "required": ["repo"], "properties": {
        ...         "repo": {"type": "string"}, "state": {"enum": ["open", "closed"]}}}}}])
        >>> print(text)
        async def github__list_issues(repo: str, state: Literal['open', 'closed'] = None) -> Any:
            \"\"\"List issues.\"\"\"
        >>> names
        {'github__list_issues': 'github__list-issues'}
    """
    taken: set[str] = set()
    stubs, names = [], {}
    for definition in definitions:
        function = definition.get("function", definition)
        tool = str(function["name"])
        identifier = _identifier(tool, taken)
        names[identifier] = tool
        stubs.append(_stub(identifier, function))
    return "\n\n".join(stubs), names


_GUIDE = (
    "Run a Python program in a sandbox and get what it prints and its last expression's "
    "value (or the variable `result`). The sandbox runs a subset of Python 3 with asyncio, "
    "json, re, math and datetime; it has no files, network or other modules. The "
    "functions below call tools. They are async: `await` each call, and use "
    "`await asyncio.gather(f(...), g(...))` to run independent calls at once. Do several "
    "steps in one program, keep intermediate results in variables, and print or return "
    "only what you need. A tool's error is raised as an exception you can catch.\n\n"
)


# -- the program runner ------------------------------------------------------------


class RunPythonTool(BaseTool):
    """The ``run_python`` tool a :class:`~agcore_tools.CodeMode` run offers.

    ``table`` runs the calls (the whole registry's, with its permission checker);
    ``definitions`` are the tools the program may call (those the checker allows).

    Example:
        >>> tool = RunPythonTool(ToolTable(None), [], {}, 60.0)
        >>> tool.name, tool.parameters["required"]
        ('run_python', ['code'])
    """

    name = RUN_PYTHON
    parameters = {  # noqa: RUF012
        "type": "object",
        "properties": {"code": {"type": "string", "description": "The Python program."}},
        "required": ["code"],
    }

    def __init__(
        self,
        table: ToolTable,
        definitions: Sequence[Mapping[str, Any]],
        limits: Mapping[str, Any],
        call_timeout: float | None,
    ) -> None:
        self.table = table
        """The registry's tools and permission checker, which the program's calls use."""
        stubs, self._tools = python_signatures(definitions)
        self._order = {
            identifier: _parameters(d.get("function", d))[0]
            for identifier, d in zip(self._tools, definitions, strict=True)
        }
        self.description = _GUIDE + (stubs or "(no tools are available)")
        self._limits = dict(limits)
        self.call_timeout = call_timeout
        """Seconds each tool call of a program may take (None for no limit)."""

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        """Run (or resume) the program; its output text, or :class:`ProgramPaused`."""
        code = args.get("code")
        if not isinstance(code, str):
            raise ToolExecutionError(self.name, "'code' must be a string holding a program")
        monty = require_monty()
        resume = args.get(RESUME)
        async with (
            monty.AsyncMonty(
                min_processes=1,
                max_processes=1,
                checkout_timeout=WORKER_DEADLINE,
                request_timeout=WORKER_DEADLINE,
            ) as pool,
            pool.checkout(script_name="program.py", limits=self._limits) as session,
        ):
            program = _Program(self, monty, ctx)
            try:
                if resume is None:
                    first = await session.feed_start(code, print_callback=program.print)
                else:
                    first = await program.restore(session, resume)
                return await program.finish(session, code, await program.drive(first))
            except monty.MontyError as exc:
                raise ToolExecutionError(self.name, _failure(monty, exc)) from exc
            finally:
                await program.cancel()

    def tool_name(self, function: str) -> str | None:
        """The tool a program's function name calls, or None."""
        return self._tools.get(function)

    def named_arguments(
        self, function: str, args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> dict[str, Any]:
        """A call's positional and keyword arguments as the tool's argument object."""
        order = self._order[function]
        if len(args) > len(order):
            raise TypeError(f"{function}() takes {len(order)} arguments but {len(args)} were given")
        named = dict(zip(order, args, strict=False))
        for key, value in kwargs.items():
            if key in named:
                raise TypeError(f"{function}() got multiple values for argument '{key}'")
            named[key] = value
        return named


def _failure(monty: Any, exc: BaseException) -> str:
    if isinstance(exc, (monty.MontyRuntimeError, monty.MontySyntaxError)):
        return f"the program failed:\n{exc.display()}"
    if isinstance(exc, monty.MontyCrashedError):
        return f"the sandbox stopped the program: {exc}"
    return f"the program failed: {exc}"


def _settled(entry: Mapping[str, Any]) -> dict[str, Any]:
    if "error" in entry:
        kind, message = entry["error"]
        return {"exc_type": kind, "message": message}
    return {"return_value": entry["value"]}


class _Program:
    """One program's run: its calls in flight, results not yet delivered, calls waiting
    for approval, and printed output."""

    def __init__(self, tool: RunPythonTool, monty: Any, ctx: ToolContext) -> None:
        self._tool = tool
        self._monty = monty
        self._ctx = ctx
        self._outer = ctx.call_id or RUN_PYTHON
        self._running: dict[int, asyncio.Task[ToolInvocation]] = {}
        self._done: dict[int, dict[str, Any]] = {}
        self._waiting: dict[int, dict[str, Any]] = {}
        self._printed: list[str] = []
        self._kept = 0
        self._dropped = False
        self._fatal: ToolError | None = None

    def print(self, stream: str, text: str) -> None:
        room = MAX_PRINTED - self._kept
        if len(text) > room:
            text, self._dropped = text[: max(room, 0)], True
        if text:
            self._printed.append(text)
            self._kept += len(text)

    async def restore(self, session: Any, resume: Mapping[str, Any]) -> Any:
        state = resume["state"]
        self._printed = [state.get("printed", "")]
        self._kept = len(self._printed[0])
        self._done = {int(k): v for k, v in state.get("done", {}).items()}
        self._waiting = {int(w["id"]): w for w in state.get("waiting", ())}
        snapshot = await session.load_snapshot(
            base64.b64decode(state["snapshot"]), print_callback=self.print
        )
        for number, answer in resume.get("answers", {}).items():
            waiting = self._waiting.pop(int(number))
            if "declined" in answer:
                self._done[int(number)] = {"error": ["PermissionError", answer["declined"]]}
            else:
                self._start(int(number), waiting["tool"], answer["run"])
        return snapshot

    async def drive(self, snapshot: Any) -> Any:
        monty = self._monty
        while not isinstance(snapshot, monty.MontyComplete):
            if isinstance(snapshot, monty.AsyncFunctionSnapshot):
                snapshot = await self._call(snapshot)
            elif isinstance(snapshot, monty.AsyncFutureSnapshot):
                paused = await self._wait(snapshot)
                if isinstance(paused, ProgramPaused):
                    return paused
                snapshot = paused
            else:  # a name the program never defined, read but not called
                snapshot = await snapshot.resume()
        return snapshot

    async def finish(self, session: Any, code: str, end: Any) -> Any:
        if isinstance(end, ProgramPaused):
            return end
        value = end.output
        if value is None and re.search(r"^\s*result\s*=", code, re.MULTILINE):
            with contextlib.suppress(self._monty.MontyError):  # no `result` after all
                value = await session.feed_run("result")
        printed = "".join(self._printed)
        parts = [printed.rstrip("\n")] if printed else []
        if self._dropped:
            parts.append(
                f"[the program printed over {MAX_PRINTED} characters; the rest was dropped]"
            )
        if value is not None:
            parts.append(f"result: {json.dumps(to_jsonable_python(value, fallback=repr), ensure_ascii=False)}")  # fmt: skip
        return "\n".join(parts) or "(the program printed nothing and returned None)"

    async def _call(self, snapshot: Any) -> Any:
        name = snapshot.function_name
        if snapshot.is_os_function:
            if name == "import":
                module = snapshot.args[0] if snapshot.args else "?"
                message = f"No module named '{module}' in the sandbox"
                return await snapshot.resume(
                    {"exc_type": "ModuleNotFoundError", "message": message}
                )
            return await snapshot.resume({"exc_type": "PermissionError", "message": _NO_SYSTEM})
        tool = self._tool.tool_name(name)
        if tool is None:
            message = (
                f"name '{name}' is not defined (the tools are listed in run_python's description)"
            )
            return await snapshot.resume({"exc_type": "NameError", "message": message})
        try:
            args = self._tool.named_arguments(name, snapshot.args, snapshot.kwargs)
        except TypeError as exc:
            return await snapshot.resume({"exc_type": "TypeError", "message": str(exc)})
        number = snapshot.call_id
        call_id = inner_call_id(self._outer, number)
        parsed = ParsedCall(call_id, tool, json.dumps(args, default=str), args)
        asked = await approval_requests(self._tool.table, [parsed], self._ctx, None)
        request = asked[0] if asked else None
        if request is not None:
            self._waiting[number] = {
                "id": number, "tool": tool, "arguments": args, "reason": request.reason
            }  # fmt: skip
        else:
            self._start(number, tool, args)
        return await snapshot.resume({"future": ...})

    def _start(self, number: int, tool: str, args: dict[str, Any]) -> None:
        call = ToolCall(tool, args, inner_call_id(self._outer, number))
        self._running[number] = asyncio.ensure_future(self._invoke(call))

    async def _invoke(self, call: ToolCall) -> ToolInvocation:
        timeout = self._tool.call_timeout
        async for _, invocation in as_completed(self._tool.table, [call], self._ctx, timeout):
            return invocation
        raise AssertionError("as_completed gave no result for one call")  # pragma: no cover

    def _settle(self, number: int, task: asyncio.Task[ToolInvocation]) -> None:
        invocation = task.result()
        error = invocation.error
        if error is None:
            value = to_jsonable_python(invocation.output, fallback=str)
            self._done[number] = {"value": value}
        elif error.is_recoverable():
            self._done[number] = {"error": ["RuntimeError", str(error)]}
        elif self._fatal is None:
            self._fatal = error

    async def _wait(self, snapshot: Any) -> Any:
        pending = snapshot.pending_call_ids
        if any(number in self._waiting for number in pending):
            await self._settle_all()
            return await self._pause(snapshot)
        while not any(number in self._done for number in pending):
            tasks = [self._running[n] for n in pending if n in self._running]
            if not tasks:
                raise ToolExecutionError(
                    RUN_PYTHON, "the program waits for a call that never started"
                )
            finished, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for number in [n for n, t in self._running.items() if t in finished]:
                self._settle(number, self._running.pop(number))
            if self._fatal is not None:
                raise self._fatal
        results = {n: _settled(self._done.pop(n)) for n in pending if n in self._done}
        return await snapshot.resume(results)

    async def _settle_all(self) -> None:
        if self._running:
            await asyncio.wait(list(self._running.values()))
        for number, task in list(self._running.items()):
            self._settle(number, task)
        self._running.clear()
        if self._fatal is not None:
            raise self._fatal

    async def _pause(self, snapshot: Any) -> ProgramPaused:
        state = {
            "snapshot": base64.b64encode(snapshot.dump()).decode("ascii"),
            "done": {str(n): v for n, v in self._done.items()},
            "waiting": list(self._waiting.values()),
            "printed": "".join(self._printed),
        }
        requests = tuple(
            ApprovalRequest(
                inner_call_id(self._outer, w["id"]), w["tool"], w["arguments"], w["reason"]
            )
            for w in self._waiting.values()
        )
        logger.debug("program of call %r paused for %d approval(s)", self._outer, len(requests))
        return ProgramPaused(requests, state)

    async def cancel(self) -> None:
        tasks = [task for task in self._running.values() if not task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=5.0)
