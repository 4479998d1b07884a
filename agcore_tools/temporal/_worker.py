"""Starting a worker: the workflow, the activities, and a sandbox that lets the
package's own modules through."""

from __future__ import annotations

from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from ._activities import ToolActivities
from ._workflow import ToolLoopWorkflow

__all__ = ["sandbox_runner", "worker"]

# Imported once per process, not once per run: these modules keep no state a run could
# leak into another, and the workflow code in them reads no clock (see _clock.py).
_PASSTHROUGH = ("agcore_tools", "pydantic", "pydantic_core", "annotated_types", "typing_inspection")


def sandbox_runner() -> SandboxedWorkflowRunner:
    """Temporal's workflow sandbox, with agcore_tools and pydantic passed through.

    Example:
        >>> type(sandbox_runner()).__name__
        'SandboxedWorkflowRunner'
    """
    restrictions = SandboxRestrictions.default.with_passthrough_modules(*_PASSTHROUGH)
    return SandboxedWorkflowRunner(restrictions=restrictions)


def worker(
    client: Client,
    task_queue: str,
    activities: ToolActivities,
    *,
    workflows: bool = True,
    **options: Any,
) -> Worker:
    """A ``temporalio.worker.Worker`` for ``task_queue`` that runs ``activities`` and
    (unless ``workflows=False``, for a tools-only queue) :class:`ToolLoopWorkflow`.

    ``options`` go to ``Worker`` as they are (``max_concurrent_activities``,
    ``identity``, ...). Run it with ``async with`` or ``await worker.run()``.

    Example:
        >>> async def main(client, registry, openai_client):  # doctest: +SKIP
        ...     activities = ToolActivities(registry, openai_client)
        ...     async with worker(client, "agents", activities):
        ...         await asyncio.Event().wait()  # serve until cancelled
    """
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[ToolLoopWorkflow] if workflows else [],
        activities=activities.activities(),
        workflow_runner=sandbox_runner(),
        **options,
    )
