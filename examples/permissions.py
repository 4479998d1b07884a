"""A permission policy blocks a destructive tool, and you get a structured error.

Run it with ``python examples/permissions.py``. The registry's checker uses the
default policy (``read`` and ``network`` allowed, ``delete`` and ``shell`` denied).
``delete_file`` declares ``delete``, so it never runs:

1. called directly, ``registry.invoke`` raises ``PermissionDeniedError``;
2. called by the model, the loop stops with an ``LlmError`` whose ``__cause__`` is
   that error, and the history stays valid for the API (the call got an error result).
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from _offline import model_client

from agcore_tools import (
    CycleConfig,
    LlmCycle,
    LlmError,
    PermissionChecker,
    PermissionConfig,
    PermissionDeniedError,
    ToolRegistry,
)
from agcore_tools.testing import ScriptedChatServer, ScriptItem


def build_registry(folder: Path) -> ToolRegistry:
    """Two tools on ``folder``, behind the default permission policy."""
    registry = ToolRegistry(PermissionChecker(PermissionConfig()))

    @registry.tool(permissions=["read"])
    def list_files() -> list[str]:
        """List the files in the working folder."""
        return sorted(path.name for path in folder.iterdir())

    @registry.tool(permissions=["delete"])
    def delete_file(name: str) -> str:
        """Delete a file from the working folder."""
        (folder / name).unlink()
        return f"deleted {name}"

    return registry


def offline_script() -> list[ScriptItem]:
    """The model lists the folder, then tries to delete the report."""
    reply = ScriptedChatServer
    return [
        reply.reply_tool_calls([("list_files", {})]),
        reply.reply_tool_calls([("delete_file", {"name": "report.txt"})]),
    ]


async def main() -> None:
    async with model_client("permissions", offline_script()) as (client, model):
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            (folder / "report.txt").write_text("Q3 figures\n")
            registry = build_registry(folder)

            # 1. Directly: the checker refuses before the function is called.
            try:
                await registry.invoke("delete_file", {"name": "report.txt"})
            except PermissionDeniedError as error:
                print(f"invoke raised PermissionDeniedError: {error}")
                print(f"  tool_name={error.tool_name!r} permission={error.permission!r}")
                print(f"  recoverable={error.is_recoverable()}")

            # 2. In the loop: the model asks for it; the loop stops instead of running it.
            cycle = LlmCycle(CycleConfig(model), client=client)
            try:
                response = await cycle.submit_with_tools("Clean up: delete the report.", registry)
            except LlmError as error:
                print(f"submit_with_tools raised LlmError: {error}")
                print(f"  __cause__: {error.__cause__!r}")
                print(f"  the model's tool result: {cycle.messages[-1]['content']}")
            else:  # a real model may decide not to try
                print(f"assistant> {response.text}")
            print(f"report.txt still exists: {(folder / 'report.txt').exists()}")


if __name__ == "__main__":
    asyncio.run(main())
