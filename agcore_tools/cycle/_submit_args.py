"""What a ``submit*`` call is given, checked before anything joins the history: the
tools (a registry, one tool or some tools) and the prompt.

Apart from the façade (``cycle``) because it is a job of its own: turning what an app
passes into what the run takes, or into an error that names what is accepted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .._unicode import scrub
from ..base import BaseTool
from ..error import LlmUsageError
from ..registry import ToolRegistry, checked_in
from ._given import kind

__all__ = ["Tools", "as_registry", "prompt_messages", "user_message"]

Message = dict[str, Any]

Tools = ToolRegistry | BaseTool | Iterable[BaseTool]
"""What the ``submit*_with_tools`` methods take: a registry, one tool, or some tools."""


def as_registry(tools: Tools, method: str) -> ToolRegistry:
    """``tools`` as a :class:`ToolRegistry`: a registry as it is; one tool (such as a
    function decorated with ``@tool``), or an iterable of them, in a fresh registry.

    Anything else raises :class:`~agcore_tools.error.LlmUsageError` (a ``TypeError``)
    naming what ``method`` accepts.

    Example:
        >>> from agcore_tools.testing import StaticTool
        >>> [t.name for t in as_registry([StaticTool("a"), StaticTool("b")], "submit_with_tools")]
        ['a', 'b']
        >>> as_registry(None, "submit_with_tools")
        Traceback (most recent call last):
        ...
        agcore_tools.error.LlmUsageError: submit_with_tools() got None instead of tools: pass a ToolRegistry, a tool or a list of tools (ToolRegistry() for none), or call submit() to chat without tools
    """
    if isinstance(tools, ToolRegistry):
        return tools
    if isinstance(tools, BaseTool):
        tools = [tools]
    if tools is None:
        raise LlmUsageError(
            f"{method}() got None instead of tools: pass a ToolRegistry, a tool or a list of "
            "tools (ToolRegistry() for none), or call submit() to chat without tools"
        )
    accepted = "a ToolRegistry, a tool (a function decorated with @tool) or a list of tools"
    if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Iterable):
        raise LlmUsageError(f"{method}() takes {accepted}, got {kind(tools)}")
    registry = ToolRegistry()
    for item in tools:
        if not isinstance(item, BaseTool):
            raise LlmUsageError(f"{method}() takes {accepted}, got a list holding {kind(item)}")
        if checked_in(item) is not None:
            raise LlmUsageError(
                f"{method}(): tool '{item.name}' belongs to a ToolRegistry with a permission "
                "checker, which a tool passed on its own would bypass: pass that registry "
                "(select=[...] offers some of its tools)"
            )
        registry.register(item)
    return registry


def user_message(prompt: str) -> Message:
    """The user message ``prompt`` makes, each lone surrogate in it replaced by U+FFFD
    (no request can encode one); anything but a string raises
    :class:`~agcore_tools.error.LlmUsageError` (a ``TypeError``).

    Example:
        >>> user_message("Hi")
        {'role': 'user', 'content': 'Hi'}
    """
    if not isinstance(prompt, str):
        # Sent as is, a None or a number would stay in the history, and servers refuse it.
        raise LlmUsageError(
            f"a prompt is a string, got {kind(prompt)}; to go on from the history with "
            "no new message, call submit_with_tools(None, registry) or submit_messages([])"
        )
    return {"role": "user", "content": scrub(prompt)}


def prompt_messages(prompt: str | None) -> list[Message]:
    """The messages a ``submit*_with_tools`` call adds: none for ``prompt=None``, which
    goes on from the history as it is.

    Example:
        >>> prompt_messages(None), prompt_messages("Hi")
        ([], [{'role': 'user', 'content': 'Hi'}])
    """
    return [] if prompt is None else [user_message(prompt)]
