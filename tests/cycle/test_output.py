"""Structured final output (``output_type=``) against a real loopback server: what each
request asks for, the validated value, the retries and their feedback, the tool-mode
fallback, streaming and the sync twins."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
import logging
import sys
import uuid
from collections.abc import Callable
from typing import Annotated, Any, Literal

import pytest
from openai import OpenAI
from pydantic import BaseModel, ConfigDict, Field, PydanticUserError
from typing_extensions import TypedDict

from agcore_tools import (
    AssistantTextDelta,
    CycleConfig,
    DefinitionBudgetError,
    FinishReason,
    LlmConfigError,
    LlmCycle,
    OutputValidationError,
    StructuredOutput,
    ToolRegistry,
    TrimOldest,
    TurnComplete,
)
from agcore_tools.cycle import split_exchanges
from agcore_tools.testing import RawResponse

from .conftest import S, assert_history_valid, tool_messages


class City(BaseModel):
    name: str
    population: int


@dataclasses.dataclass
class Point:
    x: float
    y: float


class Movie(TypedDict):
    title: str
    year: int


class Forecast(BaseModel):
    city: str
    celsius: int = 15  # optional: strict mode makes it nullable
    note: str | None = "none"  # None is a value of its own here


class Kind(enum.Enum):
    STANDUP = "standup"
    REVIEW = "review"


ROOM = "12345678-1234-5678-1234-567812345678"

OBJECT = {"type": "object", "additionalProperties": False}

# One row per kind of type: (output_type, the model's JSON, the value, the strict schema).
KINDS = [
    pytest.param(
        City,
        '{"name": "Paris", "population": 2102650}',
        City(name="Paris", population=2102650),
        {
            **OBJECT,
            "properties": {"name": {"type": "string"}, "population": {"type": "integer"}},
            "required": ["name", "population"],
        },
        id="pydantic",
    ),
    pytest.param(
        Point,
        '{"x": 1.5, "y": -2}',
        Point(1.5, -2.0),
        {
            **OBJECT,
            "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
            "required": ["x", "y"],
        },
        id="dataclass",
    ),
    pytest.param(
        Movie,
        '{"title": "Alien", "year": 1979}',
        {"title": "Alien", "year": 1979},
        {
            **OBJECT,
            "properties": {"title": {"type": "string"}, "year": {"type": "integer"}},
            "required": ["title", "year"],
        },
        id="typeddict",
    ),
    pytest.param(
        int,
        '{"result": 42}',
        42,
        {**OBJECT, "properties": {"result": {"type": "integer"}}, "required": ["result"]},
        id="int",
    ),
    pytest.param(
        list[str],
        '{"result": ["a", "b"]}',
        ["a", "b"],
        {
            **OBJECT,
            "properties": {"result": {"type": "array", "items": {"type": "string"}}},
            "required": ["result"],
        },
        id="list",
    ),
    pytest.param(
        Literal["yes", "no"],
        '{"result": "no"}',
        "no",
        {
            **OBJECT,
            "properties": {"result": {"type": "string", "enum": ["yes", "no"]}},
            "required": ["result"],
        },
        id="literal",
    ),
]


@pytest.mark.parametrize(("output_type", "answer", "value", "schema"), KINDS)
async def test_each_kind_of_type_is_asked_for_strictly_and_validated(
    serve, make_cycle, output_type, answer, value, schema
):
    server = serve(S.reply_text(answer))
    cycle = make_cycle(server)

    response = await cycle.submit_with_tools("Answer.", ToolRegistry(), output_type=output_type)

    assert response.output == value
    assert type(response.output) is type(value)
    assert response.text == answer  # the text stays available
    sent = server.requests[0].json["response_format"]
    assert sent["type"] == "json_schema"
    assert sent["json_schema"]["strict"] is True
    assert sent["json_schema"]["schema"] == schema
    assert sent["json_schema"]["name"].replace("_", "").isalnum()


async def test_a_null_for_an_optional_field_means_its_default_unless_it_accepts_none(
    serve, make_cycle
):
    server = serve(S.reply_text('{"city": "Oslo", "celsius": null, "note": null}'))
    cycle = make_cycle(server)

    response = await cycle.submit("Weather in Oslo?", output_type=Forecast)

    assert response.output == Forecast(city="Oslo", celsius=15, note=None)
    properties = server.requests[0].json["response_format"]["json_schema"]["schema"]["properties"]
    assert properties["celsius"] == {"anyOf": [{"type": "integer"}, {"type": "null"}]}


class Report(BaseModel):
    summary: str
    scratch: str = Field("sk-excluded-default", exclude=True)  # the model's notes
    key: str = Field("sk-hidden-default", repr=False)
    counts: dict[str, int] = {}  # a map with free keys: not strict


@pytest.mark.parametrize("mode", ["json_schema", "json_object", "tool"])
async def test_a_default_kept_out_of_dumps_or_reprs_is_not_in_the_schema_sent(
    serve, make_cycle, mode
):
    # Sent without strict mode (strict mode drops every default), a Field(exclude=True)
    # or repr=False field's default reached the model: often a key. The fields stay.
    answer = {"summary": "ok", "scratch": "thought"}
    reply = (
        S.reply_tool_calls([("final_result", answer)])
        if mode == "tool"
        else S.reply_text(json.dumps(answer))
    )
    server = serve(reply)
    cycle = make_cycle(server)

    response = await cycle.submit("Report?", output_type=StructuredOutput(Report, mode=mode))

    assert response.output == Report(summary="ok", scratch="thought")
    assert response.output.key == "sk-hidden-default"
    request = server.requests[0].json
    sent = request["tools"][0]["function"] if mode == "tool" else request["response_format"]
    assert "sk-" not in json.dumps(sent), sent
    assert '"scratch"' in json.dumps(sent) and '"key"' in json.dumps(sent)


class Meeting(BaseModel):
    model_config = ConfigDict(strict=True)
    day: datetime.date
    room: uuid.UUID
    kind: Kind
    note: str = "none"


async def test_a_strict_model_takes_dates_uuids_and_enums_from_json(serve, make_cycle):
    fields = {"day": "2024-05-06", "room": ROOM, "kind": "standup"}
    answer = json.dumps({**fields, "note": None})  # null: the default, in strict mode
    server = serve(S.reply_text(answer))
    cycle = make_cycle(server)

    response = await cycle.submit("When?", output_type=Meeting)

    assert response.output == Meeting.model_validate_json(json.dumps(fields))
    assert response.output.day == datetime.date(2024, 5, 6)


async def test_without_output_type_no_request_carries_a_response_format(serve, make_cycle, calc):
    server = serve(S.reply_tool_calls([("add", {"a": 1, "b": 2})]), S.reply_text("3"))
    cycle = make_cycle(server)

    response = await cycle.submit_with_tools("1 + 2?", calc)

    assert response.output is None
    assert all("response_format" not in r.json for r in server.requests)


async def test_tool_turns_run_first_and_every_request_asks_for_the_output(serve, make_cycle, calc):
    server = serve(
        S.reply_tool_calls([("weather", {"city": "Oslo"})]),
        S.reply_text('{"city": "Oslo", "celsius": 21, "note": "clear"}'),
    )
    cycle = make_cycle(server)

    response = await cycle.submit_with_tools("Weather in Oslo?", calc, output_type=Forecast)

    assert response.output == Forecast(city="Oslo", celsius=21, note="clear")
    assert calc.runs == [("weather", {"city": "Oslo"})]
    assert [r.json["response_format"]["type"] for r in server.requests] == ["json_schema"] * 2
    assert_history_valid(cycle.messages)


# -- retries -------------------------------------------------------------------------


async def test_an_invalid_answer_is_retried_with_its_field_errors(serve, make_cycle):
    server = serve(
        S.reply_text('{"name": "Paris", "population": "many"}'),
        S.reply_text('{"name": "Paris", "population": 2102650}'),
    )
    cycle = make_cycle(server)

    response = await cycle.submit("Biggest French city?", output_type=City)

    assert response.output == City(name="Paris", population=2102650)
    assert response.turns == 2
    feedback = server.requests[1].json["messages"][-1]
    assert feedback["role"] == "user"
    assert "population: Input should be a valid integer" in feedback["content"]
    assert server.requests[1].json["response_format"] == server.requests[0].json["response_format"]
    # The rejected answer stays in the history, followed by the feedback.
    assert [m["role"] for m in cycle.messages] == ["user", "assistant", "user", "assistant"]


async def test_a_trimmed_retry_keeps_the_question_and_the_answer_it_is_about(
    serve, make_cycle, calc
):
    server = serve(
        S.reply_text("Hello!"),
        S.reply_tool_calls([("add", {"a": 2, "b": 3})]),
        S.reply_text('{"result": "five"}'),
        S.reply_text('{"result": 5}'),
    )
    cycle = make_cycle(server, history=TrimOldest(max_messages=6))
    await cycle.submit("Hi")

    response = await cycle.submit_with_tools("2 + 3?", calc, output_type=int)

    assert response.output == 5
    sent = server.requests[-1].json["messages"]
    # The greeting's exchange goes; the question, tool turn and bad answer stay with
    # the feedback (a user message, yet not the start of an exchange).
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "assistant", "user"]
    assert sent[0]["content"] == "2 + 3?"
    assert sent[-1]["content"].startswith("Your answer is not a valid int: result:")
    # The mark survives a JSON round trip of the history.
    _, exchanges = split_exchanges(json.loads(json.dumps(cycle.messages)))
    assert [len(ex) for ex in exchanges] == [2, 6]


async def test_spent_retries_raise_with_the_raw_text(serve, make_cycle):
    server = serve(S.reply_text("not json"), S.reply_text('{"name": "Paris"}'))
    cycle = make_cycle(server)

    with pytest.raises(OutputValidationError) as caught:
        await cycle.submit("Biggest French city?", output_type=City)

    error = caught.value
    assert error.raw_text == '{"name": "Paris"}'
    assert error.problems == ("population: Field required",)
    assert error.attempts == 2
    assert "not a valid City after 2 attempt(s)" in str(error)
    assert "not valid JSON" in server.requests[1].json["messages"][-1]["content"]
    assert len(server.requests) == 2  # the default: one retry


async def test_retries_are_configurable(serve, make_cycle):
    answers = ['{"name": 1}', '{"name": 2}', '{"name": 3}', '{"name": "Lyon", "population": 1}']
    server = serve(*(S.reply_text(a) for a in answers))
    cycle = make_cycle(server)

    response = await cycle.submit("City?", output_type=StructuredOutput(City, retries=3))
    assert response.output == City(name="Lyon", population=1)

    server.add(S.reply_text("[]"))
    with pytest.raises(OutputValidationError) as caught:
        await cycle.submit("Again?", output_type=StructuredOutput(City, retries=0))
    assert caught.value.attempts == 1
    assert len(server.requests) == 5


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_an_answer_in_a_markdown_fence_is_taken_from_it(serve, make_cycle, api):
    # A server that ignores response_format (llama.cpp's without a grammar) lets the
    # model fence its JSON; before, the fence failed it as "not valid JSON".
    answer = '```json\n{"name": "Paris", "population": 2102650}\n```'
    server = serve(S.reply_text(answer))
    cycle = make_cycle(server, api=api)

    response = await cycle.submit("City?", output_type=StructuredOutput(City, retries=0))

    assert response.output == City(name="Paris", population=2102650)
    assert response.text == answer
    assert len(server.requests) == 1


async def test_a_fence_with_more_than_the_json_is_no_answer(serve, make_cycle):
    answer = '```json\n{"name": "Paris", "population": 1}\n```\nIt is Paris.'
    server = serve(S.reply_text(answer))
    cycle = make_cycle(server)

    with pytest.raises(OutputValidationError, match="not valid JSON"):
        await cycle.submit("City?", output_type=StructuredOutput(City, retries=0))


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_final_result_call_with_fenced_arguments_is_no_answer(serve, make_cycle, api):
    # The fence leniency is for a text answer: a tool call's arguments are JSON, and a
    # call kept as "Final answer received." with a fence for arguments would be sent
    # back in the history as it is.
    fenced = '```json\n{"name": "Paris", "population": 1}\n```'
    server = serve(S.reply_tool_calls([("final_result", fenced)]))
    cycle = make_cycle(server, api=api)

    with pytest.raises(OutputValidationError, match="not valid JSON"):
        await cycle.submit("City?", output_type=StructuredOutput(City, mode="tool", retries=0))


class Cat(BaseModel):
    kind: Literal["cat"]
    lives: int


class Dog(BaseModel):
    kind: Literal["dog"]
    name: str


async def test_the_model_reads_a_types_plain_name_without_modules_or_annotations(serve, make_cycle):
    pet = Annotated[Cat | Dog, Field(discriminator="kind", description="the pet")]
    server = serve(S.reply_text('{"result": {"kind": "cat"}}'), S.reply_text("[]"))
    cycle = make_cycle(server)

    with pytest.raises(OutputValidationError) as caught:
        await cycle.submit("Pet?", output_type=list[pet])

    # Before, it read "list[Annotated[Union[tests.cycle.test_output.Cat, ...],
    # FieldInfo(annotation=NoneType, required=True, ...)]]".
    feedback = server.requests[1].json["messages"][-1]["content"]
    assert feedback.startswith("Your answer is not a valid list[Cat | Dog]: result: ")
    assert str(caught.value).startswith("the model's answer is not a valid list[Cat | Dog] after")
    assert server.requests[0].json["response_format"]["json_schema"]["name"] == "list_Cat_Dog"


@pytest.mark.parametrize("stream", [False, True], ids=["unstreamed", "streamed"])
async def test_spent_retries_raise_with_the_usage_of_every_request(serve, make_cycle, calc, stream):
    spent = {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}
    server = serve(
        S.reply_tool_calls([("add", {"a": 1, "b": 2})], usage=spent),
        S.reply_text('{"name": "Paris"}', usage=spent),
        S.reply_text("not json", usage=spent),
    )
    cycle = make_cycle(server)

    with pytest.raises(OutputValidationError) as caught:
        if stream:
            events = cycle.submit_stream_with_tools("City?", calc, output_type=City)
            await events.collect()
        else:
            await cycle.submit_with_tools("City?", calc, output_type=City)

    # The tool turn and both answers were paid for: before, the error carried no usage.
    usage = caught.value.usage
    assert (usage.requests, usage.prompt_tokens, usage.total_tokens) == (3, 21, 30)


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_new_prompt_after_spent_retries_follows_the_rejected_answer(
    serve, make_cycle, calc, api
):
    # The history after OutputValidationError ends with the rejected answer, not with a
    # feedback asking for it again: the app's next question would follow that feedback,
    # two user messages in a row (refused by chat templates that want roles to
    # alternate), the model told to answer the old question again right before it.
    server = serve(
        S.reply_tool_calls([("add", {"a": 1, "b": 2})]),
        S.reply_text('{"name": "Paris"}'),
        S.reply_text('{"name": "Lyon", "population": 3}'),
    )
    cycle = make_cycle(server, api=api)
    with pytest.raises(OutputValidationError):
        await cycle.submit_with_tools("City?", calc, output_type=StructuredOutput(City, retries=0))
    assert_history_valid(cycle.messages)
    assert cycle.messages[-1]["role"] == "assistant"

    response = await cycle.submit_with_tools("Another city?", calc, output_type=City)

    assert response.output == City(name="Lyon", population=3)
    sent = server.requests[2].json
    roles = [item.get("role") for item in (sent["messages"] if api == "chat" else sent["input"])]
    assert roles[-2:] == ["assistant", "user"]
    assert "not a valid City" not in json.dumps(sent)


@pytest.mark.parametrize("stream", [False, True], ids=["unstreamed", "streamed"])
@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_resume_after_spent_retries_tells_the_model_why_its_last_answer_failed(
    serve, make_cycle, calc, api, stream
):
    # The history after OutputValidationError ends with the rejected answer (a new
    # prompt may follow it). A resume asks again with the feedback on that answer, added
    # by the resume itself; before, the request ended with the answer, unexplained.
    server = serve(
        S.reply_tool_calls([("add", {"a": 1, "b": 2})]),
        S.reply_text('{"name": "Paris"}'),
        S.reply_text('{"name": "Paris", "population": 3}'),
        S.reply_text('{"name": "Lyon", "population": 4}'),
    )
    cycle = make_cycle(server, api=api)
    with pytest.raises(OutputValidationError):
        await cycle.submit_with_tools("City?", calc, output_type=StructuredOutput(City, retries=0))
    assert cycle.messages[-1]["role"] == "assistant"

    if stream:
        response = await cycle.submit_stream_with_tools(None, calc, output_type=City).collect()
    else:
        response = await cycle.submit_with_tools(None, calc, output_type=City)

    assert response.output == City(name="Paris", population=3)
    sent = server.requests[2].json
    items = sent["messages"] if api == "chat" else sent["input"]
    assert [item.get("role") for item in items[-2:]] == ["assistant", "user"]
    assert "population: Field required" in json.dumps(items[-1]["content"])
    assert_history_valid(cycle.messages)
    assert split_exchanges(cycle.messages) == ([], [cycle.messages])  # one exchange
    # A resume after a valid answer adds nothing.
    await cycle.submit_with_tools(None, calc, output_type=City)
    items = server.requests[3].json["messages" if api == "chat" else "input"]
    assert items[-1]["role"] == "assistant"
    assert json.dumps(items).count("not a valid City") == 1


async def test_a_resume_refused_before_its_request_takes_its_feedback_back(serve, make_cycle, calc):
    # Left in the history, the feedback would be followed by the app's next prompt: two
    # user messages in a row.
    server = serve(S.reply_text("{}"), S.reply_text('{"name": "Oslo", "population": 1}'))
    cycle = make_cycle(server, max_definition_tokens=1)  # no tools: no budget to refuse
    with pytest.raises(OutputValidationError):
        await cycle.submit("City?", output_type=StructuredOutput(City, retries=0))
    history = list(cycle.messages)

    with pytest.raises(DefinitionBudgetError):
        await cycle.submit_with_tools(None, calc, output_type=City)

    assert len(server.requests) == 1
    assert cycle.messages == history
    # Still the rejected answer: a resume that is sent tells the model why.
    assert (await cycle.submit_messages([], output_type=City)).output.name == "Oslo"
    assert "population: Field required" in json.dumps(server.requests[-1].json["messages"][-1])


@pytest.mark.parametrize(
    "earlier",
    ["free text", "valid of another type", "rejected as another type", "saved and loaded"],
)
async def test_a_resume_tells_the_model_only_of_an_answer_it_rejected_itself(
    serve, make_cycle, earlier
):
    # The feedback is for the answer an OutputValidationError left last under the same
    # output type: another last answer (free text asked without output_type, say) was
    # told it "is not a valid City", the history kept that, and the model was told it had
    # erred in what it was never asked.
    class Town(BaseModel):
        town: str

    answer = {
        "free text": "Paris is the capital of France.",
        "valid of another type": '{"town": "Paris"}',
        "rejected as another type": "Paris",
        "saved and loaded": "Paris",
    }[earlier]
    server = serve(S.reply_text(answer), S.reply_text('{"name": "Paris", "population": 2}'))
    cycle = make_cycle(server)
    if earlier == "free text":
        await cycle.submit("Tell me about Paris.")
    elif earlier == "valid of another type":
        await cycle.submit("Which town?", output_type=Town)
    else:
        asked = City if earlier == "saved and loaded" else Town
        with pytest.raises(OutputValidationError):
            await cycle.submit("Which?", output_type=StructuredOutput(asked, retries=0))
    if earlier == "saved and loaded":
        saved = json.loads(json.dumps(cycle.messages))
        cycle = make_cycle(server)
        cycle.messages = saved

    response = await cycle.submit_messages([], output_type=City)

    assert response.output == City(name="Paris", population=2)
    sent = server.requests[1].json["messages"]
    assert sent[-1] == {"role": "assistant", "content": answer}
    assert "not a valid" not in json.dumps(cycle.messages)
    assert_history_valid(cycle.messages)


@pytest.mark.parametrize("stream", [False, True], ids=["unstreamed", "streamed"])
@pytest.mark.parametrize("mode", ["json_schema", "tool"])
@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_nan_and_infinities_in_an_answer_are_refused_and_retried(
    serve, make_cycle, api, mode, stream
):
    # pydantic's JSON parser takes NaN and Infinity for a float field, as Python's json
    # does: the app would get a float nan, which compares False with everything.
    def answer(text: str) -> Any:
        if mode == "tool":
            return S.reply_tool_calls([("final_result", text)])
        return S.reply_text(text)

    server = serve(
        answer('{"x": NaN, "y": 1}'), answer('{"x": 1, "y": -1e999}'), answer('{"x": 1, "y": 2}')
    )
    cycle = make_cycle(server, api=api)
    output = StructuredOutput(Point, mode=mode, retries=2)

    if stream:
        response = await cycle.submit_stream("Where?", output_type=output).collect()
    else:
        response = await cycle.submit("Where?", output_type=output)

    assert response.output == Point(1.0, 2.0)
    feedback = [json.dumps(request.json) for request in server.requests[1:]]
    assert len(feedback) == 2
    assert "x: NaN is not a JSON number; send a finite number" in feedback[0]
    assert "y: -1e999 is past the range of a 64-bit float" in feedback[1]


async def test_an_infinity_in_the_last_answer_raises_naming_where_it_is(serve, make_cycle):
    server = serve(S.reply_text('{"result": [1.5, Infinity]}'))
    cycle = make_cycle(server)

    with pytest.raises(OutputValidationError) as caught:
        await cycle.submit("Numbers?", output_type=StructuredOutput(list[float], retries=0))

    error = caught.value
    assert error.problems == ("result.1: Infinity is not a JSON number; send a finite number",)
    assert error.raw_text == '{"result": [1.5, Infinity]}'


def _refusal_body(api: str, refusal: str) -> dict[str, Any]:
    if api == "chat":
        message = {"role": "assistant", "content": None, "refusal": refusal}
        return {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                "choices": [{"index": 0, "finish_reason": "stop", "message": message}]}  # fmt: skip
    item = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
            "content": [{"type": "refusal", "refusal": refusal}]}  # fmt: skip
    return {"id": "resp_1", "object": "response", "created_at": 0, "model": "m",
            "status": "completed", "output": [item]}  # fmt: skip


@pytest.mark.parametrize("mode", ["json_schema", "tool"])
@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_refusal_raises_at_once_naming_it(serve, make_cycle, api, mode):
    refusal = "I'm sorry, I can't help with that."
    server = serve(RawResponse(200, _refusal_body(api, refusal)), S.reply_text("{}"))
    cycle = make_cycle(server, api=api)

    with pytest.raises(OutputValidationError) as caught:
        await cycle.submit("Biggest city?", output_type=StructuredOutput(City, mode=mode))

    error = caught.value
    assert f"the model refused to answer: {refusal}" in str(error)
    assert (error.raw_text, error.attempts) == (refusal, 1)
    assert len(server.requests) == 1  # no retry spent on it
    assert cycle.messages[-1]["refusal"] == refusal


@pytest.mark.parametrize(
    ("reason", "cause"),
    [("length", "cut at the token limit (raise max_"), ("content_filter", "content filter")],
)
@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_cut_answer_raises_at_once_naming_the_cause(serve, make_cycle, api, reason, cause):
    cut = '{"name": "Paris", "population": 21'
    server = serve(S.reply_text(cut, finish_reason=reason), S.reply_text("{}"))
    cycle = make_cycle(server, api=api)

    with pytest.raises(OutputValidationError) as caught:
        await cycle.submit("Biggest city?", output_type=City)

    error = caught.value
    assert cause in str(error)
    assert (error.raw_text, error.attempts) == (cut, 1)
    assert len(server.requests) == 1  # the same limit would cut a retry too


@pytest.mark.parametrize("mode", ["json_object", "json_schema"])
@pytest.mark.parametrize(
    ("cut", "astray"),
    [
        ('{\n  "Biggest city?"\n: 1.25,\n"Is it Tokyo? No, no, no, no,', "'Biggest city?'"),
        ("The biggest city is Tokyo, which", "not a JSON object"),
    ],
    ids=["other-field", "prose"],
)
async def test_a_cut_answer_that_never_followed_the_schema_says_so(
    serve, make_cycle, mode, cut, astray
):
    # LiteLLM's Responses bridge dropped json_object's schema: the model wrote free JSON
    # until max_output_tokens, and the error said to raise the limit.
    server = serve(S.reply_text(cut, finish_reason="length"))
    cycle = make_cycle(server)

    with pytest.raises(OutputValidationError) as caught:
        await cycle.submit("Biggest city?", output_type=StructuredOutput(City, mode=mode))

    message = str(caught.value)
    assert "does not follow the schema" in message and astray in message
    assert "ask with StructuredOutput(City, mode='tool')" in message
    assert "raise max_" not in message
    assert len(server.requests) == 1


async def test_a_bare_submit_answered_with_tool_calls_is_retried(serve, make_cycle):
    server = serve(
        S.reply_tool_calls([("lookup", {"q": "Japan"})], text="Let me look."),
        S.reply_text('{"name": "Tokyo", "population": 37400000}'),
        S.reply_tool_calls([("lookup", {"q": "Peru"})]),
    )
    cycle = make_cycle(server)

    response = await cycle.submit("Largest city of Japan?", output_type=City)

    assert response.output == City(name="Tokyo", population=37400000)
    sent = server.requests[1].json["messages"]
    assert sent[-2]["content"].endswith("did not complete: no tools are offered")
    assert "it must be the JSON answer, not tool calls" in sent[-1]["content"]
    assert_history_valid(cycle.messages)

    with pytest.raises(OutputValidationError) as caught:
        await cycle.submit("Of Peru?", output_type=StructuredOutput(City, retries=0))
    assert caught.value.problems == ("it must be the JSON answer, not tool calls",)
    assert_history_valid(cycle.messages)


# -- the json_object mode and the tool-mode fallback ----------------------------------


async def test_json_object_mode_sends_the_schema_in_the_json_object_format(serve, make_cycle):
    server = serve(S.reply_text('{"result": 7}'))
    cycle = make_cycle(server)

    response = await cycle.submit("7?", output_type=StructuredOutput(int, mode="json_object"))

    assert response.output == 7
    sent = server.requests[0].json["response_format"]
    assert sent == {
        "type": "json_object",
        "schema": {**OBJECT, "properties": {"result": {"type": "integer"}}, "required": ["result"]},
    }


async def test_tool_mode_offers_final_result_and_ends_when_it_is_called(serve, make_cycle):
    server = serve(S.reply_tool_calls([("final_result", {"name": "Rome", "population": 2})]))
    cycle = make_cycle(server)

    response = await cycle.submit("City?", output_type=StructuredOutput(City, mode="tool"))

    assert response.output == City(name="Rome", population=2)
    request = server.requests[0].json
    assert "response_format" not in request
    assert request["tool_choice"] == {"type": "function", "function": {"name": "final_result"}}
    [final] = request["tools"]
    assert final["function"]["name"] == "final_result"
    assert final["function"]["strict"] is True
    assert final["function"]["parameters"]["required"] == ["name", "population"]
    assert_history_valid(cycle.messages)


async def test_tool_mode_next_to_tools_requires_a_call_and_runs_the_others_first(
    serve, make_cycle, calc
):
    server = serve(
        S.reply_tool_calls([("add", {"a": 2, "b": 3})]),
        S.reply_tool_calls([("final_result", {"result": 5}), ("add", {"a": 9, "b": 9})]),
    )
    cycle = make_cycle(server)

    response = await cycle.submit_with_tools(
        "2 + 3?", calc, output_type=StructuredOutput(int, mode="tool")
    )

    assert response.output == 5
    assert calc.runs == [("add", {"a": 2, "b": 3})]  # not the call next to final_result
    first = server.requests[0].json
    assert first["tool_choice"] == "required"
    assert [t["function"]["name"] for t in first["tools"]][-1] == "final_result"
    assert_history_valid(cycle.messages)
    answers = list(tool_messages(cycle.messages).values())
    assert answers[-2:] == [
        "Final answer received.",
        "Error: aborted; tool 'add' did not complete: final_result was called in the same turn",
    ]


async def test_tool_mode_retries_bad_arguments_and_a_text_answer(serve, make_cycle):
    server = serve(
        S.reply_tool_calls([("final_result", {"name": "Rome"})]),
        S.reply_text("Rome, about 2.8 million people."),
        S.reply_tool_calls([("final_result", {"name": "Rome", "population": 2800000})]),
    )
    cycle = make_cycle(server)

    output = StructuredOutput(City, mode="tool", retries=2)
    response = await cycle.submit("City?", output_type=output)

    assert response.output == City(name="Rome", population=2800000)
    second = server.requests[1].json["messages"]
    assert second[-1]["role"] == "tool"
    assert second[-1]["content"].startswith("Error: Your answer is not a valid City: population")
    third = server.requests[2].json["messages"]
    assert third[-1]["role"] == "user"
    assert "final_result" in third[-1]["content"]
    assert_history_valid(cycle.messages)


async def test_tool_mode_takes_the_first_valid_of_several_final_result_calls(serve, make_cycle):
    server = serve(
        S.reply_tool_calls(
            [
                ("final_result", {"name": "Rome"}),
                ("final_result", {"name": "Rome", "population": 2800000}),
                ("final_result", {"name": "Milan", "population": 1}),
            ]
        )
    )
    cycle = make_cycle(server)

    output = StructuredOutput(City, mode="tool", retries=0)
    response = await cycle.submit("City?", output_type=output)

    assert response.output == City(name="Rome", population=2800000)
    assert len(server.requests) == 1  # no retry spent
    answers = list(tool_messages(cycle.messages).values())
    assert answers[0].startswith("Error: aborted; tool 'final_result' did not complete: another")
    assert answers[1:] == [
        "Final answer received.",
        "Error: aborted; tool 'final_result' did not complete: "
        "another final_result call of this turn is the answer",
    ]
    assert_history_valid(cycle.messages)


async def test_tool_mode_spent_retries_raise_with_the_arguments_and_answer_the_call(
    serve, make_cycle
):
    server = serve(S.reply_tool_calls([("final_result", {"result": "x"})]))
    cycle = make_cycle(server)

    with pytest.raises(OutputValidationError) as caught:
        await cycle.submit("Number?", output_type=StructuredOutput(int, mode="tool", retries=0))

    assert json.loads(caught.value.raw_text) == {"result": "x"}
    assert_history_valid(cycle.messages)


@pytest.mark.parametrize("repair", [False, True])
async def test_tool_mode_a_final_result_cut_at_the_token_limit_is_never_the_answer(
    serve, make_cycle, repair
):
    cut = '{"name": "Rome", "population": 2800000, "nicknames": ["Urbs", '
    server = serve(
        S.reply_tool_calls([("final_result", cut)], finish_reason="length"),
        S.reply_tool_calls([("final_result", {"name": "Rome", "population": 1})]),
    )
    cycle = make_cycle(server, repair_arguments=repair)

    with pytest.raises(OutputValidationError) as caught:
        await cycle.submit("City?", output_type=StructuredOutput(City, mode="tool"))

    assert "cut at the token limit" in str(caught.value)
    assert len(server.requests) == 1
    assert_history_valid(cycle.messages)


# -- streaming and sync ----------------------------------------------------------------


async def test_streaming_carries_the_output_on_the_response(serve, make_cycle, calc):
    server = serve(
        S.reply_tool_calls([("add", {"a": 2, "b": 3})]),
        S.reply_text('{"result": 5}'),
        chunk_chars=4,
    )
    cycle = make_cycle(server)

    async with cycle.submit_stream_with_tools("2 + 3?", calc, output_type=int) as events:
        seen = [event async for event in events]

    assert events.response is not None
    assert events.response.output == 5
    assert calc.runs == [("add", {"a": 2, "b": 3})]
    deltas = "".join(e.text for e in seen if isinstance(e, AssistantTextDelta))
    assert deltas == '{"result": 5}'
    assert isinstance(seen[-1], TurnComplete)
    assert all(
        r.stream and r.json["response_format"]["type"] == "json_schema" for r in server.requests
    )


@pytest.mark.parametrize("stream", [True, False], ids=["sse", "unstreamed"])
@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_in_tool_mode_the_answer_streams_as_text_and_ends_its_turn(
    serve, make_cycle, calc, api, stream
):
    # The answer is final_result's arguments: it streams as AssistantTextDelta, as the
    # JSON of the other modes does, and its turn ends as an answer, not a tool turn.
    answer = {"name": "Oslo", "population": 709000}
    server = serve(
        S.reply_tool_calls([("add", {"a": 2, "b": 3})]),
        S.reply_tool_calls([("final_result", answer)]),
        chunk_chars=5,
    )
    # llama-cpp-python's profile sends a tool turn with a tool_choice unstreamed.
    profile = None if stream else "llama-cpp-python"
    if api == "responses" and not stream:
        profile = "litellm"
    cycle = make_cycle(server, api=api, profile=profile)
    output = StructuredOutput(City, mode="tool")

    async with cycle.submit_stream_with_tools("Oslo?", calc, output_type=output) as events:
        seen = [event async for event in events]

    assert [r.stream for r in server.requests] == [stream, stream]
    last = max(i for i, e in enumerate(seen) if isinstance(e, TurnComplete) and e.turn == 1)
    deltas = [e.text for e in seen[last:] if isinstance(e, AssistantTextDelta)]
    assert json.loads("".join(deltas)) == answer
    assert len(deltas) > 1 if stream else len(deltas) == 1
    turns = [e for e in seen if isinstance(e, TurnComplete)]
    assert [t.finish_reason for t in turns] == [FinishReason.TOOL_CALLS, FinishReason.STOP]
    assert turns[-1] is seen[-1] and turns[-1].raw_finish_reason == turns[0].raw_finish_reason
    assert events.response is not None
    assert events.response.output == City(name="Oslo", population=709000)
    assert events.response.finish_reason is FinishReason.STOP


async def test_streaming_retries_too(serve, make_cycle):
    server = serve(S.reply_text('{"x": "a"}'), S.reply_text('{"x": 1, "y": 2}'), chunk_chars=3)
    cycle = make_cycle(server)

    response = await cycle.submit_stream("Where?", output_type=Point).collect()

    assert response.output == Point(1.0, 2.0)
    assert len(server.requests) == 2


def test_sync_twins_take_output_type(serve):
    server = serve(
        S.reply_text('{"result": true}'),
        S.reply_text('{"title": "Heat", "year": 1995}'),
        S.reply_text('{"result": ["a"]}'),
        S.reply_text('{"result": 1}'),
    )
    client = OpenAI(base_url=server.base_url, api_key="-", timeout=10.0)
    with LlmCycle(CycleConfig("m"), client=client) as cycle:
        assert cycle.submit_sync("?", output_type=bool).output is True
        registry = ToolRegistry()
        movie = cycle.submit_with_tools_sync("?", registry, output_type=Movie).output
        assert movie == {"title": "Heat", "year": 1995}
        assert cycle.submit_stream_sync("?", output_type=list[str]).collect().output == ["a"]
        stream = cycle.submit_stream_with_tools_sync("?", registry, output_type=int)
        assert stream.collect().output == 1
    client.close()


# -- mistakes in the caller's code -------------------------------------------------------


async def test_caller_mistakes_raise_before_any_request(serve, make_cycle):
    import typing

    class Old(typing.TypedDict):
        a: int

    server = serve()
    with_format = make_cycle(server, response_format={"type": "json_object"})
    with pytest.raises(LlmConfigError, match="response_format"):
        await with_format.submit("?", output_type=City)
    # The same setting in the Responses API's shape is not overwritten either.
    text_format = {"format": {"type": "json_object"}, "verbosity": "low"}
    with_text_format = make_cycle(server, api="responses", text=text_format)
    with pytest.raises(LlmConfigError, match=r"text\.format"):
        await with_text_format.submit("?", output_type=City)
    taken = ToolRegistry()

    @taken.tool
    def final_result(x: int) -> int:
        """Shadows the output tool."""
        return x

    cycle = make_cycle(server)
    with pytest.raises(LlmConfigError, match="final_result"):
        cycle.submit_stream_with_tools("?", taken, output_type=StructuredOutput(int, mode="tool"))
    if sys.version_info < (3, 12):  # pydantic reads typing.TypedDict from 3.12 on
        with pytest.raises(ValueError, match=r"typing_extensions\.TypedDict"):
            await cycle.submit("?", output_type=Old)
    with pytest.raises(ValueError, match="retries"):
        StructuredOutput(City, retries=-1)
    assert server.requests == []
    assert cycle.messages == []


class _Opaque:
    """A class pydantic has no schema for."""


@pytest.mark.parametrize(
    ("output_type", "label"),
    [(json, "(the module json)"), (_Opaque, "_Opaque"), (Callable[[int], int], None)],
    ids=["module", "plain-class", "callable"],
)
async def test_an_output_type_pydantic_cannot_handle_is_told_without_pydantics_advice(
    serve, make_cycle, output_type, label
):
    # Before: the message carried pydantic's paragraph for authors of pydantic types
    # (arbitrary_types_allowed, __get_pydantic_core_schema__, a docs URL), 781
    # characters for output_type=json.
    server = serve()
    cycle = make_cycle(server)

    with pytest.raises(LlmConfigError) as info:
        await cycle.submit("?", output_type=output_type)

    message = str(info.value)
    assert message.startswith(f"output_type {label or ''}")
    assert message.endswith(
        " is not a type pydantic can validate and describe as JSON: use a pydantic model, "
        "a dataclass, a TypedDict or a builtin type such as list[str]"
    )
    assert "arbitrary_types_allowed" not in message and "errors.pydantic.dev" not in message
    assert isinstance(info.value.__cause__, PydanticUserError)  # pydantic's, kept
    assert server.requests == [] and cycle.messages == []


async def test_a_type_strict_mode_cannot_describe_is_sent_non_strict_with_a_warning(
    serve, make_cycle, caplog
):
    class Scores(BaseModel):
        by_player: dict[str, int]

    server = serve(S.reply_text('{"by_player": {"ann": 3}}'))
    cycle = make_cycle(server)

    with caplog.at_level(logging.WARNING, logger="agcore_tools.cycle"):
        response = await cycle.submit("Scores?", output_type=Scores)

    assert response.output == Scores(by_player={"ann": 3})
    sent = server.requests[0].json["response_format"]["json_schema"]
    assert sent["strict"] is False
    assert sent["schema"]["properties"]["by_player"]["additionalProperties"] == {"type": "integer"}
    assert "Scores is sent without strict mode" in caplog.text


class Node(BaseModel):
    label: str
    children: list[Node] = []


async def test_a_recursive_model_is_wrapped_and_validated(serve, make_cycle):
    answer = {"result": {"label": "root", "children": [{"label": "leaf", "children": []}]}}
    server = serve(S.reply_text(json.dumps(answer)))
    cycle = make_cycle(server)

    response = await cycle.submit("A tree?", output_type=Node)

    assert response.output == Node(label="root", children=[Node(label="leaf")])
    schema = server.requests[0].json["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["result"] == {"$ref": "#/$defs/Node"}
    assert schema["$defs"]["Node"]["additionalProperties"] is False
