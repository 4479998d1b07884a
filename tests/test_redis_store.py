"""RedisStore against a real Redis server: the shared result cache, the shared rate
bucket (across processes), refusals, and errors that keep a URL's password out.

The session starts its own ``redis-server`` (Debian's package, which ``make test``
installs) on a unix socket in a temporary folder, with TCP off (``--port 0``) and
nothing saved to disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from agcore_tools import (
    Breaker,
    RateLimit,
    ResultCache,
    ToolConfigError,
    ToolError,
    ToolPolicy,
    ToolRegistry,
    ToolUnavailableError,
    _guard,
)
from agcore_tools.policies import CacheStore, RateStore

redis = pytest.importorskip(
    "redis", reason="redis-py (the redis extra, in dev) is not installed: run make test"
)

from agcore_tools.redis import RedisStore  # noqa: E402 (after the skip)

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def redis_socket(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A redis-server of this session, on a unix socket only; its path."""
    server = shutil.which("redis-server")
    if server is None:
        pytest.skip("redis-server is not installed: `make test` installs Debian's redis-server")
    folder = tmp_path_factory.mktemp("redis")
    socket = str(folder / "redis.sock")
    proc = subprocess.Popen(
        [
            *(server, "--port", "0", "--unixsocket", socket, "--unixsocketperm", "700"),
            *("--save", "", "--appendonly", "no", "--dir", str(folder), "--logfile", ""),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        client = redis.Redis(unix_socket_path=socket, socket_timeout=1.0)
        deadline = time.monotonic() + 10.0
        while True:
            if proc.poll() is not None:
                out = proc.stdout.read() if proc.stdout else ""
                pytest.fail(f"redis-server exited with {proc.returncode}: {out[-2000:]}")
            try:
                if client.ping():
                    break
            except (redis.ConnectionError, redis.TimeoutError, OSError):
                if time.monotonic() > deadline:
                    pytest.fail("redis-server did not answer PING within 10 s")
                time.sleep(0.02)
        client.close()
        yield socket
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.fixture
def prefix() -> str:
    """A key prefix of this test's own, so tests never see each other's keys."""
    return f"t{uuid.uuid4().hex[:10]}:"


@pytest.fixture
async def store(redis_socket: str, prefix: str) -> AsyncIterator[RedisStore]:
    async with RedisStore(f"unix://{redis_socket}", prefix=prefix) as store:
        yield store


def counting_registry(store: RedisStore, calls: list[str]) -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool(policy=ToolPolicy(cache=ResultCache(60, store=store)))
    def lookup(order_id: str) -> dict[str, str]:
        """Look an order up."""
        calls.append(order_id)
        return {"order": order_id, "status": "shipped"}

    return registry


async def test_the_store_is_both_protocols_and_its_repr_names_where(
    store: RedisStore, redis_socket: str, prefix: str
) -> None:
    assert isinstance(store, RateStore) and isinstance(store, CacheStore)
    assert repr(store) == f"RedisStore('unix://{redis_socket}', prefix='{prefix}')"
    # A client given is used as is, and left open.
    client = redis.asyncio.Redis(unix_socket_path=redis_socket, decode_responses=True)
    async with RedisStore(client, prefix=prefix) as given:
        await given.set("k", "é", ttl=5)
        assert await given.get("k") == "é"
        assert await store.get("k") == "é"  # bytes from the other client, decoded
    assert await client.ping()
    await client.aclose()


async def test_cache_set_get_and_expiry(store: RedisStore) -> None:
    assert await store.get("missing") is None
    await store.set("long", '{"a": 1}', ttl=60)
    await store.set("short", '"x"', ttl=0.05)
    assert await store.get("long") == '{"a": 1}'
    assert 0 < await store.client.pttl(store.cache_key("long")) <= 60_000
    assert 0 < await store.client.pttl(store.cache_key("short")) <= 50
    await asyncio.sleep(0.1)  # never ends early: the 50 ms are over
    assert await store.get("short") is None
    assert await store.get("long") == '{"a": 1}'


async def test_two_registries_share_results_through_the_store(
    redis_socket: str, prefix: str
) -> None:
    # Two workers: each has its own registry and its own store on the same server.
    first_calls: list[str] = []
    second_calls: list[str] = []
    url = f"unix://{redis_socket}"
    async with RedisStore(url, prefix=prefix) as one, RedisStore(url, prefix=prefix) as two:
        first, second = counting_registry(one, first_calls), counting_registry(two, second_calls)
        ran = await first.invoke("lookup", {"order_id": "A1"})
        answered = await second.invoke("lookup", {"order_id": "A1"})
        assert (ran.cached, answered.cached) == (False, True)
        assert answered.output == ran.output == {"order": "A1", "status": "shipped"}
        assert first_calls == ["A1"] and second_calls == []
        # Other arguments are another key.
        other = await second.invoke("lookup", {"order_id": "B2"})
        assert not other.cached and second_calls == ["B2"]


async def test_reserve_takes_turns_like_the_memory_store(store: RedisStore) -> None:
    limit = RateLimit(2, per=1.0)  # a turn every 0.5 s, 2 back to back
    assert [await store.reserve("k", limit, 0.0) for _ in range(2)] == [0.0, 0.0]
    assert await store.reserve("k", limit, 0.0) is None  # would wait: refused...
    assert await store.reserve("k", limit, 0.3) is None
    # ...with nothing taken: the next turn is still the first one after the burst,
    # at most 0.5 s after the first reservation (had a refusal taken it, about 1 s).
    first = await store.reserve("k", limit, float("inf"))
    assert first is not None and 0.0 < first <= 0.5
    second = await store.reserve("k", limit, 10.0)
    assert second is not None and 0.5 < second <= 1.0
    # The bucket's key vanishes once the bucket is full again (~2 s from now).
    assert 0 < await store.client.pttl(store.rate_key("k")) <= 2000
    # Buckets are separate.
    assert await store.reserve("other", limit, 0.0) == 0.0


async def test_give_back_returns_a_turn_like_the_memory_store(store: RedisStore) -> None:
    limit = RateLimit(1, per=60.0)
    assert await store.reserve("k", limit, 0.0) == 0.0
    waited = await store.reserve("k", limit, float("inf"))
    assert waited is not None and 59.0 < waited <= 60.0
    await store.give_back("k", limit)  # the second call never started
    again = await store.reserve("k", limit, float("inf"))
    assert again is not None and 59.0 < again <= 60.0
    # Never fuller than full: giving back two turns of one leaves a single turn.
    await store.give_back("k", limit)
    await store.give_back("k", limit)
    assert await store.client.exists(store.rate_key("k")) == 0
    assert await store.reserve("k", limit, 0.0) == 0.0
    assert await store.reserve("k", limit, 0.0) is None
    await store.give_back("absent", limit)  # nothing to give back: nothing happens
    assert await store.client.exists(store.rate_key("absent")) == 0


async def test_a_tool_set_not_to_wait_is_refused_through_the_store(
    store: RedisStore, redis_socket: str
) -> None:
    registry = ToolRegistry()

    @registry.tool(policy=ToolPolicy(rate=RateLimit(1, per=60, wait=False, store=store)))
    def send(text: str) -> str:
        """Send a message."""
        return f"sent {text}"

    assert (await registry.invoke("send", {"text": "a"})).output == "sent a"
    # The key the guide names: {prefix}rate:tool:<name> ({prefix}rate:resource:<name>).
    assert await store.client.exists(f"{store.prefix}rate:tool:send") == 1
    with pytest.raises(ToolUnavailableError, match=r"over its rate limit of 1 call\(s\) per 60 s"):
        await registry.invoke("send", {"text": "b"})
    # The bucket is the server's: another registry and store share it.
    async with RedisStore(f"unix://{redis_socket}", prefix=store.prefix) as other_store:
        other = ToolRegistry()

        @other.tool(
            name="send", policy=ToolPolicy(rate=RateLimit(1, per=60, wait=False, store=other_store))
        )
        def send_again(text: str) -> str:
            """Send a message."""
            return f"sent {text}"

        with pytest.raises(ToolUnavailableError):
            await other.invoke("send", {"text": "c"})


async def test_a_full_redis_or_none_never_fails_a_call_that_ran(
    store: RedisStore, tmp_path: Path
) -> None:
    calls: list[str] = []
    registry = counting_registry(store, calls)
    await store.client.config_set("maxmemory", "1")  # full: SET refused (OOM), GET works
    try:
        result = await registry.invoke("lookup", {"order_id": "A1"})
    finally:
        await store.client.config_set("maxmemory", "0")
    assert result.ok and result.output == {"order": "A1", "status": "shipped"}
    assert result.may_have_run and not result.cached and calls == ["A1"]
    # No server at all: a rate limit cannot be checked, so the call is refused unrun,
    # which the model is told and the breaker never counts.
    async with RedisStore(f"unix://{tmp_path}/no-such.sock") as gone:
        registry = ToolRegistry()

        @registry.tool(policy=ToolPolicy(rate=RateLimit(5, store=gone), breaker=Breaker(1)))
        def send(text: str) -> str:
            """Send a message."""
            return f"sent {text}"

        refused = await registry.invoke_all([("send", {"text": "a"})] * 2)
    assert [(r.ok, r.may_have_run) for r in refused] == [(False, False)] * 2
    error = refused[0].error
    assert isinstance(error, ToolUnavailableError)
    assert str(error).startswith("tool 'send' is unavailable: its rate limit could not be checked")
    assert isinstance(error.__cause__, ToolError) and registry.unavailable_tools() == []


@contextlib.asynccontextmanager
async def silent_server() -> AsyncIterator[int]:
    """The port of a server on 127.0.0.1 that accepts connections and never answers
    (partitioned, stalled in a fork)."""
    held: list[asyncio.StreamWriter] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)  # read nothing, answer nothing

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        for writer in held:
            writer.close()
        server.close()
        await server.wait_closed()


async def test_a_redis_that_never_answers_leaves_the_tool_to_run_uncached(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A server that accepts connections and never answers (partitioned, stalled in a
    # fork): each cache read and write gives up at its bound, within the call's time,
    # and the tool runs. Nothing is a failure: not of the call, not to the breaker.
    caplog.set_level(logging.WARNING, "agcore_tools.policies")
    runs: list[str] = []
    async with (
        silent_server() as port,
        RedisStore(f"redis://127.0.0.1:{port}/0", prefix="t:") as store,
    ):
        registry = ToolRegistry()
        breaker = Breaker(failures=1)
        cache = ResultCache(60, store=store, store_timeout=0.2)

        @registry.tool(policy=ToolPolicy(cache=cache, breaker=breaker))
        def lookup(order_id: str) -> str:
            """Look an order up."""
            runs.append(order_id)
            return f"order {order_id}: shipped"

        # The default bound (0.5 s) is cut to half the time left: the tool's own
        # timeout of 0.6 s leaves it time to run.
        slow = ResultCache(60, store=store)

        @registry.tool(timeout=0.6, policy=ToolPolicy(cache=slow, breaker=breaker))
        def stock(sku: str) -> int:
            """Stock level."""
            runs.append(sku)
            return 3

        (first,) = await registry.invoke_all([("lookup", {"order_id": "A1"})], timeout=2.0)
        second = await registry.invoke("lookup", {"order_id": "A2"})  # no timeout at all
        third = await registry.invoke("stock", {"sku": "B1"})
    for result in (first, second, third):
        assert result.ok and result.may_have_run and not result.cached, result.error
    assert first.output == "order A1: shipped" and third.output == 3
    assert runs == ["A1", "A2", "B1"] and registry.unavailable_tools() == []
    # One warning a call, and no write after a read that failed; the own timeout's call
    # read for half its 0.6 s at most, not the default 0.5 s.
    read = "could not be read; the call runs uncached: no answer within "
    warned = [r.getMessage() for r in caplog.records if r.name == "agcore_tools.policies"]
    bounds = [float(m.split(read)[1][:-2]) for m in warned if read in m]
    assert len(warned) == 3 and bounds[:2] == [0.2, 0.2] and bounds[2] <= 0.3, warned


async def test_a_rate_store_that_never_answers_refuses_a_call_with_no_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A call with no timeout of its own asks a stalled store for its turn: it is refused
    # unrun at the bound, instead of waiting as long as the store stalls. (redis-py's
    # own socket timeout, 5 s by default in 8.x, is off here, as a client may have it.)
    monkeypatch.setattr(_guard, "RESERVE_TIMEOUT", 0.3, raising=False)
    runs: list[str] = []
    async with silent_server() as port:
        url = f"redis://127.0.0.1:{port}/0"
        async with RedisStore(url, prefix="t:", socket_timeout=None) as store:
            registry = ToolRegistry()

            @registry.tool(policy=ToolPolicy(rate=RateLimit(5, per=1.0, store=store)))
            def lookup(order_id: str) -> str:
                """Look an order up."""
                runs.append(order_id)
                return "shipped"

            calls = registry.invoke_all([("lookup", {"order_id": "A1"})])  # no timeout
            (result,) = await asyncio.wait_for(calls, 10)
    assert isinstance(result.error, ToolUnavailableError) and not result.may_have_run
    assert str(result.error) == (
        "tool 'lookup' is unavailable: its rate limit could not be checked: no answer within 0.3 s"
    )
    assert runs == [] and registry.entry("lookup").stats.failures == 0


_WORKER = textwrap.dedent(
    """
    import asyncio, json, sys, time
    from agcore_tools import RateLimit, ToolPolicy, ToolRegistry
    from agcore_tools.redis import RedisStore

    socket, prefix, calls = sys.argv[1], sys.argv[2], int(sys.argv[3])

    async def main() -> None:
        starts = []
        async with RedisStore(f"unix://{socket}", prefix=prefix) as store:
            registry = ToolRegistry()
            limit = RateLimit(5, per=0.25, burst=2, store=store)

            @registry.tool(policy=ToolPolicy(rate=limit))
            def ping() -> str:
                '''Ping.'''
                starts.append(time.time())
                return "pong"

            await store.client.ping()  # connected before the start
            print("ready", flush=True)
            sys.stdin.readline()
            done = await asyncio.gather(*(registry.invoke("ping", {}) for _ in range(calls)))
            assert all(inv.ok for inv in done), [inv.error for inv in done]
        print(json.dumps(starts), flush=True)

    asyncio.run(main())
    """
)


def test_a_rate_limit_holds_across_processes(redis_socket: str, prefix: str) -> None:
    # Two processes, each with its own registry and store, fire 12 calls each at a tool
    # limited to 5 calls per 0.25 s (a turn every 50 ms) with a burst of 2. The bucket
    # starts full when they start; from then on, at any moment t, the calls started by
    # both together are at most burst + (t - start) / interval. Deterministic: a call
    # starts no earlier than its turn on the server's clock (a sleep never ends early),
    # and the server's clock is this machine's wall clock.
    interval, burst, calls = 0.05, 2, 12
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, redis_socket, prefix, str(calls)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=ROOT,
        )
        for _ in range(2)
    ]
    try:
        for worker in workers:
            assert worker.stdout is not None
            line = worker.stdout.readline()
            assert line == "ready\n", (line, worker.stderr.read() if worker.stderr else "")
        begin = time.time()
        for worker in workers:  # both go at once
            assert worker.stdin is not None
            worker.stdin.write("go\n")
            worker.stdin.close()
        outputs = []
        for worker in workers:
            assert worker.stdout is not None and worker.stderr is not None
            outputs.append((worker.stdout.read(), worker.stderr.read()))
            worker.wait(timeout=30)
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait(timeout=5)
            for pipe in (worker.stdout, worker.stderr):
                if pipe is not None:
                    pipe.close()
    for worker, (_, err) in zip(workers, outputs, strict=True):
        assert worker.returncode == 0, err
    starts = sorted(t for out, _ in outputs for t in json.loads(out.splitlines()[-1]))
    assert len(starts) == 2 * calls
    # The k-th start (from 0) is no earlier than the (k + 1 - burst)-th interval after
    # the start, give or take the server clock's microsecond.
    early = [
        (k, round(t - begin, 4))
        for k, t in enumerate(starts)
        if t < begin + (k + 1 - burst) * interval - 1e-3
    ]
    assert not early, f"calls started ahead of their turn: {early}"
    # So together they took at least (2 * calls - burst) intervals: a bucket per process
    # would have let them through in about half that.
    assert starts[-1] - begin >= (2 * calls - burst) * interval - 1e-3


async def test_errors_name_what_failed_and_leave_the_password_out(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    secret = "hunter2-Zq9"
    urls = [
        f"unix://:{secret}@{tmp_path}/no-such.sock",
        f"redis://agent:{secret}@127.0.0.1:1/0",  # port 1: refused
    ]
    limit = RateLimit(1)
    for url in urls:
        async with RedisStore(url) as store:
            assert secret not in repr(store) and "://***@" in repr(store)
            assert "agent" not in repr(store)  # all between '://' and '@' is hidden
            attempts = [
                ("reading cached result 'k'", store.get("k")),
                ("caching result 'k'", store.set("k", "v", 1.0)),
                ("reserving a turn in rate bucket 'b'", store.reserve("b", limit, 1.0)),
            ]
            for what, attempt in attempts:
                with pytest.raises(ToolError) as caught:
                    await attempt
                text = str(caught.value)
                assert secret not in text and "\n" not in text
                assert text.startswith("RedisStore on ") and f"{what} failed: " in text
                assert isinstance(caught.value.__cause__, redis.RedisError)
    # A URL redis-py refuses to parse: a configuration error, still without the password.
    with pytest.raises(ToolConfigError) as bad:
        RedisStore(f"redis://:{secret}@localhost:notaport/0")
    assert secret not in str(bad.value)
    # A password written URL-encoded is left out in both forms.
    async with RedisStore("redis://:hunter%402@127.0.0.1:1/0") as encoded:
        with pytest.raises(ToolError) as caught:
            await encoded.get("k")
        assert "hunter" not in str(caught.value) and "hunter" not in repr(encoded)
    assert not [r for r in caplog.records if secret in r.getMessage()]


@pytest.mark.parametrize(
    "password",
    [
        "Zq8v/Kp2+T1mNw9xR4=",  # an Azure Cache for Redis key: base64
        "9120/Kp2+T1mNw9xR4=",  # digits first: read as a port, no password sent
        "hunter#2x",
        "s3cr?et9",
        "p@ss/w0rd",
    ],
)
async def test_a_password_holding_url_delimiters_is_never_shown(
    password: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Unencoded, redis-py would read part of the password as the host, port or path
    # (and show it in its errors): the URL is refused, and the error hides it all.
    caplog.set_level(logging.DEBUG)
    pieces = [p for p in re.split(r"[/?#@]", password) if len(p) > 2]
    with pytest.raises(ToolConfigError) as caught:
        RedisStore(f"rediss://default:{password}@cache.example.net:6380/0")
    text = str(caught.value)
    assert text.startswith("RedisStore('rediss://***@cache.example.net:6380/0'): ")
    assert "percent-encode the password" in text and "\n" not in text
    assert not [p for p in pieces if p in text], text
    # Percent-encoded, it is read whole and still never shown.
    async with RedisStore(f"redis://agent:{quote(password, safe='')}@127.0.0.1:1/0") as store:
        assert store.client.connection_pool.connection_kwargs["password"] == password
        assert repr(store) == "RedisStore('redis://***@127.0.0.1:1/0', prefix='agcore:')"
        with pytest.raises(ToolError) as failed:
            await store.get("k")
        assert not [p for p in pieces if p in str(failed.value)], str(failed.value)
    assert not [r for r in caplog.records for p in pieces if p in r.getMessage()]


async def test_a_password_in_the_query_is_left_out_too(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # redis-py's documented forms also take the password (and username) from the query.
    caplog.set_level(logging.DEBUG)
    secret = "hunter2 Qz9"
    urls = [
        f"unix://{tmp_path}/no-such.sock?db=0&password=hunter2+Qz9",
        "rediss://127.0.0.1:1/0?password=hunter2%20Qz9&ssl_password=hunter2+key",
        "redis://127.0.0.1:1/0?username=agent&password=hunter2%20Qz9",
    ]
    for url in urls:
        async with RedisStore(url) as store:
            assert store.client.connection_pool.connection_kwargs["password"] == secret
            assert "ssl_password" not in url or "ssl_password=***" in repr(store)
            assert "hunter2" not in repr(store) and "password=***" in repr(store)
            with pytest.raises(ToolError) as caught:
                await store.get("k")
            assert "hunter2" not in str(caught.value)
            assert "password=***" in str(caught.value)
    assert "username=***" in repr(store) and "agent" not in repr(store)
    assert not [r for r in caplog.records if "hunter2" in r.getMessage()]


async def test_an_at_sign_in_a_query_value_or_a_socket_path_is_read_as_written(
    redis_socket: str, prefix: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Both were refused (an '@' after the host), and the refusal showed the password's
    # end: RedisStore('redis://***@ss-Qz9'). There an '@' is the path's or a value's, as
    # redis-py reads it, not the end of a cut password.
    caplog.set_level(logging.DEBUG)
    password, user = "p@ss-Qz9", f"u{uuid.uuid4().hex[:10]}"
    folder = tmp_path / "run@1000"  # a socket's path with an '@', through a link
    folder.mkdir()
    (folder / "redis.sock").symlink_to(redis_socket)
    admin = redis.asyncio.Redis(unix_socket_path=redis_socket)
    try:
        await admin.acl_setuser(
            user, enabled=True, passwords=[f"+{password}"], keys="*", commands=["+@all"]
        )
        url = f"unix://{folder}/redis.sock?db=0&username={user}&password={password}"
        async with RedisStore(url, prefix=prefix) as store:
            kwargs = store.client.connection_pool.connection_kwargs
            assert (kwargs["path"], kwargs["password"]) == (f"{folder}/redis.sock", password)
            assert repr(store) == (
                f"RedisStore('unix://{folder}/redis.sock?db=0&username=***&password=***', "
                f"prefix='{prefix}')"
            )
            await store.set("k", "v", ttl=5)
            assert await store.get("k") == "v"
            assert await store.client.acl_whoami() == user  # signed in with it
    finally:
        await admin.acl_deluser(user)
        await admin.aclose()
    # Over TCP, after the database number: read whole, and never shown.
    async with RedisStore(f"redis://127.0.0.1:1/0?password={password}") as tcp:
        assert tcp.client.connection_pool.connection_kwargs["password"] == password
        assert repr(tcp) == "RedisStore('redis://127.0.0.1:1/0?password=***', prefix='agcore:')"
        with pytest.raises(ToolError) as caught:
            await tcp.get("k")
        assert "password=***" in str(caught.value)
        assert "p@" not in str(caught.value) and "ss-Qz9" not in str(caught.value)
    assert not [r for r in caplog.records if "ss-Qz9" in r.getMessage()]


@pytest.mark.parametrize(
    ("url", "shown", "pieces"),
    [
        # A '#' cuts the query's password: refused, and its '@' is not taken for the
        # userinfo's (the old refusal showed RedisStore('redis://***@ss-Qz9#***')).
        ("redis://localhost:6379/0?password=p@ss-Qz9#x", "redis://***", ["ss-Qz9"]),
        # With no database number, the query may be the rest of a password 6379?...:
        # refused, the '@' may be either, so nothing after '://' is shown.
        ("redis://localhost:6379?password=p@ss-Qz9", "redis://***", ["ss-Qz9"]),
        ("rediss://default:s3cr?e=t9Qz@cache.example.net:6380/0", "rediss://***", ["s3cr", "t9Qz"]),
        # Behind a database number, but the "port" is no number: a password Kq/0?...
        (
            "rediss://default:Kq/0?password=Zt@cache.example.net:6380/0",
            "rediss://***",
            ["Kq", "Zt"],
        ),
        # A socket URL names no host: text before an '@' in its path is a password's.
        ("unix://:s3cr/et9Qz@/run/redis.sock", "unix://***@/run/redis.sock", ["s3cr", "et9Qz"]),
        ("unix://:s3cr?et9Qz@/run/redis.sock", "unix://***@/run/redis.sock", ["s3cr", "et9Qz"]),
    ],
)
def test_a_url_refused_for_an_at_sign_shows_no_part_of_a_password(
    url: str, shown: str, pieces: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with pytest.raises(ToolConfigError) as caught:
        RedisStore(url)
    text = str(caught.value)
    assert text.startswith(f"RedisStore({shown!r}): ") and "percent-encode the password" in text
    assert not [p for p in pieces if p in text], text
    assert not caplog.records


async def test_the_default_prefix_on_a_server_over_tcp_is_a_warning_once(
    redis_socket: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The prefix is the only namespace: apps that leave it out share their caches and
    # rate buckets on a server they share. Said once per server; a prefix chosen, even
    # the default, or a unix socket (one host's) says nothing.
    caplog.set_level(logging.WARNING, "agcore_tools.policies")
    host, other = (f"h{uuid.uuid4().hex[:10]}.invalid" for _ in range(2))
    stores = [
        RedisStore(f"redis://:s3cret@{host}:6379/0"),
        RedisStore.from_url(f"redis://:s3cret@{host}:6379/0"),  # the same server
        RedisStore(f"redis://{host}:6379/1", prefix="agcore:"),
        RedisStore(f"unix://{redis_socket}"),
        RedisStore(redis.asyncio.Redis(unix_socket_path=redis_socket)),
        RedisStore(redis.asyncio.Redis(host=other, port=6380)),
    ]
    try:
        assert {store.prefix for store in stores} == {"agcore:"}
    finally:
        for store in stores:
            await store.aclose()
        await stores[-2].client.aclose()
        await stores[-1].client.aclose()
    warned = [r.getMessage() for r in caplog.records if r.name == "agcore_tools.policies"]
    assert [m.split(" uses ")[0] for m in warned] == [
        f"RedisStore on redis://***@{host}:6379/0",
        f"RedisStore on redis://{other}:6380/0",
    ]
    assert all("default key prefix 'agcore:'" in m and "prefix='agcore:'" in m for m in warned)
    assert "s3cret" not in "".join(warned)


def test_without_redis_py_the_store_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)  # as if it were not installed
    with pytest.raises(ToolConfigError, match=r"pip install 'agcore-tools\[redis\]'"):
        RedisStore("redis://localhost")


async def test_a_call_cancelled_in_its_wait_never_waits_on_a_stalled_store(
    redis_socket: str, prefix: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A call cancelled after taking its turn gives the turn back to the store; a store
    # that stopped answering held the cancellation (a Ctrl-C) for as long as it stalled.
    caplog.set_level(logging.WARNING, "agcore_tools.policies")
    stalled = asyncio.Event()
    pumps: list[asyncio.Task[None]] = []

    async def pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):
            if not stalled.is_set():  # stalled: read and never answered
                writer.write(data)
                await writer.drain()

    async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream = await asyncio.open_unix_connection(redis_socket)
        pumps.extend(
            asyncio.ensure_future(job)
            for job in (pump(reader, upstream), pump(upstream_reader, writer))
        )

    relay_path = str(tmp_path / "relay.sock")
    server = await asyncio.start_unix_server(relay, relay_path)
    release, entered = asyncio.Event(), asyncio.Event()
    try:
        async with RedisStore(f"unix://{relay_path}", prefix=prefix) as store:
            registry = ToolRegistry()
            limit = RateLimit(10, per=1.0, store=store)

            @registry.tool(policy=ToolPolicy(rate=limit, concurrency=1))
            async def write(text: str) -> str:
                """Write a line."""
                entered.set()
                await release.wait()
                return text

            holder = asyncio.ensure_future(registry.invoke("write", {"text": "a"}))
            await asyncio.wait_for(entered.wait(), 10.0)  # it holds the slot
            waiter = asyncio.ensure_future(registry.invoke("write", {"text": "b"}))
            slots = registry.entry("write").guard.slots
            # Until the second call has its turn (a round trip to the server), and waits
            # for the slot.
            for _ in range(1000):
                if slots.waiters:
                    break
                await asyncio.sleep(0.01)
            assert len(slots.waiters) == 1
            stalled.set()
            waiter.cancel()
            done, _ = await asyncio.wait({waiter}, timeout=5.0)
            assert done and waiter.cancelled()
            release.set()
            assert (await holder).output == "a"
    finally:
        release.set()
        for job in pumps:
            job.cancel()
        await asyncio.gather(*pumps, return_exceptions=True)
        server.close()
        await server.wait_closed()
    warned = [r.getMessage() for r in caplog.records if r.name == "agcore_tools.policies"]
    assert warned == [
        "tool 'write': could not give back the rate turn of a call that never started: "
        "no answer within 0.5 s"
    ]
