"""The server profile record: what one kind of server can do, one field per capability.

Its own module because everything else about profiles reads it: the built-in table
(:mod:`._builtin_profiles`), the detection of a server's profile
(:mod:`._profile_detect`) and the fitting of requests and reading of refusals
(:mod:`._profile_fit`). :mod:`.profiles` is the public face of all four.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..content import CONTENT_KINDS
from ..error import LlmConfigError

__all__ = ["ServerProfile", "StructuredMode"]

StructuredMode = Literal["json_schema", "json_object", "tool"]


@dataclass(frozen=True, slots=True)
class ServerProfile:
    """What one kind of server can do. Every field's default is OpenAI's behaviour.

    Example:
        >>> small = ServerProfile("my-server", tool_choice_required=False)
        >>> small.structured_output, small.tool_choice_required
        ('json_schema', False)
        >>> import dataclasses
        >>> from agcore_tools.cycle.profiles import OPENAI
        >>> dataclasses.replace(OPENAI, name="mine").stream_auto_tool_calls
        True
    """

    name: str
    """The profile's name, for logs and errors."""
    structured_output: StructuredMode = "json_schema"
    """How a bare ``output_type`` asks for structured output: native ``json_schema``,
    ``json_object`` with a schema, or the ``final_result`` output tool (see
    :class:`~agcore_tools.StructuredOutput`)."""
    strict_tools: bool = True
    """Whether tool definitions may carry ``"strict": true``."""
    tool_choice_required: bool = True
    """Whether ``tool_choice: "required"`` is accepted; without it, a request with one
    tool names that tool, and one with several sends ``"auto"``."""
    tool_choice_named: bool = True
    """Whether a named ``tool_choice`` is accepted; without it, ``"auto"`` is sent."""
    parallel_tool_calls: bool = True
    """Whether the ``parallel_tool_calls`` option is accepted; without it, it is dropped."""
    stream_auto_tool_calls: bool = True
    """Whether a streamed request may leave the tool choice to the model; without it,
    such a turn is sent unstreamed."""
    null_content_with_tool_calls: bool = True
    """Whether an assistant message with tool calls may have ``content: null`` (the
    loop always sends ``""``, valid everywhere)."""
    tools_need_tool_choice: bool = False
    """Whether the server ignores ``tools`` unless a ``tool_choice`` is sent (so a
    request without one is a plain chat, which streams)."""
    tool_results_in_prompt: bool = True
    """Whether tool results reach the model. Without it, the model cannot see what its
    call returned and calls again on every ``"auto"`` turn, so after a forced first
    request the loop sends no ``tool_choice`` at all ("forced first, then free")."""
    responses_api: bool = True
    """Whether the server speaks the Responses API (``CycleConfig(api="responses")``)."""
    responses_assistant_text: bool = False
    """Whether a Responses follow-up needs ``{"role": "assistant", "content": ""}``
    before its ``function_call`` items (LiteLLM's Responses-to-Chat bridge merges it into
    the call's message; without it the server behind gets a message with no content),
    and an earlier answer's output ``message`` item as plain assistant text (the bridge
    forwards its ``output_text`` parts as list content, which that server refuses).
    :func:`fit_responses_request` adds it to what is sent, never to the history. With
    ``chain_responses`` the calls go back inside the server's stored response, out of
    the client's reach, so only the default whole ``input`` can carry it."""
    responses_stream_tool_calls: bool = True
    """Whether a streamed Responses request may end in a function call; without it, a
    Responses turn that may call a tool is sent unstreamed."""
    responses_structured_output: StructuredMode | None = None
    """How a bare ``output_type`` asks for structured output on the Responses API; None
    for as :attr:`structured_output` says (see :meth:`output_mode`)."""
    reasoning_field: str | None = None
    """The message field carrying reasoning text (``reasoning_content``), if any."""
    max_tools: int | None = None
    """The most tools one request may offer, where the server documents a limit; None
    for no known limit. A request over it is refused before it is sent (see
    :func:`check_tool_count`), so only a documented limit is set."""
    content_parts: tuple[str, ...] = CONTENT_KINDS
    """The kinds of binary tool results the server takes as message parts: ``"image"``,
    ``"audio"``, ``"file"`` (text always goes). A tool's value of another kind is left
    out, its label in the result's text saying so, instead of failing every later
    request of the conversation."""

    def output_mode(self, api: str) -> StructuredMode:
        """How a bare ``output_type`` asks for structured output on ``api`` (``"chat"``
        or ``"responses"``).

        Example:
            >>> from agcore_tools.cycle.profiles import LITELLM
            >>> LITELLM.output_mode("chat"), LITELLM.output_mode("responses")
            ('json_object', 'tool')
        """
        if api == "responses" and self.responses_structured_output is not None:
            return self.responses_structured_output
        return self.structured_output

    def __post_init__(self) -> None:
        # A list (from JSON, a Temporal payload) would make the profile unhashable.
        parts = tuple(self.content_parts)
        unknown = [kind for kind in parts if kind not in CONTENT_KINDS]
        if unknown:
            raise LlmConfigError(
                f"ServerProfile.content_parts names {', '.join(map(repr, unknown))}: "
                f"use some of {', '.join(map(repr, CONTENT_KINDS))}"
            )
        object.__setattr__(self, "content_parts", parts)
