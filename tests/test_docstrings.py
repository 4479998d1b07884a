"""Every public name is documented with an example (issue 5's "done when").

Public names are the ``__all__`` of ``agcore_tools`` and of its public subpackages
``agcore_tools.cycle``, ``agcore_tools.mcp``, ``agcore_tools.redis``,
``agcore_tools.temporal`` and ``agcore_tools.testing``. For each:

- a class or function has a docstring with an ``Example:`` section, written as a
  doctest (``>>>``), which ``pytest --doctest-modules`` runs;
- each public method and property a class defines in this package (inherited ones
  included) has a docstring, and is shown in an example: its own, or one in its class's
  or module's docstring that uses it;
- a type alias or constant has an attribute docstring (a string right after it).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import itertools
import pkgutil
import re
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import agcore_tools
import agcore_tools.cycle
import agcore_tools.mcp
import agcore_tools.redis
import agcore_tools.temporal
import agcore_tools.testing

PUBLIC_MODULES = (
    agcore_tools,
    agcore_tools.cycle,
    agcore_tools.mcp,
    agcore_tools.redis,
    agcore_tools.temporal,
    agcore_tools.testing,
)


def public_names() -> dict[str, Any]:
    """Every exported object once, under its first qualified public name."""
    found: dict[str, Any] = {}
    ids: set[int] = set()
    for module in PUBLIC_MODULES:
        for name in module.__all__:
            obj = getattr(module, name)
            if id(obj) in ids or name == "__version__":
                continue
            ids.add(id(obj))
            found[f"{module.__name__}.{name}"] = obj
    return found


PUBLIC = public_names()
CALLABLES = {
    n: o
    for n, o in PUBLIC.items()
    # get_origin: on Python 3.10, inspect.isclass() is also True for aliases like list[int].
    if (inspect.isclass(o) or inspect.isfunction(o)) and typing.get_origin(o) is None
}
ALIASES = {n: o for n, o in PUBLIC.items() if n not in CALLABLES}


def example_section(doc: str | None) -> str:
    """The text from the first ``Example`` heading on ("" when there is none)."""
    doc = doc or ""
    start = doc.find("Example")
    return doc[start:] if start >= 0 else ""


def members(cls: type) -> Iterator[tuple[type, str, Any]]:
    """Public methods and properties of ``cls`` defined in this package, with their owner."""
    seen: set[str] = set()
    for owner in cls.__mro__:
        if not owner.__module__.startswith("agcore_tools"):
            continue
        for attr, value in vars(owner).items():
            if attr.startswith("_") or attr in seen:
                continue
            if isinstance(value, (staticmethod, classmethod)):
                value = value.__func__
            if isinstance(value, property) or inspect.isfunction(value):
                seen.add(attr)
                yield owner, attr, value


def test_the_walk_sees_the_whole_api() -> None:
    # A guard against a silently empty walk.
    assert {"agcore_tools.LlmCycle", "agcore_tools.testing.ScriptedChatServer"} <= set(PUBLIC)
    assert len(CALLABLES) > 50
    assert sum(1 for cls in CALLABLES.values() if inspect.isclass(cls) for _ in members(cls)) > 100


@pytest.mark.parametrize("name", sorted(CALLABLES))
def test_class_or_function_has_a_doctest_example(name: str) -> None:
    obj = CALLABLES[name]
    doc = inspect.getdoc(obj) if inspect.isfunction(obj) else obj.__doc__
    assert doc and doc.strip(), f"{name} has no docstring"
    example = example_section(doc)
    assert example, f"{name}'s docstring has no 'Example:' section"
    assert ">>>" in example, f"{name}'s example is not a doctest"


@pytest.mark.parametrize("name", sorted(n for n, o in CALLABLES.items() if inspect.isclass(o)))
def test_public_members_are_documented_and_exemplified(name: str) -> None:
    cls = CALLABLES[name]
    undocumented, unexemplified = [], []
    for owner, attr, value in members(cls):
        doc = value.__doc__ or ""
        if not doc.strip():
            undocumented.append(attr)
            continue
        if "Example" in doc:
            continue
        # Shown in an example of the class (or a subclass's), or of its module; for a
        # member of a mixin, of the class between that uses it (McpClient's, for the
        # testing kit's subclass of it).
        between = [base.__doc__ for base in cls.__mro__[1:] if owner in base.__mro__]
        context = "".join(
            example_section(text)
            for text in (
                cls.__doc__,
                owner.__doc__,
                *between,
                inspect.getmodule(owner).__doc__,
                inspect.getmodule(cls).__doc__,
            )
        )
        if not re.search(rf"[.\s]{re.escape(attr)}\b", context):
            unexemplified.append(attr)
    assert not undocumented, f"{name}: no docstring on {undocumented}"
    assert not unexemplified, f"{name}: no example shows {unexemplified}"


def documented_module_names() -> set[str]:
    """Module-level names in the package followed by an attribute docstring."""
    names: set[str] = set()
    root = Path(agcore_tools.__file__).parent
    modules = ["agcore_tools"] + [
        m.name for m in pkgutil.walk_packages([str(root)], prefix="agcore_tools.")
    ]
    for module_name in modules:
        source = inspect.getsource(importlib.import_module(module_name))
        body = ast.parse(source).body
        for node, after in itertools.pairwise(body):
            is_doc = (
                isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            )
            if is_doc and isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def test_type_aliases_have_attribute_docstrings() -> None:
    assert ALIASES, "expected a few exported type aliases (StreamEvent, ScriptItem, ...)"
    documented = documented_module_names()
    missing = [name for name in ALIASES if name.rsplit(".", 1)[1] not in documented]
    assert not missing, f"no attribute docstring after {missing}"
