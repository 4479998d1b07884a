"""examples/quickstart.ipynb runs top to bottom in a Jupyter kernel on this venv's Python."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "examples" / "quickstart.ipynb"

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
kernelspec = pytest.importorskip("jupyter_client.kernelspec")
manager = pytest.importorskip("jupyter_client.manager")


def test_the_notebook_is_stored_without_outputs() -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    assert code
    assert all(cell.outputs == [] and cell.execution_count is None for cell in code)


def _venv_kernel(directory: Path) -> Any:
    """A kernel manager whose kernel is this interpreter, whatever kernels the machine has."""
    spec_dir = directory / "agcore-venv"
    spec_dir.mkdir()
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    spec = {"argv": argv, "display_name": "agcore_tools venv", "language": "python"}
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    specs = kernelspec.KernelSpecManager(kernel_dirs=[str(directory)], ensure_native_kernel=False)
    return manager.AsyncKernelManager(kernel_name="agcore-venv", kernel_spec_manager=specs)


def _text(cell: Any, mime: str = "text/plain") -> str:
    parts = []
    for output in cell.outputs:
        if output.output_type == "stream":
            parts.append(output.text)
        elif output.output_type in ("execute_result", "display_data"):
            parts.append(output.data.get(mime, ""))
    return "".join(parts)


@pytest.mark.timeout(90)
def test_the_quickstart_notebook_runs_top_to_bottom(tmp_path: Path) -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("import sys; print(sys.executable)"))
    client = nbclient.NotebookClient(
        nb,
        km=_venv_kernel(tmp_path),
        timeout=60,
        startup_timeout=60,
        resources={"metadata": {"path": str(NOTEBOOK.parent)}},
    )
    client.execute()  # raises CellExecutionError on the first failing cell

    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    assert _text(code[-1]).strip() == sys.executable
    by_source = {cell.source.split("\n")[-1]: cell for cell in code}
    # The registry shows as a table (Markdown for notebooks, HTML as well).
    registry = by_source["registry"]
    table = _text(registry, "text/markdown")
    assert "| get_weather |" in table and "network" in table and "| average |" in table
    assert "<table>" in _text(registry, "text/html")
    # An invocation, and an invalid one whose error names the field.
    ok = _text(by_source['await registry.invoke("get_weather", {"city": "Lima"})'], "text/markdown")
    assert "19.5" in ok
    bad = by_source[
        'await registry.invoke("average", {"values": []})  # invalid: the error names the field'
    ]
    assert "(failed)" in _text(bad, "text/markdown")
    assert "invalid arguments: values: List should have at least 1 item" in _text(
        bad, "text/markdown"
    )
    # The loop ran both tools and answered.
    answer = _text(by_source["response"], "text/markdown")
    assert "21.25 °C on average" in answer
    assert "get_weather" in answer and "average" in answer
    streamed = _text(next(cell for cell in code if "async for" in cell.source))
    assert streamed.splitlines() == [
        "  [turn 1: tool_calls]",
        "-> get_weather({'city': 'Lima'})",
        '<- get_weather: {"city":"Lima","celsius":19.5}',
        "Lima is at 19.5 °C right now.  [turn 2: stop]",
    ]
    # The transcript: every message of both calls.
    transcript = _text(by_source["cycle"], "text/markdown")
    assert "How warm is it in Lima" in transcript and "And Lima alone?" in transcript
    assert transcript.count("| tool |") == 4
    # Stats in the registry's table after the loop.
    after = _text(by_source["registry  # the calls and failures are counted"], "text/markdown")
    assert (
        "| get_weather | The current temperature in a city, in degrees Celsius. | network | weather | - | 4 | 0 |"
        in after
    )
    assert "| average | The arithmetic mean of some numbers. | - | - | math | 2 | 1 |" in after
