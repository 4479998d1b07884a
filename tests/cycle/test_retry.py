"""Retries: which failures, how long to wait, and how many requests actually reach the server."""

from __future__ import annotations

import email.utils
import logging
import socket
import time

import pytest

from agcore_tools import CycleConfig, LlmCycle, LlmError
from agcore_tools.cycle._retry import RetryPolicy, is_retryable, retry_after
from agcore_tools.testing import Pause, RawStream, Reply

from .conftest import S


async def test_429_waits_as_retry_after_says_and_the_sdk_does_not_retry_too(serve, make_cycle):
    server = serve(S.error(429, "slow down", headers={"Retry-After": "1"}), S.reply_text("ok"))
    # A client with the SDK's default retries: the cycle must switch them off.
    cycle = make_cycle(server, client_options={"max_retries": 2}, retry_initial_delay=0.0)

    started = time.perf_counter()
    response = await cycle.submit("Hi")
    elapsed = time.perf_counter() - started

    assert response.text == "ok"
    assert len(server.requests) == 2
    assert elapsed >= 0.95  # the server's word, not the 0 s backoff


async def test_attempts_do_not_multiply_with_the_sdk_retries(serve, make_cycle):
    from openai import RateLimitError

    server = serve(*[S.error(429, "busy", headers={"retry-after-ms": "1"}) for _ in range(10)])
    cycle = make_cycle(server, client_options={"max_retries": 5}, max_retries=2)

    with pytest.raises(LlmError, match="RateLimitError") as raised:
        await cycle.submit("Hi")

    assert isinstance(raised.value.__cause__, RateLimitError)
    assert len(server.requests) == 3  # 1 + max_retries, not (1 + 5) * 3


async def test_500_is_retried_with_backoff(serve, make_cycle):
    server = serve(S.error(500), S.error(502), S.reply_text("recovered"))
    cycle = make_cycle(server, max_retries=3, retry_initial_delay=0.01)

    assert (await cycle.submit("Hi")).text == "recovered"
    assert len(server.requests) == 3


async def test_retry_after_ms_is_preferred_and_honoured(serve, make_cycle):
    headers = {"retry-after-ms": "300", "Retry-After": "30"}
    server = serve(S.error(503, headers=headers), S.reply_text("ok"))
    cycle = make_cycle(server, retry_initial_delay=0.0)

    started = time.perf_counter()
    await cycle.submit("Hi")
    elapsed = time.perf_counter() - started

    assert 0.28 <= elapsed < 5


@pytest.mark.parametrize("status", [408, 409, 429, 500, 503, 529])
async def test_retryable_statuses(serve, make_cycle, status):
    server = serve(S.error(status, headers={"retry-after-ms": "1"}), S.reply_text("ok"))
    assert (await make_cycle(server).submit("Hi")).text == "ok"
    assert len(server.requests) == 2


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
async def test_client_errors_are_not_retried(serve, make_cycle, status):
    server = serve(S.error(status), S.reply_text("never"))
    with pytest.raises(LlmError):
        await make_cycle(server).submit("Hi")
    assert len(server.requests) == 1


async def test_x_should_retry_false_is_respected(serve, make_cycle):
    server = serve(S.error(500, headers={"x-should-retry": "false"}), S.reply_text("never"))
    with pytest.raises(LlmError):
        await make_cycle(server).submit("Hi")
    assert len(server.requests) == 1


async def test_timeouts_are_retried(serve, make_cycle):
    from openai import APITimeoutError

    server = serve(Reply(text="late", delay=2), S.reply_text("in time"))
    cycle = make_cycle(server, client_options={"timeout": 0.3}, max_retries=1)

    assert (await cycle.submit("Hi")).text == "in time"
    assert len(server.requests) == 2
    assert server.requests[0].disconnected
    assert is_retryable(APITimeoutError(request=_request()))


async def test_connection_errors_are_retried_then_reported(caplog):
    from openai import APIConnectionError, AsyncOpenAI

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="k", max_retries=0)
    cycle = LlmCycle(CycleConfig("m", max_retries=2, retry_initial_delay=0.01), client=client)

    with (
        caplog.at_level(logging.WARNING, logger="agcore_tools.cycle"),
        pytest.raises(LlmError, match="APIConnectionError") as raised,
    ):
        await cycle.submit("Hi")
    await client.close()

    assert isinstance(raised.value.__cause__, APIConnectionError)
    assert len([r for r in caplog.records if "retrying" in r.getMessage()]) == 2


async def test_a_stream_that_fails_before_its_first_chunk_is_retried(serve, make_cycle, calc):
    server = serve(S.error(503, headers={"retry-after-ms": "1"}), S.reply_text("streamed"))
    cycle = make_cycle(server)

    response = await cycle.submit_stream_with_tools("Hi", calc).collect()

    assert response.text == "streamed"
    assert len(server.requests) == 2


@pytest.mark.parametrize("failure", ["connection_dropped", "truncated_event"])
async def test_a_stream_that_fails_after_its_first_byte_is_not_retried(
    serve, make_cycle, calc, failure
):
    from openai import APIConnectionError

    server = serve()
    first = server.chunk({"content": "Hel"})
    # The pause lets the client take the first chunk before the failure, whatever the
    # machine's load: a failure before it would rightly be retried.
    if failure == "connection_dropped":
        broken = RawStream([first, Pause(0.2)], done=False, drop_connection=True)
    else:
        broken = RawStream([first, Pause(0.2), 'data: {"choices": [{"index": 0, "del'], done=False)
    server.add(broken, S.reply_text("never requested"))
    cycle = make_cycle(server, max_retries=3)
    seen = []

    with pytest.raises(LlmError, match="stream failed") as raised:
        async for event in cycle.submit_stream_with_tools("Hi", calc):
            seen.append(event)

    expected = APIConnectionError if failure == "connection_dropped" else ValueError
    assert isinstance(raised.value.__cause__, expected)  # a retryable kind, yet not retried
    assert [e.text for e in seen] == ["Hel"]
    assert len(server.requests) == 1


# -- the policy itself ------------------------------------------------------------------------


def _request():
    import httpx2

    return httpx2.Request("POST", "http://127.0.0.1/v1/chat/completions")


def _status_error(status: int, headers: dict[str, str]):
    import httpx2
    from openai import APIStatusError

    response = httpx2.Response(status, headers=headers, request=_request())
    return APIStatusError("err", response=response, body=None)


def test_retry_after_reads_seconds_milliseconds_and_http_dates() -> None:
    assert retry_after(_status_error(429, {"retry-after": "2.5"})) == 2.5
    assert retry_after(_status_error(429, {"retry-after-ms": "150"})) == 0.15
    soon = email.utils.formatdate(time.time() + 10, usegmt=True)
    waited = retry_after(_status_error(429, {"retry-after": soon}))
    assert waited is not None and 8 <= waited <= 10.5


@pytest.mark.parametrize("value", ["120", "-1", "soon", ""])
def test_retry_after_ignores_values_out_of_range_or_unreadable(value: str) -> None:
    assert retry_after(_status_error(429, {"retry-after": value})) is None


def test_retry_after_without_a_response_is_none() -> None:
    assert retry_after(ValueError("x")) is None


def test_backoff_doubles_up_to_the_cap() -> None:
    policy = RetryPolicy(max_retries=5, initial_delay=0.5, max_delay=3.0)
    assert [policy.backoff(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_non_api_errors_are_not_retryable() -> None:
    assert not is_retryable(RuntimeError("bug"))
    assert is_retryable(_status_error(500, {}))
    assert not is_retryable(_status_error(500, {"x-should-retry": "false"}))
    assert is_retryable(_status_error(400, {"x-should-retry": "true"}))
