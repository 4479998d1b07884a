"""Determinism: Temporal's replayer runs recorded histories through the workflow code
again, inside a sandbox that lets no agcore_tools module through, so a clock read, a
random number or I/O in the loop's code fails the replay."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest

pytest.importorskip("temporalio")

from temporalio.client import Client, WorkflowHistory
from temporalio.worker import Replayer
from temporalio.worker.workflow_sandbox import (
    SandboxedWorkflowRunner,
    SandboxRestrictions,
)

from agcore_tools import CodeMode, CycleConfig
from agcore_tools.temporal import ToolLoopInput, ToolLoopWorkflow

from .conftest import WorkerProcess

RECORDED = Path(__file__).resolve().parent / "histories"
TIMEOUT = 60.0


def strict_replayer() -> Replayer:
    # Only pydantic passes through; agcore_tools loads anew under the restrictions.
    restrictions = SandboxRestrictions.default.with_passthrough_modules("pydantic", "pydantic_core")
    runner = SandboxedWorkflowRunner(restrictions=restrictions)
    return Replayer(workflows=[ToolLoopWorkflow], workflow_runner=runner)


async def test_recorded_histories_replay() -> None:
    files = sorted(RECORDED.glob("*.json"))
    assert [f.name for f in files] == ["add.json", "dump.json", "remove.json"]
    histories = [WorkflowHistory.from_json(f.stem, f.read_text()) for f in files]
    replayer = strict_replayer()
    for history in histories:
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        assert result.replay_failure is None, history.workflow_id


async def test_fresh_runs_replay(client: Client, spawn: Callable[..., WorkerProcess]) -> None:
    spawn("replay", "w1")
    config = CycleConfig("m")
    handles = []
    for prompt in ("add", "dump", "program", "remove"):
        code_mode = CodeMode() if prompt == "program" else None  # issue 27
        handle = await client.start_workflow(
            ToolLoopWorkflow.run,
            ToolLoopInput.of(prompt, config, code_mode=code_mode),
            id=f"replay-{prompt}",
            task_queue="replay",
            execution_timeout=timedelta(seconds=TIMEOUT),
        )
        handles.append(handle)
    approving = handles[-1]
    deadline = time.monotonic() + TIMEOUT
    while not (pending := await approving.query(ToolLoopWorkflow.pending_approvals)):
        assert time.monotonic() < deadline, "the run never asked for approval"
        await asyncio.sleep(0.02)  # polls the run's own state, bounded above
    await approving.signal(ToolLoopWorkflow.approve, [pending[0].approve()])
    for handle in handles:
        await asyncio.wait_for(handle.result(), TIMEOUT)
    histories = [await handle.fetch_history() for handle in handles]
    if os.environ.get("AGCORE_RECORD_HISTORIES"):  # refreshes the recorded ones
        RECORDED.mkdir(exist_ok=True)
        for prompt, history in zip(("add", "dump", "program", "remove"), histories, strict=True):
            if prompt != "program":  # the recorded set predates code mode
                (RECORDED / f"{prompt}.json").write_text(history.to_json())
    replayer = strict_replayer()
    for history in histories:
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        assert result.replay_failure is None, history.workflow_id
