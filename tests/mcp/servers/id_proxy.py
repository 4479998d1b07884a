"""The fixture server over stdio, behind a relay that answers one tool with wrong ids.

Run: ``python id_proxy.py TOOL ID``. Lines pass both ways unchanged, except the
server's answers to ``tools/call`` requests of TOOL: they carry the integer ID in
place of the request's id. The server runs as this process's child, in its process
group (the client's shutdown ends both).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

FIXTURE = Path(__file__).with_name("fixture_server.py")


def main() -> None:
    tool, wrong = sys.argv[1], int(sys.argv[2])
    server = subprocess.Popen(
        [sys.executable, str(FIXTURE)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert server.stdin is not None and server.stdout is not None
    targets: set[object] = set()
    lock = threading.Lock()

    def to_server() -> None:
        assert server.stdin is not None
        for line in sys.stdin.buffer:
            message = json.loads(line)
            if message.get("method") == "tools/call" and message["params"]["name"] == tool:
                with lock:
                    targets.add(message["id"])
            server.stdin.write(line)
            server.stdin.flush()
        server.stdin.close()

    threading.Thread(target=to_server, daemon=True).start()
    out = sys.stdout.buffer
    for line in server.stdout:
        message = json.loads(line)
        with lock:
            rewrite = "method" not in message and message.get("id") in targets
        if rewrite:
            message["id"] = wrong
            line = json.dumps(message).encode() + b"\n"
        out.write(line)
        out.flush()
    sys.exit(server.wait())


if __name__ == "__main__":
    main()
