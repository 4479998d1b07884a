"""An MCP server's question to the user (2026-07-28 input_required) pauses the loop
like an approval, and resumes from the saved history with the server's requestState
unchanged: real fixture server over HTTP, real scripted model over HTTP."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import signal
import subprocess
import sys
import textwrap
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from agcore_tools import (
    ApprovalDecision,
    ApprovalError,
    BaseTool,
    InputAnswer,
    InputRequest,
    LlmError,
    McpClient,
    McpError,
    StdioTransport,
    StreamableHttpTransport,
    ToolContext,
    ToolExecutionError,
    ToolInputRequested,
    ToolPolicy,
    ToolProgress,
    ToolRegistry,
)
from agcore_tools.cycle._call_ids import UNIQUE_CALL_IDS
from agcore_tools.pending import CallPaused
from tests.mcp.conftest import FIXTURE, HttpServer

from .conftest import S, assert_history_valid, tool_messages

BOOK = S.reply_tool_calls([("book_table", {"party": "Ada"}, "c_book")])


@pytest.fixture
def clock(tmp_path: Path) -> Path:
    """The fixture server's clock offset, in seconds (a test moves it a day on)."""
    path = tmp_path / "clock"
    path.write_text("0")
    return path


@pytest.fixture
def booking(clock: Path) -> Iterator[HttpServer]:
    server = HttpServer(env={"FIXTURE_CLOCK_FILE": str(clock)})
    try:
        yield server
    finally:
        server.stop()


async def _registry(url: str) -> tuple[McpClient, ToolRegistry]:
    client = McpClient("shop", StreamableHttpTransport(url))
    await client.connect()
    registry = ToolRegistry()
    for adapter in client.into_tools():
        registry.register(adapter)
    return client, registry


async def test_a_servers_question_pauses_the_loop_and_a_resume_answers_it(
    serve, make_cycle, booking, clock
):
    model = serve(BOOK, S.reply_text("Booked."))
    client, registry = await _registry(booking.url)
    try:
        cycle = make_cycle(model, approval_key=b"k" * 32)
        paused = await cycle.submit_with_tools("book for Ada", registry)
        [question] = paused.pending
        assert paused.pending_approvals == ()
        assert isinstance(question, InputRequest)
        assert (question.call_id, question.tool_name) == ("c_book", "book_table")
        assert question.request_id.startswith("c_book~seats~")  # and this pause's token
        assert question.message == "How many seats for Ada?"
        assert question.requested_schema["required"] == ["seats"]
        assert len(model.requests) == 1
        saved = json.loads(json.dumps(cycle.messages))  # plain JSON is all an app keeps
        state = saved[-1]["tool_calls"][0]["paused_call"]["state"]["request_state"]
        clock.write_text(str(24 * 3600))  # the user answers a day later

        fresh = make_cycle(model, approval_key=b"k" * 32)
        fresh.messages[:] = saved
        answer = question.accept({"seats": 4})
        done = await fresh.submit_with_tools(None, registry, approvals=[answer])
    finally:
        await client.close()
    assert done.text == "Booked."
    result = tool_messages(model.requests[1].json["messages"])["c_book"]
    # The server's own MAC over its requestState held, after 24 h on its clock.
    assert result == "booked 4 seats for Ada; asked 24 h ago; state intact"
    assert isinstance(state, str) and state
    assert "paused_call" not in json.dumps(model.requests[1].json["messages"])
    assert "paused_call" not in json.dumps(fresh.messages)
    assert_history_valid(fresh.messages)


async def test_an_answer_that_does_not_fit_the_schema_is_refused(serve, make_cycle, booking):
    model = serve(BOOK, S.reply_text("ok"))
    client, registry = await _registry(booking.url)
    try:
        cycle = make_cycle(model)
        [question] = (await cycle.submit_with_tools("book", registry)).pending
        assert isinstance(question, InputRequest)
        with pytest.raises(ApprovalError, match="does not fit its schema") as caught:
            question.accept({"seats": 40})
        assert isinstance(caught.value, ValueError)
        # An answer rebuilt from JSON is checked again on resume; nothing is sent.
        forged = InputAnswer(question.request_id, "c_book", "accept", {"seats": "four"})
        with pytest.raises(ApprovalError, match="'four' is not of type 'integer'"):
            await cycle.submit_with_tools(None, registry, approvals=[forged])
        stray = InputAnswer("c_other~x", "c_other", "decline")
        with pytest.raises(ApprovalError, match="no open call asked the input requests"):
            await cycle.submit_with_tools(None, registry, approvals=[stray])
        assert len(model.requests) == 1
        # Still paused: a right answer goes on.
        done = await cycle.submit_with_tools(None, registry, approvals=[question.decline()])
    finally:
        await client.close()
    assert done.text == "ok"
    assert tool_messages(model.requests[1].json["messages"])["c_book"] == (
        "no booking for Ada: the user chose decline"
    )


async def test_a_changed_request_state_in_the_history_is_refused_with_a_key(
    serve, make_cycle, booking
):
    model = serve(BOOK, S.reply_text("ok"))
    client, registry = await _registry(booking.url)
    try:
        cycle = make_cycle(model, approval_key=b"k" * 32)
        [question] = (await cycle.submit_with_tools("book", registry)).pending
        assert isinstance(question, InputRequest)
        held = cycle.messages[-1]["tool_calls"][0]["paused_call"]
        held["state"]["request_state"] += "x"
        with pytest.raises(ApprovalError, match="missing or wrong signature"):
            await cycle.submit_with_tools(None, registry, approvals=[question.accept({"seats": 2})])
    finally:
        await client.close()
    assert len(model.requests) == 1


def _break(raw: dict[str, Any], how: str) -> None:
    held = raw["paused_call"]
    if how == "not an object":
        raw["paused_call"] = "lost"
    elif how == "no state":
        del held["state"]
    elif how == "no requests":
        del held["requests"]
    elif how == "a request of text":
        held["requests"] = ["seats?"]
    elif how == "an unknown field":
        held["requests"][0]["extra"] = 1
    elif how == "a field missing":
        del held["requests"][0]["request_id"]
    else:  # a question read as a task
        held["requests"][0]["kind"] = "task"


@pytest.mark.parametrize(
    ("how", "why"),
    [
        ("not an object", "it is not an object"),
        ("no state", "'state' is missing or not an object"),
        ("no requests", "'requests' is missing or not a list"),
        ("a request of text", "a request is not an object whose 'kind' is 'input' or 'task'"),
        ("an unknown field", "a request's 'extra' is not one of its fields"),
        ("a field missing", "a request lacks 'request_id'"),
        ("another kind", "a request's 'requested_schema' is not one of its fields"),
    ],
)
async def test_without_a_key_a_malformed_paused_call_is_refused_naming_what_is_wrong(
    serve, make_cycle, booking, how, why
):
    # A store that keeps part of a call's keys, or an app's own edit: a KeyError or a
    # TypeError from the loop's insides said nothing of the history. Nothing is sent.
    model = serve(BOOK, S.reply_text("ok"))
    client, registry = await _registry(booking.url)
    try:
        cycle = make_cycle(model)
        [question] = (await cycle.submit_with_tools("book", registry)).pending
        assert isinstance(question, InputRequest)
        _break(cycle.messages[-1]["tool_calls"][0], how)
        saved = json.loads(json.dumps(cycle.messages))
        for answers in ([question.accept({"seats": 2})], None):
            with pytest.raises(
                ApprovalError, match="the paused call 'c_book' has a malformed"
            ) as caught:
                await cycle.submit_with_tools(None, registry, approvals=answers)
            assert why in str(caught.value)
            assert isinstance(caught.value, ValueError)
            assert cycle.messages == saved  # left as it was, for a fixed history to resume
    finally:
        await client.close()
    assert len(model.requests) == 1


async def test_an_approval_given_to_a_call_waiting_for_its_question_says_what_it_waits_for(
    serve, make_cycle, booking
):
    # It was refused saying no call awaited approval and "the open calls are: none",
    # while this one was open, waiting for a different kind of answer.
    model = serve(BOOK, S.reply_text("ok"))
    client, registry = await _registry(booking.url)
    try:
        cycle = make_cycle(model)
        [question] = (await cycle.submit_with_tools("book", registry)).pending
        assert isinstance(question, InputRequest)
        saved = json.loads(json.dumps(cycle.messages))
        approval = ApprovalDecision("c_book", "book_table", {"party": "Ada"}, True)
        with pytest.raises(ApprovalError) as caught:
            await cycle.submit_with_tools(None, registry, approvals=[approval])
    finally:
        await client.close()
    assert str(caught.value) == (
        f"call 'c_book' waits for the answer to its question '{question.request_id}', not "
        "for approval: answer it with the InputRequest's accept(), decline() or cancel()"
    )
    assert cycle.messages == saved
    assert len(model.requests) == 1


async def test_a_call_id_answered_in_an_earlier_turn_keeps_a_later_pause(
    serve, make_cycle, booking
):
    # Ids repeat across turns (a server's own, or those generated for servers that
    # send none): the second pause of "c_book" must keep its saved state. The loop
    # gives a repeated id a new one, but a history saved before that, or a Temporal run
    # begun before it, still holds repeats: as such a run does, this one keeps them.
    model = serve(BOOK, S.reply_text("Booked."), BOOK, S.reply_text("Booked again."))
    client, registry = await _registry(booking.url)
    repeats = UNIQUE_CALL_IDS.set(False)
    try:
        cycle = make_cycle(model, approval_key=b"k" * 32)
        [first] = (await cycle.submit_with_tools("book for Ada", registry)).pending
        assert isinstance(first, InputRequest)
        await cycle.submit_with_tools(None, registry, approvals=[first.accept({"seats": 2})])
        [second] = (await cycle.submit_with_tools("book again", registry)).pending
        assert isinstance(second, InputRequest) and second.request_id.startswith("c_book~seats~")
        saved = json.loads(json.dumps(cycle.messages))
        assert "paused_call" in saved[-1]["tool_calls"][0]

        fresh = make_cycle(model, approval_key=b"k" * 32)
        fresh.messages[:] = saved
        done = await fresh.submit_with_tools(
            None, registry, approvals=[second.accept({"seats": 3})]
        )
    finally:
        UNIQUE_CALL_IDS.reset(repeats)
        await client.close()
    assert done.text == "Booked again."
    assert fresh.messages[-2]["content"] == "booked 3 seats for Ada; asked 0 h ago; state intact"
    assert "paused_call" not in json.dumps(fresh.messages)


async def test_an_answer_kept_from_an_earlier_question_does_not_answer_a_later_one(
    serve, make_cycle, booking
):
    # The same call id asks again (ids repeat): the answer given to the first question
    # must not be taken as the answer to the second.
    model = serve(BOOK, S.reply_text("Booked."), BOOK, S.reply_text("Booked again."))
    client, registry = await _registry(booking.url)
    try:
        cycle = make_cycle(model)
        [first] = (await cycle.submit_with_tools("book for Ada", registry)).pending
        assert isinstance(first, InputRequest)
        kept = first.accept({"seats": 2})
        await cycle.submit_with_tools(None, registry, approvals=[kept])
        [second] = (await cycle.submit_with_tools("book again", registry)).pending
        assert isinstance(second, InputRequest) and second.request_id != first.request_id
        with pytest.raises(ApprovalError, match="no open call asked the input requests"):
            await cycle.submit_with_tools(None, registry, approvals=[kept])
        assert len(model.requests) == 3  # nothing was sent to the server or the model
        done = await cycle.submit_with_tools(
            None, registry, approvals=[second.accept({"seats": 5})]
        )
    finally:
        await client.close()
    assert done.text == "Booked again."
    assert cycle.messages[-2]["content"].startswith("booked 5 seats for Ada")


async def test_a_history_saved_before_request_ids_named_their_pause_still_resumes(
    serve, make_cycle, booking
):
    model = serve(BOOK, S.reply_text("Booked."))
    client, registry = await _registry(booking.url)
    try:
        cycle = make_cycle(model)
        await cycle.submit_with_tools("book for Ada", registry)
        saved = json.loads(json.dumps(cycle.messages))
        held = saved[-1]["tool_calls"][0]["paused_call"]
        # As an earlier release saved it: the request id was the call id and the key.
        held["requests"][0]["request_id"] = "c_book~seats"
        held["state"]["keys"] = {"c_book~seats": "seats"}
        fresh = make_cycle(model)
        fresh.messages[:] = saved
        answer = InputAnswer("c_book~seats", "c_book", "accept", {"seats": 4})
        done = await fresh.submit_with_tools(None, registry, approvals=[answer])
    finally:
        await client.close()
    assert done.text == "Booked."
    assert fresh.messages[-2]["content"].startswith("booked 4 seats for Ada")


async def test_a_stream_consumer_answers_the_question_inline(serve, make_cycle, booking):
    model = serve(BOOK, S.reply_text("Booked inline."))
    client, registry = await _registry(booking.url)
    asked: list[str] = []
    try:
        cycle = make_cycle(model)
        stream = cycle.submit_stream_with_tools("book", registry)
        async for event in stream:
            if isinstance(event, ToolInputRequested):
                asked.append(event.request.message)
                event.accept({"seats": 2})
        response = stream.response
    finally:
        await client.close()
    assert asked == ["How many seats for Ada?"]
    assert response.text == "Booked inline." and response.pending == ()
    assert tool_messages(model.requests[1].json["messages"])["c_book"] == (
        "booked 2 seats for Ada; asked 0 h ago; state intact"
    )


async def test_an_inline_answer_after_the_stream_moved_on_is_logged(
    serve, make_cycle, booking, caplog
):
    model = serve(BOOK)
    client, registry = await _registry(booking.url)
    asked: list[ToolInputRequested] = []
    try:
        stream = make_cycle(model).submit_stream_with_tools("book", registry)
        async for event in stream:
            if isinstance(event, ToolInputRequested):
                asked.append(event)
        response = stream.response
    finally:
        await client.close()
    [event] = asked
    assert response is not None and [p.call_id for p in response.pending] == ["c_book"]
    # The run paused with the question open; an answer now changes nothing in it.
    with caplog.at_level(logging.WARNING, logger="agcore_tools.approval"):
        answer = event.accept({"seats": 2})
    assert "the inline answer to call 'c_book' came after the stream moved on" in caplog.text
    assert answer.content == {"seats": 2}  # still an answer a resume can take


async def test_with_an_elicitation_handler_the_handler_answers_and_nothing_pauses(
    serve, make_cycle, booking
):
    import mcp.types as types

    async def seats(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"seats": 3})

    model = serve(BOOK, S.reply_text("ok"))
    client = McpClient("shop", StreamableHttpTransport(booking.url), elicitation_handler=seats)
    async with client:
        registry = ToolRegistry()
        for adapter in client.into_tools():
            registry.register(adapter)
        response = await make_cycle(model).submit_with_tools("book", registry)
    assert response.pending == ()
    assert tool_messages(model.requests[1].json["messages"])["c_book"] == (
        "booked 3 seats for Ada; asked 0 h ago; state intact"
    )


CHILD = textwrap.dedent(
    """
    import asyncio, json, sys, time
    from agcore_tools import CycleConfig, LlmCycle, McpClient, StreamableHttpTransport, ToolRegistry

    async def main(model_url, mcp_url, history):
        from openai import AsyncOpenAI
        client = AsyncOpenAI(base_url=model_url, api_key="-", timeout=20.0)
        async with McpClient("shop", StreamableHttpTransport(mcp_url)) as mcp:
            registry = ToolRegistry()
            for adapter in mcp.into_tools():
                registry.register(adapter)
            async with LlmCycle(CycleConfig("m", approval_key=b"k" * 32), client=client) as cycle:
                paused = await cycle.submit_with_tools("book for Ada", registry)
                with open(history, "w") as out:
                    json.dump(cycle.messages, out)
                print(json.dumps([p.request_id for p in paused.pending]), flush=True)
                await asyncio.sleep(60)  # killed here, paused

    asyncio.run(main(*sys.argv[1:]))
    """
)


def _pause_in_a_child_and_kill_it(model_url: str, mcp_url: str, folder: Path) -> list[Any]:
    """Run CHILD until it pauses on the question, kill it, and return its history."""
    script = folder / "child.py"
    script.write_text(CHILD)
    history = folder / "history.json"
    root = Path(__file__).resolve().parents[2]
    child = subprocess.Popen(
        [sys.executable, str(script), model_url, mcp_url, str(history)],
        stdout=subprocess.PIPE,
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline().decode()  # bounded: the child sleeps 60 s at most
        [request_id] = json.loads(line)
        assert request_id.startswith("c_book~seats~")
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(10)
        assert child.stdout is not None
        child.stdout.close()  # else a ResourceWarning when the pipe is collected
    saved: list[Any] = json.loads(history.read_text())
    return saved


async def test_killed_while_a_question_waits_and_resumed_in_this_process(
    serve, make_cycle, booking, tmp_path: Path
):
    model = serve(BOOK, S.reply_text("Booked after restart."))
    saved = await asyncio.to_thread(
        _pause_in_a_child_and_kill_it, model.base_url, booking.url, tmp_path
    )
    held = saved[-1]["tool_calls"][0]["paused_call"]
    [saved_question] = held["requests"]
    assert saved_question["kind"] == "input"
    question = InputRequest(**{k: v for k, v in saved_question.items() if k != "kind"})
    client, registry = await _registry(booking.url)
    try:
        cycle = make_cycle(model, approval_key=b"k" * 32)
        cycle.messages[:] = saved
        done = await cycle.submit_with_tools(
            None, registry, approvals=[question.accept({"seats": 6})]
        )
    finally:
        await client.close()
    assert done.text == "Booked after restart."
    assert tool_messages(model.requests[1].json["messages"])["c_book"] == (
        "booked 6 seats for Ada; asked 0 h ago; state intact"
    )
    assert dataclasses.asdict(question)["message"] == "How many seats for Ada?"


async def test_in_a_program_a_question_is_an_error_the_program_can_read(serve, make_cycle, booking):
    pytest.importorskip("pydantic_monty")
    from agcore_tools import CodeMode

    code = "try:\n    await book_table(party='Ada')\nexcept RuntimeError as e:\n    print(e)"
    model = serve(
        S.reply_tool_calls([("run_python", {"code": code}, "c_prog")]), S.reply_text("ok")
    )
    client, registry = await _registry(booking.url)
    try:
        response = await make_cycle(model).submit_with_tools("book", registry, select=CodeMode())
    finally:
        await client.close()
    assert response.pending == ()
    assert (
        "asked the user a question, which a program cannot wait for"
        in (tool_messages(model.requests[1].json["messages"])["c_prog"])
    )


# -- 2025-11-25: the question is a request on the live connection --------------------

ASK = S.reply_tool_calls([("ask", {"question": "Your colour?"}, "c_ask")])


async def _legacy(url: str, timeout: float = 20.0) -> tuple[McpClient, ToolRegistry]:
    client = McpClient("shop", StreamableHttpTransport(url), protocol="legacy", timeout=timeout)
    await client.connect()
    registry = ToolRegistry()
    for adapter in client.into_tools():
        registry.register(adapter)
    return client, registry


async def test_on_2025_the_pause_holds_the_live_question_and_answers_it_in_process(
    serve, make_cycle, booking
):
    model = serve(ASK, S.reply_text("Blue it is."))
    client, registry = await _legacy(booking.url)
    try:
        assert client.protocol_version == "2025-11-25"
        cycle = make_cycle(model)
        paused = await cycle.submit_with_tools("colour?", registry)
        [question] = paused.pending
        assert isinstance(question, InputRequest)
        assert question.request_id.startswith("c_ask~ask~")
        assert question.message == "Your colour?"
        assert question.requested_schema["required"] == ["answer"]
        saved = json.loads(json.dumps(cycle.messages))
        cycle.messages[:] = saved  # the same process, from the saved history
        done = await cycle.submit_with_tools(
            None, registry, approvals=[question.accept({"answer": "blue"})]
        )
    finally:
        await client.close()
    assert done.text == "Blue it is."
    assert tool_messages(model.requests[1].json["messages"])["c_ask"] == "accept: blue"


class _Declined(logging.Handler):
    """Wakes a waiter when a question is declined with a WARNING, and keeps its text."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []
        self.logged = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if "declined" in record.getMessage():
            self.messages.append(record.getMessage())
            self.logged.set()


async def test_on_2025_a_second_question_while_one_waits_is_declined_saying_why(
    serve, make_cycle, booking
):
    # It was declined with a warning that the client has no elicitation_handler, as if
    # none could answer, while the first question waited for the app's answer.
    declined = _Declined()
    mcp_logger = logging.getLogger("agcore_tools.mcp")
    mcp_logger.addHandler(declined)
    twice = S.reply_tool_calls([("ask_twice", {"question": "Your colour?"}, "c_ask")])
    model = serve(twice, S.reply_text("Blue it is."))
    client, registry = await _legacy(booking.url)
    try:
        cycle = make_cycle(model)
        paused = await cycle.submit_with_tools("colour?", registry)
        [question] = paused.pending
        assert isinstance(question, InputRequest)
        # The other question comes while this one waits for its answer.
        await asyncio.wait_for(declined.logged.wait(), 10)
        done = await cycle.submit_with_tools(
            None, registry, approvals=[question.accept({"answer": "blue"})]
        )
    finally:
        mcp_logger.removeHandler(declined)
        await client.close()
    assert done.text == "Blue it is."
    told = tool_messages(model.requests[1].json["messages"])["c_ask"]
    assert sorted(told.split("; ")) == ["accept: blue", "decline: "]
    other = "Your colour? (again)" if question.message == "Your colour?" else "Your colour?"
    assert declined.messages == [_held_warning(other)]


def _held_warning(question: str) -> str:
    return (
        f"MCP server 'shop' asked a question ({question!r}) while a paused call waits for "
        "the answer to another; declined: a paused call holds one question at a time, "
        "2025-11-25 does not say which call asked, and the McpClient has no "
        "elicitation_handler to answer it"
    )


async def test_on_2025_a_question_from_a_call_that_cannot_pause_is_not_blamed_on_the_paused_one(
    serve, make_cycle, booking
):
    # Asked by a call made outside the loop while a paused call waited, it was declined
    # with a warning that a paused call holds one question at a time, as if the paused
    # call had asked it; the wire does not say which call asked, and no handler could
    # answer it.
    declined = _Declined()
    mcp_logger = logging.getLogger("agcore_tools.mcp")
    mcp_logger.addHandler(declined)
    model = serve(ASK, S.reply_text("Blue it is."))
    client, registry = await _legacy(booking.url)
    try:
        cycle = make_cycle(model)
        paused = await cycle.submit_with_tools("colour?", registry)
        [question] = paused.pending
        # Declined (the fixture's ask tool then fails on the answer's missing data).
        with pytest.raises(ToolExecutionError):
            await client.call_tool("ask", {"question": "Your size?"})
        done = await cycle.submit_with_tools(
            None, registry, approvals=[question.accept({"answer": "blue"})]
        )
    finally:
        mcp_logger.removeHandler(declined)
        await client.close()
    assert done.text == "Blue it is."
    assert tool_messages(model.requests[1].json["messages"])["c_ask"] == "accept: blue"
    assert declined.messages == [_held_warning("Your size?")]


async def test_on_2025_two_conversations_with_the_same_call_id_keep_their_own_questions(
    serve, make_cycle, booking
):
    # One registry serves every conversation (a web app), and call ids repeat across
    # them: each answer must reach the call of the conversation that was asked.
    alice_model = serve(ASK, S.reply_text("Alice done."))
    bob_model = serve(ASK, S.reply_text("Bob done."))
    client, registry = await _legacy(booking.url)
    try:
        alice, bob = make_cycle(alice_model), make_cycle(bob_model)
        [alice_asked] = (await alice.submit_with_tools("colour?", registry)).pending
        [bob_asked] = (await bob.submit_with_tools("colour?", registry)).pending
        assert isinstance(alice_asked, InputRequest) and isinstance(bob_asked, InputRequest)
        await alice.submit_with_tools(
            None, registry, approvals=[alice_asked.accept({"answer": "red"})]
        )
        await bob.submit_with_tools(
            None, registry, approvals=[bob_asked.accept({"answer": "blue"})]
        )
    finally:
        await client.close()
    assert tool_messages(alice_model.requests[1].json["messages"])["c_ask"] == "accept: red"
    assert tool_messages(bob_model.requests[1].json["messages"])["c_ask"] == "accept: blue"


async def test_on_2025_two_conversations_resuming_at_once_get_their_own_answers(
    serve, make_cycle, booking
):
    # Both hand their answers to the shared tool before either call runs (here both
    # wait for a desk another call holds): each call must take its own conversation's.
    alice_model = serve(ASK, S.reply_text("Alice done."))
    bob_model = serve(ASK, S.reply_text("Bob done."))
    client, registry = await _legacy(booking.url)
    gate = asyncio.Event()

    @registry.tool(policy=ToolPolicy(concurrency=1, resource="desk"))
    async def hold() -> str:
        """Keep the desk until the test lets go."""
        await asyncio.wait_for(gate.wait(), 20.0)
        return "held"

    try:
        alice, bob = make_cycle(alice_model), make_cycle(bob_model)
        [alice_asked] = (await alice.submit_with_tools("colour?", registry)).pending
        [bob_asked] = (await bob.submit_with_tools("colour?", registry)).pending
        assert isinstance(alice_asked, InputRequest) and isinstance(bob_asked, InputRequest)
        registry.set_policy(ToolPolicy(concurrency=1, resource="desk"), names=["ask"])
        desk = registry.entry("ask").guard.slots  # type: ignore[union-attr]
        holder = asyncio.ensure_future(registry.invoke("hold", {}))
        # A resume handed over earlier in this outer context: both tasks below start
        # from it, and must not share what each adds to it.
        registry.get("ask").resume_next("c_other", {"state": {}, "answers": {}})  # type: ignore[union-attr]
        resumed = [
            asyncio.ensure_future(cycle.submit_with_tools(None, registry, approvals=[answer]))
            for cycle, answer in (
                (alice, alice_asked.accept({"answer": "red"})),
                (bob, bob_asked.accept({"answer": "blue"})),
            )
        ]
        deadline = asyncio.get_running_loop().time() + 20.0
        while len(desk.waiters) < 2:  # both calls wait, their answers handed over
            assert asyncio.get_running_loop().time() < deadline, "the calls never waited"
            await asyncio.sleep(0.01)
        gate.set()
        await asyncio.wait_for(asyncio.gather(holder, *resumed), 20.0)
    finally:
        gate.set()
        await client.close()
    assert tool_messages(alice_model.requests[1].json["messages"])["c_ask"] == "accept: red"
    assert tool_messages(bob_model.requests[1].json["messages"])["c_ask"] == "accept: blue"


async def test_on_2025_a_question_cannot_outlive_its_process_and_the_model_is_told(
    serve, make_cycle, booking
):
    model = serve(ASK, S.reply_text("I will ask again."))
    first, registry = await _legacy(booking.url)
    try:
        cycle = make_cycle(model)
        [question] = (await cycle.submit_with_tools("colour?", registry)).pending
        assert isinstance(question, InputRequest)
        saved = json.loads(json.dumps(cycle.messages))
    finally:
        await first.close()  # the process that held the question is gone
    second, fresh_registry = await _legacy(booking.url)
    try:
        fresh = make_cycle(model)
        fresh.messages[:] = saved
        done = await fresh.submit_with_tools(
            None, fresh_registry, approvals=[question.accept({"answer": "blue"})]
        )
    finally:
        await second.close()
    assert done.text == "I will ask again."
    told = tool_messages(model.requests[1].json["messages"])["c_ask"]
    assert "the question asked during tools/call 'ask' was lost" in told
    assert "call the tool again" in told


async def test_on_2025_an_answer_after_the_timeout_is_not_read_as_a_cancel(
    serve, make_cycle, booking, caplog
):
    caplog.set_level(logging.WARNING, logger="agcore_tools.mcp")
    model = serve(ASK, S.reply_text("I will ask again."))
    client, registry = await _legacy(booking.url, timeout=2.0)
    try:
        cycle = make_cycle(model)
        [question] = (await cycle.submit_with_tools("colour?", registry)).pending
        assert isinstance(question, InputRequest)
        # The person answers late: the server was told "cancel" after the client's timeout.
        await _given_up_asking(caplog, "the question never timed out")
        done = await cycle.submit_with_tools(
            None, registry, approvals=[question.accept({"answer": "blue"})]
        )
    finally:
        await client.close()
    assert done.text == "I will ask again."
    told = tool_messages(model.requests[1].json["messages"])["c_ask"]
    assert "the question asked during tools/call 'ask' was lost" in told
    assert "after the call's timeout (2 s)" in told and "call the tool again" in told


async def test_on_2025_a_question_the_server_withdrew_gives_the_model_the_calls_result(
    serve, make_cycle, caplog
):
    # The server stopped waiting (notifications/cancelled) and its call went on without
    # the answer: the model read that the answer came after the call's timeout and the
    # server was told "cancel", neither of which happened, and the call's result was lost.
    caplog.set_level(logging.WARNING, logger="agcore_tools.mcp")
    model = serve(
        S.reply_tool_calls([("ask_withdrawable", {"question": "Your colour?"}, "c_ask")]),
        S.reply_text("Noted."),
    )
    # Over stdio the withdrawal reaches the client before the answer to withdraw_question.
    transport = StdioTransport(sys.executable, [str(FIXTURE)])
    async with McpClient("shop", transport, protocol="legacy", timeout=20.0) as client:
        registry = ToolRegistry()
        registry.register_all(client.into_tools())
        cycle = make_cycle(model)
        [question] = (await cycle.submit_with_tools("colour?", registry)).pending
        assert isinstance(question, InputRequest)
        assert await client.call_tool("withdraw_question") == "withdrawn"
        done = await cycle.submit_with_tools(
            None, registry, approvals=[question.accept({"answer": "blue"})]
        )
    assert done.text == "Noted."
    told = tool_messages(model.requests[1].json["messages"])["c_ask"]
    assert told == "withdrawn: went on without an answer"
    warned = "tools/call 'ask_withdrawable' ('Your colour?') was withdrawn before it was answered"
    assert warned in caplog.text


async def test_on_2025_a_question_lost_with_its_server_tells_the_model_to_call_again(
    serve, make_cycle
):
    # The server died while the loop held its question: the model must read that the
    # question was lost and to call the tool again, and the run go on.
    model = serve(ASK, S.reply_text("I will ask again."))
    transport = StdioTransport(sys.executable, [str(FIXTURE)])
    async with McpClient("shop", transport, protocol="legacy", timeout=20.0) as client:
        registry = ToolRegistry()
        registry.register_all(client.into_tools())
        cycle = make_cycle(model)
        [question] = (await cycle.submit_with_tools("colour?", registry)).pending
        assert isinstance(question, InputRequest)
        with pytest.raises(McpError, match="connection lost"):
            await client.call_tool("die", {"code": 3})
        done = await cycle.submit_with_tools(
            None, registry, approvals=[question.accept({"answer": "blue"})]
        )
    assert done.text == "I will ask again."
    told = tool_messages(model.requests[1].json["messages"])["c_ask"]
    assert "the question asked during tools/call 'ask' was lost" in told
    assert "call the tool again" in told and "timeout" not in told


async def test_on_2025_a_resumed_stream_gets_the_progress_of_the_call_after_its_answer(
    serve, make_cycle
):
    # The call runs on while the loop waits for the answer; the progress it reported
    # after the answer went to the context of the stream that paused, which had ended,
    # so the stream that resumed it showed none.
    model = serve(
        S.reply_tool_calls([("ask_then_progress", {"question": "Go?", "steps": 3}, "c_ask")]),
        S.reply_text("Done."),
    )
    transport = StdioTransport(sys.executable, [str(FIXTURE)])
    async with McpClient("shop", transport, protocol="legacy", timeout=20.0) as client:
        registry = ToolRegistry()
        registry.register_all(client.into_tools())
        cycle = make_cycle(model)
        first = [event async for event in cycle.submit_stream_with_tools("go?", registry)]
        [asked] = [e for e in first if isinstance(e, ToolInputRequested)]
        answer = asked.request.accept({"answer": "yes"})
        resumed = [
            event
            async for event in cycle.submit_stream_with_tools(None, registry, approvals=[answer])
        ]
    progress = [(e.call_id, e.progress, e.total) for e in resumed if isinstance(e, ToolProgress)]
    assert progress == [("c_ask", 1.0, 3.0), ("c_ask", 2.0, 3.0), ("c_ask", 3.0, 3.0)]
    assert tool_messages(model.requests[1].json["messages"])["c_ask"] == "accept: yes"


async def _given_up_asking(caplog: pytest.LogCaptureFixture, otherwise: str) -> None:
    """Once the client has logged that its question got no answer in time (15 s at most,
    else fail saying ``otherwise``)."""
    deadline = time.monotonic() + 15
    while "no answer to its question" not in caplog.text:
        assert time.monotonic() < deadline, otherwise
        await asyncio.sleep(0.05)


async def test_on_2025_a_held_question_is_bounded_by_its_calls_timeout_not_the_connections(
    serve, make_cycle, booking, caplog
):
    # The held question was bounded by the timeout the connection started with (20 s
    # here), not by the timeout of the call that asked: a client.timeout set later, for
    # longer or shorter calls, did not apply to it.
    caplog.set_level(logging.WARNING, logger="agcore_tools.mcp")
    model = serve(ASK, S.reply_text("I will ask again."))
    client, registry = await _legacy(booking.url, timeout=20.0)
    client.timeout = 1.5  # the call's timeout, set after the connection started
    try:
        cycle = make_cycle(model)
        [question] = (await cycle.submit_with_tools("colour?", registry)).pending
        assert isinstance(question, InputRequest)
        await _given_up_asking(caplog, "the question was not bounded by its call")
        done = await cycle.submit_with_tools(
            None, registry, approvals=[question.accept({"answer": "blue"})]
        )
    finally:
        await client.close()
    [warned] = [r.getMessage() for r in caplog.records if "no answer" in r.getMessage()]
    assert "within 1.5 s (its call's timeout); cancelled" in warned
    assert done.text == "I will ask again."
    told = tool_messages(model.requests[1].json["messages"])["c_ask"]
    assert "after the call's timeout (1.5 s)" in told


async def test_on_2025_a_call_that_fails_after_its_question_shows_no_echoed_token(
    serve, make_cycle, booking
):
    # The error said what the server answered, and was chained from the SDK's error,
    # both with the token the server quoted from its request unmasked.
    token = "ghp_S3CRETt0ken00"
    model = serve(
        S.reply_tool_calls([("ask_then_reject", {"question": "Your colour?"}, "c_ask")]),
        S.reply_text("It failed."),
    )
    transport = StreamableHttpTransport(booking.url, {"Authorization": f"Bearer {token}"})
    client = McpClient("shop", transport, protocol="legacy", timeout=20.0)
    registry = ToolRegistry()
    async with client:
        registry.register_all(client.into_tools())
        cycle = make_cycle(model)
        [question] = (await cycle.submit_with_tools("colour?", registry)).pending
        assert isinstance(question, InputRequest)
        answer = question.accept({"answer": "blue"})
        with pytest.raises(LlmError) as stopped:  # the error stops the loop
            await cycle.submit_with_tools(None, registry, approvals=[answer])
    failed = stopped.value.__cause__
    assert isinstance(failed, McpError)
    assert "failed after its question: upstream rejected credentials: ***" in str(failed)
    shown = "".join(traceback.format_exception(stopped.value))
    assert token not in shown, shown
    assert "MCPError: upstream rejected credentials: ***" in shown  # its cause, masked


async def test_a_call_edited_on_approval_goes_on_from_its_question_with_the_edited_arguments(
    serve, make_cycle, booking
):
    # 2026-07-28's input_required: the client calls the tool again with its arguments,
    # the answers and the requestState. The history holds the model's call (Ada); the
    # call the user approved ran with Bob, and so must its second request.
    model = serve(BOOK, S.reply_text("Booked."))
    client, registry = await _registry(booking.url)
    sent: list[dict[str, Any]] = []
    calling = client.call_tool

    async def call_tool(name: str, args: dict[str, Any], *more: Any, **kw: Any) -> Any:
        sent.append(dict(args))
        return await calling(name, args, *more, **kw)

    client.call_tool = call_tool  # type: ignore[method-assign]
    tool = registry.get("book_table")
    tool.needs_approval = True  # type: ignore[union-attr]
    try:
        cycle = make_cycle(model, approval_key=b"k" * 32)
        [asked] = (await cycle.submit_with_tools("book for Ada", registry)).pending_approvals
        edited = asked.approve(arguments={"party": "Bob"})
        [question] = (await cycle.submit_with_tools(None, registry, approvals=[edited])).pending
        assert isinstance(question, InputRequest)
        assert question.message == "How many seats for Bob?"
        saved = json.loads(json.dumps(cycle.messages))
        fresh = make_cycle(model, approval_key=b"k" * 32)
        fresh.messages[:] = saved
        done = await fresh.submit_with_tools(
            None, registry, approvals=[question.accept({"seats": 2})]
        )
    finally:
        await client.close()
    assert done.text == "Booked."
    assert sent == [{"party": "Bob"}, {"party": "Bob"}]
    result = tool_messages(model.requests[1].json["messages"])["c_book"]
    assert result == (
        "[the user edited this call's arguments before it ran; it ran with "
        '{"party": "Bob"}]\nbooked 2 seats for Bob; asked 0 h ago; state intact'
    )
    assert_history_valid(fresh.messages)


class _TwoQuestions(BaseTool):
    """Asks two questions at once (as an MCP ``input_required`` may), then answers
    with what it was told."""

    name = "plan_trip"
    description = "Plan a trip."
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}

    def __init__(self) -> None:
        self.resumes: dict[str, Any] = {}

    def resume_next(self, call_id: str, resume: Any) -> None:
        self.resumes[call_id] = resume

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        call_id = ctx.call_id or ""
        resume = self.resumes.pop(call_id, None)
        if resume is not None:
            return json.dumps(resume["answers"], sort_keys=True)
        schema = {"type": "object", "properties": {"x": {"type": "string"}}}
        return CallPaused(
            (
                InputRequest(f"{call_id}~where", call_id, self.name, "Where?", schema),
                InputRequest(f"{call_id}~when", call_id, self.name, "When?", schema),
            ),
            {},
        )


async def test_a_call_whose_questions_are_answered_only_in_part_inline_says_so(
    serve, make_cycle, caplog
):
    # The one answer given was dropped without a word: the call still waited.
    model = serve(S.reply_tool_calls([("plan_trip", {}, "c_trip")]))
    registry = ToolRegistry()
    registry.register(_TwoQuestions())
    stream = make_cycle(model).submit_stream_with_tools("plan", registry)
    with caplog.at_level(logging.WARNING, logger="agcore_tools.approval"):
        async for event in stream:
            if isinstance(event, ToolInputRequested) and event.request.message == "Where?":
                event.accept({"x": "Rome"})
    response = stream.response

    assert response is not None
    assert [p.message for p in response.pending if isinstance(p, InputRequest)] == [
        "Where?",
        "When?",
    ]
    assert (
        "1 of the 2 questions of call 'c_trip' were answered inline; the call goes on only "
        "with every answer, so it still waits"
    ) in caplog.text
