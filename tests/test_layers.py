"""The shape of the top-level package: its imports go down the layers, with no circle.

Imports inside functions and under ``TYPE_CHECKING`` count: a circle hidden in a
function is still a circle to a reader. ``mcp/``, ``cycle/`` and ``temporal/`` sit
above every module checked here.
"""

from __future__ import annotations

import ast
import pathlib

import agcore_tools

ROOT = pathlib.Path(agcore_tools.__file__).parent
UPPER = ("agcore_tools.mcp", "agcore_tools.cycle", "agcore_tools.temporal")

# Lowest first; a module may import only from its own layer's predecessors (or its
# own package), never from a later layer.
LAYERS: list[tuple[str, ...]] = [
    (
        "agcore_tools._version",
        "agcore_tools._sdk",
        "agcore_tools._usage",
        "agcore_tools.error",
        "agcore_tools._clock",
        "agcore_tools._unicode",
        "agcore_tools._repair",
        "agcore_tools._aio",
        "agcore_tools._sync",
        "agcore_tools._cancel",
        "agcore_tools._text",
        "agcore_tools._display",
        "agcore_tools._progress",
        "agcore_tools._context",
    ),
    ("agcore_tools.schema",),
    (
        "agcore_tools.permission",
        "agcore_tools.content",
        "agcore_tools.base",
        "agcore_tools.approval",
        "agcore_tools._records",
        "agcore_tools._attachments",
    ),
    (
        "agcore_tools._generators",
        "agcore_tools._function_tool",
        "agcore_tools._search",
        "agcore_tools._budget",
        "agcore_tools._otel",
        "agcore_tools._execute",
    ),
    ("agcore_tools.calls",),
    ("agcore_tools._offer", "agcore_tools.registry"),
    ("agcore_tools.decorator", "agcore_tools._selection", "agcore_tools.testing"),
]


def _modules() -> dict[str, pathlib.Path]:
    found = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _imports(name: str, path: pathlib.Path, known: set[str]) -> set[str]:
    targets: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for alias in node.names:
                full = f"{module}.{alias.name}"
                targets.add(full if full in known else module)
        elif isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
    return {t for t in targets if t in known and t != name}


def _layer_of(name: str) -> int | None:
    for index, layer in enumerate(LAYERS):
        if any(name == m or name.startswith(m + ".") for m in layer):
            return index
    return None


def _shims() -> set[str]:
    # Old private paths kept for the loop: each only re-exports from calls/ or schema/.
    return {
        "agcore_tools._toolcalls",
        "agcore_tools._approval",
        "agcore_tools._argplan",
        "agcore_tools._strict",
    }


def test_every_top_level_module_has_a_layer() -> None:
    modules = _modules()
    top = [
        m for m in modules if m != "agcore_tools" and not m.startswith(UPPER) and m not in _shims()
    ]
    assert [m for m in top if _layer_of(m) is None] == []


def test_top_level_imports_only_go_down() -> None:
    modules = _modules()
    known = set(modules)
    upward = []
    for name, path in modules.items():
        layer = _layer_of(name)
        if layer is None:
            continue
        for target in _imports(name, path, known):
            if target.startswith(UPPER) or target == "agcore_tools" or target in _shims():
                upward.append((name, target))
                continue
            target_layer = _layer_of(target)
            if target_layer is not None and target_layer > layer:
                upward.append((name, target))
    assert upward == []


def test_leaves_import_nothing_above_them() -> None:
    modules = _modules()
    imports = _imports("agcore_tools.error", modules["agcore_tools.error"], set(modules))
    assert imports == {"agcore_tools._usage"}


def test_no_circle_among_top_level_modules() -> None:
    modules = _modules()
    known = set(modules)
    graph = {
        name: _imports(name, path, known)
        for name, path in modules.items()
        if not name.startswith(UPPER) and name != "agcore_tools"
    }
    visiting: list[str] = []
    done: set[str] = set()
    circles: list[list[str]] = []

    def visit(name: str) -> None:
        if name in done or name not in graph:
            return
        if name in visiting:
            circles.append([*visiting[visiting.index(name) :], name])
            return
        visiting.append(name)
        for target in sorted(graph[name]):
            visit(target)
        visiting.pop()
        done.add(name)

    for name in sorted(graph):
        visit(name)
    assert circles == []


def _own_names(tree: ast.Module) -> set[str]:
    # Attribute names the module's own classes define: methods, class attributes and
    # what their methods assign to self.
    names: set[str] = set()
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for node in ast.walk(cls):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                if node.value.id == "self":
                    names.add(node.attr)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
            elif isinstance(node, ast.Assign):
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def test_no_top_level_module_reads_another_modules_private_attributes() -> None:
    allowed = {"sys._getframe"}
    found = []
    for name, path in _modules().items():
        if name.startswith(UPPER):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        own = _own_names(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute):
                continue
            attr = node.attr
            if not attr.startswith("_") or attr.startswith("__") or attr in own:
                continue
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            if ast.unparse(node) not in allowed:
                found.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr", "setattr")
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and str(node.args[1].value).startswith("_")
                and not str(node.args[1].value).startswith("__")
            ):
                found.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
    assert found == []
