"""Code mode's listing names a tool's parameters so that a program written as it says
reaches the tool with the keys the tool declared.

Python reads a name in source as its NFKC form (so does Monty): a keyword argument
``ｑｕｅｒｙ=`` (full-width letters, as some CJK servers' schemas name keys) arrives as
``query``, a decomposed ``café=`` as the composed one, and two keys with one NFKC form
make a signature no parser takes. Such keys are listed as ``**arguments`` with the
keys spelled out, as keywords and dashed names are. Likewise a tool named as a global
the sandbox defines (``__name__``) gets a function name of its own.
"""

from __future__ import annotations

import ast
import asyncio
import json
import unicodedata
from typing import Any

import pytest

from agcore_tools import BaseTool, ToolContext, ToolRegistry
from agcore_tools._code_mode import DEFAULT_LIMITS, RunPythonTool

pytest.importorskip("pydantic_monty")

FULL_WIDTH = "ｑｕｅｒｙ"
DECOMPOSED = unicodedata.normalize("NFD", "café")
LIGATURE = "ﬁle"


class Keyed(BaseTool):
    """An MCP-style tool whose keys are identifiers Python reads as other names; it
    returns the arguments it got."""

    description = "Look a place up."

    def __init__(self, name: str, keys: list[str]) -> None:
        self.name = name
        self.parameters = {
            "type": "object",
            "properties": {key: {"type": "string"} for key in keys},
            "required": keys[:1],
            "additionalProperties": False,
        }

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        return args


def call_as_listed(stub: ast.AsyncFunctionDef, values: dict[str, Any]) -> str:
    """The call a model writes from ``stub``: keywords for the parameters it names, or
    ``**{...}`` when it takes ``**arguments``."""
    if stub.args.kwarg is not None:
        return f"await {stub.name}(**{values!r})"
    return f"await {stub.name}({', '.join(f'{k}={v!r}' for k, v in values.items())})"


def run_as_listed(tool: Keyed, values: dict[str, Any]) -> Any:
    """What ``tool`` gets from a program written as code mode's listing says."""
    registry = ToolRegistry()
    registry.register(tool)
    runner = RunPythonTool(registry.tool_table, registry.definitions(), DEFAULT_LIMITS, 60.0)
    listing = runner.description[runner.description.index("async def") :]
    compile(listing, "listing", "exec")
    [stub] = ast.parse(listing).body
    assert isinstance(stub, ast.AsyncFunctionDef)
    output = asyncio.run(runner.execute({"code": call_as_listed(stub, values)}, ToolContext()))
    return json.loads(output.removeprefix("result: "))


def test_keys_python_reads_as_other_names_reach_the_tool_as_declared() -> None:
    values = {FULL_WIDTH: "cats", DECOMPOSED: "Paris"}
    # Before, the listing showed them as keywords, which reached the tool as query and
    # a composed café (an MCP tool refused the call: "'ｑｕｅｒｙ' is a required property").
    assert run_as_listed(Keyed("lookup", list(values)), values) == values


def test_keys_with_one_python_name_are_listed_as_valid_python() -> None:
    values = {"file": "a.txt", LIGATURE: "b.txt"}
    # Before: "duplicate argument 'file' in function definition".
    assert run_as_listed(Keyed("open_files", list(values)), values) == values


def test_a_key_python_cannot_take_as_a_parameter_is_listed_as_valid_python() -> None:
    # Before: "cannot assign to __debug__".
    assert run_as_listed(Keyed("debug", ["__debug__"]), {"__debug__": "on"}) == {"__debug__": "on"}


def test_plain_names_are_still_keywords() -> None:
    registry = ToolRegistry()

    @registry.tool
    def find(term: str, naïve: bool = False) -> str:
        """Find a term."""
        return f"{term} {naïve}"

    tool = RunPythonTool(registry.tool_table, registry.definitions(), DEFAULT_LIMITS, 60.0)
    assert "async def find(term: str, naïve: bool = None) -> str:" in tool.description


@pytest.mark.parametrize(
    "name",
    ["__annotations__", "__debug__", "__doc__", "__file__", "__name__", "__package__", "__spec__"],
)
def test_a_tool_named_as_a_sandbox_global_is_called_from_a_program(name: str) -> None:
    # Before, its function took the global's name, so the program's call reached the
    # global's value ("'str' object is not callable"), not the tool.
    assert run_as_listed(Keyed(name, ["q"]), {"q": "x"}) == {"q": "x"}
