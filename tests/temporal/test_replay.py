"""Determinism: Temporal's replayer runs recorded histories through the workflow code
again, inside a sandbox that lets no agcore_tools module through, so a clock read, a
random number or I/O in the loop's code fails the replay."""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("temporalio")

from temporalio.client import Client, WorkflowHistory
from temporalio.worker import (
    ExecuteWorkflowInput,
    Interceptor,
    Replayer,
    UnsandboxedWorkflowRunner,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)
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
    files = [RECORDED / f"{name}.json" for name in ("add", "dump", "remove")]
    histories = [WorkflowHistory.from_json(f.stem, f.read_text()) for f in files]
    replayer = strict_replayer()
    for history in histories:
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        assert result.replay_failure is None, history.workflow_id


# A worker that traces as Temporal's OpenTelemetryPlugin sets it up: a global tracer
# provider, and the sandbox passing opentelemetry through. In its own process: a global
# provider can be set once.
#
# The replayer runs on a Temporal runtime of the script's own, dropped before the
# interpreter exits. The default runtime lives until the interpreter finalizes, and so do
# Temporal core's threads; one of them could still be inside a call into Python then: the
# one handing the result of the replayer's awaited history push to the loop, which the
# script can take and go on to its end before that call returns. Finalization stopped
# that thread as it waited for the GIL, and its unwinding aborted the process ("Fatal
# Python error: PyGILState_Release: thread state ... must be current when releasing",
# exit -6). Dropping the runtime's last reference shuts its threads down with the GIL
# released, so such a call ends first; the script counts the threads left after it.
TRACED_REPLAY = """
import asyncio, gc, os, sys, time
from pathlib import Path
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.client import WorkflowHistory
from temporalio.runtime import Runtime, TelemetryConfig
from temporalio.worker import Replayer
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions
from agcore_tools.temporal import ToolLoopWorkflow

exporter, provider = InMemorySpanExporter(), TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
restrictions = SandboxRestrictions.default.with_passthrough_modules(
    "pydantic", "pydantic_core", "opentelemetry"
)
runtime = Runtime(telemetry=TelemetryConfig())
replayer = Replayer(
    workflows=[ToolLoopWorkflow],
    runtime=runtime,
    workflow_runner=SandboxedWorkflowRunner(restrictions=restrictions),
)

async def main():
    for path in sys.argv[1:]:
        history = WorkflowHistory.from_json(Path(path).stem, Path(path).read_text())
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        print("replayed", Path(path).stem, result.replay_failure)
    print("replayed spans:", [span.name for span in exporter.get_finished_spans()])

asyncio.run(main())
del replayer, runtime  # the last references: Temporal core's threads stop here
gc.collect()
# A joined thread can still be listed while the kernel finishes its exit, and the
# replayer's pool threads end on their own once it is collected: wait, with a deadline,
# for the count to come down to the main thread (Temporal core's threads never do while
# its runtime lives).
tasks = "/proc/self/task"  # Linux: one entry per thread, Temporal core's included
left = None
if os.path.isdir(tasks):
    deadline = time.monotonic() + 10
    while (left := len(os.listdir(tasks))) > 1 and time.monotonic() < deadline:
        time.sleep(0.01)
print("replayed, threads left:", left)
"""


def test_a_worker_with_a_tracer_provider_replays_and_its_workflows_make_no_spans() -> None:
    # Workflow code reading the environment for content capture failed every workflow
    # task; and its spans would be made again on every replay.
    paths = [RECORDED / "add.json", RECORDED / "v0.2.0-approved.json"]
    out = subprocess.run(
        [sys.executable, "-c", TRACED_REPLAY, *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    # Temporal's core logs to stdout too: only the script's own lines.
    said = [line for line in out.stdout.splitlines() if line.startswith("replayed")]
    assert said[:3] == [
        "replayed add None",
        "replayed v0.2.0-approved None",
        "replayed spans: []",
    ]
    # Only the main thread is left to the interpreter's finalization (where it can count).
    assert said[3:] in (["replayed, threads left: 1"], ["replayed, threads left: None"])


# Recorded by 0.2.0's workers (tests/temporal/worker_process.py's kind of tools, a
# scripted model): finished runs, and runs paused for approval, as runs in flight when
# workers are upgraded. A newer workflow that issues other commands for one of these
# fails them with a nondeterminism error: gate such a change with workflow.patched.
V020 = {
    "multi-turn": "two turns of tool calls, then the answer",
    "approved": "paused for approval; approved by a signal; finished",
    "paused": "paused for two approvals (in flight)",
    "paused-rule": "paused by a needs_approval function (in flight)",
    "program-paused": "a code-mode program paused for approval (in flight)",
    "program-approved": "a code-mode program paused for approval; approved; finished",
    "reject-edit": "two calls paused; one rejected, one approved with edited arguments",
    "cancelled-tool": "cancelled while its tool ran; 0.2.0 went on to the answer",
    "misfit-answer": "an answer for a call id that is not waiting failed the run",
    "duplicate-signal": "an approval signalled twice: the second round failed the run",
    # A saved history holding call_0_0, and a model server that sends no call ids: 0.2.0
    # named the new call call_0_0 again, and the approve signal answered that id.
    "saved-history-approved": "went on from a saved history; paused; approved; finished",
    "saved-history-paused": "went on from a saved history; two calls paused (in flight)",
}


# A code-mode program's calls are awaited without asyncio.wait, whose result sets the
# sandbox warns of as non-deterministic. Not on 3.10, where the library's timeouts go
# through _aio.wait_task (asyncio.wait_for loses cancellations there).
NO_ASYNCIO_WAIT = "error:asyncio.wait:UserWarning" if sys.version_info >= (3, 11) else "default"


@pytest.mark.parametrize("name", sorted(V020))
@pytest.mark.filterwarnings(NO_ASYNCIO_WAIT)
async def test_histories_of_0_2_0_replay(name: str) -> None:
    path = RECORDED / f"v0.2.0-{name}.json"
    history = WorkflowHistory.from_json(path.stem, path.read_text())
    result = await strict_replayer().replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, f"{path.name} ({V020[name]}): {result.replay_failure}"


def test_every_0_2_0_history_is_replayed() -> None:
    assert sorted(p.name for p in RECORDED.glob("v0.2.0-*.json")) == sorted(
        f"v0.2.0-{name}.json" for name in V020
    )


# Recorded by the workers of 0653417, the commit before the patches
# "agcore-permissions-per-queue", "agcore-requests-as-text" and
# "agcore-cut-calls-not-repaired" (runs with tool_task_queues, a ranked result, a clash
# of tool names, a turn cut at the token limit), as runs in flight or queried across
# that upgrade: they replay as they ran.
UNPATCHED = {
    "queue-ask-ran": "a tools queue's PermissionConfig.ask ignored: its call ran unasked",
    "queue-paused": "paused for a tools queue's tool (in flight)",
    "paused-cancelled": "paused for a tools queue's tool, then cancelled",
    "ordered-result": "a dict result, and a tool whose parameters are not alphabetical",
    "queue-clash": "a tool two task queues serve failed the run with the registry's error",
    # repair_arguments=True; the model's turn ended with finish_reason "length" (the
    # Responses API: incomplete, max_output_tokens) inside '{"a": 1, ': the call was
    # repaired and agcore.call_tool ran, where this version asks the model again.
    "cut-call": "a call cut at max_completion_tokens, repaired and run",
    "cut-call-responses": "a call cut at max_output_tokens (Responses API), repaired and run",
    # Recorded by the workers of e3f6314, before "agcore-approval-checks-together": the
    # second call's agcore.needs_approval was scheduled once the first had ended.
    "two-checks": "two calls asked their needs_approval function in turn (in flight)",
    # Recorded by the workers of fe64418, before "agcore-call-ids-unique-in-history": the
    # model server gave both turns' calls the id "0", the second call waited for approval
    # under that id (and ran with the first call's idempotency key), and the approve
    # signal answered "0"; this version names that call call_1_0.
    "repeated-id-approved": "a call id given again in the next turn; approved; finished",
    "repeated-id-paused": "a call id given again in the next turn; paused (in flight)",
    # Recorded by the workers of cc606b7, before "agcore-permission-names-normalised": a
    # tool needing custom "billing:Refund" ran under a policy denying "billing:refund".
    "custom-names": "custom permission names that differ in case did not match: it ran",
    # Recorded by the workers of 897867a, before "agcore-unoffered-choice-refused": the
    # tool_choice named "ad", not offered; the request was sent, and the scripted model
    # called add all the same. This version fails such a run before any activity.
    "unoffered-choice": "a tool_choice naming a tool not offered, sent; the run finished",
    # Recorded by the workers of 13aefbd, before "agcore-derived-call-ids-reserved": the
    # model server gave a call needing approval the id "r~1", which it kept, and the
    # approve signal answered "r~1"; this version names that call call_0_0.
    "tilde-id-approved": "a server's call id holding '~', kept; approved; finished",
    "tilde-id-paused": "a server's call id holding '~', kept; paused (in flight)",
    # Recorded by the workers of 13aefbd, before "agcore-non-finite-arguments-refused":
    # the model sent {"order": 2, "amount": NaN}, the needs_approval function weighed
    # nan > 100 (False) and agcore.call_tool ran; this version tells the model at once.
    "nan-ran": "a call whose amount was NaN, weighed by its needs_approval rule and run",
    # Recorded by the workers of 13aefbd, before "agcore-tool-calls-per-turn-limited":
    # one answer of 130 add calls, each an agcore.call_tool; this version runs 128.
    # Gzipped: 130 activities are 455 kB of JSON.
    "many-calls": "one answer of 130 tool calls, all run",
}


def unpatched(name: str) -> Path:
    """The recorded history of UNPATCHED's ``name``: JSON, or gzipped JSON."""
    path = RECORDED / f"unpatched-{name}.json"
    return path if path.exists() else path.with_name(f"{path.name}.gz")


def read_history(path: Path) -> WorkflowHistory:
    raw = path.read_bytes()
    text = gzip.decompress(raw).decode() if path.suffix == ".gz" else raw.decode()
    return WorkflowHistory.from_json(path.name.split(".")[0], text)


@pytest.mark.parametrize("name", sorted(UNPATCHED))
async def test_histories_of_runs_before_the_queue_and_text_patches_replay(name: str) -> None:
    path = unpatched(name)
    history = read_history(path)
    result = await strict_replayer().replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, (
        f"{path.name} ({UNPATCHED[name]}): {result.replay_failure}"
    )


def test_the_unoffered_choice_history_sent_its_requests() -> None:
    events = json.loads((RECORDED / "unpatched-unoffered-choice.json").read_text())["events"]
    scheduled = [
        e["activityTaskScheduledEventAttributes"]["activityType"]["name"]
        for e in events
        if "activityTaskScheduledEventAttributes" in e
    ]
    assert scheduled == ["agcore.model_request", "agcore.call_tool", "agcore.model_request"]


def scheduled(name: str) -> list[str]:
    """The activity types the UNPATCHED run ``name`` scheduled, in order."""
    path = unpatched(name)
    raw = path.read_bytes()
    events = json.loads(gzip.decompress(raw) if path.suffix == ".gz" else raw)["events"]
    return [
        e["activityTaskScheduledEventAttributes"]["activityType"]["name"]
        for e in events
        if "activityTaskScheduledEventAttributes" in e
    ]


def test_the_nan_history_ran_the_call() -> None:
    assert scheduled("nan-ran") == [
        "agcore.model_request",
        "agcore.needs_approval",
        "agcore.call_tool",
        "agcore.model_request",
    ]


def test_the_many_calls_history_ran_every_call_of_the_answer() -> None:
    request = "agcore.model_request"
    assert scheduled("many-calls") == [request, *["agcore.call_tool"] * 130, request]


@pytest.mark.parametrize("name", ["cut-call", "cut-call-responses"])
def test_the_cut_call_histories_ran_the_repaired_call(name: str) -> None:
    # What makes them worth replaying: this version schedules other activities.
    events = json.loads((RECORDED / f"unpatched-{name}.json").read_text())["events"]
    scheduled = [
        e["activityTaskScheduledEventAttributes"]["activityType"]["name"]
        for e in events
        if "activityTaskScheduledEventAttributes" in e
    ]
    assert scheduled == ["agcore.model_request", "agcore.call_tool", "agcore.model_request"]


def test_every_unpatched_history_is_replayed() -> None:
    found = [p.name.removesuffix(".gz") for p in RECORDED.glob("unpatched-*.json*")]
    assert sorted(found) == sorted(f"unpatched-{name}.json" for name in UNPATCHED)


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


async def test_a_replayed_run_keeps_what_its_model_read_of_an_edited_call() -> None:
    # 0.2.0 sent "removed b2.txt" alone (its recorded model answer echoes it): the note
    # heading an edited call's result (agcore-edited-calls-noted) must not appear in
    # the messages a replay of that run gives (its query, its result).
    results: list[Any] = []

    class Kept(WorkflowInboundInterceptor):
        async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
            results.append(await super().execute_workflow(input))
            return results[-1]

    class Keeping(Interceptor):
        def workflow_interceptor_class(
            self, input: WorkflowInterceptorClassInput
        ) -> type[WorkflowInboundInterceptor]:
            return Kept

    path = RECORDED / "v0.2.0-reject-edit.json"
    history = WorkflowHistory.from_json(path.stem, path.read_text())
    replayer = Replayer(
        workflows=[ToolLoopWorkflow],
        workflow_runner=UnsandboxedWorkflowRunner(),
        interceptors=[Keeping()],
    )
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None
    [done] = results
    told = {m["tool_call_id"]: m["content"] for m in done.messages if m["role"] == "tool"}
    assert told["call_remove_b"] == "removed b2.txt"
    assert done.messages[-1]["content"].endswith("| removed b2.txt")
