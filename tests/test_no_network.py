"""no_network(): what it refuses beside connections (DNS lookups, datagrams off the
machine) and what it leaves working (the loopback)."""

from __future__ import annotations

import asyncio
import contextlib
import socket

import pytest

from agcore_tools.testing import CassetteError, no_network

# Names and addresses that never reach anyone: RFC 6761's .invalid, RFC 5737's TEST-NET-1.
NOWHERE = "api.example.invalid"
TEST_NET = "192.0.2.1"


def test_a_dns_lookup_of_a_name_off_the_machine_is_refused() -> None:
    # Only connections were refused: the lookup went to the name server, which a replay
    # must not reach (a name in a query can carry data out).
    refused = r"DNS lookup of 'api\.example\.invalid'"
    with pytest.raises(CassetteError, match=refused), no_network() as guard:
        socket.getaddrinfo(NOWHERE, 443)
    assert guard.attempts == [f"DNS lookup of {NOWHERE!r}"]
    with pytest.raises(CassetteError, match="DNS lookup"), no_network():
        socket.gethostbyname(NOWHERE)


def test_a_lookup_swallowed_in_an_event_loop_s_worker_thread_fails_the_block() -> None:
    async def look_up() -> None:
        # The code under test hides the error; the block still tells.
        with contextlib.suppress(Exception):
            await asyncio.get_running_loop().getaddrinfo(NOWHERE, 443)

    with pytest.raises(CassetteError) as caught, no_network() as guard:
        asyncio.run(look_up())
    assert str(caught.value) == (
        "1 attempt(s) to use the network while it was blocked, "
        f"the first: DNS lookup of {NOWHERE!r}"
    )
    assert guard.attempts == [f"DNS lookup of {NOWHERE!r}"]


def test_a_datagram_off_the_machine_is_refused() -> None:
    # sendto() needs no connect(): a UDP datagram (statsd, telemetry) went out.
    with (
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp,
        pytest.raises(CassetteError, match=r"datagram to \('192\.0\.2\.1', 9\)"),
        no_network() as guard,
    ):
        udp.sendto(b"x", (TEST_NET, 9))
    assert guard.attempts == ["datagram to ('192.0.2.1', 9)"]


def test_the_loopback_s_lookups_and_datagrams_still_work() -> None:
    with (
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as receiver,
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender,
    ):
        receiver.bind(("127.0.0.1", 0))
        receiver.settimeout(5)
        with no_network() as guard:
            assert socket.getaddrinfo("localhost", 80)
            assert socket.getaddrinfo("127.0.0.1", 80)  # an address asks no name server
            assert socket.getaddrinfo(None, 80, flags=socket.AI_PASSIVE)  # a listener's
            sender.sendto(b"ping", receiver.getsockname())
            assert receiver.recvfrom(16)[0] == b"ping"
    assert guard.attempts == []


def test_connections_are_still_refused_the_loopback_s_too() -> None:
    with pytest.raises(CassetteError, match="connect to"), no_network() as guard:
        socket.create_connection(("127.0.0.1", 9), timeout=1)
    assert guard.attempts == ["('127.0.0.1', 9)"]


@pytest.mark.skipif(not hasattr(socket, "AF_NETLINK"), reason="netlink is Linux's")
def test_a_netlink_datagram_to_the_kernel_is_not_refused() -> None:
    # A netlink address is (pid, groups): (0, 0) is the kernel, in this machine; it was
    # judged as an IP address, and refused.
    with (
        socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0) as kernel,
        no_network() as guard,
    ):
        kernel.sendto(bytes(16), (0, 0))
    assert guard.attempts == []
