"""What crosses between the workflow and its activities: plain dataclasses of JSON values.

A tool activity gets its call only (name, arguments, id, the context's ids and
metadata); the history never goes to a tool, and the tools' dependencies stay on the
worker. The run's :class:`~agcore_tools.CycleConfig` travels as a dict (see
:func:`config_fields`), since its history policy is an object.

Temporal's JSON converter writes objects with their keys sorted. What the model reads
in an order of its own (a tool's result, a tool's parameters, a request's tools)
travels as JSON text too (the ``*_json`` fields), read back in preference, with its
order kept. The fields of earlier versions stay filled next to the text, so that a
worker not yet upgraded reads a newer worker's payloads (a rolling upgrade), and
payloads recorded before the text fields read as they did. A tool's result, which can
be large, is written once: as text only when the workflow asks for it
(``ToolCallInput.as_text``), which a workflow of an earlier version never does.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic_core import to_json
from temporalio.api.common.v1 import Payloads
from temporalio.converter import PayloadConverter

from ..content import CONTENT_TYPES, Audio, File, Image
from ..cycle.config import CycleConfig, Limits, Retries
from ..cycle.history import TrimOldest
from ..cycle.profiles import ServerProfile
from ..error import LlmConfigError
from ..permission import Permission, PermissionConfig

__all__ = [
    "APPROVAL_RULE_RAISED",
    "CATALOGUE_TOO_LARGE",
    "CONFIG_REFUSED",
    "PAYLOAD_LIMIT",
    "PROGRAM_TOO_LARGE",
    "RESPONSE_TOO_LARGE",
    "Catalogue",
    "ModelRequest",
    "ProgramStepInput",
    "ProgramStepOutput",
    "ToolCallInput",
    "ToolCallOutput",
    "ToolSpec",
    "config_fields",
    "config_from_fields",
    "payload_size",
    "permission_config",
    "permission_names",
    "permissions_of",
    "portable",
    "restored",
]

RESULT_TOO_LARGE = "ToolResultTooLarge"
"""The ``ApplicationError`` type of a tool result over the activity's size limit."""
RESULT_NOT_RETURNED = "ToolResultNotReturned"
"""The ``ApplicationError`` type of a call whose tool ran but whose result could not be
made into the activity's output: not retried, as a retry would run the tool again."""
TOOL_TIMED_OUT = "ToolTimedOut"
"""The ``ApplicationError`` type of a tool call's attempt that its worker ended at the
activity's start-to-close timeout (retried as the server's timeout is); its one detail
says whether the tool had started."""
MODEL_REFUSED = "ModelRequestRefused"
"""The ``ApplicationError`` type of a model request no retry can fix (a 4xx answer)."""
RESPONSE_TOO_LARGE = "ModelResponseTooLarge"
"""The ``ApplicationError`` type of a model's answer too large for an activity result:
not retried, as each retry would pay for the same answer again."""
CONFIG_REFUSED = "LlmConfigError"
"""The ``ApplicationError`` type of a model request refused before it was sent, for a
setting the in-process loop refuses too (``background=True``, which the activity never
streams): the workflow raises it as that :class:`~agcore_tools.error.LlmConfigError`."""
PROGRAM_TOO_LARGE = "ProgramSnapshotTooLarge"
"""The ``ApplicationError`` type of a code-mode program's step whose output (its
snapshot, printed output, result) would not fit in the workflow's history."""
APPROVAL_RULE_RAISED = "NeedsApprovalRaised"
"""The ``ApplicationError`` type of a tool's ``needs_approval`` function that raised:
not retried, as the loop then asks for approval (fail closed)."""
CATALOGUE_TOO_LARGE = "ToolCatalogueTooLarge"
"""The ``ApplicationError`` type of a worker whose tools' description would not fit in
the workflow's history."""
PAYLOAD_LIMIT = 2 * 1024 * 1024
"""Most bytes of one payload an activity may hand the workflow: Temporal refuses a
payload over 2 MB by default (the server's ``limit.blobSize.error``), and a workflow
task that records one fails again on every retry until the run times out."""


def payload_size(converter: PayloadConverter, value: Any) -> int:
    """Bytes of ``value`` as ``converter`` encodes it, counted as the worker counts
    them against :data:`PAYLOAD_LIMIT` (the whole ``Payloads`` message).

    Example:
        >>> payload_size(PayloadConverter.default, {"a": 1})
        35
    """
    return Payloads(payloads=converter.to_payloads([value])).ByteSize()


def oversize(converter: PayloadConverter, value: Any, what: str, advice: str) -> str | None:
    """Why ``value`` cannot be handed over (over :data:`PAYLOAD_LIMIT`), naming it as
    ``what`` and saying what to change; None when it fits. Refused, such a payload fails
    its workflow task on every retry, leaving the run hanging until it times out: the
    caller fails the run (or the step) at once instead, by name.

    Example:
        >>> print(oversize(PayloadConverter.default, "x" * PAYLOAD_LIMIT, "the result", "return less"))
        the result is 2097188 bytes, over the 2097152-byte payload limit of a Temporal workflow's history; return less
        >>> oversize(PayloadConverter.default, {"a": 1}, "the result", "return less") is None
        True
    """
    size = payload_size(converter, value)
    if size <= PAYLOAD_LIMIT:
        return None
    return (
        f"{what} is {size} bytes, over the {PAYLOAD_LIMIT}-byte payload limit of a "
        f"Temporal workflow's history; {advice}"
    )


_CUSTOM = "custom:"
"""The prefix of a custom permission's name in a payload. A plain name is a built-in's,
as 0.2.0 wrote them all (a history of 0.2.0 holds no custom permission: its runs with
one failed at start), so the histories it recorded read back as they did."""


def permission_names(permissions: Iterable[Permission]) -> list[str]:
    """``permissions`` as JSON strings: a built-in by its name, a custom permission
    marked, so that a custom one named like a built-in stays custom (see
    :func:`permissions_of`).

    Example:
        >>> permission_names([Permission.READ, Permission.custom("billing:refund")])
        ['read', 'custom:billing:refund']
    """
    return [_CUSTOM + p.name if p.is_custom else p.name for p in permissions]


def permissions_of(names: Iterable[str], *, verbatim: bool = False) -> tuple[Permission, ...]:
    """The permissions :func:`permission_names` wrote. With ``verbatim`` (a run begun
    before custom names were normalised), a custom name is kept as it was recorded.

    Example:
        >>> permissions_of(["read", "custom:read"])
        (Permission.READ, Permission.custom('read'))
        >>> permissions_of(["custom:mcp:GitHub"]), permissions_of(["custom:mcp:GitHub"], verbatim=True)
        ((Permission.custom('mcp:github'),), (Permission.custom('mcp:GitHub'),))
    """
    return tuple(
        (
            Permission(name[len(_CUSTOM) :], True)
            if verbatim
            else Permission.custom(name[len(_CUSTOM) :])
        )
        if name.startswith(_CUSTOM)
        else Permission.parse(name)
        for name in names
    )


def permission_config(fields: Mapping[str, Any], *, verbatim: bool = False) -> PermissionConfig:
    """The :class:`~agcore_tools.PermissionConfig` of a :class:`Catalogue`'s
    ``permissions`` (its sets as :func:`permission_names` wrote them; ``verbatim`` as
    for :func:`permissions_of`).

    Example:
        >>> config = permission_config({"allowed": ["custom:billing:refund"], "denied": [],
        ...                             "ask": [], "allow_unspecified": False})
        >>> config.allowed
        frozenset({Permission.custom('billing:refund')})
    """
    return PermissionConfig(
        allowed=permissions_of(fields["allowed"], verbatim=verbatim),
        denied=permissions_of(fields["denied"], verbatim=verbatim),
        allow_unspecified=fields["allow_unspecified"],
        ask=permissions_of(fields["ask"], verbatim=verbatim),
    )


@dataclass(frozen=True)
class ToolSpec:
    """One tool as the workflow sees it: its definition, its rules, where it runs."""

    name: str
    description: str
    parameters: dict[str, Any]
    strict: bool | None
    permissions: list[str]  # as permission_names writes them
    approval: str  # "never", "always" or "per_call" (a function on the worker decides)
    tags: list[str]
    category: str | None
    version: str | None
    task_queue: str | None = None
    timeout_secs: float | None = None
    max_attempts: int | None = None
    heartbeat_secs: float | None = None  # set for calls that wait for work on a server
    output_schema: dict[str, Any] | None = None  # what code mode's listing shows it returns
    # When set, ``parameters`` and ``output_schema`` as JSON text, in the tool's order,
    # read in preference to those (kept filled for a workflow of an earlier version).
    parameters_json: str | None = None
    output_schema_json: str | None = None

    def parameters_schema(self) -> dict[str, Any]:
        """The tool's parameters schema, its properties in the tool's order.

        Example:
            >>> spec = ToolSpec("f", "", {}, None, [], "never", [], None, None,
            ...                 parameters_json='{"properties":{"b":{},"a":{}}}')
            >>> list(spec.parameters_schema()["properties"])
            ['b', 'a']
        """
        schema: dict[str, Any] = _ordered(self.parameters_json, self.parameters)
        return schema

    def returns_schema(self) -> dict[str, Any] | None:
        """The tool's output schema (or None), its properties in the tool's order."""
        schema: dict[str, Any] | None = _ordered(self.output_schema_json, self.output_schema)
        return schema


@dataclass(frozen=True)
class Catalogue:
    """The tools one task queue's workers run, and their registry's policy."""

    tools: list[ToolSpec]
    strict: bool
    permissions: dict[str, Any] | None = None  # a PermissionConfig's fields


@dataclass(frozen=True)
class ToolCallInput:
    """One tool call, and the bits of its context a tool can read."""

    name: str
    arguments: dict[str, Any]
    call_id: str | None
    session_id: str
    trace_id: str
    metadata: dict[str, Any] = field(default_factory=dict)
    # The output as JSON text (``ToolCallOutput.output_json``), which a worker of an
    # earlier version, like a workflow of one, knows nothing of: its output is in
    # ``output``, as that workflow reads it.
    as_text: bool = False
    # The workflow gives a code-mode program the {"result": v} of a plain value an MCP
    # adapter unwraps for the model; one of an earlier version does not, and its calls
    # keep such values wrapped, as it lists them.
    unwraps: bool = False


@dataclass(frozen=True)
class ToolCallOutput:
    """A tool's output (as JSON text, or as JSON values), or the error it ended with."""

    output: Any = None
    error: str | None = None  # the error's one-line message, as the model reads it
    recoverable: bool = True
    output_json: str | None = None  # when set, the output as JSON text (None in ``output``)

    def value(self) -> Any:
        """The tool's output as JSON values, its objects' keys in the tool's order.

        Example:
            >>> ToolCallOutput(output_json='{"zebra": 1, "apple": 2}').value()
            {'zebra': 1, 'apple': 2}
        """
        return _ordered(self.output_json, self.output)


@dataclass(frozen=True)
class ProgramStepInput:
    """One stretch of a code-mode program: start ``code``, or resume ``snapshot`` (which
    waits for the calls ``pending`` lists) with ``results`` by call number."""

    code: str
    functions: dict[str, list[Any]]  # name -> [tool, [parameter, ...], [required, ...]]
    limits: dict[str, Any]
    snapshot: str | None = None
    pending: list[int] = field(default_factory=list)
    results: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class ProgramStepOutput:
    """What the program did until it waited again (``pending``), or ended (None)."""

    calls: list[list[Any]] = field(default_factory=list)  # [number, tool, arguments]
    pending: list[int] | None = None
    output: Any = None
    printed: str = ""
    dropped: bool = False
    snapshot: str | None = None
    error: str | None = None  # the program's failure, in one line
    report: str | None = None  # its traceback, as ProgramError.report holds it


@dataclass(frozen=True)
class ModelRequest:
    """One model request: the wire API and the request's parameters.

    ``params`` holds them all as JSON values, which a worker of an earlier version
    sends. Made by :meth:`of`, ``params_json`` holds them but the history as JSON text
    too, read in preference: the tools' schemas keep the order of their properties.
    The history, the bulk of a request, is read from ``params``, so it is neither
    written twice nor escaped. Without ``params_json`` (as recorded before), ``params``
    is read alone.
    """

    api: str
    chain: bool
    params: dict[str, Any]
    params_json: str | None = None

    @classmethod
    def of(cls, api: str, chain: bool, params: Mapping[str, Any]) -> ModelRequest:
        """The request of ``params``, the parameters of a turn.

        Example:
            >>> tools = [{"type": "function", "function": {"name": "f", "parameters": {
            ...     "properties": {"thoughts": {}, "again": {}}}}}]
            >>> request = ModelRequest.of("chat", False, {"model": "m", "messages": [], "tools": tools})
            >>> sorted(request.params), request.params_json[:13]
            (['messages', 'model', 'tools'], '{"model":"m",')
            >>> list(request.parameters()["tools"][0]["function"]["parameters"]["properties"])
            ['thoughts', 'again']
        """
        rest = {key: value for key, value in params.items() if key not in _HISTORY}
        return cls(api, chain, dict(params), to_json(rest).decode())

    def parameters(self) -> dict[str, Any]:
        """The parameters to send, with their order as the turn made them."""
        if self.params_json is None:
            return dict(self.params)
        history = {key: self.params[key] for key in _HISTORY if key in self.params}
        return {**json.loads(self.params_json), **history}


_HISTORY = ("messages", "input")
"""The keys of a turn's parameters that hold its history: Chat Completions'
``messages``, the Responses API's ``input``. No model reads their objects' key order
(a call's arguments are text of their own), so they go as JSON values only, never
into ``params_json``: escaped there, a long history would grow by a fifth."""


def _ordered(text: str | None, value: Any) -> Any:
    # JSON text where the payload carries it (json.loads keeps the order), else the
    # JSON value a payload recorded before it held.
    return json.loads(text) if text is not None else value


# The JSON key of each setting -> where CycleConfig holds it. The keys keep the flat
# names a workflow's stored input has always had, so a history replays.
_PLAIN = {
    "model": ("model",),
    "max_turns": ("limits", "max_turns"),
    "tool_timeout_secs": ("limits", "tool_timeout"),
    "max_tool_result_bytes": ("limits", "max_result_bytes"),
    "max_tool_attachment_bytes": ("limits", "max_attachment_bytes"),
    "max_retries": ("retries", "max_retries"),
    "retry_initial_delay": ("retries", "initial_delay"),
    "retry_max_delay": ("retries", "max_delay"),
    "unknown_tool": ("unknown_tool",),
    "reset_tool_choice": ("reset_tool_choice",),
    "max_definition_tokens": ("limits", "max_definition_tokens"),
    "repair_arguments": ("repair_arguments",),
    "api": ("api",),
    "chain_responses": ("chain_responses",),
    "adapt": ("adapt",),
}
_PER_TURN = Limits().max_tool_calls_per_turn  # absent from a run's input when it is this


def config_fields(config: CycleConfig) -> dict[str, Any]:
    """``config`` as JSON values, for a workflow's input.

    Raises ``LlmConfigError`` (also a ``ValueError``) for what cannot go into a
    workflow's history: an ``approval_key`` (a secret) and history policies other than
    :class:`~agcore_tools.TrimOldest`.

    Example:
        >>> config_fields(CycleConfig("m", max_turns=3, temperature=0))["max_turns"]
        3
    """
    if config.approval_key is not None:
        raise LlmConfigError(
            "a Temporal run cannot take CycleConfig.approval_key: it would be stored in the "
            "workflow's history; the history itself records who approved what"
        )
    if type(config.history) is not TrimOldest:
        raise LlmConfigError(
            f"a Temporal run takes the TrimOldest history policy only, got "
            f"{type(config.history).__name__}"
        )
    fields = {key: _read(config, path) for key, path in _PLAIN.items()}
    per_turn = config.limits.max_tool_calls_per_turn
    if per_turn != _PER_TURN:
        # Only then: a worker of an earlier version fails a setting it does not know.
        fields["max_tool_calls_per_turn"] = per_turn
    fields["history"] = dataclasses.asdict(config.history)
    fields["request_options"] = dict(config.request_options)
    if config.profile is not None:  # absent from histories stored before profiles
        fields["profile"] = dataclasses.asdict(config.profile)
    return fields


def config_from_fields(fields: dict[str, Any]) -> CycleConfig:
    """The :class:`CycleConfig` that :func:`config_fields` gave ``fields`` for.

    Example:
        >>> config = CycleConfig("m", max_turns=3, temperature=0)
        >>> config_from_fields(config_fields(config)) == config
        True
        >>> llama = CycleConfig("m", profile="llama-cpp-python")
        >>> config_from_fields(config_fields(llama)).profile == llama.profile
        True
    """
    rest = dict(fields)
    history = TrimOldest(**rest.pop("history"))
    options = rest.pop("request_options")
    profile = rest.pop("profile", None)
    groups: dict[str, dict[str, Any]] = {"limits": {}, "retries": {}}
    plain: dict[str, Any] = {}
    for key, value in rest.items():
        path = _PLAIN.get(key, (key,))  # an unknown key fails as CycleConfig's would
        if len(path) == 2:
            groups[path[0]][path[1]] = value
        else:
            plain[path[0]] = value
    return CycleConfig(
        history=history,
        request_options=options,
        limits=Limits(**groups["limits"]),
        retries=Retries(**groups["retries"]),
        profile=ServerProfile(**profile) if profile is not None else None,
        **plain,
    )


def _read(config: CycleConfig, path: tuple[str, ...]) -> Any:
    value: Any = config
    for name in path:
        value = getattr(value, name)
    return value


_CONTENT = "agcore.content"
"""The key marking a tool's image, sound, file or bytes in an activity's result."""
_KINDS: dict[str, type[Image | Audio | File]] = {"image": Image, "audio": Audio, "file": File}


def portable(value: Any) -> Any:
    """A tool's output with each :class:`~agcore_tools.Image`, ``Audio``, ``File`` and
    bytes value made JSON (base64, marked), for the activity's result; :func:`restored`
    turns them back in the workflow, so the model sees the image as it does in
    ``LlmCycle`` instead of its bytes as text.

    Example:
        >>> from agcore_tools import Image
        >>> shot = Image(b"GIF89a" + bytes(10))
        >>> sent = portable({"shot": shot, "n": 1})
        >>> sent["shot"]["media_type"], restored(sent) == {"shot": shot, "n": 1}
        ('image/gif', True)
    """
    if isinstance(value, CONTENT_TYPES):
        kind = type(value).__name__.lower()
        marked = {_CONTENT: kind, "media_type": value.media_type}
        if isinstance(value, File):
            marked["filename"] = value.filename
        return {**marked, "base64": base64.b64encode(value.data).decode("ascii")}
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {_CONTENT: "bytes", "base64": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, Mapping):
        return {key: portable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [portable(item) for item in value]
    return value


def restored(value: Any) -> Any:
    """What :func:`portable` made, turned back into the values the tool returned."""
    if isinstance(value, dict):
        kind = value.get(_CONTENT)
        if isinstance(kind, str) and isinstance(value.get("base64"), str):
            data = base64.b64decode(value["base64"])
            if kind == "bytes":
                return data
            if kind in _KINDS:
                extra = {"filename": value.get("filename", "")} if kind == "file" else {}
                return _KINDS[kind](data, value.get("media_type", ""), **extra)
        return {key: restored(item) for key, item in value.items()}
    if isinstance(value, list):
        return [restored(item) for item in value]
    return value
