"""A block on the network, through an audit hook (no patching).

``socket.connect``, ``socket.getaddrinfo`` (and ``gethostbyname``), ``socket.sendto``
and ``socket.sendmsg`` raise audit events (PEP 578) before they act, in whichever
thread acts; a hook that raises there stops the connection, the DNS lookup or the
datagram. The hook is added to the process once, the first time :func:`no_network` is
used (audit hooks cannot be removed), and does nothing while no block is open.
"""

from __future__ import annotations

import ipaddress
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
    """What :func:`no_network` saw: everything that tried to reach the network.

    Example:
        >>> with no_network() as guard:
        ...     pass
        >>> guard.attempts, guard
        ([], <NetworkGuard 0 attempt(s) refused>)
    """

    def __init__(self) -> None:
        self.attempts: list[str] = []
        """What was refused, in order: a connection's address (``"('10.0.0.1', 443)"``),
        ``"DNS lookup of 'api.openai.com'"``, ``"datagram to ('8.8.8.8', 53)"``."""

    def __repr__(self) -> str:
        return f"<NetworkGuard {len(self.attempts)} attempt(s) refused>"


_LOOKUPS = ("socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyname_ex")
_DATAGRAMS = ("socket.sendto", "socket.sendmsg")
# Families whose datagrams stay in the machine (a Unix socket's, the kernel's netlink).
_LOCAL_FAMILIES = frozenset(
    getattr(socket, name) for name in ("AF_UNIX", "AF_NETLINK") if hasattr(socket, name)
)


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if not _OPEN:
        return
    if event == "socket.connect":
        if _pairing(args, sys._getframe(1).f_code):
            return
        attempt = repr(args[1]) if len(args) > 1 else "?"
        message = f"a socket tried to connect to {attempt}"
    elif event in _LOOKUPS:
        if not args or _local_host(args[0]):
            return
        attempt = f"DNS lookup of {args[0]!r}"
        message = f"a {attempt} was tried"
    elif event in _DATAGRAMS:
        address = args[1] if len(args) > 1 else None
        if getattr(args[0], "family", None) in _LOCAL_FAMILIES:
            return
        if not isinstance(address, tuple) or not address or _loopback(address[0]):
            return  # a connected socket's (its connect was judged)
        attempt = f"datagram to {address!r}"
        message = f"a socket tried to send a {attempt}"
    else:
        return
    for guard in _OPEN:
        guard.attempts.append(attempt)
    raise CassetteError(f"{message} while the network is blocked")


def _local_host(host: object) -> bool:
    """Whether looking ``host`` up asks no name server: no host (a listener's), an IP
    address as text, or ``localhost`` and its subdomains (RFC 6761)."""
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str) or not host:
        return True
    name = host.lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _loopback(host: object) -> bool:
    """Whether a datagram to ``host`` stays on this machine."""
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return False
    name = host.lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name.partition("%")[0]).is_loopback
    except ValueError:
        return False


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
    """Refuse every socket connection, DNS lookup and datagram off this machine in this
    process while the block is open.

    An attempt raises :class:`~agcore_tools.testing.CassetteError` where it is made,
    and again when the block ends (in case the code that tried swallowed the first),
    naming what was tried. Refused: ``connect()`` to any address, the loopback
    included (a replay must not reach a local model server either), except the
    loopback connection ``socket.socketpair()`` makes to itself where the platform
    has no socketpair (Windows), which every asyncio event loop needs; a name lookup
    (``getaddrinfo``, ``gethostbyname``, ``gethostbyname_ex``, which asyncio and httpx
    use) of any name but ``localhost`` and its subdomains (an IP address given as text
    asks no name server, and passes); a datagram (``sendto``, ``sendmsg``) to any
    address but the loopback. Allowed: listening and accepting (a server in another
    test's thread is not disturbed), the loopback's datagrams and lookups, a Unix or
    netlink socket's datagrams (connecting to a Unix socket is refused, as any
    connection). Not refused: reverse lookups (``gethostbyaddr``, ``getnameinfo``, as
    ``socket.getfqdn()`` makes). Not seen: what does not go through Python's ``socket``
    module (a C library's own sockets, a subprocess). The block is the whole process's,
    as the hook is: another thread's attempt while it is open (a test server's, the
    worker thread asyncio's ``getaddrinfo()`` runs in) is refused too.

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
        >>> try:
        ...     with no_network() as guard:
        ...         socket.getaddrinfo("api.openai.com", 443)
        ... except Exception as exc:
        ...     print(exc)
        a DNS lookup of 'api.openai.com' was tried while the network is blocked
        >>> with no_network() as guard:
        ...     _ = socket.getaddrinfo("localhost", 80)
        >>> guard.attempts
        []
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
        first = guard.attempts[0]
        if not first.startswith(("DNS lookup", "datagram")):
            first = f"connection to {first}"
        raise CassetteError(
            f"{len(guard.attempts)} attempt(s) to use the network while it was blocked, "
            f"the first: {first}"
        )
