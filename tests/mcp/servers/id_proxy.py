"""The fixture server over stdio, behind a relay that answers one tool with wrong ids.

Run: ``python id_proxy.py TOOL ID``. Lines pass both ways unchanged, except the
server's answers to ``tools/call`` requests of TOOL: they carry the integer ID in
place of the request's id.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

from _relay import relay  # the script's directory is on sys.path

FIXTURE = Path(__file__).with_name("fixture_server.py")


def main() -> None:
    tool, wrong = sys.argv[1], int(sys.argv[2])
    targets: set[object] = set()
    lock = threading.Lock()

    def note_target(line: bytes) -> bytes:
        message = json.loads(line)
        if message.get("method") == "tools/call" and message["params"]["name"] == tool:
            with lock:
                targets.add(message["id"])
        return line

    def rewrite(line: bytes) -> bytes:
        message = json.loads(line)
        with lock:
            stray = "method" not in message and message.get("id") in targets
        if not stray:
            return line
        message["id"] = wrong
        return json.dumps(message).encode() + b"\n"

    relay(FIXTURE, note_target, rewrite)


if __name__ == "__main__":
    main()
