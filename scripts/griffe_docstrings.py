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

import re
from typing import Any

import griffe

_EXAMPLE = re.compile(r"^(\s*)Example:[ \t]*$", re.M)
# :role:`target`, :role:`~a.b.target`, :role:`target()` or :role:`title <target>`, the
# target maybe broken over two lines.
_ROLE = re.compile(
    r":(?:py:)?(?:class|func|meth|mod|attr|data|exc|obj):`(~?)([^`<]+?)\s*(?:<([\w.]+)>)?`"
)


def _public_top_level() -> set[str]:
    import agcore_tools

    return set(agcore_tools.__all__)


class SiteDocstrings(griffe.Extension):
    """Read ``Example:`` as examples and Sphinx roles as cross-references."""

    def __init__(self) -> None:
        super().__init__()
        self._top = _public_top_level()

    def _identifier(self, obj: griffe.Object, target: str) -> str:
        """The identifier a role's target most likely has in the reference."""
        if target.startswith("agcore_tools"):
            return target
        if target.split(".")[0] in self._top:
            return f"agcore_tools.{target}"
        package = obj.package.path if obj.package else "agcore_tools"
        return f"{package}.{target}"

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

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = self._rewrite(obj, obj.docstring.value)
