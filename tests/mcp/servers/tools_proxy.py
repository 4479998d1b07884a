"""A test server over stdio, behind a relay that spoils its tool lists.

Run: ``python tools_proxy.py MODE [SERVER]``, SERVER being ``fixture`` (the fixture
server, the default) or ``paged`` (the paged server: 25 tools over pages of 10). Lines
pass both ways unchanged, except the answers to ``tools/list``:

- ``some``: after its first tool, each answer lists the tools of :data:`MALFORMED`,
  each broken in one field, as third-party servers break them;
- ``late``: each answer to a request with a cursor (a page after the first) lists the
  tool ``late_bad`` last, with the string ``"object"`` for its ``inputSchema``;
- ``all``: every tool's ``inputSchema`` is the string ``"object"``.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any

from _relay import relay  # the script's directory is on sys.path

SERVERS = {
    "fixture": Path(__file__).with_name("fixture_server.py"),
    "paged": Path(__file__).with_name("paged_server.py"),
}
OBJECT = {"type": "object", "properties": {}}

MALFORMED: list[dict[str, Any]] = [
    {"name": "bad_schema", "inputSchema": "object"},
    {"name": 42, "description": "A number for a name.", "inputSchema": OBJECT},
    {"name": "bad_description", "description": 7, "inputSchema": OBJECT},
    {"name": "bad_annotations", "inputSchema": OBJECT, "annotations": {"readOnlyHint": [1]}},
    {"name": "bad_icons", "inputSchema": OBJECT, "icons": [{"src": 5}]},
    {"name": "bad_output", "inputSchema": OBJECT, "outputSchema": []},
]
"""Tools the SDK's schema refuses, in the order the ``some`` answers list them."""
LATE = {"name": "late_bad", "inputSchema": "object"}


def main() -> None:
    mode, server = sys.argv[1], (sys.argv[2:] or ["fixture"])[0]
    later_pages: set[object] = set()  # ids of tools/list requests with a cursor
    lock = threading.Lock()

    def note(line: bytes) -> bytes:
        message = json.loads(line)
        if message.get("method") == "tools/list" and (message.get("params") or {}).get("cursor"):
            with lock:
                later_pages.add(message["id"])
        return line

    def spoil(line: bytes) -> bytes:
        message = json.loads(line)
        tools = message.get("result", {}).get("tools") if "method" not in message else None
        if not isinstance(tools, list):
            return line
        if mode == "some":
            tools[1:1] = MALFORMED
        elif mode == "late":
            with lock:
                later = message["id"] in later_pages
            if later:
                tools.append(LATE)
        elif mode == "all":
            for tool in tools:
                tool["inputSchema"] = "object"
        else:
            raise SystemExit(f"unknown mode {mode!r}")
        return json.dumps(message).encode() + b"\n"

    relay(SERVERS[server], to_server=note, to_client=spoil)


if __name__ == "__main__":
    main()
