"""A stdio relay in front of a test server: what the relaying scripts share.

:func:`relay` starts ``script`` (a server over stdio) as this process's child, in its
process group (the client's shutdown ends both), and copies lines both ways, each
passed through a hook that may rewrite it.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn


def relay(
    script: Path,
    to_server: Callable[[bytes], bytes] = lambda line: line,
    to_client: Callable[[bytes], bytes] = lambda line: line,
) -> NoReturn:
    """Relay stdin to the server and its stdout back, through the hooks; exit with the
    server's exit code once its stdout ends."""
    server = subprocess.Popen(
        [sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert server.stdin is not None and server.stdout is not None

    def feed() -> None:
        assert server.stdin is not None
        for line in sys.stdin.buffer:
            server.stdin.write(to_server(line))
            server.stdin.flush()
        server.stdin.close()

    threading.Thread(target=feed, daemon=True).start()
    out = sys.stdout.buffer
    for line in server.stdout:
        out.write(to_client(line))
        out.flush()
    sys.exit(server.wait())
