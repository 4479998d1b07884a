"""The floor of a Temporal tool loop: a workflow that schedules the same activities as
``ToolLoopWorkflow`` (a describe, then per turn one model request and the turn's tool
calls in parallel; the describe is a local activity, as there) with payloads of a few bytes and activities that do nothing. What it
costs is Temporal's own: server round trips, history events, the SDK's worker."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import activity, workflow

_TIMEOUT = timedelta(seconds=60)


@activity.defn(name="floor.noop")
async def noop(value: str) -> str:
    """Do nothing."""
    return value


@workflow.defn(name="floor.Loop")
class FloorWorkflow:
    """``turns`` model requests; the first ``turns - 1`` followed by ``calls`` parallel
    tool calls each."""

    @workflow.run
    async def run(self, turns: int, calls: int) -> int:
        """Schedule the activities; return how many ran."""
        ran = 1
        await workflow.execute_local_activity(noop, "describe", start_to_close_timeout=_TIMEOUT)
        for turn in range(turns):
            await workflow.execute_activity(noop, "model", start_to_close_timeout=_TIMEOUT)
            ran += 1
            if turn < turns - 1:
                await asyncio.gather(
                    *(
                        workflow.execute_activity(noop, "tool", start_to_close_timeout=_TIMEOUT)
                        for _ in range(calls)
                    )
                )
                ran += calls
        return ran
