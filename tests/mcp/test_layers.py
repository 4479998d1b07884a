"""The shape of ``agcore_tools/mcp``: its modules import each other without a cycle (imports
inside functions and under ``TYPE_CHECKING`` counted), no helper imports ``client``,
none imports the package's ``__init__``, and none reads a private attribute of another
object."""

from __future__ import annotations

import ast
from pathlib import Path

import agcore_tools.mcp

MCP = Path(agcore_tools.mcp.__file__).parent
PACKAGE = "agcore_tools.mcp"
CLIENT_USERS = {"__init__", "config"}
"""The modules above the façade: the package's exports and the config loader."""
PRIVATE_READS = {("_adapter", "ctx", "_events")}
"""Known reads of another object's private attribute: ToolContext has no public way yet
to ask whether anyone listens to a call's progress."""


def _modules() -> dict[str, ast.Module]:
    return {path.stem: ast.parse(path.read_text()) for path in sorted(MCP.glob("*.py"))}


def _imports(name: str, tree: ast.Module) -> set[str]:
    """Every module of ``agcore_tools`` that ``name`` imports, wherever the import sits."""
    found: set[str] = set()
    here = f"{PACKAGE}.{name}".split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("agcore_tools"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(here[: len(here) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            if not module.startswith("agcore_tools"):
                continue
            for alias in node.names:  # from . import _prompts names a module, not the package
                found.add(f"{module}.{alias.name}" if _is_module(module, alias.name) else module)
    return found


def _is_module(package: str, name: str) -> bool:
    folder = MCP.parent.joinpath(*package.split(".")[1:])
    return (folder / f"{name}.py").exists() or (folder / name / "__init__.py").exists()


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    names = {f"{PACKAGE}.{m}" for m in modules if m != "__init__"}
    return {
        f"{PACKAGE}.{m}": _imports(m, tree) & names
        for m, tree in modules.items()
        if m != "__init__"
    }


def test_the_mcp_modules_import_each_other_without_a_cycle() -> None:
    graph = _graph()
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> None:
        if node in path:
            cycle = [*path[path.index(node) :], node]
            raise AssertionError("import cycle: " + " -> ".join(cycle))
        if node in done:
            return
        for target in sorted(graph[node]):
            visit(target, [*path, node])
        done.add(node)

    for module in sorted(graph):
        visit(module, [])


def test_only_the_package_exports_and_the_config_loader_import_the_client() -> None:
    users = {
        m
        for m, tree in _modules().items()
        if f"{PACKAGE}.client" in _imports(m, tree) and m != "client"
    }
    assert users <= CLIENT_USERS


def test_no_mcp_module_imports_the_package_init() -> None:
    importers = {m for m, tree in _modules().items() if "agcore_tools" in _imports(m, tree)}
    assert importers == set()


def test_no_mcp_module_reads_another_objects_private_attributes() -> None:
    reads: set[tuple[str, str, str]] = set()
    for name, tree in _modules().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                private = node.attr.startswith("_") and not node.attr.startswith("__")
                owner = ast.unparse(node.value)
                if private and owner not in ("self", "cls"):
                    reads.add((name, owner, node.attr))
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "setattr", "hasattr")
                and len(node.args) > 1
                and isinstance(node.args[1], ast.Constant)
                and str(node.args[1].value).startswith("_")
            ):
                reads.add((name, ast.unparse(node.args[0]), str(node.args[1].value)))
    assert reads <= PRIVATE_READS
