"""Package-level promises: a light import, a small documented surface, one version."""

from __future__ import annotations

import functools
import inspect
import re
import subprocess
import sys
import types
import warnings
from collections.abc import Callable
from pathlib import Path

from typing_extensions import get_overloads

import agcore_tools
from agcore_tools import (
    ChatResponse,
    CycleConfig,
    FinishReason,
    LlmCycle,
    McpClient,
    StdioTransport,
    StreamableHttpTransport,
    ToolContext,
    ToolRegistry,
    TurnComplete,
)
from agcore_tools.temporal import ToolActivityOptions

ROOT = Path(__file__).resolve().parents[1]


def test_import_does_not_load_openai_mcp_temporalio_or_redis() -> None:
    code = (
        "import sys, agcore_tools\n"
        "from agcore_tools import McpClient, StdioTransport, load_mcp_servers\n"
        "McpClient('x', StdioTransport('server'))\n"
        "load_mcp_servers({'mcpServers': {'a': {'url': 'http://127.0.0.1:1/mcp'}}})\n"
        "heavy = ('openai', 'mcp', 'mcp_types', 'httpx', 'httpx2', 'anyio', 'temporalio', 'redis')\n"
        "heavy = [m for m in heavy if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == ""


def test_the_loop_and_mcp_packages_load_on_first_use() -> None:
    code = (
        "import sys, agcore_tools\n"
        "print(sorted(m for m in sys.modules if m.split('.')[:2] in "
        "(['agcore_tools', 'cycle'], ['agcore_tools', 'mcp'], ['agcore_tools', '_selection'],"
        " ['agcore_tools', '_run_offer'])))\n"
        "agcore_tools.LlmCycle, agcore_tools.McpClient\n"
        "print('agcore_tools.cycle' in sys.modules, 'agcore_tools.mcp' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.splitlines() == ["[]", "True True"]
    assert "LlmCycle" in dir(agcore_tools)


def test_import_leaves_what_only_a_first_use_needs_unloaded() -> None:
    # pydantic.fields (with pydantic.types, annotated_types, hashlib) loads with the first
    # tool, html and json with the first repr or schema note: `import agcore_tools`
    # costs little beyond `import asyncio; from pydantic import BaseModel, TypeAdapter`.
    lazy = ("pydantic.fields", "pydantic.types", "annotated_types", "html", "json")
    code = (
        "import sys, agcore_tools\n"
        f"print([m for m in {lazy!r} if m in sys.modules])\n"
        "registry = agcore_tools.ToolRegistry()\n"
        "@registry.tool\n"
        "def add(a: int, b: int) -> int:\n"
        "    'Add.'\n"
        "    return a + b\n"
        "registry.invoke_sync('add', {'a': 1, 'b': 2})._repr_html_()\n"
        f"print([m for m in {lazy!r} if m not in sys.modules])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.splitlines() == ["[]", "[]"]


def test_the_temporal_package_without_temporalio_names_the_extra() -> None:
    code = (
        "import sys\n"
        "sys.modules['temporalio'] = None  # as if it were not installed\n"
        "from agcore_tools import LlmConfigError\n"
        "try:\n"
        "    import agcore_tools.temporal\n"
        "except LlmConfigError as exc:\n"
        "    print(exc)\n"
        "    print(type(exc.__cause__).__name__)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.splitlines() == [
        "agcore_tools.temporal runs on the temporalio package: "
        "pip install 'agcore-tools[temporal]'",
        "ModuleNotFoundError",
    ]


def test_all_is_alphabetised_and_every_public_name_is_documented() -> None:
    assert agcore_tools.__all__ == sorted(agcore_tools.__all__)
    for name in agcore_tools.__all__:
        obj = getattr(agcore_tools, name)
        # Python 3.10 reads a generic alias (SchemaTransform) as a class too.
        if (inspect.isclass(obj) and not isinstance(obj, types.GenericAlias)) or (
            inspect.isfunction(obj)
        ):
            assert inspect.getdoc(obj), f"{name} has no docstring"


def test_version_matches_pyproject() -> None:
    match = re.search(r'^version = "([^"]+)"$', (ROOT / "pyproject.toml").read_text(), re.M)
    assert match is not None
    assert agcore_tools.__version__ == match.group(1)


def test_the_documented_patterns_pass_mypy_strict() -> None:
    # The package says Typing :: Typed: an app written as the README, the guides and
    # the drop-in examples write it must type-check, and its bugs must not (each is a
    # `# type: ignore` that --strict reports if it silences nothing).
    files = [
        "tests/_typed_usage.py",
        "examples/openai_chat_loop.py",
        "examples/openai_responses_loop.py",
    ]
    # A cache of its own that outlives the run (mypy checks each cached module against
    # its source): about 20 s of CPU from an empty one, 3 s from a warm one.
    cache = ROOT / ".mypy_cache" / "documented-patterns"
    command = [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(cache), *files]
    out = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=110)
    assert out.returncode == 0, out.stdout + out.stderr


def _init_overload(cls: type, keyword: str | None = None) -> object:
    # The deprecated overload of __init__ (the one taking ``keyword``), as
    # typing.get_overloads() keeps it (from 3.11: typing.overload records none before).
    return next(
        f
        for f in get_overloads(cls.__init__)
        if hasattr(f, "__deprecated__")
        and (keyword is None or keyword in inspect.signature(f).parameters)
    )


def _deprecated_uses() -> list[tuple[object, Callable[[], object] | None]]:
    """Each deprecated API's marked function, and a use of it that warns (None: the use
    needs a server; tests/mcp/test_names.py and tests/cycle/test_renames.py warn)."""
    response, turn = ChatResponse({}, "", FinishReason.STOP), TurnComplete(FinishReason.STOP)
    client, options = McpClient("x", StdioTransport("server")), ToolActivityOptions(timeout=5)
    config = CycleConfig("m")
    uses: list[tuple[object, Callable[[], object] | None]] = [
        (vars(ChatResponse)["stop_reason"].fget, lambda: response.stop_reason),
        (vars(TurnComplete)["reason"].fget, lambda: turn.reason),
        (vars(TurnComplete)["raw_reason"].fget, lambda: turn.raw_reason),
        (vars(CycleConfig)["tool_timeout_secs"].fget, lambda: config.tool_timeout_secs),
        (vars(CycleConfig)["max_tool_result_bytes"].fget, lambda: config.max_tool_result_bytes),
        (vars(ToolActivityOptions)["timeout_secs"].fget, lambda: options.timeout_secs),
        (
            vars(StreamableHttpTransport)["max_sse_event_size"].fget,
            lambda: StreamableHttpTransport("http://x/mcp").max_sse_event_size,
        ),
        (
            ToolRegistry.with_permission_checker,
            lambda: ToolRegistry().with_permission_checker(None),
        ),
        (McpClient.with_timeout, lambda: client.with_timeout(5)),
        (McpClient.list_tools, None),
        (McpClient.list_tools_sync, None),
        (LlmCycle.aclose, None),
    ]
    if sys.version_info >= (3, 11):
        uses.append((_init_overload(ToolContext), lambda: ToolContext("session-1")))
        uses.append(
            (_init_overload(ToolActivityOptions), lambda: ToolActivityOptions(timeout_secs=5))
        )
        uses.append(
            (
                _init_overload(StreamableHttpTransport),
                lambda: StreamableHttpTransport("http://x/mcp", max_sse_event_size=1024),
            )
        )
        for keyword in ("tool_timeout_secs", "max_tool_result_bytes"):
            uses.append(
                (
                    _init_overload(CycleConfig, keyword),
                    functools.partial(CycleConfig, "m", **{keyword: 4096}),
                )
            )
    return uses


def test_deprecated_apis_are_marked_for_checkers_and_warn_once() -> None:
    # @typing_extensions.deprecated(..., category=None): checkers and IDEs see it, and
    # the run-time warning stays renamed()'s alone (the decorator would add a second).
    for marked, use in _deprecated_uses():
        message = getattr(marked, "__deprecated__", None)
        assert message, f"{marked} is not marked @deprecated"
        # The library's own keyword check wraps a method (its __wrapped__); under it,
        # the function must be as it was written.
        while getattr(marked, "__globals__", {}).get("__name__") == "agcore_tools._keywords":
            marked = marked.__wrapped__  # type: ignore[attr-defined]
        assert not hasattr(marked, "__wrapped__"), f"{marked} warns a second time"
        if use is None:
            continue
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            use()
        assert [w.category for w in caught] == [DeprecationWarning], marked
        assert str(caught[0].message).startswith(message.split(";")[0])
        # At the caller's line (here), which Python's default filters show in __main__;
        # through a keyword-checking wrapper, it pointed at agcore_tools/_keywords.py.
        assert caught[0].filename == __file__, (marked, caught[0].filename)
