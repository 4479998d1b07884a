"""mkdocs hooks for the documentation site (mkdocs.yml, ``make docs``).

- The API reference is generated, never written by hand: one page per public name, from
  the ``__all__`` of ``agcore_tools`` and of its public subpackages, each page a
  ``::: identifier`` stub that mkdocstrings fills from the docstrings. A name added to an
  ``__all__`` gets its page and its place in the navigation with no edit here.
- A page whose whole text is ``--8<-- "FILE"`` shows a file of the repository root
  (README.md as the home page, CHANGELOG.md as the changelog), its links rebased.
- A link to a file that is not a page of the site (a script, a test, a document kept out
  of the site) becomes a link to the file in the repository when ``repo_url`` is set,
  else its plain text; a link to a file that does not exist is a warning, which
  ``mkdocs build --strict`` turns into a failure.
- The fence options the snippet tests read (```` ```python no-run ````) are dropped, so
  the blocks highlight as Python.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

log = logging.getLogger("mkdocs.hooks.agcore")

ROOT = Path(__file__).resolve().parents[1]

# The public modules, in the reference's order. A subpackage is listed when it exists,
# so one added later (agcore_tools.redis) shows up by being added here once.
PUBLIC_MODULES = [
    "agcore_tools",
    "agcore_tools.cycle",
    "agcore_tools.mcp",
    "agcore_tools.temporal",
    "agcore_tools.testing",
    "agcore_tools.policies",
    "agcore_tools.approval",
    "agcore_tools.pending",
    "agcore_tools.content",
    "agcore_tools.permission",
    "agcore_tools.redis",
]

_INCLUDE = re.compile(r'\A\s*--8<--\s+"([^"]+)"\s*\Z')
_LINK = re.compile(r"(!?\[(?:[^\]\[]|\[[^\]]*\])*\])\(([^)\s]+)\)")
_FENCE_OPTIONS = re.compile(
    r"^(\s*(?:`{3,}|~{3,})python)[ \t]+(?:run|no-run|notebook)[ \t]*$", re.M
)


def _modules() -> list[Any]:
    found = []
    for name in PUBLIC_MODULES:
        try:
            found.append(importlib.import_module(name))
        except ModuleNotFoundError as error:
            if error.name != name:  # the module exists but fails to import
                raise
    return found


def _mixed_in(obj: Any) -> list[str]:
    """The public members a class gets from mixins in private modules of the package
    (``McpClient``'s tool and sync methods, ``ToolRegistry``'s sync ones): its own by
    design, so shown on its page, where mkdocstrings shows no inherited member."""
    if not inspect.isclass(obj):
        return []
    names: list[str] = []
    for base in obj.__mro__[1:]:
        parts = base.__module__.split(".")
        if parts[0] == "agcore_tools" and any(part.startswith("_") for part in parts[1:]):
            names += [n for n in vars(base) if not n.startswith("_") and n not in names]
    return names


def _reference() -> tuple[dict[str, str], list[Any]]:
    """The generated pages (path -> Markdown) and their navigation."""
    pages: dict[str, str] = {}
    nav: list[Any] = [{"Overview": "reference/index.md"}]
    documented: dict[int, str] = {}  # id(object) -> the identifier it is documented under
    index = [
        "# API reference\n",
        "Every public name of `agcore_tools` and of its public subpackages, generated from "
        "the docstrings. Each example is a doctest the test suite runs.\n",
    ]
    for module in _modules():
        name = module.__name__
        folder = f"reference/{name}"
        section: list[Any] = [{"Module": f"{folder}/index.md"}]
        listing = []
        for public in module.__all__:
            if public.startswith("__"):
                continue
            obj = getattr(module, public)
            identifier = f"{name}.{public}"
            first = documented.get(id(obj))
            if first is not None:
                listing.append(f"- [`{public}`][{first}] (documented as `{first}`)")
                continue
            documented[id(obj)] = identifier
            page = f"{folder}/{public}.md"
            pages[page] = f"::: {identifier}\n"
            mixed_in = _mixed_in(obj)
            if mixed_in:
                pages[page] += f"    options:\n      inherited_members: [{', '.join(mixed_in)}]\n"
            section.append({public: page})
            listing.append(f"- [`{public}`][{identifier}]")
        pages[f"{folder}/index.md"] = (
            f"# `{name}`\n\n::: {name}\n    options:\n      members: false\n"
            "      show_root_heading: false\n\n"
            "## Public names\n\n" + "\n".join(listing) + "\n"
        )
        nav.append({name: section})
        index.append(f"- [`{name}`]({name}/index.md)")
    pages["reference/index.md"] = "\n".join(index) + "\n"
    return pages, nav


_PAGES: dict[str, str] = {}


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    pages, nav = _reference()
    _PAGES.clear()
    _PAGES.update(pages)
    config.nav = [*(config.nav or []), {"API reference": nav}]
    return config


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for path, text in _PAGES.items():
        files.append(File.generated(config, path, content=text))
    return files


def _rebase(markdown: str, source: Path, page: Page, files: Files, config: MkDocsConfig) -> str:
    """Links of ``source`` (a file of the repository), as seen from ``page``."""
    docs = Path(config.docs_dir).resolve()
    here = (docs / page.file.src_uri).parent
    repo_url = (config.repo_url or "").rstrip("/")

    def replace(match: re.Match[str]) -> str:
        label, target = match.groups()
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            return match.group(0)
        path, _, anchor = target.partition("#")
        resolved = (source.parent / path).resolve()
        if not resolved.exists():
            log.warning("%s links to %s, which does not exist", page.file.src_uri, target)
            return match.group(0)
        if resolved.is_relative_to(docs):
            uri = resolved.relative_to(docs).as_posix()
            file = files.get_file_from_path(uri)
            if file is not None and file.inclusion.is_included():
                relative = posixpath.relpath(str(resolved), str(here))
                return f"{label}({relative}{'#' + anchor if anchor else ''})"
        # Not a page of the site: the file in the repository, or the label alone.
        in_repo = resolved.relative_to(ROOT).as_posix()
        if repo_url:
            kind = "tree" if resolved.is_dir() else "blob"
            return f"{label}({repo_url}/{kind}/main/{in_repo}{'#' + anchor if anchor else ''})"
        return label[1:-1] if not label.startswith("!") else match.group(0)

    return _LINK.sub(replace, markdown)


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    if page.file.src_uri.startswith("reference/"):
        return markdown
    source = Path(config.docs_dir).resolve() / page.file.src_uri
    include = _INCLUDE.match(markdown)
    if include:
        source = (ROOT / include[1]).resolve()
        markdown = source.read_text(encoding="utf-8")
    markdown = _FENCE_OPTIONS.sub(r"\1", markdown)
    return _rebase(markdown, source, page, files, config)
