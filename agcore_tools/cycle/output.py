"""Structured final output: :class:`StructuredOutput`, what ``output_type=`` takes.

Every ``submit*`` method of :class:`~agcore_tools.LlmCycle` takes ``output_type=``: a
pydantic model, a dataclass, a ``TypedDict``, any other type pydantic validates
(``int``, ``list[str]``, ``Literal[...]``, a union), or a :class:`StructuredOutput`
naming one of those with how to ask for it. The final answer is then validated into
that type and carried by ``ChatResponse.output``; ``ChatResponse.text`` keeps the text.
See ``docs/guides/structured-output.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ..error import LlmConfigError

__all__ = ["StructuredOutput"]

OutputMode = Literal["json_schema", "json_object", "tool"]
"""How the final answer is asked for; see :class:`StructuredOutput`."""

_MODES = ("json_schema", "json_object", "tool")


@dataclass(frozen=True, slots=True)
class StructuredOutput:
    """The type a call's final answer must have, and how to ask the server for it.

    ``mode`` says what the requests carry:

    - ``"json_schema"`` (the default): native structured output,
      ``response_format={"type": "json_schema", "json_schema": {"name", "schema",
      "strict": true}}``, with the schema made strict as for strict tools (a type strict
      mode cannot describe, such as ``dict[str, int]``, is sent with ``"strict": false``
      and a logged warning). OpenAI, Azure, vLLM, llama.cpp's own ``llama-server``.
    - ``"json_object"``: ``response_format={"type": "json_object", "schema": ...}``,
      the form llama-cpp-python's server constrains with a grammar (it refuses
      ``json_schema``), as do some hosted servers.
    - ``"tool"``: for servers with tool calls but no structured output. The requests
      offer one more tool, ``final_result``, whose parameters are the output schema,
      with ``tool_choice`` set to it (``"required"`` next to other tools) unless
      ``CycleConfig`` sets one; the loop ends when the model calls it, and its arguments
      are the answer. Other calls of that turn are not run.

    A non-object type (``int``, ``list[str]``, a union) is wrapped in an object with
    one field, ``result``, since the schema's root must be an object.

    When the answer does not validate, the model reads the field errors and tries again,
    up to ``retries`` times (each try is a request, counted by ``max_turns``); then the
    call raises :class:`~agcore_tools.OutputValidationError`, which carries the raw text.

    Example:
        >>> import asyncio
        >>> from pydantic import BaseModel
        >>> from agcore_tools import CycleConfig, LlmCycle
        >>> from agcore_tools.testing import ScriptedChatServer as Scripted
        >>> class City(BaseModel):
        ...     name: str
        ...     population: int
        >>> async def main(server: Scripted, output_type: object) -> object:
        ...     async with server.client() as client:
        ...         cycle = LlmCycle(CycleConfig("m"), client=client)
        ...         return (await cycle.submit("Largest city?", output_type=output_type)).output
        >>> answer = Scripted.reply_text('{"name": "Tokyo", "population": 37400000}')
        >>> with Scripted([answer]) as server:
        ...     asyncio.run(main(server, City))
        ...     server.requests[0].json["response_format"]["json_schema"]["strict"]
        City(name='Tokyo', population=37400000)
        True

        A plain type is wrapped in ``{"result": ...}``; here the server has no structured
        output, so the answer comes as the arguments of a ``final_result`` call:

        >>> call = Scripted.reply_tool_calls([("final_result", {"result": 3})])
        >>> with Scripted([call]) as server:
        ...     asyncio.run(main(server, StructuredOutput(int, mode="tool")))
        3
        >>> StructuredOutput(City, mode="xml")
        Traceback (most recent call last):
        ...
        agcore_tools.error.LlmConfigError: StructuredOutput.mode must be 'json_schema', 'json_object' or 'tool', got 'xml'
    """

    output_type: Any
    """The type the answer is validated into."""
    mode: OutputMode = "json_schema"
    """How the requests ask for it."""
    retries: int = 1
    """How many more tries the model gets after an answer that does not validate."""

    def __post_init__(self) -> None:
        if self.mode not in _MODES:
            raise LlmConfigError(
                "StructuredOutput.mode must be 'json_schema', 'json_object' or 'tool', "
                f"got {self.mode!r}"
            )
        retries = self.retries
        if not isinstance(retries, int) or isinstance(retries, bool) or retries < 0:
            raise LlmConfigError(f"StructuredOutput.retries must be at least 0, got {retries!r}")
        if self.output_type is None or isinstance(self.output_type, StructuredOutput):
            raise LlmConfigError(
                f"StructuredOutput.output_type must be a type, got {self.output_type!r}"
            )
