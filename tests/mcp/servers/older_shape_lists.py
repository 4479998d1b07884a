"""The fixture server over stdio, behind a relay that answers ``tools/list`` in the
2025 shape on a 2026-07-28 session, as ``@mcp-z/server`` 2.2.3 does: it answers
``server/discover`` with 2026-07-28, then lists its tools without the fields that
revision adds (``resultType``, ``ttlMs``, ``cacheScope``). After an ``initialize``,
answers pass unchanged.

Run: ``python older_shape_lists.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

from _relay import relay  # the script's directory is on sys.path

FIXTURE = Path(__file__).with_name("fixture_server.py")
LATER_FIELDS = ("resultType", "ttlMs", "cacheScope")


def main() -> None:
    initialized = False
    listings: set[object] = set()  # ids of the tools/list requests sent before it

    def to_server(line: bytes) -> bytes:
        nonlocal initialized
        message = json.loads(line)
        if message.get("method") == "initialize":
            initialized = True
        elif message.get("method") == "tools/list" and not initialized:
            listings.add(message.get("id"))
        return line

    def to_client(line: bytes) -> bytes:
        message = json.loads(line)
        result = message.get("result")
        if message.get("id") not in listings or not isinstance(result, dict):
            return line
        for field in LATER_FIELDS:
            result.pop(field, None)
        return json.dumps(message).encode() + b"\n"

    relay(FIXTURE, to_server, to_client)


if __name__ == "__main__":
    main()
