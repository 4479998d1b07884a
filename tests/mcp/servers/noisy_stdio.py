"""The fault server over stdio, behind a relay that writes junk to stdout.

Run: ``python noisy_stdio.py``. Before each line the server writes, it writes lines
that are not MCP messages, as servers that print banners, logs or progress bars to
stdout do: a banner, an empty line, ANSI colour codes, a cut-off JSON object, JSON that
is not JSON-RPC.
"""

from __future__ import annotations

from pathlib import Path

from _relay import relay  # the script's directory is on sys.path

JUNK = b"".join(
    [
        b"Starting server v1.2.3 on stdio...\n",
        b"\n",
        b"\x1b[32mINFO\x1b[0m ready\n",
        b'{"jsonrpc": "2.0", "id": \n',
        b'{"log": "not a JSON-RPC message"}\n',
    ]
)

if __name__ == "__main__":
    relay(Path(__file__).with_name("fault_server.py"), to_client=lambda line: JUNK + line)
