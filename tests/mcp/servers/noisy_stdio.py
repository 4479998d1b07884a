"""The fault server over stdio, behind a wrapper that writes junk to stdout.

Run: ``python noisy_stdio.py``. It starts ``fault_server.py`` (stdio) and copies its
stdin to it; before each line the server writes, it writes lines that are not MCP
messages, as servers that print banners, logs or progress bars to stdout do: a banner,
an empty line, ANSI colour codes, a cut-off JSON object, JSON that is not JSON-RPC.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

JUNK = [
    b"Starting server v1.2.3 on stdio...\n",
    b"\n",
    b"\x1b[32mINFO\x1b[0m ready\n",
    b'{"jsonrpc": "2.0", "id": \n',
    b'{"log": "not a JSON-RPC message"}\n',
]


def main() -> None:
    server = Path(__file__).with_name("fault_server.py")
    child = subprocess.Popen(
        [sys.executable, str(server)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert child.stdin is not None and child.stdout is not None

    def feed() -> None:
        assert child.stdin is not None
        for line in sys.stdin.buffer:
            child.stdin.write(line)
            child.stdin.flush()
        child.stdin.close()

    threading.Thread(target=feed, daemon=True).start()
    out = sys.stdout.buffer
    for line in child.stdout:
        out.write(b"".join(JUNK) + line)
        out.flush()
    sys.exit(child.wait())


if __name__ == "__main__":
    main()
