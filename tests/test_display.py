from __future__ import annotations

from agcore_tools import ToolContext, ToolError, ToolInvocation, ToolRegistry
from agcore_tools._display import html_table, markdown_table, short


def test_cells_are_escaped_and_bounded() -> None:
    table = markdown_table(["a"], [["x|y\nz"], ["w" * 500]])
    assert "x\\|y z" in table
    assert max(len(line) for line in table.splitlines()) < 140
    assert "&lt;b&gt;" in html_table(["h"], [["<b>"]])
    assert short({"k": "中文"}) == '{"k": "中文"}'


async def test_registry_and_invocation_render_for_notebooks() -> None:
    registry = ToolRegistry()

    @registry.tool(permissions=["read"], tags=["fs"], category="files")
    def read(path: str) -> str:
        """Read a file."""
        return "content"

    await registry.invoke("read", {"path": "/x"}, ToolContext(call_id="c9"))
    md = registry._repr_markdown_()
    assert "| name | description | permissions | tags | category | calls | failures |" in md
    assert "| read | Read a file. | read | fs | files | 1 | 0 |" in md
    assert "<td>read</td>" in registry._repr_html_()

    inv = await registry.invoke("read", {"path": "/x"})
    assert "| output | content |" in inv._repr_markdown_()
    failed = ToolInvocation("read", {}, error=ToolError("disk on fire"))
    assert "failed" in failed._repr_markdown_() and "disk on fire" in failed._repr_html_()
