"""The package's shape, beyond what the import-linter contract (``make lint``) checks.

The contract in ``pyproject.toml`` keeps the imports going down the layers with no
circle, counting imports inside functions and under ``TYPE_CHECKING``. These tests keep
the rest of the shape: no module reaches into the private attributes of a class that
another module defines (a hook found with ``getattr(obj, "_name")`` counts too), and the
layer diagram in ``docs/architecture.md`` is the one the contract and the code draw.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import agcore_tools

PACKAGE = Path(agcore_tools.__file__).parent
ROOT = PACKAGE.parent

# Private names of other code that a module may read, each with the reason it must.
ALLOWED = {
    "_getframe": "sys._getframe: the standard way to find the caller's namespace",
    "_custom_headers": "openai's client has no public view of the caller's own headers "
    "(default_headers mixes in the SDK's, probed blocking); see cycle/_client.py",
    "_api_key_provider": "openai's sync client keeps a callable api_key only there (its "
    "api_key is the last key it got); the async twin calls it too, see cycle/_client.py",
    "_provider": "openai's client has no public view of a provider= (Bedrock, Vertex) it was "
    "built with, which its async twin could not carry over; see cycle/_client.py",
    "_client": "openai's sync client has no public view of the http_client it was built "
    "with, whose proxy and certificates its async twin would drop; see cycle/_client.py",
    "_stamp": "the MCP SDK 2.3.0 session validates a 2025-11-25 task-augmented tools/call "
    "result as a CallToolResult and has no unvalidated send; see mcp/_task_wire.py",
    "_dispatcher": "the same: send_raw_request, which send_request itself uses",
    "_fields": "a named tuple's documented field names (the underscore keeps them apart "
    "from its fields); tells a NamedTuple class, which can be a tool, from a plain class",
}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _defined_by_own_classes(tree: ast.Module) -> set[str]:
    """Private names a class of this module defines: methods, attributes, slots."""
    names: set[str] = set()
    for cls in (node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)):
        for node in ast.walk(cls):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _private(node.name):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name):
                        names.add(target.id)
                        if target.id == "__slots__" and node.value is not None:
                            names.update(
                                c.value
                                for c in ast.walk(node.value)
                                if isinstance(c, ast.Constant) and isinstance(c.value, str)
                            )
    return {name for name in names if _private(name)}


def _private_reads(tree: ast.Module) -> list[tuple[int, str]]:
    """``obj._name`` (not on ``self``, ``cls`` or ``super()``) and ``getattr(obj, "_name")``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            base = node.value
            if isinstance(base, ast.Name) and base.id in ("self", "cls"):
                continue
            if isinstance(base, ast.Call) and getattr(base.func, "id", None) == "super":
                continue
            found.append((node.lineno, node.attr))
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", None) in ("getattr", "setattr", "hasattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _private(node.args[1].value)
        ):
            found.append((node.lineno, node.args[1].value))
    return found


def test_no_module_reads_private_attributes_of_another_modules_class() -> None:
    reads = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        own = _defined_by_own_classes(tree)
        reads += [
            f"{path.relative_to(ROOT)}:{line}: {name}"
            for line, name in _private_reads(tree)
            if name not in own and name not in ALLOWED
        ]
    assert reads == []


def test_the_check_finds_a_hook_found_with_getattr() -> None:
    tree = ast.parse(
        "class A:\n    def _mine(self): ...\n"
        "def f(tool, a):\n    getattr(tool, '_quiet', False)\n    a._mine()\n    tool._other\n"
    )
    own = _defined_by_own_classes(tree)
    assert [(n, name) for n, name in _private_reads(tree) if name not in own] == [
        (4, "_quiet"),
        (6, "_other"),
    ]


def test_the_architecture_page_draws_the_current_layers() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "architecture.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_a_tool_call_goes_down_the_layers_and_back_without_reentering_a_module() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "call_path.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "0 chain(s) break a rule" in done.stderr
    assert "_execute [" in done.stderr  # the check saw the call reach the execution


def test_the_call_path_check_sees_a_module_entered_twice_and_a_step_up() -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import call_path
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    chain = ["agcore_tools.cycle.cycle", "agcore_tools.calls._run", "agcore_tools.registry"]
    assert call_path.faults(chain) == [
        "agcore_tools.calls._run calls up into agcore_tools.registry"
    ]
    again = ["agcore_tools._execute", "agcore_tools._aio", "agcore_tools._execute"]
    assert call_path.faults(again) == [
        "agcore_tools._execute entered twice",
        "agcore_tools._aio calls up into agcore_tools._execute",
    ]
