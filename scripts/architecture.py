"""Draw the layer diagram of docs/architecture.md from the import-linter contract.

The contract in pyproject.toml (``[tool.importlinter]``, the ``layers`` contract) is the
source of truth for the layers; the edges come from the real import graph, built by
grimp (import-linter's own graph builder), with imports inside functions and under
``TYPE_CHECKING`` counted. So the picture cannot drift from the code: ``--check``, run by
the test suite, fails when the committed diagram differs from a fresh one.

    python scripts/architecture.py          # rewrite the diagram in docs/architecture.md
    python scripts/architecture.py --check  # exit 1 if it is out of date
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pytest brings tomli on 3.10
    import tomli as tomllib

import grimp

logger = logging.getLogger("architecture")

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
BEGIN, END = "<!-- layers:begin (scripts/architecture.py) -->", "<!-- layers:end -->"


def _layers() -> tuple[str, list[list[str]]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    contract = next(c for c in config["contracts"] if c["type"] == "layers")
    container = contract["containers"][0]
    rows = [re.split(r"\s*[|:]\s*", layer.strip("() ")) for layer in contract["layers"]]
    return container, rows


def _module_of(name: str, container: str, modules: set[str]) -> str | None:
    """The contract's module (``registry``, ``mcp``) that ``name`` belongs to."""
    rest = name.removeprefix(container + ".")
    while rest:
        if rest in modules:
            return rest
        rest = rest.rpartition(".")[0]
    return None


def diagram() -> str:
    """The Mermaid diagram: one box per layer, top first, and the imports between them."""
    container, rows = _layers()
    modules = {module for row in rows for module in row}
    layer_of = {module: i for i, row in enumerate(rows) for module in row}
    graph = grimp.build_graph(container.split(".")[0], cache_dir=None)
    edges: set[tuple[str, str]] = set()
    for importer in graph.modules:
        source = _module_of(importer, container, modules)
        if source is None:
            continue
        for imported in graph.find_modules_directly_imported_by(importer):
            target = _module_of(imported, container, modules)
            if target is not None and target != source and layer_of[source] != layer_of[target]:
                edges.add((source, target))
    ident = {module: "m_" + module.replace(".", "_") for module in modules}
    lines = ["```mermaid", "flowchart TB"]
    for i, row in enumerate(rows):
        lines.append(f'  subgraph L{i}["layer {len(rows) - i}"]')
        lines.extend(f'    {ident[m]}["{m}"]' for m in row)
        lines.append("  end")
    lines.extend(f"  {ident[a]} --> {ident[b]}" for a, b in sorted(edges))
    lines.append("```")
    return "\n".join(lines)


def _replaced(text: str, block: str) -> str:
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return f"{text[:start]}\n{block}\n{text[end:]}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the doc is stale")
    args = parser.parse_args()
    text = DOC.read_text(encoding="utf-8")
    fresh = _replaced(text, diagram())
    if args.check:
        if fresh != text:
            logger.error("docs/architecture.md is out of date: run scripts/architecture.py")
            return 1
        return 0
    DOC.write_text(fresh, encoding="utf-8")
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    sys.exit(main())
