"""The loop for sync apps: a sync OpenAI client, the *_sync methods, SyncEventStream."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from typing import Any

import pytest
from openai import AsyncOpenAI, AzureOpenAI, DefaultHttpxClient, OpenAI

from agcore_tools import (
    AssistantTextDelta,
    CycleConfig,
    LlmCycle,
    LlmError,
    SyncEventStream,
    ToolExecutionCompleted,
    ToolExecutionStarted,
    ToolRegistry,
    TurnComplete,
    _sync,
)
from agcore_tools.error import ClientTypeError, LlmConfigError, LlmUsageError
from agcore_tools.testing import Pause, RawStream, ScriptedChatServer

from .conftest import assert_history_valid

S = ScriptedChatServer
Serve = Callable[..., ScriptedChatServer]
CONFIG = CycleConfig("test-model", retry_initial_delay=0.01)


def sync_client(server: ScriptedChatServer, **options: Any) -> OpenAI:
    options.setdefault("max_retries", 0)
    return OpenAI(base_url=server.base_url, api_key="sk-sync", **options)


def tool_script() -> list[Any]:
    return [S.reply_tool_calls([("add", {"a": 2, "b": 3})], text="Adding."), S.reply_text("5")]


# -- a sync OpenAI client ------------------------------------------------------------------


def test_a_sync_openai_client_gets_an_async_twin_with_the_same_settings(serve: Serve) -> None:
    server = serve(S.reply_text("Hi"), S.reply_text("Hi again"))
    client = sync_client(
        server,
        organization="org-1",
        project="proj-1",
        timeout=7.5,
        max_retries=3,
        default_headers={"X-App": "sync-app"},
        default_query={"tenant": "t1"},
    )
    with client:
        with LlmCycle(CONFIG, client=client) as cycle:
            twin = cycle.client
            assert isinstance(twin, AsyncOpenAI) and twin is not client
            assert (twin.api_key, twin.organization, twin.project) == ("sk-sync", "org-1", "proj-1")
            assert (twin.base_url, twin.timeout, twin.max_retries) == (client.base_url, 7.5, 3)
            assert cycle.submit_sync("Hello").text == "Hi"
        # The cycle closed the twin it built, and left the caller's client alone.
        assert twin.is_closed() and not client.is_closed()

        # The async methods work with it too (this was a TypeError on the first await).
        async def ask() -> str:
            async with LlmCycle(CONFIG, client=client) as cycle:
                return (await cycle.submit("Hello again")).text

        assert asyncio.run(ask()) == "Hi again"
    for request in server.requests:
        headers = request.headers
        assert headers["authorization"] == "Bearer sk-sync"
        assert (headers["openai-organization"], headers["openai-project"]) == ("org-1", "proj-1")
        assert headers["x-app"] == "sync-app"
        assert request.path.endswith("?tenant=t1")


@pytest.mark.parametrize(
    "client",
    [
        "sk-not-a-client",
        None.__class__,
        OpenAI(api_key="-").chat,
        AzureOpenAI(api_key="-", api_version="2024-06-01", azure_endpoint="https://x.invalid"),
    ],
    ids=["str", "type", "resource", "sync-azure"],
)
def test_other_client_types_are_refused_at_construction(client: Any) -> None:
    with pytest.raises(
        TypeError, match=r"takes an openai\.AsyncOpenAI or an openai\.OpenAI"
    ) as info:
        LlmCycle(CONFIG, client=client)
    assert isinstance(info.value, LlmError)
    if isinstance(client, AzureOpenAI):
        assert "pass an AsyncAzureOpenAI" in str(info.value)
    else:
        assert str(info.value).endswith(f"got {type(client).__name__}")


def test_a_sync_client_with_an_api_key_provider_asks_it_for_each_request(serve: Serve) -> None:
    # OpenAI(api_key=callable): short-lived tokens (Azure Entra ID and the like). The SDK
    # leaves client.api_key "" until its first request, then the key of that moment.
    server = serve(S.reply_text("ok"), repeat=True)
    issued: list[str] = []

    def token() -> str:
        issued.append(f"token-{len(issued)}")
        return issued[-1]

    client = OpenAI(base_url=server.base_url, api_key=token, max_retries=0)
    with client, LlmCycle(CONFIG, client=client) as cycle:  # nothing sent yet
        cycle.submit_sync("one")
        cycle.submit_sync("two")
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "-"}])
        with LlmCycle(CONFIG, client=client) as later:  # after the client's own request
            later.submit_sync("three")
    # A fresh key each time (the cycle also asks for one to read the server's model list).
    sent = [request.headers["authorization"].removeprefix("Bearer ") for request in server.requests]
    assert len(sent) == len(set(sent)) == 4 and set(sent) <= set(issued)


def test_an_api_key_provider_that_fails_or_hangs_fails_the_call_as_an_llm_error(
    serve: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agcore_tools.cycle import _client

    server = serve(S.reply_text("ok"), repeat=True)
    release = threading.Event()

    def failing() -> str:
        raise RuntimeError("credential service unreachable")

    def hanging() -> str:
        release.wait(30)
        return "late"

    monkeypatch.setattr(_client, "KEY_PROVIDER_TIMEOUT", 0.2)
    try:
        for provider, message in [
            (failing, "provider of the sync OpenAI client given failed: RuntimeError: cred"),
            (hanging, "provider of the sync OpenAI client given did not return a key within"),
        ]:
            client = OpenAI(base_url=server.base_url, api_key=provider, max_retries=0)
            with client, LlmCycle(CycleConfig("m", max_retries=0), client=client) as cycle:
                with pytest.raises(LlmError, match=message) as info:
                    cycle.submit_sync("hi")
                assert isinstance(info.value.__cause__, (RuntimeError, TimeoutError))
                assert_history_valid(cycle.messages)
    finally:
        release.set()
    assert server.requests == []


def test_sync_clients_the_cycle_cannot_twin_are_refused_with_the_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from openai.providers import bedrock

    subject = {"token_type": "jwt", "get_token": lambda: "subject-token"}
    identity: Any = {"identity_provider_id": "i", "service_account_id": "s", "provider": subject}
    for client, option in [
        (OpenAI(workload_identity=identity), "workload_identity"),
        (OpenAI(provider=bedrock(region="us-east-1", api_key="-")), "provider"),
        # Its proxy, certificates and hooks were dropped without a word.
        (OpenAI(api_key="-", http_client=DefaultHttpxClient()), "http_client"),
    ]:
        with pytest.raises(ClientTypeError, match=f"built with {option}= cannot be converted"):
            LlmCycle(CONFIG, client=client)
    # An admin key alone authenticates no model request: the SDK refuses the twin, and
    # the cycle says whose client that was.
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_ADMIN_KEY", raising=False)
    admin_only = OpenAI(admin_api_key="admin-key", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(LlmConfigError, match="cannot build the AsyncOpenAI twin") as info:
        LlmCycle(CONFIG, client=admin_only)
    assert isinstance(info.value, ValueError) and "Missing credentials" in str(info.value)
    assert "admin-key" not in str(info.value)


# -- the loop, not streamed ---------------------------------------------------------------


def test_submit_with_tools_sync_runs_the_loop(serve: Serve, calc: ToolRegistry) -> None:
    server = serve(*tool_script())
    with sync_client(server) as client, LlmCycle(CONFIG, client=client) as cycle:
        response = cycle.submit_with_tools_sync("What is 2 + 3?", calc)
        assert response.text == "5" and response.turns == 2
        assert [m["role"] for m in cycle.messages] == ["user", "assistant", "tool", "assistant"]
        assert calc.runs == [("add", {"a": 2, "b": 3})]  # type: ignore[attr-defined]
        server.add(S.reply_text("Bonjour"))
        answer = cycle.submit_messages_sync([{"role": "user", "content": "In French?"}])
        assert answer.text == "Bonjour" and len(cycle.messages) == 6


def test_an_async_client_keeps_its_connections_across_sync_calls(serve: Serve) -> None:
    # The client's connection pool belongs to the loop that opened it. With
    # asyncio.run() per call the second call fails ("Event loop is closed"); the sync
    # methods all run on the one library loop, so the pool stays usable.
    server = serve(S.reply_text("one"), S.reply_text("two"), S.reply_text("three"))
    cycle = LlmCycle(CONFIG, client=server.client(timeout=10.0))
    assert [cycle.submit_sync(p).text for p in ("1", "2", "3")] == ["one", "two", "three"]
    cycle.close_sync()  # a client the caller passed stays open ...
    assert not cycle.client.is_closed()
    _sync.run(cycle.client.close())  # ... and is closed on the loop it was used on


def test_a_cycle_used_from_a_second_event_loop_says_so(serve: Serve) -> None:
    # What asyncio.run() per call gives: the pool's connection belongs to the first,
    # closed loop. Asyncio's bare RuntimeError ("Event loop is closed") came after the
    # request was sent; now an error naming the cause and the fix comes before.
    server = serve(S.reply_text("one"), S.reply_text("two"))
    cycle = LlmCycle(CONFIG, client=server.client(timeout=10.0))

    async def ask(prompt: str) -> str:
        return (await cycle.submit(prompt)).text

    assert asyncio.run(ask("1")) == "one"
    with pytest.raises(LlmUsageError, match="belong to the event loop of its first") as caught:
        asyncio.run(ask("2"))
    assert isinstance(caught.value, TypeError)
    assert len(server.requests) == 1  # nothing sent, nothing billed
    assert cycle.messages[-1] == {"role": "assistant", "content": "one"}  # history untouched


def test_one_async_client_shared_by_cycles_in_two_event_loops_is_refused_unsent(
    serve: Serve,
) -> None:
    # A new cycle per call on one AsyncOpenAI, as advised, but from two loops: a CLI's
    # asyncio.run() per command, or a notebook cell that awaits and a later one that
    # calls a *_sync helper. Every other call failed with asyncio's bare RuntimeError,
    # after its request had reached the model.
    server = serve(S.reply_text("hi"), repeat=True)
    client = server.client(timeout=10.0)

    async def command() -> str:
        return (await LlmCycle(CONFIG, client=client).submit("x")).text

    assert asyncio.run(command()) == "hi"
    for _ in range(2):
        with pytest.raises(LlmUsageError) as caught:
            asyncio.run(command())
        assert str(caught.value) == (
            "this AsyncOpenAI client's connections belong to the event loop of its first "
            "request, and this call runs in another (a new asyncio.run(), or a *_sync call "
            "after an await): use one client per event loop, for the *_sync calls a sync "
            "OpenAI client (the cycle builds its twin on agcore_tools' own loop)"
        )
    with pytest.raises(LlmUsageError, match="belong to the event loop of its first"):
        LlmCycle(CONFIG, client=client).submit_sync("x")  # the notebook's sync helper
    assert len(server.requests) == 1  # the refused calls sent nothing

    # Its own loop still serves it; a cycle's own client, built per cycle, is free.
    notebook = server.client(timeout=10.0)

    async def kernel() -> list[str]:
        first = (await LlmCycle(CONFIG, client=notebook).submit("x")).text
        with LlmCycle(CONFIG, client=sync_client(server)) as helper:
            return [first, helper.submit_sync("x").text]

    assert asyncio.run(kernel()) == ["hi", "hi"]


@pytest.mark.parametrize("call", ["sync", "async"])
def test_an_async_client_the_app_used_in_a_closed_loop_says_so(serve: Serve, call: str) -> None:
    # The app's own request on its AsyncOpenAI, in an asyncio.run() now over, left a
    # kept-alive connection of that closed loop in the pool; no cycle saw it, so the
    # cycle's first call (a *_sync one, or one in a new asyncio.run()) failed with
    # asyncio's bare RuntimeError when the pool closed that connection.
    server = serve(S.reply_text("app's"), S.reply_text("cycle's"))
    client = server.client(timeout=10.0)

    async def app_request() -> str | None:
        completion = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}]
        )
        return completion.choices[0].message.content

    assert asyncio.run(app_request()) == "app's"
    cycle = LlmCycle(CONFIG, client=client)

    async def ask() -> str:
        return (await cycle.submit("hi")).text

    with pytest.raises(LlmUsageError) as caught:
        cycle.submit_sync("hi") if call == "sync" else asyncio.run(ask())
    assert str(caught.value) == (
        "this AsyncOpenAI client holds connections of an event loop that has closed (an "
        "earlier asyncio.run() the app used it in), which this call can neither use nor "
        "close: use one client per event loop, for the *_sync calls a sync OpenAI client "
        "(the cycle builds its twin on agcore_tools' own loop)"
    )
    assert isinstance(caught.value.__cause__, RuntimeError)  # asyncio's, kept
    assert len(server.requests) == 1 and cycle.messages == []  # nothing sent


def test_a_cycles_own_client_follows_it_to_the_library_loop_but_not_to_a_second_one(
    serve: Serve,
) -> None:
    # The twin of a sync client sends through the library loop's shared pool there,
    # and through a pool of its own on the app's loop; a second app loop is refused.
    server = serve(S.reply_text("hi"), repeat=True)
    cycle = LlmCycle(CONFIG, client=sync_client(server))

    async def ask() -> str:
        return (await cycle.submit("x")).text

    try:
        assert cycle.submit_sync("x").text == "hi"
        assert asyncio.run(ask()) == "hi"
        assert cycle.submit_sync("x").text == "hi"
        with pytest.raises(LlmUsageError) as caught:
            asyncio.run(ask())
        assert str(caught.value).startswith(
            "this LlmCycle's own client has its connections in the event loop of the "
            "cycle's first call"
        )
        assert len(server.requests) == 3
    finally:
        cycle.close_sync()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_cycle_used_before_a_fork_says_so_in_the_child_and_sends_nothing() -> None:
    # A prefork server: the parent used the cycle, with the *_sync methods as the guide
    # says. The child used to send its request on the parent's pooled connection, then
    # fail with advice it already followed and asyncio's object reprs.
    code = textwrap.dedent(
        """
        import os, sys
        from openai import OpenAI
        from agcore_tools import CycleConfig, LlmCycle
        from agcore_tools.testing import ScriptedChatServer as S

        with S([S.reply_text("hi")], repeat=True) as server:
            client = OpenAI(base_url=server.base_url, api_key="sk-sync", max_retries=0)
            cycle = LlmCycle(CycleConfig("m"), client=client)
            print(cycle.submit_sync("parent").text, flush=True)
            pid = os.fork()
            if pid == 0:
                try:
                    cycle.submit_sync("child")
                except TypeError as exc:
                    print(type(exc).__name__, "|", exc, flush=True)
                os._exit(0)
            _, status = os.waitpid(pid, 0)
            print(cycle.submit_sync("parent again").text, len(server.requests), flush=True)
            cycle.close_sync()
        sys.exit(os.waitstatus_to_exitcode(status))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    first, child, parent = done.stdout.splitlines()
    assert first == "hi"
    assert child.startswith("LlmUsageError | ")
    assert "used before this process was forked" in child
    assert "make a new LlmCycle" in child
    assert "asyncio" not in child and " at 0x" not in child
    assert parent == "hi 2"  # the child sent nothing; the parent's connection still works


def test_a_closed_cycle_refuses_a_call_before_sending_it(serve: Serve) -> None:
    server = serve(S.reply_text("never sent"))
    caller = server.client(timeout=10.0)
    cycle = LlmCycle(CONFIG, client=caller)
    cycle.close_sync()
    assert cycle.submit_sync("still here?").text == "never sent"  # the caller's client
    _sync.run(caller.close())  # its connection is on the library's loop, where it was used
    owned = LlmCycle(CONFIG, client=OpenAI(base_url=server.base_url, api_key="sk-sync"))
    owned.close_sync()  # a sync client's async twin is the cycle's own
    with pytest.raises(LlmUsageError, match="this LlmCycle is closed"):
        owned.submit_sync("hello")
    assert len(server.requests) == 1


async def test_a_cycle_closed_while_its_call_runs_a_tool_ends_the_call_with_a_usage_error(
    serve: Serve,
) -> None:
    # An app shutting down (a web server's lifespan) closes the cycle while a call's
    # tool runs: the call's next request finds the client closed. It said so with the
    # HTTP client's bare RuntimeError, which no `except AgcoreError` caught.
    server = serve(S.reply_tool_calls([("wait", {})]), S.reply_text("never sent"))
    registry = ToolRegistry()
    running, release = asyncio.Event(), asyncio.Event()

    @registry.tool
    async def wait() -> str:
        """Wait for the test."""
        running.set()
        await release.wait()
        return "done"

    owned = LlmCycle(CONFIG, client=sync_client(server))  # its async twin is the cycle's own
    call = asyncio.ensure_future(owned.submit_with_tools("go", registry))
    await asyncio.wait_for(running.wait(), 10)
    await owned.close()
    release.set()
    with pytest.raises(
        LlmUsageError, match="the OpenAI client was closed before or while this call"
    ) as raised:
        await asyncio.wait_for(call, 10)
    assert isinstance(raised.value.__cause__, RuntimeError)
    assert len(server.requests) == 1  # the answer of the tool call was never sent
    assert_history_valid(owned.messages)


async def test_a_sync_loop_called_inside_a_running_loop_does_not_deadlock(
    serve: Serve, calc: ToolRegistry
) -> None:
    server = serve(*tool_script())
    with sync_client(server) as client, LlmCycle(CONFIG, client=client) as cycle:
        assert cycle.submit_with_tools_sync("What is 2 + 3?", calc).text == "5"


def test_a_script_that_never_closes_its_cycle_exits_without_an_unclosed_transport() -> None:
    # A sync script swaps OpenAI() for an LlmCycle over it and never calls close_sync():
    # the async twin the cycle built (or made from the environment) is closed when the
    # library's loop winds down at exit, as the sync client's sockets are. A client the
    # app passed in is never closed for it.
    code = textwrap.dedent(
        """
        import atexit, os

        def after_the_library() -> None:  # atexit runs handlers last in, first out
            print(twin.is_closed(), env.client.is_closed(), flush=True)

        atexit.register(after_the_library)

        from openai import AsyncOpenAI, OpenAI
        from agcore_tools import CycleConfig, LlmCycle
        from agcore_tools.testing import ScriptedChatServer as S

        server = S([S.reply_text("hi")], repeat=True).start()
        os.environ.update(OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="sk-env")

        def sync_client() -> OpenAI:
            return OpenAI(base_url=server.base_url, api_key="sk-sync", max_retries=0)

        cycle = LlmCycle(CycleConfig("m"), client=sync_client())
        twin = cycle.client
        print(cycle.submit_sync("hello").text)
        env = LlmCycle(CycleConfig("m"))  # a client from the environment: the cycle's
        print(env.submit_stream_sync("hello").collect().text)
        closed = LlmCycle(CycleConfig("m"), client=sync_client())
        closed.submit_sync("hello")
        closed.close_sync()  # closed again at exit: no harm

        class Yours(AsyncOpenAI):
            async def close(self) -> None:
                print("closed the app's client", flush=True)
                await super().close()

        yours = LlmCycle(CycleConfig("m"), client=Yours(base_url=server.base_url, api_key="-"))
        yours.submit_stream_sync("never read")
        """
    )
    done = subprocess.run(
        [sys.executable, "-X", "dev", "-W", "error::ResourceWarning", "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "ResourceWarning" not in done.stderr and "unclosed" not in done.stderr, done.stderr
    assert done.stdout.splitlines() == ["hi", "hi", "True True"]


# -- the loop, streamed -------------------------------------------------------------------


def test_submit_stream_with_tools_sync_yields_the_same_events_as_async_for(
    serve: Serve, calc: ToolRegistry
) -> None:
    def kinds(events: list[Any]) -> list[tuple[str, Any]]:
        return [
            (type(e).__name__, getattr(e, "text", getattr(e, "tool_name", None))) for e in events
        ]

    async def async_events() -> list[Any]:
        async with server_a.client() as client:
            cycle = LlmCycle(CONFIG, client=client)
            async with cycle.submit_stream_with_tools("2 + 3?", calc) as stream:
                return [event async for event in stream]

    server_a, server_b = serve(*tool_script()), serve(*tool_script())
    expected = asyncio.run(async_events())
    with sync_client(server_b) as client, LlmCycle(CONFIG, client=client) as cycle:
        stream = cycle.submit_stream_with_tools_sync("2 + 3?", calc)
        assert isinstance(stream, SyncEventStream) and iter(stream) is stream
        assert stream.response is None
        events = list(stream)
        assert stream.response is not None and stream.response.text == "5"
    assert kinds(events) == kinds(expected)
    assert [type(e) for e in events].count(ToolExecutionCompleted) == 1
    assert isinstance(events[-1], TurnComplete) and events[-1].turn == 2
    assert all(request.stream for request in server_b.requests)


def test_submit_stream_sync_collect_and_early_close(serve: Serve) -> None:
    server = serve(S.reply_text("Hello"))
    server.add(RawStream([server.chunk({"content": "partial"}), Pause(30)]))
    with sync_client(server) as client, LlmCycle(CONFIG, client=client) as cycle:
        assert cycle.submit_stream_sync("Hi").collect().text == "Hello"
        with cycle.submit_stream_sync("Hi") as events:
            first = next(events)
        assert isinstance(first, AssistantTextDelta) and first.text == "partial"
        assert events.response is None
        # Closing dropped the HTTP stream, which tells the server to stop generating.
        asyncio.run(server.wait_for(lambda: server.requests[1].disconnected))
        assert not server.requests[1].completed
        with pytest.raises(StopIteration):
            next(events)
        with pytest.raises(LlmError, match="closed before the call finished"):
            events.collect()


def test_a_stream_left_by_an_exception_in_its_loop_body_needs_closing_and_says_so(
    serve: Serve, calc: ToolRegistry
) -> None:
    # Ctrl-C while the app prints an event is raised in the loop's body, which the
    # iterator never sees: the call stays open until the stream is closed.
    adding = S.reply_tool_calls([("add", {"a": 2, "b": 3})])
    server = serve(adding, adding, S.reply_text("5"))
    with sync_client(server) as client, LlmCycle(CONFIG, client=client) as cycle:
        with pytest.raises(KeyboardInterrupt):
            events = cycle.submit_stream_with_tools_sync("What is 2 + 3?", calc)
            for event in events:
                if isinstance(event, ToolExecutionStarted):
                    raise KeyboardInterrupt
        with pytest.raises(LlmError, match=r"a sync stream: `events\.close\(\)` or `with events:`"):
            cycle.submit_messages_sync([])
        events.close()
        assert_history_valid(cycle.messages)
        # In a `with` block, the same interrupt closes it on the way out.
        with (
            pytest.raises(KeyboardInterrupt),
            cycle.submit_stream_with_tools_sync("And again?", calc) as events,
        ):
            for event in events:
                if isinstance(event, ToolExecutionStarted):
                    raise KeyboardInterrupt
        assert_history_valid(cycle.messages)
        assert cycle.submit_messages_sync([]).text == "5"


def test_ctrl_c_during_a_sync_loop_stops_its_tools_and_keeps_the_history_valid(
    serve: Serve,
) -> None:
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach the main thread only")
    main = threading.main_thread().ident
    assert main is not None
    registry = ToolRegistry()
    events: list[str] = []

    @registry.tool
    async def long_job() -> str:
        """Runs until cancelled; presses Ctrl-C for the user first."""
        events.append("started")
        signal.pthread_kill(main, signal.SIGINT)
        try:
            await asyncio.sleep(30)
        finally:
            events.append("cleaned up")
        return "finished"

    server = serve(S.reply_tool_calls([("long_job", {})]), S.reply_text("ok"))
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with sync_client(server) as client, LlmCycle(CONFIG, client=client) as cycle:
            with pytest.raises(KeyboardInterrupt):
                cycle.submit_with_tools_sync("Run the job", registry)
            assert events == ["started", "cleaned up"]
            assert_history_valid(cycle.messages)
            assert "cancelled" in cycle.messages[-1]["content"]
            # The cycle is free again: the interrupted call has ended.
            assert cycle.submit_messages_sync([]).text == "ok"
    finally:
        signal.signal(signal.SIGINT, previous)
