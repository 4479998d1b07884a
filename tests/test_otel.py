"""OpenTelemetry: the opt-in, the settings and the ``execute_tool`` spans of the registry
(the loop's spans are tested in tests/cycle/test_trace.py, MCP's in tests/mcp/test_trace.py)."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import SpanKind, StatusCode
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    SecretStr,
    computed_field,
    field_serializer,
)
from pydantic.dataclasses import dataclass as pydantic_dataclass
from pydantic_core import PydanticCustomError

from agcore_tools import (
    AgcoreError,
    Audio,
    CycleConfig,
    File,
    Image,
    LlmCycle,
    ToolConfigError,
    ToolRegistry,
    configure_tracing,
)
from agcore_tools._span_content import content_json
from agcore_tools.calls import parse_call
from agcore_tools.testing import ScriptedChatServer as S
from tests._otel import attributes, recording


def run_python(code: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_neither_the_import_nor_an_untraced_loop_imports_opentelemetry() -> None:
    # A program that never imports OpenTelemetry runs the loop and the registry as before.
    out = run_python(
        """
        import asyncio, sys
        import agcore_tools
        print(sorted(m for m in sys.modules if m.startswith("opentelemetry")))
        from agcore_tools import CycleConfig, LlmCycle, ToolRegistry
        from agcore_tools.testing import ScriptedChatServer as S

        registry = ToolRegistry()

        @registry.tool
        def add(a: int, b: int) -> int:
            '''Add two integers.'''
            return a + b

        async def main(server):
            async with server.client() as client:
                cycle = LlmCycle(CycleConfig("m"), client=client)
                await cycle.submit_with_tools("2 + 3?", registry)
                await cycle.submit_stream_with_tools("again", registry).collect()
            await registry.invoke_all([("add", {"a": 1, "b": 2})])

        script = [S.reply_tool_calls([("add", {"a": 2, "b": 3})]), S.reply_text("5")] * 2
        with S(script) as server:
            asyncio.run(main(server))
        print(sorted(m for m in sys.modules if m.startswith("opentelemetry")))
        """
    )
    assert out.splitlines() == ["[]", "[]"]


def test_the_global_tracer_provider_is_used_unless_one_is_given() -> None:
    out = run_python(
        """
        import asyncio
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from agcore_tools import ToolRegistry, configure_tracing
        from agcore_tools import _otel

        def pipeline():
            exporter, provider = InMemorySpanExporter(), TracerProvider()
            provider.add_span_processor(SimpleSpanProcessor(exporter))
            return exporter, provider

        registry = ToolRegistry()

        @registry.tool
        def ping() -> str:
            '''Answer pong.'''
            return "pong"

        def run():
            asyncio.run(registry.invoke_all([("ping", {})]))

        print("no provider:", _otel.tracer())
        run()
        global_exporter, global_provider = pipeline()
        trace.set_tracer_provider(global_provider)
        run()
        print("global:", [s.name for s in global_exporter.get_finished_spans()])
        given_exporter, given_provider = pipeline()
        configure_tracing(given_provider)
        run()
        print("given:", [s.name for s in given_exporter.get_finished_spans()])
        configure_tracing(enabled=False)
        run()
        configure_tracing()
        run()
        print("global:", [s.name for s in global_exporter.get_finished_spans()])
        print("given:", [s.name for s in given_exporter.get_finished_spans()])
        """
    )
    assert out.splitlines() == [
        "no provider: None",
        "global: ['execute_tool ping']",
        "given: ['execute_tool ping']",
        # Disabled: nothing anywhere; then the defaults again: the global provider.
        "global: ['execute_tool ping', 'execute_tool ping']",
        "given: ['execute_tool ping']",
    ]


@pytest.fixture
def registry() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @registry.tool
    def fail(reason: str) -> str:
        """Always fails."""
        raise ValueError(reason)

    @registry.tool
    async def slow() -> str:
        """Takes a minute."""
        await asyncio.sleep(60)
        return "late"

    @registry.tool
    async def weather(city: str) -> dict[str, Any]:
        """The weather in a city."""
        return {"city": city, "temp_c": 21}

    return registry


async def test_every_registry_call_gets_an_execute_tool_span(registry: ToolRegistry) -> None:
    calls = [
        ("add", {"a": 2, "b": 3}, "call_1"),
        ("fail", {"reason": "broken"}, "call_2"),
        ("slow", {}, "call_3"),
        ("nope", {}, "call_4"),
    ]
    with recording() as spans:
        results = await registry.invoke_all(calls, timeout=0.2)
    assert [r.ok for r in results] == [True, False, False, False]
    assert sorted(s.name for s in spans.finished()) == [
        "execute_tool add",
        "execute_tool fail",
        "execute_tool nope",
        "execute_tool slow",
    ]
    add = spans.one("execute_tool add")
    assert add.kind is SpanKind.INTERNAL
    assert attributes(add) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "add",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.call.id": "call_1",
        "gen_ai.tool.description": "Add two integers.",
    }
    assert add.status.status_code is StatusCode.UNSET
    failed = {name: spans.one(f"execute_tool {name}") for name in ("fail", "slow", "nope")}
    assert {n: attributes(s)["error.type"] for n, s in failed.items()} == {
        "fail": "ToolExecutionError",
        "slow": "ToolTimeoutError",
        "nope": "ToolNotFoundError",
    }
    assert all(s.status.status_code is StatusCode.ERROR for s in failed.values())
    assert "ValueError: broken" in (failed["fail"].status.description or "")
    assert "gen_ai.tool.description" not in attributes(failed["nope"])  # no such tool


async def test_a_call_id_that_is_no_str_runs_traced_as_untraced(registry: ToolRegistry) -> None:
    # Before: traced, invoke_all() raised a bare TypeError (the id's len()) for a call
    # that runs untraced; a dict id was put on the span as it is, no attribute type.
    calls = [("add", {"a": 2, "b": 3}, 7), ("add", {"a": 1, "b": 1}, {"n": 1})]
    with recording() as spans:
        results = await registry.invoke_all(calls)
    assert [(r.output, r.call_id) for r in results] == [(5, 7), (2, {"n": 1})]
    ids = sorted(attributes(s)["gen_ai.tool.call.id"] for s in spans.named("execute_tool add"))
    assert ids == ["7", "{'n': 1}"]


async def test_arguments_and_results_are_recorded_only_when_asked(
    registry: ToolRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    call = [("weather", {"city": "Paris"}, "c1")]
    with recording() as spans:
        await registry.invoke_all(call)
    assert not {"gen_ai.tool.call.arguments", "gen_ai.tool.call.result"} & set(
        attributes(spans.one("execute_tool weather"))
    )
    with recording(capture_content=True) as spans:
        await registry.invoke_all(call)
    recorded = attributes(spans.one("execute_tool weather"))
    assert recorded["gen_ai.tool.call.arguments"] == '{"city":"Paris"}'
    assert recorded["gen_ai.tool.call.result"] == '{"city":"Paris","temp_c":21}'
    # The GenAI instrumentations' environment variable turns it on too; the argument wins.
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    with recording() as spans:
        await registry.invoke_all(call)
    assert "gen_ai.tool.call.result" in attributes(spans.one("execute_tool weather"))
    with recording(capture_content=False) as spans:
        await registry.invoke_all(call)
    assert "gen_ai.tool.call.result" not in attributes(spans.one("execute_tool weather"))


PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256))  # not UTF-8: pydantic cannot write it as text


@dataclass
class Report:
    title: str
    pdf: File


async def test_binary_results_are_recorded_as_stubs_and_never_change_a_run() -> None:
    registry = ToolRegistry()

    @registry.tool
    def screenshot() -> Image:
        """A screenshot."""
        return Image(PNG)

    @registry.tool
    def recording_of(name: str) -> dict[str, Any]:
        """A recording, with its name."""
        return {"name": name, "sound": Audio(b"RIFF" + bytes(4) + b"WAVEfmt " + bytes(16))}

    @registry.tool
    def report() -> Report:
        """A report."""
        return Report("Q3", File(b"%PDF-1.7\n" + PNG))

    script = [
        S.reply_tool_calls(
            [("screenshot", {}, "c1"), ("recording_of", {"name": "a"}, "c2"), ("report", {}, "c3")]
        ),
        S.reply_text("I see them."),
    ]
    with recording(capture_content=True) as spans, S(script) as server:
        async with LlmCycle(CycleConfig("m"), client=server.client()) as cycle:
            response = await cycle.submit_with_tools("Look", registry)
    assert response.text == "I see them."
    assert [invocation.ok for invocation in response.invocations] == [True, True, True]
    results = {
        name: attributes(spans.one(f"execute_tool {name}"))["gen_ai.tool.call.result"]
        for name in ("screenshot", "recording_of", "report")
    }
    assert results == {
        "screenshot": '{"type":"image","media_type":"image/png","size":264}',
        "recording_of": '{"name":"a","sound":{"type":"audio","media_type":"audio/wav","size":32}}',
        "report": '{"title":"Q3","pdf":{"type":"file","media_type":"application/pdf",'
        '"filename":"file.pdf","size":273}}',
    }


def test_a_model_holding_an_image_is_recorded_as_pydantic_writes_it() -> None:
    # A registry's own tool may return its model as it is. Before: read field by field,
    # its excluded token was recorded on the span, and its alias lost.
    class Profile(BaseModel):
        model_config = ConfigDict(arbitrary_types_allowed=True)
        user_name: str = Field(serialization_alias="userName")
        token: str = Field(exclude=True)
        photo: Image

    recorded = content_json(Profile(user_name="ann", token="tok_live_1", photo=Image(PNG)))
    assert recorded == (
        '{"userName":"ann","photo":{"type":"image","media_type":"image/png","size":264}}'
    )


def test_a_pydantic_dataclass_holding_an_image_is_recorded_as_pydantic_writes_it() -> None:
    # Before: read field by field, its excluded token was recorded on the span.
    @pydantic_dataclass(config=ConfigDict(arbitrary_types_allowed=True))
    class Profile:
        user_name: str = Field(serialization_alias="userName")
        token: str = Field(exclude=True)
        photo: Image | None = None

    recorded = content_json(Profile(user_name="ann", token="tok_live_1", photo=Image(PNG)))
    assert recorded == (
        '{"userName":"ann","photo":{"type":"image","media_type":"image/png","size":264}}'
    )


async def test_a_secret_masked_for_json_stays_masked_in_a_model_holding_an_image() -> None:
    # Before: a record holding an image was dumped in pydantic's Python mode, where a
    # serializer for JSON only does not run: the span and the model read the secrets.
    class Login(BaseModel):
        model_config = ConfigDict(arbitrary_types_allowed=True)
        user: str
        password: Annotated[str, PlainSerializer(lambda _: "***", when_used="json")]
        token: str
        qr: Image
        key: SecretStr

        @field_serializer("token", when_used="json")
        def _masked(self, token: str) -> str:
            return "<hidden>"

    registry = ToolRegistry()

    @registry.tool
    def login() -> Login:
        """Log in."""
        return Login(
            user="ann",
            password="pw-live-1",
            token="tok_live_2",
            qr=Image(PNG),
            key=SecretStr("k-live-3"),
        )

    call = {"id": "c1", "type": "function", "function": {"name": "login", "arguments": "{}"}}
    with recording(capture_content=True) as spans:
        messages = await registry.run_tool_calls([call])
    assert attributes(spans.one("execute_tool login"))["gen_ai.tool.call.result"] == (
        '{"user":"ann","password":"***","token":"<hidden>","qr":{"type":"image",'
        '"media_type":"image/png","size":264},"key":"**********"}'
    )
    assert messages[0]["content"] == (
        '{"user":"ann","password":"***","token":"<hidden>","qr":"[image 1 (image/png, 264 B) '
        'is attached in the next user message]","key":"**********"}'
    )


Masked = Annotated[str, PlainSerializer(lambda _: "***", when_used="json")]


class Vault(BaseModel):
    pin: Masked
    slots: Any = range(2)  # no JSON type of pydantic's own: the fallback converts it


class Badge(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    password: Masked
    qr: Image
    rows: Any
    vault: Vault


class ThumbedBadge(Badge):
    @computed_field  # type: ignore[prop-decorator]
    @property
    def thumb(self) -> Image:
        return self.qr


@pytest.mark.parametrize("kind", [Badge, ThumbedBadge])
async def test_a_secret_masked_for_json_stays_masked_beside_values_pydantic_cannot_write(
    kind: type[Badge],
) -> None:
    # A field pydantic writes in no JSON mode of its own (a dict view, a range, numpy's
    # arrays), or an image it cannot write as text (a computed field): the record was
    # written in Python mode after all, the masked secrets in clear.
    registry = ToolRegistry()

    @registry.tool
    def badge() -> Badge:
        """A badge."""
        vault = Vault(pin="pin-live-2")
        return kind(password="pw-live-1", qr=Image(PNG), rows={"a": 1}.keys(), vault=vault)

    call = {"id": "c1", "type": "function", "function": {"name": "badge", "arguments": "{}"}}
    with recording(capture_content=True) as spans:
        messages = await registry.run_tool_calls([call])
    recorded = attributes(spans.one("execute_tool badge"))["gen_ai.tool.call.result"]
    for text in (recorded, messages[0]["content"]):
        assert "live" not in text, text
        assert json.loads(text)["password"] == "***"
        assert json.loads(text)["vault"] == {"pin": "***", "slots": [0, 1]}
        assert json.loads(text)["rows"] == ["a"]


async def test_raw_bytes_are_recorded_by_size_and_unwritable_content_as_a_placeholder() -> None:
    registry = ToolRegistry()

    @registry.tool
    def raw() -> bytes:
        """A PNG's bytes."""
        return PNG

    with recording(capture_content=True) as spans:
        [result] = await registry.invoke_all([("raw", {})])
    assert result.ok
    recorded = attributes(spans.one("execute_tool raw"))
    assert recorded["gen_ai.tool.call.result"] == (
        '{"type":"image","media_type":"image/png","size":264}'  # bytes read as an image
    )
    assert content_json([b"\xff\xfe\x00"]) == '[{"type":"bytes","size":3}]'

    class Opaque:
        def __str__(self) -> str:
            raise RuntimeError("no text for this")

    # What no JSON writer can write (a registry's own tool may return anything).
    assert content_json({"x": Opaque()}) == "[not recorded: PydanticSerializationError]"
    looped: list[Any] = []
    looped.append(looped)
    text = content_json(looped)
    del looped[:]  # no cycle left for pytest to print
    assert text.endswith('"[deeper than 64 levels]"' + "]" * 64)


async def test_a_lone_surrogate_in_a_result_is_recorded_as_the_model_reads_it() -> None:
    registry = ToolRegistry()

    @registry.tool
    def listing() -> dict[str, Any]:
        """Names of files (os.listdir decodes a name that is no UTF-8 to a surrogate)."""
        return {"files": ["caf\udce9.txt"], "caf\udce9": 1}

    with recording(capture_content=True) as spans:
        [result] = await registry.invoke_all([("listing", {})])
    assert result.ok
    # Before: "[not recorded: PydanticSerializationError]", and a plain string went on
    # the span raw, which OTLP's protobuf cannot encode.
    recorded = attributes(spans.one("execute_tool listing"))["gen_ai.tool.call.result"]
    assert recorded == '{"files":["caf\ufffd.txt"],"caf\ufffd":1}'
    assert content_json("caf\udce9.txt") == "caf\ufffd.txt"
    # Met only as pydantic writes the value: a Path's name.
    assert content_json({"files": [Path("/d/caf\udce9.txt")]}) == '{"files":["/d/caf\ufffd.txt"]}'


async def test_argument_values_stay_out_of_logs_and_of_error_spans_unless_content_is_recorded(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = ToolRegistry()

    @registry.tool
    def charge(amount: int, card: str) -> str:
        """Charge a card."""
        return "ok"

    card = "4111-1111-1111-1111"
    call = [("charge", {"amount": card, "card": "x"}, "c1")]
    caplog.set_level(logging.DEBUG, logger="agcore_tools")
    with recording() as spans:
        [failed] = await registry.invoke_all(call)
        parse_call("charge", "c2", '{"card": "' + card + '",', repair=True)
    assert card in str(failed.error)  # the model reads the value, to correct it
    status = spans.one("execute_tool charge").status.description
    assert status == (
        "tool 'charge' got invalid arguments: amount: Input should be a valid integer, "
        "unable to parse string as an integer"
    )
    assert "charge" in caplog.text and "amount" in caplog.text and card not in caplog.text
    caplog.clear()
    with recording(capture_content=True) as spans:
        await registry.invoke_all(call)
        parse_call("charge", "c2", '{"card": "' + card + '",', repair=True)
    assert f"(got '{card}')" in (spans.one("execute_tool charge").status.description or "")
    assert card not in caplog.text  # logs never carry argument values


async def test_span_strings_and_failure_log_lines_are_bounded(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # OpenTelemetry's attribute limit does not cover a status: one failure's text of
    # megabytes would make an OTLP batch too large, and the collector drop it whole.
    registry = ToolRegistry()

    @registry.tool
    def deploy(target: str) -> str:
        """Deploy."""
        raise RuntimeError("build log line\n" * 200_000)

    @registry.tool
    def echo(text: str) -> str:
        """Echo twice."""
        return text * 2

    caplog.set_level(logging.DEBUG, logger="agcore_tools")
    with recording() as spans:
        await registry.invoke_all([("deploy", {"target": "prod"}, "c" * 10_000)])
    span = spans.one("execute_tool deploy")
    status = span.status.description or ""
    assert len(status) == 4096
    assert status.startswith("tool 'deploy' failed: RuntimeError: build log line build log")
    assert status.endswith("… (3,000,035 chars)")
    assert attributes(span)["gen_ai.tool.call.id"].endswith("… (10,000 chars)")
    [line] = [r.getMessage() for r in caplog.records if r.name == "agcore_tools.registry"]
    assert line == status
    # Content: each argument and result cut at max_content_chars, with its full length.
    with recording(capture_content=True) as spans:
        await registry.invoke_all([("echo", {"text": "A" * 100_000})])
    recorded = attributes(spans.one("execute_tool echo"))
    assert len(recorded["gen_ai.tool.call.arguments"]) == 16384
    assert recorded["gen_ai.tool.call.arguments"].endswith("… (100,011 chars)")
    assert recorded["gen_ai.tool.call.result"].endswith("… (200,000 chars)")
    with recording(capture_content=True, max_content_chars=1000) as spans:
        await registry.invoke_all([("echo", {"text": "A" * 100_000})])
    recorded = attributes(spans.one("execute_tool echo"))
    assert len(recorded["gen_ai.tool.call.result"]) == 1000
    with recording(capture_content=True, max_content_chars=None) as spans:
        await registry.invoke_all([("echo", {"text": "A" * 100_000})])
    assert attributes(spans.one("execute_tool echo"))["gen_ai.tool.call.result"] == "A" * 200_000


async def test_a_cancelled_call_says_so_on_its_span() -> None:
    registry = ToolRegistry()
    started, never = asyncio.Event(), asyncio.Event()

    @registry.tool
    async def hang() -> str:
        """Waits for ever."""
        started.set()
        await never.wait()
        return "never"

    with recording() as spans:
        calls = asyncio.ensure_future(registry.invoke_all([("hang", {})]))
        await asyncio.wait_for(started.wait(), 10)
        calls.cancel()
        with pytest.raises(asyncio.CancelledError):
            await calls
    span = spans.one("execute_tool hang")
    assert attributes(span)["error.type"] == "CancelledError"
    assert span.status.description == "CancelledError: cancelled by the caller"


def test_configure_tracing_checks_max_content_chars() -> None:
    with pytest.raises(ToolConfigError, match="max_content_chars must be at least 256, got 10"):
        configure_tracing(max_content_chars=10)
    with pytest.raises(
        TypeError, match="max_content_chars must be an int or None, got str"
    ) as info:
        configure_tracing(max_content_chars="1000")  # type: ignore[arg-type]
    assert isinstance(info.value, AgcoreError)
    with pytest.raises(TypeError, match="capture_content must be True, False or None") as info:
        configure_tracing(capture_content="yes")  # type: ignore[arg-type]
    assert isinstance(info.value, AgcoreError)
    configure_tracing()


async def test_the_redacted_form_leaves_out_validator_texts_and_unknown_keys(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A validator's message often quotes the value, and an unknown key is the model's text.
    secret = "SSN-123-45-6789"

    def known_city(city: str) -> str:
        if city not in {"Paris", "Oslo"}:
            raise ValueError(f"unknown city {city!r}")
        return city

    def positive(days: int) -> int:
        assert days > 0, f"{days} is not positive"
        return days

    def coded(code: str) -> str:
        raise PydanticCustomError("unknown_code", "no such code {code}", {"code": code})

    registry = ToolRegistry()

    @registry.tool
    def weather(
        city: Annotated[str, AfterValidator(known_city)],
        days: Annotated[int, AfterValidator(positive)] = 1,
        code: Annotated[str, AfterValidator(coded)] = "",
    ) -> str:
        """Weather of a city."""
        return "sunny"

    caplog.set_level(logging.DEBUG, logger="agcore_tools")
    calls = [
        ("weather", {"city": secret, "days": -7, "code": secret, f"note {secret}": 1}),
        ("weather", {"city": "Oslo", f"note {secret}": 1, f"also {secret}": 2}),
    ]
    with recording() as spans:
        results = await registry.invoke_all(calls)
    assert all(secret in str(result.error) for result in results)  # the model reads them
    statuses = sorted(span.status.description or "" for span in spans.named("execute_tool weather"))
    assert statuses == [
        "tool 'weather' got invalid arguments: 2 unknown keys (Extra inputs are not permitted)",
        "tool 'weather' got invalid arguments: city: Value error; days: Assertion failed; "
        "code: failed its check (unknown_code); 1 unknown key (Extra inputs are not permitted)",
    ]
    assert secret not in caplog.text and "-7" not in caplog.text


async def test_a_tools_own_spans_are_children_of_its_execute_tool_span() -> None:
    registry = ToolRegistry()
    with recording() as spans:
        tracer = spans.provider.get_tracer("app")

        @registry.tool
        async def lookup(key: str) -> str:
            """Look a key up."""
            with tracer.start_as_current_span("db query"):
                return key.upper()

        await registry.invoke_all([("lookup", {"key": "a"}), ("lookup", {"key": "b"})])
    assert sorted(spans.tree()) == [
        ("db query", "execute_tool lookup"),
        ("db query", "execute_tool lookup"),
        ("execute_tool lookup", None),
        ("execute_tool lookup", None),
    ]


def test_configure_tracing_rejects_a_capture_content_that_is_not_a_bool() -> None:
    with pytest.raises(TypeError, match="capture_content"):
        configure_tracing(capture_content="yes")  # type: ignore[arg-type]


def test_configure_tracing_refuses_a_tracer_or_meter_for_a_provider() -> None:
    with pytest.raises(ToolConfigError) as caught:
        configure_tracing(TracerProvider().get_tracer("app"))
    assert str(caught.value) == (
        "configure_tracing() takes a TracerProvider, got Tracer (it has no get_tracer()): "
        "pass the provider, not provider.get_tracer(...)"
    )
    assert isinstance(caught.value, ValueError)
    with pytest.raises(ToolConfigError, match=r"takes a MeterProvider, got Meter \(it has no"):
        configure_tracing(meter_provider=MeterProvider().get_meter("app"))
    configure_tracing()
