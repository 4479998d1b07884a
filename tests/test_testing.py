"""ScriptedChatServer on its own: wire formats, capture, errors, lifecycle, no leaks."""

from __future__ import annotations

import http.client
import json
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from typing import Any

import openai
import pytest

from agcore_tools import AgcoreError, LlmUsageError
from agcore_tools.testing import (
    CapturedRequest,
    Pause,
    RawResponse,
    RawStream,
    Reply,
    ScriptedChatServer,
)

S = ScriptedChatServer


def post(server: ScriptedChatServer, body: dict[str, Any], path: str = "/chat/completions"):
    request = urllib.request.Request(
        server.base_url + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "X-Test": "yes"},
        method="POST",
    )
    return urllib.request.urlopen(request, timeout=5)


def sse_events(raw: bytes) -> list[str]:
    return [block for block in raw.decode().split("\n\n") if block]


def test_json_reply_in_the_chat_completions_format() -> None:
    usage = {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}
    server = S([S.reply_text("Hello", reasoning="hm", usage=usage)], model="m-1")
    with server, post(server, {"model": "x", "messages": [{"role": "user", "content": "Hi"}]}) as r:
        body = json.loads(r.read())
    assert body["object"] == "chat.completion"
    assert body["model"] == "m-1"
    assert body["choices"][0]["message"] == {
        "role": "assistant",
        "content": "Hello",
        "reasoning_content": "hm",
    }
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"] == usage


def test_every_response_and_chunk_is_created_at_the_same_fixed_time() -> None:
    # It was the clock's: a run recorded twice against the server differed in each one.
    server = S([S.reply_text("Hi")] * 3)
    asked = {"model": "m", "messages": []}
    with server:
        with post(server, asked) as r:
            assert json.loads(r.read())["created"] == 1_700_000_000
        with post(server, {**asked, "stream": True}) as r:
            chunks = [json.loads(e[6:]) for e in sse_events(r.read()) if e != "data: [DONE]"]
        assert {chunk["created"] for chunk in chunks} == {1_700_000_000}
        with post(server, {"model": "m", "input": "x"}, "/responses") as r:
            assert json.loads(r.read())["created_at"] == 1_700_000_000
    assert server.chunk()["created"] == 1_700_000_000


def test_requests_are_captured_with_json_and_headers() -> None:
    with S([S.reply_text("a"), S.reply_text("b")]) as server:
        post(server, {"model": "x", "messages": []}).close()
        post(server, {"model": "y", "stream": False}).close()
    first, second = server.requests
    assert isinstance(first, CapturedRequest)
    assert (first.index, first.method, first.path) == (0, "POST", "/v1/chat/completions")
    assert first.json == {"model": "x", "messages": []}
    assert first.headers["x-test"] == "yes"
    assert second.json["model"] == "y" and not second.stream
    assert first.completed and not first.disconnected


def test_tool_calls_stream_as_sse_with_arguments_in_pieces() -> None:
    reply = S.reply_tool_calls([("add", {"a": 1, "b": 22}, "call_z")], text="Adding")
    with S([reply], chunk_chars=4) as server:
        body = {"stream": True, "stream_options": {"include_usage": True}}
        with post(server, body) as response:
            assert response.headers["content-type"] == "text/event-stream"
            events = sse_events(response.read())
    assert events[-1] == "data: [DONE]"
    chunks = [json.loads(e.removeprefix("data: ")) for e in events[:-1]]
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert "".join(d.get("content") or "" for d in deltas) == "Adding"
    calls = [d["tool_calls"][0] for d in deltas if "tool_calls" in d]
    assert calls[0]["id"] == "call_z" and calls[0]["function"]["name"] == "add"
    arguments = "".join(c["function"]["arguments"] for c in calls)
    assert json.loads(arguments) == {"a": 1, "b": 22}
    assert len(calls) > 3  # split into 4-character pieces
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] > 0


def test_usage_chunk_only_when_asked_for() -> None:
    with S([S.reply_text("x")]) as server, post(server, {"stream": True}) as response:
        chunks = [json.loads(e[6:]) for e in sse_events(response.read())[:-1]]
    assert all(c["choices"] for c in chunks)


def test_raw_streams_send_exact_lines_and_pauses() -> None:
    with S() as server:
        server.add(
            RawStream([": keep-alive", {"custom": 1}, Pause(0.01), "data: tail"], done=False)
        )
        with post(server, {"stream": True}) as response:
            assert sse_events(response.read()) == [
                ": keep-alive",
                'data: {"custom": 1}',
                "data: tail",
            ]


def test_requests_are_numbered_as_they_arrive_over_several_connections() -> None:
    with S([S.reply_text(str(i)) for i in range(3)]) as server:
        first, second = (http.client.HTTPConnection("127.0.0.1", server.port) for _ in "ab")
        try:
            # The first connection waits for its next request while the second is used.
            for connection, model in ((first, "a"), (second, "b"), (first, "c")):
                connection.request("POST", "/v1/chat/completions", json.dumps({"model": model}))
                connection.getresponse().read()
        finally:
            first.close()
            second.close()
    assert [(r.index, r.json["model"]) for r in server.requests] == [(0, "a"), (1, "b"), (2, "c")]


def test_errors_carry_status_headers_and_an_openai_error_body() -> None:
    server = S([S.error(429, "slow down", headers={"Retry-After": "3"})])
    with server, pytest.raises(urllib.error.HTTPError) as raised:
        post(server, {})
    assert raised.value.code == 429
    assert raised.value.headers["retry-after"] == "3"
    assert json.loads(raised.value.read())["error"]["message"] == "slow down"


def test_an_exhausted_script_answers_500_saying_so() -> None:
    with S() as server, pytest.raises(urllib.error.HTTPError) as raised:
        post(server, {})
    assert raised.value.code == 500
    assert raised.value.headers["x-should-retry"] == "false"  # no retry finds another item
    assert "script is exhausted (request #1)" in raised.value.read().decode()


@pytest.mark.parametrize("body", [b"not json", b"[1, 2]"])
def test_a_body_that_is_not_a_json_object_gets_a_400(body: bytes) -> None:
    with S([S.reply_text("unused")]) as server, pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(
            urllib.request.Request(server.base_url + "/chat/completions", data=body, method="POST"),
            timeout=5,
        )
    assert raised.value.code == 400
    assert "invalid_json" in raised.value.read().decode()


def test_other_paths_are_404() -> None:
    with S([S.reply_text("x")]) as server, pytest.raises(urllib.error.HTTPError) as raised:
        post(server, {}, path="/embeddings")
    assert raised.value.code == 404
    assert len(server.requests) == 1  # still captured


def test_repeat_plays_the_script_again_and_callables_decide_per_request() -> None:
    def echo(request: CapturedRequest) -> Any:
        return S.reply_text(f"#{request.index}: {request.json['messages'][-1]['content']}")

    with S([S.reply_text("fixed"), echo], repeat=True) as server:
        texts = []
        for i in range(4):
            with post(server, {"messages": [{"role": "user", "content": f"m{i}"}]}) as r:
                texts.append(json.loads(r.read())["choices"][0]["message"]["content"])
    assert texts == ["fixed", "#1: m1", "fixed", "#3: m3"]


def test_raw_json_responses_are_sent_verbatim() -> None:
    with S([RawResponse(200, b"not json at all")]) as server, post(server, {}) as response:
        assert response.read() == b"not json at all"


def test_start_stop_leaves_no_thread_and_can_restart() -> None:
    before = set(threading.enumerate())
    server = S([S.reply_text("one"), S.reply_text("two")])
    for _ in range(2):
        with server:
            post(server, {}).close()
        assert set(threading.enumerate()) == before
    assert server.port == 0
    with pytest.raises(RuntimeError, match="not running") as info:
        _ = server.base_url
    assert isinstance(info.value, AgcoreError)  # the library's one root, as every error
    with server, pytest.raises(RuntimeError, match="already running") as info:
        server.start()
    assert isinstance(info.value, AgcoreError)


def test_stop_closes_connections_still_open() -> None:
    server = S([RawStream([Pause(30)])]).start()
    response = urllib.request.urlopen(
        urllib.request.Request(server.base_url + "/chat/completions", data=b"{}", method="POST"),
        timeout=5,
    )
    server.stop()  # must not wait for the 30 s pause
    assert not [t for t in threading.enumerate() if t.name == "scripted-chat-server"]
    response.close()


def test_a_hang_up_while_a_write_is_flushing_counts_as_a_disconnect() -> None:
    # 16 MiB cannot fit in the socket buffers, so the server is still flushing it
    # (not yet waiting in the Pause) when the client goes away.
    big = {"choices": [{"index": 0, "delta": {"content": "x" * (16 << 20)}}]}
    with S([RawStream([big, Pause(30)])]) as server:
        body = json.dumps({"model": "x", "stream": True}).encode()
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
            sock.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                % (len(body), body)
            )
            assert sock.recv(4096).startswith(b"HTTP/1.1 200")
        deadline = time.monotonic() + 5
        while not (server.requests and server.requests[0].disconnected):
            assert time.monotonic() < deadline, "the hang-up was not noticed"
            time.sleep(0.01)
    assert not server.requests[0].completed


def test_a_client_that_left_is_not_written_to(caplog: pytest.LogCaptureFixture) -> None:
    # The script holds the answer until the client has reset the connection, so the
    # whole stream comes after it left (as when a reader breaks out of a long stream).
    gone = threading.Event()

    def after_the_client_left(request: CapturedRequest) -> Any:
        gone.wait(5)
        return RawStream([{"choices": []}] * 50)

    with S([after_the_client_left]) as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}")
            deadline = time.monotonic() + 5
            while not server.requests:
                assert time.monotonic() < deadline, "the request did not arrive"
                time.sleep(0.01)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        gone.set()
        deadline = time.monotonic() + 5
        while not server.requests[0].disconnected:
            assert time.monotonic() < deadline, "the hang-up was not noticed"
            time.sleep(0.01)
    assert "socket.send() raised exception" not in caplog.text


async def test_async_context_manager_and_the_sdk_client() -> None:
    async with S([S.reply_text("via the SDK")]) as server:
        client = server.client()
        try:
            completion = await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "Hi"}]
            )
        finally:
            await client.close()
    assert completion.choices[0].message.content == "via the SDK"
    assert server.requests[0].headers["authorization"] == "Bearer scripted-key"


async def test_the_responses_api_is_served_as_json_and_sse_through_the_sdk() -> None:
    script = [
        S.reply_tool_calls([("add", {"a": 2, "b": 3}, "call_7")], text="Adding."),
        S.reply_text("2 + 3 = 5", usage={"prompt_tokens": 4, "completion_tokens": 2}),
        S.reply_tool_calls([("add", {"a": 1, "b": 1}, "call_8")], text="Hm.", reasoning="think"),
    ]
    async with S(script) as server:
        client = server.client()
        try:
            first = await client.responses.create(model="m", input="2 + 3?")
            second = await client.responses.create(
                model="m",
                previous_response_id=first.id,
                input=[{"type": "function_call_output", "call_id": "call_7", "output": "5"}],
            )
            stream = await client.responses.create(
                model="m", input="x", stream=True, include=["reasoning.encrypted_content"]
            )
            events = [event async for event in stream]
        finally:
            await client.close()
    message, call = first.output
    assert (call.type, call.call_id, call.name) == ("function_call", "call_7", "add")
    assert json.loads(call.arguments) == {"a": 2, "b": 3}
    assert message.type == "message" and first.output_text == "Adding."
    assert second.output_text == "2 + 3 = 5"
    assert (second.usage.input_tokens, second.usage.output_tokens) == (4, 2)
    assert server.requests[1].path == "/v1/responses"
    assert server.requests[1].json["previous_response_id"] == first.id
    kinds = [event.type for event in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    deltas = {
        kind: "".join(e.delta for e in events if e.type == kind)
        for kind in (
            "response.reasoning_summary_text.delta",
            "response.output_text.delta",
            "response.function_call_arguments.delta",
        )
    }
    assert deltas == {
        "response.reasoning_summary_text.delta": "think",
        "response.output_text.delta": "Hm.",
        "response.function_call_arguments.delta": '{"a": 1, "b": 1}',
    }
    final = events[-1].response
    assert [item.type for item in final.output] == ["reasoning", "message", "function_call"]
    assert final.output[0].encrypted_content is not None
    assert [e.sequence_number for e in events] == list(range(len(events)))


async def test_the_sdk_responses_stream_helper_reads_the_sse_stream() -> None:
    # The SDK's responses.stream() accumulates each text part from the
    # content_part.added that opens it, so every part must be opened and closed.
    script = [
        S.reply_text("Hello there"),
        S.reply_text("Hi", reasoning="thinking hard"),
        S.reply_tool_calls([("add", {"a": 1, "b": 2}, "call_9")], text="Adding.", reasoning="sum"),
    ]
    finals, kinds = [], []
    async with S(script, chunk_chars=4) as server:
        client = server.client()
        try:
            for _ in script:
                async with client.responses.stream(model="m", input="hi") as stream:
                    kinds.append([event.type async for event in stream])
                    finals.append(await stream.get_final_response())
        finally:
            await client.close()
    assert [final.output_text for final in finals] == ["Hello there", "Hi", "Adding."]
    assert finals[1].output[0].summary[0].text == "thinking hard"
    call = finals[2].output[2]
    assert (call.type, call.call_id, json.loads(call.arguments)) == (
        "function_call",
        "call_9",
        {"a": 1, "b": 2},
    )
    assert kinds[0] == [
        "response.created",
        "response.output_item.added",
        "response.content_part.added",
        *["response.output_text.delta"] * 3,
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert kinds[1][1:8] == [
        "response.output_item.added",
        "response.reasoning_summary_part.added",
        *["response.reasoning_summary_text.delta"] * 4,
        "response.reasoning_summary_text.done",
    ]
    assert kinds[1][8:10] == ["response.reasoning_summary_part.done", "response.output_item.done"]


def _buggy(request: CapturedRequest) -> Any:
    return S.reply_text(request.json["missing"])


@pytest.mark.parametrize(
    ("item", "named"),
    [(_buggy, "KeyError: 'missing'"), ("a bare string", "TypeError: a script item is")],
)
async def test_a_broken_script_item_answers_500_and_takes_no_later_item(
    item: Any, named: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Even a client that retries 500s must not move on to the next item.
    async with S([item, S.reply_text("next item")]) as server:
        client = server.client(max_retries=2)
        try:
            with pytest.raises(openai.InternalServerError) as raised:
                await client.chat.completions.create(model="m", messages=[])
        finally:
            await client.close()
    assert f"the script failed on request #1: {named}" in str(raised.value)
    assert raised.value.response.headers["x-should-retry"] == "false"
    assert len(server.requests) == 1
    assert named.startswith(type(server.requests[0].script_error).__name__)
    assert "the script failed on request #1" in caplog.text


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (
            lambda: S(S.reply_text("hi")),
            "ScriptedChatServer takes a list of script items, got Reply(",
        ),
        (lambda: S("hello"), "ScriptedChatServer takes a list of script items, got str 'hello'"),
        (lambda: S(_buggy), "ScriptedChatServer takes a list of script items, got function"),
        (lambda: S.reply_tool_calls(("add", {"a": 1})), "got one tuple ('add', {'a': 1}): wrap"),
        (
            lambda: S.reply_tool_calls([("add",)]),
            "(name, arguments, id) tuples, got tuple ('add',)",
        ),
        (lambda: S.reply_tool_calls([{"name": "add"}]), "tuples, got dict {'name': 'add'}"),
        (lambda: S.reply_tool_calls([(1, {})]), "a call's name and id are strings, got (1, {})"),
        (lambda: S.reply_text(42), "a Reply's text is a str or None, got int 42"),
        (lambda: RawStream({"choices": []}), "RawStream takes a list of events"),
        (
            lambda: S.error("429"),
            "a RawResponse's status is an int (an HTTP status), got str '429'",
        ),
        # A delay that is not a number dropped the connection in the server instead.
        (
            lambda: Reply(text="hi", delay="0.5"),
            "a Reply's delay is a number of seconds, 0 or more, got str '0.5'",
        ),
        (lambda: Pause("1"), "a Pause is a number of seconds, 0 or more, got str '1'"),
        (lambda: S.error(500, 5), "ScriptedChatServer.error()'s message is a str, got int 5"),
        (
            lambda: S.error(500, "x", type=None),
            "ScriptedChatServer.error()'s type is a str, got NoneType None",
        ),
        (lambda: Pause(-1), "a Pause is a number of seconds, 0 or more, got int -1"),
    ],
)
def test_script_mistakes_are_refused_when_made(make: Any, said: str) -> None:
    # They failed later and barely: KeyError: 0, a 500 per character of a string script,
    # an empty stream, a status of '429' accepted.
    with pytest.raises(LlmUsageError) as raised:
        make()
    assert said in str(raised.value) and "\n" not in str(raised.value)
    assert isinstance(raised.value, TypeError)


async def test_wait_for_times_out() -> None:
    with S() as server, pytest.raises(TimeoutError):
        await server.wait_for(lambda: False, timeout=0.05)


def test_the_module_does_not_import_openai() -> None:
    code = "import sys, agcore_tools.testing, agcore_tools.cycle; print('openai' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr
