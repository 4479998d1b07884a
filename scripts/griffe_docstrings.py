"""A griffe extension for the site's API reference (mkdocs.yml loads it).

The docstrings are Google style, written for ``help()`` and doctested, and stay the one
source of the reference; this reads them the way the site needs, without changing them:

- an ``Example:`` section is read as griffe's examples section (griffe takes only
  ``Examples:`` as one, and ``Example:`` as an admonition of prose), so its doctests
  render as code blocks;
- a Sphinx role (``:class:`ToolRegistry```, ``:meth:`~agcore_tools.LlmCycle.submit```)
  becomes a cross-reference to the reference entry when there is one, else code.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from typing import Any

import griffe

_EXAMPLE = re.compile(r"^(\s*)Example:[ \t]*$", re.M)
# :role:`target`, :role:`~a.b.target`, :role:`target()` or :role:`title <target>`, the
# target maybe broken over two lines.
_ROLE = re.compile(
    r":(?:py:)?(?:class|func|meth|mod|attr|data|exc|obj):`(~?)([^`<]+?)\s*(?:<([\w.]+)>)?`"
)


def _public_names() -> dict[str, str]:
    """Each name in the ``__all__`` of ``agcore_tools`` or of a public module under it,
    with the identifier it is documented under (the first module that exports it)."""
    import agcore_tools

    found = {name: f"agcore_tools.{name}" for name in agcore_tools.__all__}
    for info in pkgutil.walk_packages(agcore_tools.__path__, "agcore_tools."):
        if any(part.startswith("_") for part in info.name.split(".")):
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional extra that is not installed
            continue
        for name in getattr(module, "__all__", ()):
            found.setdefault(name, f"{info.name}.{name}")
    return found


class SiteDocstrings(griffe.Extension):
    """Read ``Example:`` as examples and Sphinx roles as cross-references."""

    def __init__(self) -> None:
        super().__init__()
        self._public = _public_names()

    def _identifier(self, obj: griffe.Object, target: str) -> str:
        """The identifier a role's target most likely has in the reference: a name of the
        object itself or of an enclosing class or module first, then a public name."""
        if target.startswith("agcore_tools"):
            return target
        first = target.split(".")[0]
        scope: griffe.Object | None = obj if obj.is_class or obj.is_module else obj.parent
        while scope is not None:
            member = scope.members.get(first)
            if member is not None and not member.is_alias:
                return f"{scope.path}.{target}"
            # A name a module imports and exports: where the reference documents it.
            if member is not None and first in (scope.exports or ()):
                where = self._public.get(first, f"{scope.path}.{first}")
                return f"{where}{target[len(first) :]}"
            scope = scope.parent
        if first in self._public:
            return f"{self._public[first]}{target[len(first) :]}"
        return f"{obj.package.path}.{target}"

    def _rewrite(self, obj: griffe.Object, text: str) -> str:
        def role(match: re.Match[str]) -> str:
            short, text, explicit = match.groups()
            text = re.sub(r"\s+", "", text) if explicit is None else text.strip()
            target = explicit or text.removesuffix("()")
            if explicit is not None:
                shown = text
            else:
                shown = text.rsplit(".", 1)[-1] if short else text
                if text.endswith("()") and short:
                    shown = target.rsplit(".", 1)[-1] + "()"
            identifier = self._identifier(obj, target)
            # An optional reference: a link when the entry exists, else just the code.
            return f'<autoref identifier="{identifier}" optional><code>{shown}</code></autoref>'

        return _ROLE.sub(role, _EXAMPLE.sub(r"\1Examples:", text))

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        """Once the package is loaded, when every name a role may point at is known."""
        seen: set[int] = set()

        def walk(obj: griffe.Object) -> None:
            if id(obj) in seen:
                return
            seen.add(id(obj))
            if obj.docstring is not None:
                obj.docstring.value = self._rewrite(obj, obj.docstring.value)
            for member in obj.members.values():
                if not member.is_alias:
                    walk(member)  # type: ignore[arg-type]

        walk(pkg)
