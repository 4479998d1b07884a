"""The notebook guide (docs/guides/notebooks.md) runs as a notebook.

Its ```python notebook blocks are the cells of one session: they run in order in a
Jupyter kernel on this venv's Python, top-level ``await`` and rich displays included.
The guides' plain ```python blocks run as scripts in test_docs_snippets.py.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from .test_notebook import _venv_kernel

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "guides" / "notebooks.md"

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

_CELL = re.compile(r"^```python notebook\n(.*?)^```$", re.DOTALL | re.MULTILINE)


def _outputs(cell: Any, mime: str) -> str:
    parts = []
    for output in cell.outputs:
        if output.output_type == "stream" and mime == "text/plain":
            parts.append(output.text)
        elif output.output_type in ("execute_result", "display_data"):
            parts.append(output.data.get(mime, ""))
    return "".join(parts)


@pytest.mark.timeout(120)
def test_the_notebook_guide_runs_as_a_notebook(tmp_path: Path) -> None:
    sources = [code.rstrip("\n") for code in _CELL.findall(GUIDE.read_text(encoding="utf-8"))]
    assert len(sources) >= 6
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    client = nbclient.NotebookClient(
        nb,
        km=_venv_kernel(tmp_path),
        timeout=60,
        startup_timeout=60,
        resources={"metadata": {"path": str(ROOT)}},
    )
    client.execute()  # raises CellExecutionError on the first failing cell

    cells = {cell.source.splitlines()[-1]: cell for cell in nb.cells}
    # Top-level await, and the invocation's display.
    invocation = _outputs(cells['await registry.invoke("add", {"a": 2, "b": 3})'], "text/markdown")
    assert "**ToolInvocation** (ok)" in invocation and "| output | 5 |" in invocation
    # The response of the loop.
    response = cells["response"]
    answer = _outputs(response, "text/markdown")
    assert "> 2 + 3 = **5**." in answer and "| stop reason | stop |" in answer
    assert '| add | {"a": 2, "b": 3} | 5 |' in answer
    assert "<strong>ChatResponse</strong>" in _outputs(response, "text/html")
    # The transcript.
    transcript = _outputs(cells["cycle"], "text/markdown")
    assert "| 0 | user | What is 2 + 3? |" in transcript
    assert '→ add({"a": 2, "b": 3}) [call_0]' in transcript
    assert "| 2 | tool | add [call_0] → 5 |" in transcript
    # A sync entry point in a cell (the kernel's loop is running) ran on the library's loop.
    assert (
        _outputs(cells['registry.invoke_sync("add", {"a": 4, "b": 5}).output'], "text/plain") == "9"
    )
    # The registry counted the three calls (the awaited one, the sync one and the model's).
    table = _outputs(cells["registry"], "text/markdown")
    assert "| add | Add two integers. | - | math | - | 3 | 0 |" in table
    # A re-run cell replaced the tool; a different function under its name was refused.
    redefined = _outputs(cells['registry.get("add").description'], "text/plain")
    assert redefined == "'Add two integers and return their sum.'"
    refused = _outputs(next(c for c in nb.cells if "def plus" in c.source), "text/plain")
    assert refused.strip() == (
        "cannot register tool 'add': a tool of that name is already registered "
        "(<FunctionTool 'add'>); unregister it first or choose another name"
    )
    # A factory's tools: a later cell replaces, the same cell collides.
    assert _outputs(cells['registry.get("lookup") is first'], "text/plain") == "True"
    replaced = cells['registry.get("lookup") is second, registry.get("lookup")("colour")']
    assert _outputs(replaced, "text/plain") == "(True, 'blue')"
    collided = _outputs(cells['registry.get("lookup")("colour")'], "text/plain")
    assert collided == "ToolConfigError True\n'green'"
    # The scoped registry took the bare @tool; the notebook's main registry did not.
    scoped = _outputs(cells['experiment.list_tools(), "shout" in registry'], "text/plain")
    assert scoped == "(['shout'], False)"
