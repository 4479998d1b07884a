"""The fixture server over stdio, behind a relay that refuses requests until
``initialize``, as kglite-mcp-server 0.21 does: it answers ``server/discover`` with
2026-07-28 among its versions, and ``tools/list``, then refuses ``tools/call`` with
-32600 "initialize is required".

Run: ``python initialize_gate.py [always] [METHOD...]``. Requests of each METHOD
(``tools/call`` when none is given) are answered here, not passed on, with that
refusal until an ``initialize`` request has passed (``always``: after it too). Each
start is noted as a line in the file ``GATE_STARTS`` names, if set, and each request
passed on as its method and tool name in the file ``GATE_SEEN`` names, if set. Each
refusal comes ``GATE_DELAY`` seconds late, if set; from the start ``GATE_SILENT_FROM``
counts in ``GATE_STARTS`` on (2: the second), if set, nothing is answered at all.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from _relay import relay  # the script's directory is on sys.path

FIXTURE = Path(__file__).with_name("fixture_server.py")
REFUSAL = {"code": -32600, "message": "initialize is required"}


def main() -> None:
    always = sys.argv[1:2] == ["always"]
    gated = set(sys.argv[2 if always else 1 :] or ["tools/call"])
    started = 0
    if starts := os.environ.get("GATE_STARTS"):
        with open(starts, "a") as log:
            log.write("start\n")
        with open(starts) as log:
            started = len(log.read().splitlines())
    if started >= int(os.environ.get("GATE_SILENT_FROM", "0")) > 0:
        for _ in sys.stdin.buffer:  # no server behind: nothing is answered
            pass
        return
    delay = float(os.environ.get("GATE_DELAY", "0"))
    initialized = False
    seen = os.environ.get("GATE_SEEN")

    def gate(line: bytes) -> bytes:
        nonlocal initialized
        message = json.loads(line)
        method = message.get("method")
        if method == "initialize":
            initialized = True
        if seen and "id" in message:
            with open(seen, "a") as log:
                log.write(f"{method} {(message.get('params') or {}).get('name', '')}\n")
        if method not in gated or "id" not in message or (initialized and not always):
            return line
        time.sleep(delay)  # the relay's thread from the client: the server's lines go on
        answer = {"jsonrpc": "2.0", "id": message["id"], "error": REFUSAL}
        # One write per line: the main thread writes the server's lines too.
        sys.stdout.buffer.write(json.dumps(answer).encode() + b"\n")
        sys.stdout.buffer.flush()
        return b""

    relay(FIXTURE, gate)


if __name__ == "__main__":
    main()
