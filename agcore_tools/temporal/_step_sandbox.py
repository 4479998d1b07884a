"""Code mode's sandbox in a workflow: :class:`StepSandbox`.

Apart from the workflow (``_workflow``) because it is a job of its own: the loop's
code mode drives a sandbox a stretch of the program at a time, and in a workflow each
stretch is the ``agcore.program_step`` activity, whose snapshot the workflow keeps in
its history between stretches. It is workflow code, deterministic as the workflow is:
no clock, no I/O, nothing but the activity.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

# The sandbox decides how these load (see _worker.sandbox_runner): passed through on a
# worker, re-imported under its restrictions by the replay test.
from .._sandbox import Functions, Segment, turn_deadline
from ..error import ProgramError, ToolError, ToolExecutionError
from ._payloads import PROGRAM_TOO_LARGE, ProgramStepInput, ProgramStepOutput, oversize
from ._stand_in import failure_reason, raise_if_cancelled

__all__ = ["StepSandbox"]


class StepSandbox:
    """Code mode's sandbox in a workflow: each stretch of the program is the
    ``agcore.program_step`` activity, which starts or restores the program in a Monty
    worker and hands back its snapshot. The workflow itself runs no sandbox."""

    def __init__(self, functions: Functions, limits: Mapping[str, Any]) -> None:
        self._functions = {
            name: [tool, list(order), list(required)]
            for name, (tool, order, required) in functions.items()
        }
        self._limits = dict(limits)
        self._code = ""
        self._snapshot: str | None = None
        self._pending: list[int] = []

    async def __aenter__(self) -> StepSandbox:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def start(self, code: str) -> Segment:
        self._code = code
        return await self._step(ProgramStepInput(code, self._functions, self._limits))

    async def restore(self, code: str, snapshot: str, pending: list[int]) -> Segment:
        self._code, self._snapshot, self._pending = code, snapshot, list(pending)
        return Segment([], list(pending))

    async def resume(self, results: Any) -> Segment:
        given = {str(number): dict(result) for number, result in results.items()}
        step = ProgramStepInput(
            self._code, self._functions, self._limits, self._snapshot, self._pending, given
        )
        return await self._step(step)

    async def snapshot(self) -> str:
        if self._snapshot is None:
            raise ToolExecutionError("run_python", "the program is not waiting for any call")
        return self._snapshot

    async def _step(self, step: ProgramStepInput) -> Segment:
        too_big = oversize(
            workflow.payload_converter(),
            step,
            "the next step of the code-mode program (its code, snapshot and the results it "
            "resumes with)",
            "keep less data in the program's variables, or have its tools return less",
        )
        if too_big is not None:
            error = ToolError(too_big, tool_name="run_python")
            error.recoverable = False
            raise error
        try:
            done = await workflow.execute_activity(
                "agcore.program_step",
                step,
                result_type=ProgramStepOutput,
                # Twice a turn's deadline on the worker: a program's own long time limit
                # stops it there first (60 s for the default limits, as always).
                start_to_close_timeout=timedelta(seconds=2 * turn_deadline(self._limits)),
                retry_policy=RetryPolicy(
                    maximum_attempts=3,
                    non_retryable_error_types=[PROGRAM_TOO_LARGE, "CodeModeUnavailable"],
                ),
            )
        except ActivityError as exc:
            raise_if_cancelled(exc)
            cause = exc.cause
            if isinstance(cause, ApplicationError) and cause.non_retryable:
                error = ToolError(cause.message, tool_name="run_python")
                error.recoverable = False  # the run fails, naming the limit
                raise error from exc
            raise ToolExecutionError("run_python", failure_reason(exc)) from exc
        if done.error is not None:
            # With its report, the loop shows the model what LlmCycle would: the
            # program's output, its traceback and the calls that ran.
            if done.report is not None:
                raise ProgramError(done.error, done.report)
            raise ToolExecutionError("run_python", done.error)
        self._snapshot, self._pending = done.snapshot, list(done.pending or ())
        calls = [(int(number), str(tool), dict(args)) for number, tool, args in done.calls]
        return Segment(calls, done.pending, done.output, done.printed, done.dropped)
