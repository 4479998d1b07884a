"""Package-level promises: a light import, a small documented surface, one version."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
import types
from pathlib import Path

import agcore_tools

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
        "(['agcore_tools', 'cycle'], ['agcore_tools', 'mcp'], ['agcore_tools', '_selection'])))\n"
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


def test_the_documented_patterns_pass_mypy_strict(tmp_path: Path) -> None:
    # The package says Typing :: Typed: an app written as the README, the guides and
    # the drop-in examples write it must type-check, and its bugs must not (each is a
    # `# type: ignore` that --strict reports if it silences nothing).
    files = [
        "tests/_typed_usage.py",
        "examples/openai_chat_loop.py",
        "examples/openai_responses_loop.py",
    ]
    command = [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path), *files]
    out = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=110)
    assert out.returncode == 0, out.stdout + out.stderr
