"""An MCP tool's arguments checked against the tool's input schema."""

from __future__ import annotations

import pytest

from agcore_tools import InvalidArgumentsError, McpClient, McpToolInfo, StdioTransport
from agcore_tools.mcp import McpTool

TALLY = McpToolInfo(
    "tally",
    input_schema={
        "type": "object",
        "properties": {
            "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
            "pin": {"type": "string", "maxLength": 4},
        },
        "additionalProperties": False,
    },
)


@pytest.mark.parametrize(
    ("args", "reason", "redacted"),
    [
        (
            {"counts": {"acct 99-1234": "SECRET"}},
            "counts/acct 99-1234: 'SECRET' is not of type 'integer'",
            "counts/*: the 'type' rule failed",
        ),
        ({"pin": "123456"}, "pin: '123456' is too long", "pin: the 'maxLength' rule failed"),
        (
            {"note ssn 078-05-1120": 1},
            "Additional properties are not allowed ('note ssn 078-05-1120' was unexpected)",
            "the 'additionalProperties' rule failed",
        ),
    ],
)
def test_a_refusal_for_spans_and_logs_holds_no_value_or_key_the_model_wrote(
    args: dict[str, object], reason: str, redacted: str
) -> None:
    # The model reads the values to correct them; spans and logs recorded without
    # content capture (and an approval's ApprovalError built from it) used to get them too.
    tool = McpTool(McpClient("demo", StdioTransport("unused")), TALLY, "demo__tally", [])
    with pytest.raises(InvalidArgumentsError) as refused:
        tool.check_arguments(args)
    assert str(refused.value) == f"tool 'demo__tally' got invalid arguments: {reason}"
    assert refused.value.redacted == f"tool 'demo__tally' got invalid arguments: {redacted}"
