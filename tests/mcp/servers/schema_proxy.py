"""The fixture server over stdio, behind a relay that lists wrong output schemas.

Run: ``python schema_proxy.py``. Lines pass both ways unchanged, except the server's
tool lists: ``weather`` declares its ``temperature`` a string (its results send a
number), ``echo`` declares an output schema (its results send no structuredContent)
and ``subscriptions`` declares one with a ``$ref`` that does not resolve. Each such
result then breaks its tool's own output schema, as results of servers with slightly
wrong schemas do.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from _relay import relay  # the script's directory is on sys.path

FIXTURE = Path(__file__).with_name("fixture_server.py")

WRONG: dict[str, dict[str, Any]] = {
    "weather": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "temperature": {"type": "string"}},
        "required": ["city", "temperature"],
    },
    "echo": {"type": "object", "properties": {"text": {"type": "string"}}},
    "subscriptions": {"type": "object", "properties": {"result": {"$ref": "#/$defs/Missing"}}},
}


def rewrite(line: bytes) -> bytes:
    message = json.loads(line)
    tools = message.get("result", {}).get("tools") if "method" not in message else None
    if not isinstance(tools, list):
        return line
    for tool in tools:
        if tool.get("name") in WRONG:
            tool["outputSchema"] = WRONG[tool["name"]]
    return json.dumps(message).encode() + b"\n"


if __name__ == "__main__":
    relay(FIXTURE, to_client=rewrite)
