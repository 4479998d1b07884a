"""Structured final output inside the loop: what the requests ask for, and the check of
each answer.

An :class:`OutputPlan` is worked out once per :class:`StructuredOutput` (and cached):
the pydantic ``TypeAdapter``, the schema sent (made strict with
:func:`agcore_tools.schema.strict_parameters`), and the ``response_format`` or the
``final_result`` tool definition. An :class:`OutputRun` holds one ``submit*`` call's
retries and, once a turn ends, says what it means (:meth:`OutputRun.end_turn`).

A call without ``output_type`` never reaches this module.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
import logging
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, NoReturn

import typing_extensions
from pydantic import (
    PydanticInvalidForJsonSchema,
    PydanticSchemaGenerationError,
    PydanticUserError,
    TypeAdapter,
    ValidationError,
)
from typing_extensions import TypedDict

from .._retry_feedback import feedback_message, feedback_text
from .._unicode import scrub_json
from ..base import tool_definition
from ..calls import aborted_text, loads_finite
from ..error import LlmConfigError, OutputValidationError
from ..registry import ToolRegistry
from ..schema import ArgumentPlan, ModelFacingSchema, build_plan, strict_parameters
from ._policy import tool_message
from ._stream import Turn
from .output import OutputMode, StructuredOutput
from .profiles import OPENAI, ServerProfile

__all__ = ["FINAL_TOOL", "OutputPlan", "OutputRun", "Verdict", "start_output"]

logger = logging.getLogger("agcore_tools.cycle")

Message = dict[str, Any]

FINAL_TOOL = "final_result"
"""The output tool of ``mode="tool"``."""
_WRAP_KEY = "result"  # the one field a non-object type is wrapped in
_MAX_PROBLEMS = 10  # field errors the model reads; the rest are counted
# Finish reasons (Chat Completions, Responses) of an answer that was cut short.
_CUT = {
    "length": "the answer was cut at the token limit (raise max_completion_tokens)",
    "max_output_tokens": "the answer was cut at the token limit (raise max_output_tokens)",
    "content_filter": "the content filter stopped the answer",
}
_FINAL_DESCRIPTION = "Give the final answer: its arguments are the answer. Call it once, last."
_LIMITS = frozenset({"length", "max_output_tokens"})
_FIRST_KEY = re.compile(r'\s*\{\s*("(?:[^"\\]|\\.)*")\s*:')
# A whole answer in a Markdown code fence: what a model writes when the server ignored
# the response_format (llama.cpp's server without a grammar, some proxies).
_FENCE = re.compile(r"\A\s*```(?:json)?[ \t]*\r?\n(.*)\n[ \t]*```\s*\Z", re.DOTALL | re.IGNORECASE)


class Verdict(enum.Enum):
    """What a finished turn means for the loop."""

    GO_ON = "go_on"
    """Not an answer: run the turn's tool calls (or end as without output)."""
    RETRY = "retry"
    """An answer that did not validate: the feedback is in the history; ask again."""
    DONE = "done"
    """A valid answer: :attr:`OutputRun.value` holds it."""


@dataclass(frozen=True, slots=True, eq=False)
class OutputPlan:
    """Everything about one output type that does not change from call to call."""

    spec: StructuredOutput
    label: str
    """The type's name, for messages."""
    adapter: TypeAdapter[Any]
    wrapped: bool
    """Whether the type is wrapped in ``{"result": ...}``."""
    nulls: ArgumentPlan | None
    """Drops a ``null`` the strict schema allowed where the type means "the default"."""
    extra: Mapping[str, Any]
    """What :meth:`prepare` puts in each request: ``response_format`` or the tool."""
    fields: frozenset[str] | None = None
    """The answer's top-level fields, when the schema allows no others."""

    def prepare(self, params: dict[str, Any]) -> None:
        """Add the output's ``response_format``, or its tool and ``tool_choice``."""
        if self.spec.mode != "tool":
            params["response_format"] = self.extra
            return
        tools = params.get("tools") or []
        params["tools"] = [*tools, self.extra]
        if "tool_choice" not in params:
            params["tool_choice"] = (
                {"type": "function", "function": {"name": FINAL_TOOL}} if not tools else "required"
            )

    def validate(self, text: str) -> tuple[bool, Any, list[str]]:
        """``(True, value, [])`` for a valid answer, else ``(False, None, problems)``."""
        try:
            data, found = loads_finite(text, whole="")
            if found is not None:
                # pydantic's JSON takes NaN and Infinity for a float, and NaN compares
                # False with everything: refused, as in a tool call's arguments.
                where, problem = found
                fix = f"{problem}; send a finite number"
                return False, None, [f"{where}: {fix}" if where else fix]
            # Escaped lone surrogates ("\\ud800") parse, but pydantic's JSON refuses them.
            data = scrub_json(data)
            if self.nulls is not None and isinstance(data, dict):
                data, _ = self.nulls.apply(data)
            # Validated as JSON, not as Python values: a strict type takes "2024-05-06"
            # for a date from JSON, never from a Python str.
            text = json.dumps(data, ensure_ascii=False)
        except (ValueError, RecursionError) as exc:
            return False, None, [f"the answer is not valid JSON: {exc}"]
        try:
            value = self.adapter.validate_json(text)
        except ValidationError as exc:
            return False, None, _problems(exc)
        return True, (value[_WRAP_KEY] if self.wrapped else value), []


class OutputRun:
    """One ``submit*`` call's structured output: retries left and the final value."""

    __slots__ = ("attempts", "plan", "retries_left", "spent", "value")

    def __init__(self, plan: OutputPlan) -> None:
        self.plan = plan
        self.retries_left = plan.spec.retries
        self.attempts = 0
        self.value: Any = None
        self.spent = False
        """Whether an answer failed to validate with no retry left (not one cut short
        or refused): :meth:`resume` may then tell the model why."""

    @property
    def mode(self) -> str:
        """How the requests ask for the output (``StructuredOutput.mode``)."""
        return self.plan.spec.mode

    def in_mode(self, mode: OutputMode) -> OutputRun:
        """The same output asked for another way (after a server refused this one), with
        the retries and attempts so far.

        Example:
            >>> run = start_output(int, {}, None)
            >>> run.mode, run.in_mode("json_object").mode
            ('json_schema', 'json_object')
        """
        spec = dataclasses.replace(self.plan.spec, mode=mode)
        moved = OutputRun(_plan_of(spec))
        moved.retries_left, moved.attempts = self.retries_left, self.attempts
        return moved

    def end_turn(self, turn: Turn, messages: list[Message], runs_tools: bool) -> Verdict:
        """What ``turn`` (already in ``messages``) means; answers and feedback are
        appended to ``messages``. Raises :class:`OutputValidationError` when an answer
        fails with no retry left, or at once when the model refused to answer or its
        answer was cut (the token limit, the content filter)."""
        if turn.refusal is not None and not turn.calls:
            # Asking again would only spend requests: the model declined, it did not err.
            reason = f"the model refused to answer: {' '.join(turn.refusal.split())}"
            self._stop(turn.refusal, reason)
        if self.plan.spec.mode == "tool":
            return self._tool_turn(turn, messages, runs_tools)
        if turn.calls and runs_tools:
            return Verdict.GO_ON
        self._stop_if_cut(turn, turn.text)
        if turn.calls:
            # No tool is offered (a bare submit): the calls cannot run, and ending here
            # would leave the call without its output.
            for call in turn.calls:
                messages.append(tool_message(call, aborted_text(call, "no tools are offered")))
            problems = ["it must be the JSON answer, not tool calls"]
            return self._judge(False, None, problems, turn.text, messages, tell=True)
        ok, value, problems = self.plan.validate(_unfenced(turn.text))
        return self._judge(ok, value, problems, turn.text, messages, tell=True)

    def resume(self, messages: list[Message], rejected: tuple[Message, Any] | None) -> bool:
        """On a resume (no new prompt), append the feedback on the history's last answer
        when it is ``rejected``: the answer an :class:`OutputValidationError` left last
        (:attr:`spent`), with the output type it failed, this run's too. Whether it did.
        The error leaves no feedback: a new prompt follows the answer instead. Any other
        last answer (free text from a call without ``output_type``, a valid answer, one
        of another type, a history saved and loaded) is sent as it is.

        Example:
            >>> run = start_output(int, {}, None)
            >>> answer = {"role": "assistant", "content": '{"result": "four"}'}
            >>> history = [answer]
            >>> run.resume(history, (answer, int)), history[-1]["content"][:26]
            (True, 'Your answer is not a valid')
            >>> run.resume([answer], (answer, str)), run.resume([answer], None)
            (False, False)
        """
        last = messages[-1] if messages else None
        if self.mode == "tool" or last is None or rejected is None or rejected[0] is not last:
            return False  # tool mode: the final_result call's error result says it
        if rejected[1] != self.plan.spec.output_type:
            return False
        text = last.get("content")
        if last.get("role") != "assistant" or last.get("tool_calls") or not isinstance(text, str):
            return False
        ok, _, problems = self.plan.validate(_unfenced(text))
        if not ok:
            messages.append(feedback_message(self.plan.label, problems, tool=False))
        return not ok

    def _tool_turn(self, turn: Turn, messages: list[Message], runs_tools: bool) -> Verdict:
        final = next((call for call in turn.calls if call.name == FINAL_TOOL), None)
        if final is None and turn.calls and runs_tools:
            return Verdict.GO_ON
        # A repaired final_result of a cut turn would hold only what was written in time.
        self._stop_if_cut(turn, final.arguments if final is not None else turn.text)
        # The turn ends the run (or is retried): no other call of it runs, and every
        # call is answered, in order, so the history stays valid.
        if final is None:
            for call in turn.calls:
                reason = f"only {FINAL_TOOL} can be called here"
                messages.append(tool_message(call, aborted_text(call, reason)))
            problems = [f"it must be the arguments of a {FINAL_TOOL} call"]
            return self._judge(False, None, problems, turn.text, messages, tell=True)
        # Of several final_result calls, the first valid one is the answer: a bad first
        # try next to a good one must not cost a retry.
        checks = [
            self.plan.validate(call.arguments) if call.name == FINAL_TOOL else None
            for call in turn.calls
        ]
        first = next(i for i, check in enumerate(checks) if check is not None)
        index = next((i for i, check in enumerate(checks) if check and check[0]), first)
        final = turn.calls[index]
        ok, value, problems = checks[index] or (False, None, [])
        for position, (call, check) in enumerate(zip(turn.calls, checks, strict=True)):
            if position == index:
                text = (
                    "Final answer received." if ok else f"Error: {_feedback(self.plan, problems)}"
                )
            elif check is not None and not ok:
                text = f"Error: {_feedback(self.plan, check[2])}"
            elif check is not None:
                text = aborted_text(call, f"another {FINAL_TOOL} call of this turn is the answer")
            else:
                text = aborted_text(call, f"{FINAL_TOOL} was called in the same turn")
            messages.append(tool_message(call, text))
        return self._judge(ok, value, problems, final.arguments, messages, tell=False)

    def _stop_if_cut(self, turn: Turn, raw: str) -> None:
        # Asking again under the same limit or filter would be cut the same way, and the
        # model would read a misleading "not valid JSON".
        cause = _CUT.get(turn.raw_reason or "")
        if cause is None:
            return
        astray = _astray(self.plan, raw) if turn.raw_reason in _LIMITS else None
        if astray is not None:
            # Held to the schema, the model could not have written it: what ran on to
            # the limit is free text, which a higher limit only lengthens.
            ignored = (
                "the schema sent with json_object (LiteLLM's Responses bridge drops it)"
                if self.mode == "json_object"
                else "the json_schema format"
            )
            cause = (
                f"the answer does not follow the schema ({astray}) and ran on to the token "
                f"limit: the server ignored {ignored}, so a higher limit would not help; "
                f"ask with StructuredOutput({self.plan.label}, mode='tool')"
            )
        self._stop(raw, cause)

    def _stop(self, raw: str, reason: str) -> NoReturn:
        self.attempts += 1
        raise OutputValidationError(self.plan.label, raw, [reason], self.attempts)

    def _judge(
        self,
        ok: bool,
        value: Any,
        problems: list[str],
        raw: str,
        messages: list[Message],
        *,
        tell: bool,
    ) -> Verdict:
        # `tell`: the feedback goes in a user message (no tool message carries it).
        self.attempts += 1
        if ok:
            self.value = value
            return Verdict.DONE
        if self.retries_left == 0:
            self.spent = True
            raise OutputValidationError(self.plan.label, raw, problems, self.attempts)
        self.retries_left -= 1
        if tell:
            # Marked, so history policies keep it with the answer it is about.
            messages.append(feedback_message(self.plan.label, problems, tool=self.mode == "tool"))
        return Verdict.RETRY


def start_output(
    output_type: Any,
    request_options: Mapping[str, Any],
    registry: ToolRegistry | None,
    profile: ServerProfile = OPENAI,
    api: str = "chat",
) -> OutputRun:
    """The :class:`OutputRun` of one call, or :class:`LlmConfigError` for a type pydantic
    cannot validate or describe, or a setting the output would silently override.

    A bare type asks for it the way the server's profile says for ``api``
    (``ServerProfile.output_mode``); a :class:`StructuredOutput` says it itself."""
    spec = (
        output_type
        if isinstance(output_type, StructuredOutput)
        else StructuredOutput(output_type, mode=profile.output_mode(api))
    )
    if spec.mode != "tool" and "response_format" in request_options:
        raise LlmConfigError(
            "output_type sets response_format; remove it from the CycleConfig request options"
        )
    text = request_options.get("text")
    if spec.mode != "tool" and isinstance(text, Mapping) and "format" in text:
        # The Responses API's name for response_format.
        raise LlmConfigError(
            "output_type sets text.format; remove it from the CycleConfig request options"
        )
    if spec.mode == "tool" and registry is not None and FINAL_TOOL in registry:
        raise LlmConfigError(
            f"the registry has a tool named '{FINAL_TOOL}', the output tool of mode='tool'; "
            "rename it or use another mode"
        )
    return OutputRun(_plan_of(spec))


def _plan_of(spec: StructuredOutput) -> OutputPlan:
    try:
        return _cached_plan(spec)
    except TypeError:  # an unhashable annotation: build it each time
        return _plan(spec)


@functools.lru_cache(maxsize=64)
def _cached_plan(spec: StructuredOutput) -> OutputPlan:
    return _plan(spec)


def _plan(spec: StructuredOutput) -> OutputPlan:
    label = _label(spec.output_type)
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(spec.output_type)
        schema = adapter.json_schema(schema_generator=ModelFacingSchema)
        wrapped = schema.get("type") != "object" or "properties" not in schema
        if wrapped:
            # A root that is not an object (or is a $ref, for a recursive model).
            wrapper = TypedDict("Output", {_WRAP_KEY: spec.output_type})  # type: ignore[misc]
            adapter = TypeAdapter(wrapper)
            schema = adapter.json_schema(schema_generator=ModelFacingSchema)
    except (PydanticSchemaGenerationError, PydanticInvalidForJsonSchema) as exc:
        # pydantic's text is advice to whoever writes a pydantic type (model_config,
        # __get_pydantic_core_schema__): kept as the cause, not in the message.
        raise LlmConfigError(
            f"output_type {label} is not a type pydantic can validate and describe as JSON: "
            "use a pydantic model, a dataclass, a TypedDict or a builtin type such as "
            "list[str]"
        ) from exc
    except PydanticUserError as exc:  # such as a model not fully defined: its fix
        raise LlmConfigError(
            f"output_type {label} cannot be validated or described by pydantic: {exc}"
        ) from exc
    strict, why = strict_parameters(schema)
    if strict is None:
        logger.warning("output_type %s is sent without strict mode: %s", label, why)
    sent = strict if strict is not None else schema
    name = re.sub(r"[^A-Za-z0-9_-]+", "_", label).strip("_")[:64] or "output"
    extra: dict[str, Any]
    # A description written with an escape ("\udfff") goes as U+FFFD, as in a tool's
    # definition (the final_result tool's too): as it is, every request fails to encode.
    if spec.mode == "json_schema":
        extra = {
            "type": "json_schema",
            "json_schema": {"name": name, "schema": scrub_json(sent), "strict": strict is not None},
        }
    elif spec.mode == "json_object":
        extra = {"type": "json_object", "schema": scrub_json(sent)}
    else:
        extra = tool_definition(FINAL_TOOL, _FINAL_DESCRIPTION, sent, strict=strict is not None)
    nulls = build_plan(schema, check_extras=False) if strict is not None else None
    properties = sent.get("properties")
    fields = (
        frozenset(properties)
        if isinstance(properties, Mapping) and sent.get("additionalProperties") is False
        else None
    )
    return OutputPlan(spec, label, adapter, wrapped, nulls, extra, fields)


def _astray(plan: OutputPlan, raw: str) -> str | None:
    """How a cut answer shows, in what came before the cut, that it does not follow the
    schema; None when it may (or when it asks for the output tool, whose arguments a
    named ``tool_choice`` holds to the schema).

    Example:
        >>> plan = start_output(int, {}, None).plan
        >>> _astray(plan, '{"result": 4'), _astray(plan, '{"Is it 4?": "ye')
        (None, "its first field 'Is it 4?' is not one of int's")
        >>> _astray(plan, "Sure! The answer is")
        'it is not a JSON object'
    """
    text = raw.lstrip()
    if plan.spec.mode == "tool" or plan.fields is None or not text:
        return None
    if not text.startswith("{"):
        return "it is not a JSON object"
    match = _FIRST_KEY.match(text)
    if match is None:
        return None  # cut before its first field was whole
    try:
        key = json.loads(match[1])
    except ValueError:
        return None
    if key in plan.fields:
        return None
    return f"its first field {key!r} is not one of {plan.label}'s"


def _unfenced(text: str) -> str:
    r"""The JSON of a text answer that is one Markdown code fence around it, else the
    text. Only a text answer: a ``final_result`` call's arguments are JSON or nothing.

    Example:
        >>> _unfenced('```json\n{"a": 1}\n```'), _unfenced('```py\n{"a": 1}\n```')
        ('{"a": 1}', '```py\n{"a": 1}\n```')
    """
    fenced = _FENCE.match(text)
    return fenced[1] if fenced is not None and "```" not in fenced[1] else text


def _label(output_type: Any) -> str:
    """The type's name as the model reads it in the feedback (and the schema's name):
    no module paths, no ``Annotated`` metadata (a ``FieldInfo``'s whole repr).

    Example:
        >>> from pydantic import BaseModel, Field
        >>> class Cat(BaseModel):
        ...     kind: Literal["cat"]
        >>> class Dog(BaseModel):
        ...     kind: Literal["dog"]
        >>> _label(Annotated[Cat | Dog, Field(discriminator="kind")])
        'Cat | Dog'
        >>> _label(list[typing.Optional[Cat]]), _label(Literal["yes", "no"])
        ('list[Cat | None]', "Literal['yes', 'no']")
    """
    origin, args = typing.get_origin(output_type), typing.get_args(output_type)
    if origin is Annotated and args:
        return _label(args[0])
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_label(arg) for arg in args)
    if origin in (Literal, typing_extensions.Literal):
        return f"Literal[{', '.join(repr(arg) for arg in args)}]"
    if origin is not None and args:
        return f"{_label(origin)}[{', '.join(_label(arg) for arg in args)}]"
    if output_type is None or output_type is type(None):
        return "None"
    if output_type is Ellipsis:
        return "..."
    if isinstance(output_type, type):
        return output_type.__name__
    if isinstance(output_type, types.ModuleType):  # its repr holds its file's path
        return f"(the module {output_type.__name__})"
    return repr(output_type).replace("typing.", "").replace("typing_extensions.", "")


def _problems(exc: ValidationError) -> list[str]:
    errors = exc.errors(include_url=False)
    problems = []
    for error in errors[:_MAX_PROBLEMS]:
        where = ".".join(str(part) for part in error["loc"])
        problems.append(f"{where}: {error['msg']}" if where else str(error["msg"]))
    if len(errors) > _MAX_PROBLEMS:
        problems.append(f"and {len(errors) - _MAX_PROBLEMS} more error(s)")
    return problems


def _feedback(plan: OutputPlan, problems: list[str]) -> str:
    return feedback_text(plan.label, problems, tool=plan.spec.mode == "tool")
