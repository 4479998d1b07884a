"""The seam in front of the model (cycle/requester.py), and the retry-less copy of a
client that cycles on it share (cycle/_requester.py)."""

from __future__ import annotations

import asyncio
import logging
import socket
import sys
import traceback
from collections.abc import AsyncGenerator, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import openai
import pytest
from pydantic import BaseModel

from agcore_tools import ClientTypeError, CycleConfig, LlmConfigError, LlmCycle, LlmError
from agcore_tools._masked_error import masked_error
from agcore_tools._redact import mask
from agcore_tools.cycle import OpenAIRequester, Requester, StreamEvent, TurnRequest
from agcore_tools.cycle._client import provided_keys
from agcore_tools.testing import RawResponse, RawStream, ScriptedChatServer

from .conftest import S

if sys.version_info < (3, 11):
    from exceptiongroup import ExceptionGroup


class CountingExecutor(ThreadPoolExecutor):
    """The loop's default executor, counting the work handed to its threads."""

    def __init__(self) -> None:
        super().__init__(max_workers=1)
        self.submitted = 0

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        self.submitted += 1
        return super().submit(fn, *args, **kwargs)


async def test_a_new_cycle_on_a_used_client_makes_no_thread_hop(
    serve: Callable[..., ScriptedChatServer],
) -> None:
    # A fresh SDK client probes the platform in a worker thread before its first
    # request; a copy per cycle paid that hop once per conversation.
    server = serve(S.reply_text("one"), S.reply_text("two"))
    executor = CountingExecutor()
    asyncio.get_running_loop().set_default_executor(executor)
    async with server.client(timeout=10.0) as client:
        first = LlmCycle(CycleConfig("m"), client=client)
        assert (await first.submit("Hi")).text == "one"
        before = executor.submitted
        second = LlmCycle(CycleConfig("m"), client=client)
        assert (await second.submit("Hi again")).text == "two"
    assert executor.submitted == before


async def test_a_setting_changed_on_the_client_reaches_the_next_cycle(
    serve: Callable[..., ScriptedChatServer],
) -> None:
    server = serve(S.reply_text("one"), S.reply_text("two"))
    async with server.client(timeout=10.0, max_retries=5) as client:
        await LlmCycle(CycleConfig("m"), client=client).submit("Hi")
        client.api_key = "sk-rotated"
        await LlmCycle(CycleConfig("m"), client=client).submit("Hi again")
        assert client.max_retries == 5  # the caller's client is left as it was
    keys = [request.headers["authorization"] for request in server.requests]
    assert keys[1] == "Bearer sk-rotated" != keys[0]


# -- the seam: LlmCycle(requester=...) ------------------------------------------------------


class Scripted(Requester):
    """Answers each request with the next completion of a list; records the requests."""

    def __init__(self, *completions: dict[str, Any]) -> None:
        self.completions = list(completions)
        self.seen: list[TurnRequest] = []

    async def request(self, turn: TurnRequest) -> AsyncGenerator[StreamEvent, None]:
        self.seen.append(turn)
        turn.builder.feed_completion(self.completions.pop(0))
        return
        yield


def _completion(message: dict[str, Any], reason: str) -> dict[str, Any]:
    return {"choices": [{"index": 0, "message": message, "finish_reason": reason}]}


async def test_a_requester_serves_the_whole_tool_loop_without_a_client(calc: Any) -> None:
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'},
    }
    requester = Scripted(
        _completion({"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"),
        _completion({"role": "assistant", "content": "5"}, "stop"),
    )
    cycle = LlmCycle(CycleConfig("m"), requester=requester)
    assert cycle.client is None and cycle.requester is requester
    response = await cycle.submit_with_tools("2 + 3?", calc)
    assert response.text == "5"
    assert [m["role"] for m in cycle.messages] == ["user", "assistant", "tool", "assistant"]
    first, second = requester.seen
    assert first.params["model"] == "m" and first.stream is False and first.wire.name
    assert [t["function"]["name"] for t in first.params["tools"]][:1]
    assert second.params["messages"][2]["role"] == "tool"  # the history, sent as it is
    await cycle.close()  # nothing to close: the requester is the caller's


async def test_the_client_builds_an_openai_requester(
    serve: Callable[..., ScriptedChatServer],
) -> None:
    server = serve(S.reply_text("hi"))
    async with server.client(timeout=10.0) as client:
        cycle = LlmCycle(CycleConfig("m"), client=client)
        assert isinstance(cycle.requester, OpenAIRequester)
        assert cycle.requester.client is client is cycle.client
        assert (await cycle.submit("Hi")).text == "hi"


def test_client_and_requester_together_are_refused() -> None:
    from openai import AsyncOpenAI

    with pytest.raises(TypeError, match="client= or requester="):
        LlmCycle(CycleConfig("m"), client=AsyncOpenAI(api_key="-"), requester=Scripted())


async def test_a_requester_that_is_not_one_is_refused_when_the_cycle_is_made() -> None:
    # Before: accepted; the first submit failed with a bare AttributeError
    # ('str' object has no attribute 'server_profile') naming no argument.
    from openai import AsyncOpenAI

    async with AsyncOpenAI(api_key="-", base_url="http://127.0.0.1:9/v1") as client:
        for given, fix in (
            (
                "http://127.0.0.1:8000/v1",
                "str: subclass Requester, or give an OpenAI SDK client as client=",
            ),
            (client, "AsyncOpenAI: an OpenAI SDK client goes in client="),
        ):
            with pytest.raises(ClientTypeError) as info:
                LlmCycle(CycleConfig("m"), requester=given)  # type: ignore[arg-type]
            assert isinstance(info.value, TypeError)
            assert str(info.value) == (
                f"LlmCycle(requester=...) takes an agcore_tools.cycle.Requester, got {fix}"
            )


@pytest.mark.parametrize("view", ["with_raw_response", "with_streaming_response"])
async def test_a_clients_raw_response_view_is_refused_naming_the_client_itself(view) -> None:
    from openai import AsyncOpenAI, OpenAI

    for client in (AsyncOpenAI(api_key="-"), OpenAI(api_key="-")):
        with pytest.raises(ClientTypeError) as info:
            LlmCycle(CycleConfig("m"), client=getattr(client, view))
        assert str(info.value).endswith(f"(that is client.{view}: pass the client itself)")
        assert "\n" not in str(info.value)


async def test_a_requester_error_is_the_loops_error() -> None:
    class Down(Requester):
        async def request(self, turn: TurnRequest) -> AsyncGenerator[StreamEvent, None]:
            raise LlmError(f"{turn.wire.name} request failed: down")
            yield

    with pytest.raises(LlmError, match="request failed: down"):
        await LlmCycle(CycleConfig("m"), requester=Down()).submit("Hi")


async def test_a_requesters_own_closed_loop_error_is_not_said_to_be_the_clients() -> None:
    # The loop names an AsyncOpenAI client's connections of a closed loop as the cause of
    # asyncio's "Event loop is closed"; a requester of the app's own has no such client,
    # and its error is its own to read.
    class Closed(Requester):
        async def request(self, turn: TurnRequest) -> AsyncGenerator[StreamEvent, None]:
            raise RuntimeError("Event loop is closed")
            yield

    with pytest.raises(RuntimeError) as caught:
        await LlmCycle(CycleConfig("m"), requester=Closed()).submit("Hi")
    assert type(caught.value) is RuntimeError and str(caught.value) == "Event loop is closed"


async def test_the_clients_key_and_header_values_are_masked_in_errors_spans_and_logs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A proxy or gateway that echoes the bearer token in its error body.
    from openai import AsyncOpenAI

    from tests._otel import recording

    key, gateway = "sk-proj-SECRETKEY0123456789", "gw-S3CRET-0042"

    def echo(status: int) -> Any:
        def answer(request: Any) -> Any:
            sent = f"{request.headers.get('authorization')} {request.headers.get('x-gateway')}"
            return S.error(status, f"Invalid credentials: {sent}")

        return answer

    caplog.set_level("WARNING", logger="agcore_tools.cycle")
    script = [echo(500), echo(401), echo(401)]
    with recording() as spans, ScriptedChatServer(script) as server:
        client = AsyncOpenAI(
            api_key=key, base_url=server.base_url, default_headers={"X-Gateway": gateway}
        )
        async with LlmCycle(CycleConfig("m", retry_initial_delay=0.01), client=client) as cycle:
            with pytest.raises(LlmError) as caught:
                await cycle.submit("hi")  # a retried 500, then a 401
            with pytest.raises(LlmError) as streamed:
                await cycle.submit_stream("hi").collect()
    for error in (caught.value, streamed.value):
        assert str(error).endswith("Invalid credentials: Bearer *** ***")
    statuses = [span.status.description or "" for span in spans.finished()]
    assert len(statuses) == 4 and all(s.endswith("Bearer *** ***") for s in statuses)
    [retried] = [r.getMessage() for r in caplog.records if "retrying" in r.getMessage()]
    assert "Bearer *** ***" in retried
    assert key not in caplog.text and gateway not in caplog.text


async def test_a_key_providers_tokens_are_masked_in_errors_spans_and_logs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # OpenAI(api_key=callable) (Azure Entra ID and the like) and AsyncOpenAI(api_key=
    # async callable): the SDK asks the provider while it prepares each request, after
    # the mask was made from a client.api_key still "", so an echoed token went out.
    from openai import AsyncOpenAI, OpenAI

    from tests._otel import recording

    issued: list[str] = []

    def token() -> str:
        issued.append(f"eyJhbGciOi-entra-token-SECRET-{len(issued):04d}")
        return issued[-1]

    async def async_token() -> str:
        return token()

    def echo(status: int) -> Any:
        def answer(request: Any) -> Any:
            return S.error(status, f"invalid token: {request.headers.get('authorization')}")

        return answer

    caplog.set_level("WARNING", logger="agcore_tools.cycle")
    errors: list[LlmError] = []
    with recording() as spans, ScriptedChatServer([echo(500), echo(401)] * 2) as server:
        sync_client = OpenAI(api_key=token, base_url=server.base_url, max_retries=0)
        async_client = AsyncOpenAI(api_key=async_token, base_url=server.base_url)
        for client in (sync_client, async_client):
            config = CycleConfig("m", retry_initial_delay=0.01)
            async with LlmCycle(config, client=client) as cycle:
                with pytest.raises(LlmError) as caught:
                    await cycle.submit("hi")  # a retried 500, then a 401
                if client is sync_client:  # the twin keeps the keys its provider gave
                    assert provided_keys(cycle.client) == tuple(issued)
            errors.append(caught.value)
        sync_client.close()
        await async_client.close()
    sent = [request.headers["authorization"] for request in server.requests]
    assert len(sent) == 4 and {key.removeprefix("Bearer ") for key in sent} <= set(issued)
    assert [str(error).rsplit(": ", 1)[-1] for error in errors] == ["Bearer ***"] * 2
    statuses = [span.status.description or "" for span in spans.finished()]
    assert statuses and all(s.endswith("invalid token: Bearer ***") for s in statuses)
    retried = [r.getMessage() for r in caplog.records if "retrying" in r.getMessage()]
    assert len(retried) == 2 and all("Bearer ***" in line for line in retried)
    assert not any(key in caplog.text for key in issued)


@pytest.mark.parametrize("given", ["azure_ad_token", "azure_ad_token_provider"])
async def test_an_azure_ad_token_is_masked_in_errors_and_logs(
    caplog: pytest.LogCaptureFixture, given: str
) -> None:
    # An AsyncAzureOpenAI built with an Entra ID token (or a token provider) holds it
    # nowhere public, and api_key is empty: a proxy's error quoting the Authorization
    # header it got showed the token in the LlmError, its cause and the retry's log line.
    from openai import AsyncAzureOpenAI

    token = "eyJ0eXAiOiJKV1Qi.eyJhdWQiOi-entra-S3CRET.c2lnbmF0dXJl"

    async def provider() -> str:
        return token

    def echo(status: int) -> Any:
        def answer(request: Any) -> Any:
            return S.error(status, f"invalid token: {request.headers.get('authorization')}")

        return answer

    caplog.set_level("WARNING", logger="agcore_tools.cycle")
    auth: dict[str, Any] = {given: token if given == "azure_ad_token" else provider}
    with ScriptedChatServer([echo(500), echo(401)]) as server:
        client = AsyncAzureOpenAI(
            azure_endpoint=server.base_url.removesuffix("/v1"),
            api_version="2024-10-21",
            azure_deployment="chat",
            **auth,
        )
        cycle = LlmCycle(CycleConfig("m", retry_initial_delay=0.01), client=client)
        with pytest.raises(LlmError) as caught:
            await cycle.submit("hi")  # a retried 500, then a 401
        await client.close()
    assert [request.headers["authorization"] for request in server.requests] == [
        f"Bearer {token}"
    ] * 2
    assert str(caught.value).endswith("invalid token: Bearer ***")
    shown = "".join(traceback.format_exception(caught.value))
    assert token not in shown  # the SDK's error on the chain too
    [retried] = [r.getMessage() for r in caplog.records if "retrying" in r.getMessage()]
    assert "invalid token: Bearer ***" in retried and token not in caplog.text


@pytest.mark.parametrize(
    "message",
    [
        "This model's maximum context length is 128000 tokens. However, your messages "
        "resulted in 130512 tokens (129000 in the messages, 1512 in the functions). "
        "Please reduce the length of the messages or functions.",
        "Token limit exceeded: 5000 tokens. Token count (1048577) exceeds 1048576; "
        "max_tokens is too large: 5000.",
    ],
)
async def test_an_error_about_tokens_is_shown_whole_with_the_sdks_error(
    serve: Callable[..., ScriptedChatServer], message: str
) -> None:
    # The mask of a credential after "Token" takes a word with a digit or a token68 sign
    # only: an error about token counts is no credential, and stays readable.
    server = serve(S.error(400, message, type="invalid_request_error"))
    async with server.client(timeout=10.0, max_retries=0) as client:
        with pytest.raises(LlmError) as caught:
            await LlmCycle(CycleConfig("m"), client=client).submit("Hi")
    assert message in str(caught.value) and "***" not in str(caught.value)
    assert isinstance(caught.value.__cause__, openai.BadRequestError)  # not a stand-in


async def test_a_request_that_reaches_no_server_names_the_reason_and_the_server() -> None:
    # The SDK says "Connection error." whatever the reason; the reason (refused, an
    # unknown host) was three causes down, and the address nowhere.
    from openai import AsyncOpenAI

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = AsyncOpenAI(api_key="sk-test", base_url=f"http://user:pw@127.0.0.1:{port}/v1")
    cycle = LlmCycle(CycleConfig("m", max_retries=0), client=client)
    with pytest.raises(LlmError) as caught:
        await cycle.submit("hi")
    message = str(caught.value)
    assert message.startswith("chat completion request failed: APIConnectionError: ")
    assert f"; server http://127.0.0.1:{port}/v1/)" in message  # userinfo left out
    assert "Connection error. (" in message and "pw" not in message
    await client.close()


def test_a_base_url_without_http_is_refused_when_the_cycle_is_made() -> None:
    # "127.0.0.1:8000/v1" could never connect, yet was retried as a connection error.
    from openai import AsyncOpenAI

    client = AsyncOpenAI(api_key="sk-test", base_url="127.0.0.1:8000/v1")
    with pytest.raises(LlmConfigError, match=r"'127\.0\.0\.1:8000/v1/' is not an http\(s\) URL"):
        LlmCycle(CycleConfig("m"), client=client)


async def test_an_error_event_in_a_stream_has_the_key_masked() -> None:
    # A gateway's error event echoing the bearer token: quoted by the turn builder
    # inside the stream's read loop, where only the SDK's own errors were masked.
    from openai import AsyncOpenAI

    key = "sk-proj-Zq8v1S3CRETk3yABCDEFGH"
    created = {
        "type": "response.created",
        "response": {"id": "r1", "status": "in_progress", "output": []},
    }
    error = {"type": "error", "code": "auth", "message": f"rejected: Bearer {key}"}
    with ScriptedChatServer([RawStream([created, error], done=False)]) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key=key, max_retries=0)
        cycle = LlmCycle(CycleConfig("m", api="responses"), client=client)
        with pytest.raises(LlmError, match=r"rejected: Bearer \*\*\*$") as caught:
            await cycle.submit_stream("hi").collect()
        await client.close()
    assert key not in str(caught.value) and key not in repr(caught.value.__cause__)


async def test_a_key_in_the_base_urls_query_is_not_shown_when_no_server_answers() -> None:
    # Gateways (Azure APIM and the like) take their key as ?api-key=...; the server the
    # loop names when it reaches none is shown as the MCP transports show theirs. Azure's
    # api-version is no secret, and tells which API was asked: it stays.
    from openai import AsyncOpenAI

    key = "sk-SECRET-query-0123456789"
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    base_url = f"http://127.0.0.1:{port}/v1?api-version=2024-10-21&api-key={key}"
    client = AsyncOpenAI(api_key="sk-test", base_url=base_url)
    cycle = LlmCycle(CycleConfig("m", max_retries=0), client=client)
    with pytest.raises(LlmError) as caught:
        await cycle.submit("hi")
    await client.close()
    shown = f"; server http://127.0.0.1:{port}/v1/?api-version=2024-10-21&api-key=***)"
    assert shown in str(caught.value)
    assert key not in "".join(traceback.format_exception(caught.value))


async def test_a_key_in_the_base_urls_path_is_not_shown_when_no_server_answers() -> None:
    # A gateway that takes its key in the path (/k/<key>/v1) had it shown whole.
    from openai import AsyncOpenAI

    key = "Zq8v1S3CRETk3yABCDEFGH0123"
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = AsyncOpenAI(api_key="sk-test", base_url=f"http://127.0.0.1:{port}/k/{key}/v1")
    cycle = LlmCycle(CycleConfig("m", max_retries=0), client=client)
    with pytest.raises(LlmError) as caught:
        await cycle.submit("hi")
    await client.close()
    assert f"; server http://127.0.0.1:{port}/k/***/v1/)" in str(caught.value)
    assert key not in "".join(traceback.format_exception(caught.value))


async def test_a_key_in_the_base_urls_path_is_masked_where_the_server_echoes_it() -> None:
    # A gateway's router answering a wrong route with the path it got ("Unknown route:
    # POST /k/<key>/v2/chat/completions"): the key was masked in the URL the loop names,
    # not in the server's words, in the loop's error and the SDK error under it.
    from openai import AsyncOpenAI

    key = "gw9f8A7b6C5d4E3f2G1h0JkLmN"
    with ScriptedChatServer(repeat=True) as server:
        server.add(lambda request: S.error(404, f"Unknown route: POST {request.path}"))
        base_url = f"{server.base_url.removesuffix('/v1')}/k/{key}/v2"
        client = AsyncOpenAI(api_key="sk-test", base_url=base_url, max_retries=0)
        cycle = LlmCycle(CycleConfig("m", max_retries=0), client=client)
        with pytest.raises(LlmError) as caught:
            await cycle.submit("hi")
        with pytest.raises(LlmError) as streamed:
            await cycle.submit_stream("hi").collect()
        await client.close()
    assert [request.path for request in server.requests] == [f"/k/{key}/v2/chat/completions"] * 2
    for error in (caught.value, streamed.value):
        assert str(error).endswith("404 - Unknown route: POST /k/***/v2/chat/completions")
        assert key not in "".join(traceback.format_exception(error))
        assert key not in str(error.__cause__.body)  # type: ignore[union-attr]


async def test_a_key_in_the_clients_default_query_is_masked_where_the_server_echoes_it() -> None:
    # The SDK puts default_query (and a request's extra_query) on the URL, which a
    # router echoes: the key showed in the loop's error and the SDK error under it.
    from openai import AsyncOpenAI

    key = "qk7Y6x5W4v3U2t1SsEcReT"
    with ScriptedChatServer(repeat=True) as server:
        server.add(lambda request: S.error(404, f"Unknown route: POST {request.path}"))
        client = AsyncOpenAI(
            api_key="sk-test",
            base_url=server.base_url,
            default_query={"api-version": "2024-10-21", "subscription-key": key},
            max_retries=0,
        )
        cycle = LlmCycle(CycleConfig("m", max_retries=0), client=client)
        with pytest.raises(LlmError) as caught:
            await cycle.submit("hi")
        await client.close()
    [request] = server.requests
    assert request.path == f"/v1/chat/completions?api-version=2024-10-21&subscription-key={key}"
    error = caught.value
    assert str(error).endswith(
        "404 - Unknown route: POST /v1/chat/completions?api-version=2024-10-21&subscription-key=***"
    )
    assert key not in "".join(traceback.format_exception(error))
    assert key not in str(error.__cause__.body)  # type: ignore[union-attr]


async def test_keys_given_as_a_list_in_the_default_query_are_masked_where_echoed() -> None:
    # The SDK sends a list as "key[]=k1&key[]=k2"; each value showed in the loop's error.
    from openai import AsyncOpenAI

    keys = ["qk7Y6x5W4v3U2t1SsEcReT", "rk8Z7y6X5w4V3u2TtFdSfU"]
    with ScriptedChatServer(repeat=True) as server:
        server.add(lambda request: S.error(404, f"Unknown route: POST {request.path}"))
        client = AsyncOpenAI(
            api_key="sk-test", base_url=server.base_url, default_query={"key": keys}, max_retries=0
        )
        cycle = LlmCycle(CycleConfig("m", max_retries=0), client=client)
        with pytest.raises(LlmError) as caught:
            await cycle.submit("hi")
        await client.close()
    [request] = server.requests
    assert all(key in request.path for key in keys)
    shown = "".join(traceback.format_exception(caught.value))
    assert "Unknown route: POST /v1/chat/completions?key%5B%5D=***&key%5B%5D=***" in shown
    assert not any(key in shown for key in keys)


async def test_an_echoed_key_with_a_deeply_nested_error_body_still_gives_the_loops_error() -> None:
    # Masking the SDK error's body recursed: 900 levels of JSON under an echoed key
    # raised RecursionError in place of the LlmError, chained to the unmasked error.
    from openai import AsyncOpenAI

    key = "sk-proj-Zq8v1S3CRETk3yABCDEFGH"

    def answer(request: Any) -> RawResponse:
        detail: dict[str, Any] = {}
        inner = detail
        for _ in range(900):
            inner["x"] = inner = {}
        message = f"Incorrect API key provided: {request.headers['authorization']}"
        error = {"message": message, "type": "auth", "code": None, "detail": detail}
        return RawResponse(401, {"error": error}, {})

    with ScriptedChatServer([answer]) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key=key, max_retries=0)
        cycle = LlmCycle(CycleConfig("m", max_retries=0), client=client)
        with pytest.raises(LlmError) as caught:
            await cycle.submit("hi")
        await client.close()
    assert str(caught.value).endswith("Incorrect API key provided: Bearer ***")
    cause: Any = caught.value.__cause__
    assert type(cause).__name__ == "AuthenticationError" and key not in str(cause.body)
    assert key not in "".join(traceback.format_exception(caught.value))


def test_masking_an_error_never_raises_in_its_place() -> None:
    # An attribute that holds itself, a body nested deeper than Python recurses, an
    # error whose str() fails: each made masked_error raise, hiding the real error.
    key = "sk-SECRET-123456789"

    def hide(text: str) -> str:
        return mask(text, [key])

    class Cyclic(Exception):
        pass

    class Deep(Exception):
        pass

    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RuntimeError(f"cannot print {key}")

    cyclic = Cyclic(f"bad key {key}")
    loop: list[Any] = [key]
    loop.append(loop)
    cyclic.items = (loop, {"again": loop})  # type: ignore[attr-defined]
    deep = Deep(f"bad key {key}")
    body: dict[str, Any] = {}
    inner = body
    for _ in range(3000):
        inner["x"] = inner = {}
    inner["key"] = key
    deep.body = body  # type: ignore[attr-defined]

    shown = masked_error(cyclic, hide)
    assert type(shown) is Cyclic and str(shown) == "bad key ***"
    copied, again = shown.items  # type: ignore[attr-defined]
    assert copied[0] == "***" and copied[1] is copied and again["again"] is copied
    shown = masked_error(deep, hide)
    assert type(shown) is Deep and str(shown) == "bad key ***"
    level = shown.body  # type: ignore[attr-defined]
    for _ in range(3000):
        level = level["x"]
    assert level == {"key": "***"}
    shown = masked_error(Unprintable(), hide)
    assert type(shown) is Exception and shown.__cause__ is None and shown.__context__ is None
    assert str(shown).endswith("Unprintable: (its message could not be read and masked)")
    assert key not in "".join(traceback.format_exception(shown))


def test_masking_reaches_group_members_and_pydantic_fields_and_keeps_the_types_it_can() -> None:
    # An exception group's members were left as they were (a traceback prints them),
    # an error whose str() reads a pydantic model (the MCP SDK's MCPError) became a
    # plain Exception, and so did the whole chain when one cause could not be masked.
    key = "sk-SECRET-123456789"

    def hide(text: str) -> str:
        return mask(text, [key])

    class Said(BaseModel):
        message: str

    class Answered(Exception):
        def __init__(self, message: str) -> None:
            super().__init__(message)
            self.said = Said(message=message)

        def __str__(self) -> str:
            return self.said.message

    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RuntimeError(f"cannot print {key}")

    group = ExceptionGroup("the task group failed", [Answered(f"bad key {key}"), KeyError("x")])
    shown = masked_error(group, hide)
    assert (
        type(shown) is ExceptionGroup and str(shown) == "the task group failed (2 sub-exceptions)"
    )
    answered, other = shown.exceptions  # type: ignore[attr-defined]
    assert type(answered) is Answered and str(answered) == "bad key ***"
    assert answered.said == Said(message="bad key ***") and other is group.exceptions[1]
    assert key not in "".join(traceback.format_exception(shown))
    error = ValueError(f"refused {key}")
    error.__cause__ = Unprintable()
    shown = masked_error(error, hide)
    assert type(shown) is ValueError and str(shown) == "refused ***"
    assert str(shown.__cause__).endswith("Unprintable: (its message could not be read and masked)")


def test_masking_a_chain_that_comes_back_round_leaves_no_original_with_the_secret() -> None:
    # A (quoting the key) has the cause B, whose context is A again. The stand-in of A
    # was chained to B itself, and B's context led back to the unmasked A: a printed
    # traceback showed the key.
    key = "sk-SECRET-123456789"

    def hide(text: str) -> str:
        return mask(text, [key])

    a = RuntimeError(f"server said bad key {key}")
    b = ValueError("inner")
    a.__cause__, b.__context__ = b, a
    shown = masked_error(a, hide)
    assert type(shown) is RuntimeError and str(shown) == "server said bad key ***"
    cause = shown.__cause__
    assert type(cause) is ValueError and cause is not b and str(cause) == "inner"
    assert cause.__context__ is shown
    assert key not in "".join(traceback.format_exception(shown))
    assert a.__cause__ is b and b.__context__ is a  # the originals are left as they were

    # The same through an exception group's member, whose context is the group.
    member = KeyError("x")
    group = ExceptionGroup(f"failed with {key}", [member])
    member.__context__ = group
    shown = masked_error(group, hide)
    [copied] = shown.exceptions  # type: ignore[attr-defined]
    assert copied is not member and copied.__context__ is shown
    assert key not in "".join(traceback.format_exception(shown))

    # Nothing to mask on a chain with a cycle: the error itself, nothing copied.
    clean = ValueError("clean")
    clean.__cause__, b.__context__ = b, clean
    assert masked_error(clean, hide) is clean


def test_a_masked_os_error_keeps_its_errno_strerror_and_file_names() -> None:
    # The stand-in was made from its formatted text alone: its str() was right, but
    # errno, strerror and filename were None.
    key = "sk-SECRET-123456789"

    def hide(text: str) -> str:
        return mask(text, [key])

    class Refused(ConnectionRefusedError):
        def __init__(self, *args: Any) -> None:  # a subclass that reads its own fields
            super().__init__(*args)

    for error in (
        ConnectionRefusedError(111, f"refused {key}"),
        Refused(111, f"refused {key}"),
        FileNotFoundError(2, "No such file", f"/run/{key}.pem"),
        OSError(18, "Cross-device link", f"/a/{key}", f"/b/{key}"),
    ):
        try:
            raise RuntimeError("failed") from error
        except RuntimeError as outer:
            shown = masked_error(outer, hide)
        cause: Any = shown.__cause__
        assert type(cause) is type(error) and str(cause) == hide(str(error))
        assert cause.errno == error.errno and cause.strerror == hide(error.strerror or "")
        assert cause.filename == (error.filename and hide(error.filename))
        assert cause.filename2 == (error.filename2 and hide(error.filename2))
        assert cause.args == tuple(hide(a) if isinstance(a, str) else a for a in error.args)
        assert key not in "".join(traceback.format_exception(shown))


async def test_the_error_chained_under_the_loops_error_has_the_key_masked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The loop's own message was masked, but it was raised from the SDK's error, whose
    # text a traceback and logger.exception print: the key, echoed by a proxy's 401.
    from openai import AsyncOpenAI

    key = "sk-proj-Zq8v1S3CRETk3yABCDEFGH"

    def echo(status: int) -> Any:
        def answer(request: Any) -> Any:
            return S.error(
                status, f"Incorrect API key provided: {request.headers['authorization']}"
            )

        return answer

    with ScriptedChatServer([echo(401), echo(401)]) as server:
        mid_stream = RawStream(
            [server.chunk({"content": "Hel"}), {"error": {"message": f"expired: {key}"}}],
            done=False,
        )
        server.add(mid_stream)
        client = AsyncOpenAI(base_url=server.base_url, api_key=key, max_retries=0)
        cycle = LlmCycle(CycleConfig("m", max_retries=0), client=client)
        errors = []
        for streamed in (False, True, True):  # a 401, a 401 to a stream, then mid-stream
            with pytest.raises(LlmError) as caught:
                await (cycle.submit_stream("hi").collect() if streamed else cycle.submit("hi"))
            errors.append(caught.value)
        await client.close()
    assert [str(error).rsplit(": ", 1)[-1] for error in errors] == ["Bearer ***"] * 2 + ["***"]
    assert str(errors[2]).startswith("the model's stream failed: APIError: expired: ")
    logger = logging.getLogger("tests.app")
    for error, sdk_error in zip(errors, ["AuthenticationError"] * 2 + ["APIError"], strict=True):
        shown = "".join(traceback.format_exception(error))
        assert f"\nopenai.{sdk_error}: " in shown  # the SDK's error and its frames stay
        assert type(error.__cause__).__name__ == sdk_error and error.__cause__.__traceback__
        assert key not in shown and key not in str(error.__cause__.body)
        try:
            raise error
        except LlmError:
            logger.exception("model call failed")
    assert len(caplog.records) == 3 and key not in caplog.text
    assert errors[0].__cause__.status_code == 401
