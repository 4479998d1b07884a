"""A block on outgoing connections, through an audit hook (no patching).

``socket.connect`` raises the ``socket.connect`` audit event (PEP 578) before it
connects, in whichever thread connects; a hook that raises there stops the
connection. The hook is added to the process once, the first time :func:`no_network`
is used (audit hooks cannot be removed), and does nothing while no block is open.
"""

from __future__ import annotations

import socket
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import CodeType
from typing import Any

from ..error import CassetteError

__all__ = ["NetworkGuard", "no_network"]

_LOCK = threading.Lock()
_OPEN: list[NetworkGuard] = []
_installed = False


class NetworkGuard:
    """What :func:`no_network` saw: every address something tried to connect to.

    Example:
        >>> with no_network() as guard:
        ...     pass
        >>> guard.attempts, guard
        ([], <NetworkGuard 0 connection(s) refused>)
    """

    def __init__(self) -> None:
        self.attempts: list[str] = []
        """The addresses of the connections refused, in order."""

    def __repr__(self) -> str:
        return f"<NetworkGuard {len(self.attempts)} connection(s) refused>"


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if not _OPEN or event != "socket.connect":
        return
    if _pairing(args, sys._getframe(1).f_code):
        return
    address = repr(args[1]) if len(args) > 1 else "?"
    for guard in _OPEN:
        guard.attempts.append(address)
    raise CassetteError(f"a socket tried to connect to {address} while the network is blocked")


def _pairing(args: tuple[Any, ...], caller: CodeType) -> bool:
    """Whether the connection is the one ``socket.socketpair()`` makes to itself.

    Where the platform has no socketpair (Windows), ``socket.py`` makes the pair by
    connecting to a listener of its own on the loopback; every asyncio event loop makes
    a pair for itself, so refusing that connection would refuse every event loop.
    """
    address = args[1] if len(args) > 1 else None
    if not (isinstance(address, tuple) and address and address[0] in ("127.0.0.1", "::1")):
        return False
    # Where the fallback is used, socket.socketpair is that function itself.
    return caller is getattr(socket.socketpair, "__code__", None)


@contextmanager
def no_network() -> Iterator[NetworkGuard]:
    """Refuse every socket connection in this process while the block is open.

    A connection attempt raises :class:`~agcore_tools.testing.CassetteError` where it is made,
    and again when the block ends (in case the code that tried swallowed the first),
    naming the address. Listening and accepting are allowed (a server in another
    test's thread is not disturbed); connecting is what a replay must never do, except
    the loopback connection ``socket.socketpair()`` makes to itself where the platform
    has no socketpair (Windows), which every asyncio event loop needs.

    Example:
        >>> import socket
        >>> with no_network() as guard:
        ...     pass
        >>> guard.attempts
        []
        >>> try:
        ...     with no_network() as guard:
        ...         socket.create_connection(("127.0.0.1", 9), timeout=1)
        ... except Exception as exc:
        ...     print(type(exc).__name__, guard.attempts)
        CassetteError ["('127.0.0.1', 9)"]
    """
    global _installed
    guard = NetworkGuard()
    with _LOCK:
        if not _installed:
            sys.addaudithook(_hook)
            _installed = True
        _OPEN.append(guard)
    try:
        yield guard
    finally:
        with _LOCK:
            _OPEN.remove(guard)
    if guard.attempts:
        raise CassetteError(
            f"{len(guard.attempts)} connection(s) attempted while the network was blocked, "
            f"the first to {guard.attempts[0]}"
        )
