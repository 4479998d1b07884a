"""Durable tool loops on Temporal (the ``agcore-tools[temporal]`` extra).

:class:`ToolLoopWorkflow` runs :class:`~agcore_tools.LlmCycle`'s own loop with each
model request and each tool call as an activity; :class:`ToolActivities` turns a
:class:`~agcore_tools.ToolRegistry` (and an ``AsyncOpenAI`` client) into a worker's
activities; :func:`worker` starts one, and :func:`dev_server` a local Temporal server. See ``docs/guides/temporal.md``.
Without the ``temporalio`` package, the import raises
:class:`~agcore_tools.LlmConfigError` naming the extra to install.
"""

from __future__ import annotations

from ..error import LlmConfigError

try:
    from ._activities import ToolActivities
    from ._activity_options import ToolActivityOptions
    from ._devserver import dev_server
    from ._worker import sandbox_runner, worker
    from ._workflow import ToolLoopInput, ToolLoopResult, ToolLoopWorkflow
except ModuleNotFoundError as exc:
    # A user without the extra reads what to install, not a bare module name; any
    # other missing module is a broken install, reported as it is.
    if exc.name != "temporalio":
        raise
    raise LlmConfigError(
        "agcore_tools.temporal runs on the temporalio package: pip install 'agcore-tools[temporal]'"
    ) from exc

__all__ = [
    "ToolActivities",
    "ToolActivityOptions",
    "ToolLoopInput",
    "ToolLoopResult",
    "ToolLoopWorkflow",
    "dev_server",
    "sandbox_runner",
    "worker",
]
