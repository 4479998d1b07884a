"""The CallToolResult -> value mapping, on the SDK's own result objects, and an MCP
image on its way through the tool loop to the model."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import sys
from typing import Any

import mcp_types as types
import pytest

from agcore_tools import (
    Audio,
    ChatResponse,
    CycleConfig,
    File,
    Image,
    LlmCycle,
    McpClient,
    McpError,
    StdioTransport,
    ToolExecutionError,
    ToolRegistry,
)
from agcore_tools.mcp._results import CONTENT_FOR_MODEL, READ_BY_MODEL, result_value


def _text(text: str) -> types.TextContent:
    return types.TextContent(type="text", text=text)


def test_structured_content_wins_over_text() -> None:
    result = types.CallToolResult(content=[_text('{"a": 1}')], structured_content={"a": 1})
    assert result_value(result, "t") == {"a": 1}


def test_text_parts_are_joined() -> None:
    assert result_value(types.CallToolResult(content=[_text("one")]), "t") == "one"
    assert result_value(types.CallToolResult(content=[_text("a"), _text("b")]), "t") == "a\nb"
    assert result_value(types.CallToolResult(content=[]), "t") == ""


def test_image_and_audio_parts_become_image_and_audio_values_in_order() -> None:
    resource = types.EmbeddedResource(
        type="resource",
        resource=types.TextResourceContents(
            uri="file:///a.txt", text="hello", mime_type="text/plain"
        ),
    )
    link = types.ResourceLink(type="resource_link", uri="file:///b.txt", name="b")
    audio = types.AudioContent(type="audio", data="UklGRg==", mime_type="audio/wav")
    image = types.ImageContent(type="image", data="R0lGODlhAQABAAAAACw=", mime_type="image/gif")
    result = types.CallToolResult(content=[_text("see:"), resource, link, audio, image])
    assert result_value(result, "t") == [
        "see:",
        {
            "type": "resource",
            "resource": {"uri": "file:///a.txt", "mimeType": "text/plain", "text": "hello"},
        },
        {"type": "resource_link", "uri": "file:///b.txt", "name": "b"},
        Audio(b"RIFF", "audio/wav"),
        Image(b"GIF89a\x01\x00\x01\x00\x00\x00\x00,", "image/gif"),
    ]


def test_images_beside_structured_content_are_kept() -> None:
    image = types.ImageContent(type="image", data="iVBORw0KGgo=", mime_type="image/png")
    result = types.CallToolResult(content=[_text('{"a": 1}'), image], structured_content={"a": 1})
    assert result_value(result, "t") == [{"a": 1}, Image(b"\x89PNG\r\n\x1a\n", "image/png")]


def test_an_image_part_with_line_wrapped_base64_is_an_image() -> None:
    # Python's base64.encodebytes and Java's MIME encoder wrap lines at 76 characters:
    # the picture was lost, its base64 sent as text cut at 16 KB.
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
    data = base64.encodebytes(png).decode()
    image = types.ImageContent(type="image", data=data, mime_type="image/png")
    assert result_value(types.CallToolResult(content=[image]), "t") == [Image(png, "image/png")]


def test_base64_repeated_in_structured_content_becomes_a_label() -> None:
    # server-filesystem's read_media_file mirrors its image part in structuredContent, so
    # the model got the picture as an image and again as (up to 16 KB of) base64 text.
    image = types.ImageContent(type="image", data="iVBORw0KGgo=", mime_type="image/png")
    audio = types.AudioContent(type="audio", data="UklGRg==", mime_type="audio/wav")
    structured = {
        "content": [
            {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
            {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"},
        ],
        "preview": "data:image/png;base64,iVBORw0KGgo=",
        "note": "UklGRg== is kept inside longer text",
    }
    result = types.CallToolResult(content=[image, audio], structured_content=structured)
    assert result_value(result, "read_media_file") == [
        {
            "content": [
                {"type": "image", "data": "[image/png image, attached]", "mimeType": "image/png"},
                {"type": "audio", "data": "[audio/wav audio, attached]", "mimeType": "audio/wav"},
            ],
            "preview": "[image/png image, attached]",
            "note": "UklGRg== is kept inside longer text",
        },
        Image(b"\x89PNG\r\n\x1a\n", "image/png"),
        Audio(b"RIFF", "audio/wav"),
    ]
    assert structured["preview"] == "data:image/png;base64,iVBORw0KGgo="


def test_base64_of_an_unusable_part_stays_in_structured_content() -> None:
    image = types.ImageContent(type="image", data="iVBORw0KGgo=", mime_type="text/plain")
    result = types.CallToolResult(content=[image], structured_content={"data": "iVBORw0KGgo="})
    assert result_value(result, "t")[0] == {"data": "iVBORw0KGgo="}


@pytest.mark.parametrize(
    ("data", "mime_type"), [("not base64!", "image/png"), ("iVBORw0KGgo=", "text/plain")]
)
def test_an_unusable_image_part_stays_typed_json(
    data: str, mime_type: str, caplog: pytest.LogCaptureFixture
) -> None:
    image = types.ImageContent(type="image", data=data, mime_type=mime_type)
    with caplog.at_level(logging.WARNING, "agcore_tools.mcp"):
        value = result_value(types.CallToolResult(content=[image]), "draw")
    assert value == [{"type": "image", "data": data, "mimeType": mime_type}]
    assert "MCP tool 'draw' sent an unusable image part" in caplog.text


def _blob(uri: str, mime_type: str, data: bytes) -> types.EmbeddedResource:
    contents = types.BlobResourceContents(
        uri=uri, mime_type=mime_type, blob=base64.b64encode(data).decode()
    )
    return types.EmbeddedResource(type="resource", resource=contents)


PNG = b"\x89PNG\r\n\x1a\n" + bytes(64)
PDF = b"%PDF-1.7\n" + bytes(64)


def test_an_embedded_image_pdf_or_sound_blob_is_an_image_file_or_audio_beside_its_uri() -> None:
    # Before: the blob stayed base64 text in the typed JSON, which the model read cut at
    # 16 KB, and no picture or document was sent.
    text = types.EmbeddedResource(
        type="resource",
        resource=types.TextResourceContents(uri="file:///a.txt", text="hi", mime_type="text/plain"),
    )
    other = _blob("file:///data.bin", "application/octet-stream", b"\x00\x01")
    result = types.CallToolResult(
        content=[
            _blob("screenshot://1", "image/png", PNG),
            _blob("file:///exports/q3%20final.pdf", "application/pdf", PDF),
            _blob("audio://beep", "audio/wav", b"RIFF"),
            text,
            other,
        ]
    )
    assert result_value(result, "t") == [
        {
            "type": "resource",
            "resource": {"uri": "screenshot://1", "mimeType": "image/png", "blob": Image(PNG)},
        },
        {
            "type": "resource",
            "resource": {
                "uri": "file:///exports/q3%20final.pdf",
                "mimeType": "application/pdf",
                "blob": File(PDF, "application/pdf", "q3 final.pdf"),
            },
        },
        {
            "type": "resource",
            "resource": {
                "uri": "audio://beep",
                "mimeType": "audio/wav",
                "blob": Audio(b"RIFF", "audio/wav"),
            },
        },
        # A text resource, and a blob no model reads, stay as they were.
        {
            "type": "resource",
            "resource": {"uri": "file:///a.txt", "mimeType": "text/plain", "text": "hi"},
        },
        other.model_dump(by_alias=True, mode="json", exclude_none=True),
    ]


def test_an_embedded_blob_beside_structured_content_is_kept_and_not_repeated() -> None:
    shot = _blob("screenshot://1", "image/png", PNG)
    data = base64.b64encode(PNG).decode()
    result = types.CallToolResult(
        content=[shot], structured_content={"screenshot": data, "title": "home"}
    )
    assert result_value(result, "t") == [
        {"screenshot": "[image/png image, attached]", "title": "home"},
        {
            "type": "resource",
            "resource": {"uri": "screenshot://1", "mimeType": "image/png", "blob": Image(PNG)},
        },
    ]


def test_an_unusable_embedded_blob_stays_typed_json(caplog: pytest.LogCaptureFixture) -> None:
    broken = _blob("screenshot://1", "image/png", PNG)
    broken.resource.blob = "not base64!"  # type: ignore[union-attr]
    with caplog.at_level(logging.WARNING, "agcore_tools.mcp"):
        value = result_value(types.CallToolResult(content=[broken]), "snap")
    assert value == [broken.model_dump(by_alias=True, mode="json", exclude_none=True)]
    assert "MCP tool 'snap' sent an unusable resource part" in caplog.text


async def _one_call_through_the_fixture(
    tool: str, args: dict[str, Any], prompt: str
) -> tuple[ChatResponse, list[dict[str, Any]]]:
    """A loop that calls one tool of the fixture server: its response, and the messages of
    the request after the call (what the model was sent)."""
    from agcore_tools.testing import ScriptedChatServer as S

    from .conftest import FIXTURE

    script = [S.reply_tool_calls([(tool, args, f"call_{tool}")]), S.reply_text("Done.")]
    async with McpClient(
        "fixture", StdioTransport(sys.executable, [str(FIXTURE)]), timeout=15
    ) as client:
        registry = ToolRegistry()
        registry.register_all(client.into_tools())
        with S(script) as server:
            cycle = LlmCycle(CycleConfig("test-model"), client=server.client(timeout=10.0))
            try:
                response = await cycle.submit_with_tools(prompt, registry)
            finally:
                await asyncio.wait_for(cycle.client.close(), 5)
            return response, server.requests[1].json["messages"]


async def test_an_mcp_embedded_screenshot_and_pdf_reach_the_model_as_an_image_and_a_file() -> None:
    _, sent = await _one_call_through_the_fixture("snapshot", {"kb": 40}, "Show me page 1.")

    png = b"\x89PNG\r\n\x1a\n" + bytes(i % 251 for i in range(40 * 1024))
    pdf = b"%PDF-1.7\n" + bytes(40 * 1024)
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "user"]
    text = sent[2]["content"]
    assert len(text) < 700  # the uris and labels, no base64
    assert text.startswith('["page 1:",{"type":"resource","resource":{"uri":"screenshot://')
    assert (
        '{"uri":"screenshot://page/1","mimeType":"image/png","blob":"[image 1 (image/png, '
        '40.0 KB) is attached in the next user message]"}'
    ) in text
    assert '"blob":"[file 1 (page 1.pdf) (application/pdf, 40.0 KB) is attached' in text
    assert '{"uri":"page://1/notes","mimeType":"text/plain","text":"2 charts"}' in text
    parts = sent[3]["content"]
    assert parts[2] == {"type": "image_url", "image_url": {"url": Image(png).data_url}}
    assert parts[4] == {
        "type": "file",
        "file": {"file_data": File(pdf, "application/pdf").data_url, "filename": "page 1.pdf"},
    }


@pytest.mark.parametrize(
    ("texts", "value", "read"),
    [
        (['line 1\nsay "hi"'], 'line 1\nsay "hi"', 'line 1\nsay "hi"'),
        (["3"], 3, 3),
        (['[\n  "ops",\n  "db"\n]'], ["ops", "db"], ["ops", "db"]),  # FastMCP's list
        # The text says something else: the server's own summary, or 1 for true.
        (["3 notes"], "a\nb\nc", {"result": "a\nb\nc"}),
        (["1"], True, {"result": True}),
        (["ops", "db"], ["ops", "db"], ["ops", "db"]),  # the SDK's list: a part per item
        (["3", "40"], [3, 40], [3, 40]),
        ([], [], []),
        # A part per item, but one says something else, or not one per item.
        (["ops", "and db"], ["ops", "db"], {"result": ["ops", "db"]}),
        (["ops, db"], ["ops", "db"], {"result": ["ops", "db"]}),
        (["1", "2", "3", "4"], [[1, 2], [3, 4]], {"result": [[1, 2], [3, 4]]}),
        (["1", "0"], [True, False], {"result": [True, False]}),
        ([], None, {"result": None}),
        (['{"a": 1}'], {"a": 1}, {"result": {"a": 1}}),  # an object stays one
    ],
)
def test_a_wrapped_plain_value_is_unwrapped_for_the_model_when_its_text_says_the_same(
    texts: list[str], value: object, read: object
) -> None:
    result = types.CallToolResult(
        content=[_text(t) for t in texts], structured_content={"result": value}
    )
    token = READ_BY_MODEL.set(True)
    try:
        assert result_value(result, "t") == read
    finally:
        READ_BY_MODEL.reset(token)
    assert result_value(result, "t") == {"result": value}  # call_tool(): as documented


def test_an_app_tools_value_is_its_parts_or_its_object_when_they_say_nothing() -> None:
    # An MCP Apps tool (CONTENT_FOR_MODEL): its text and other parts are the model's,
    # its structuredContent the page's. A blank text part, as some servers send beside
    # the page's data, said nothing: the model read "" where it could read the data.
    image = types.ImageContent(type="image", data="R0lGODlhAQABAAAAACw=", mime_type="image/gif")
    data = {"viewUUID": "v-1"}
    token = CONTENT_FOR_MODEL.set(True)
    try:
        for blank in ([], [_text("")], [_text(" \n"), _text("")]):
            result = types.CallToolResult(content=blank, structured_content=data)
            assert result_value(result, "t") == data
        said = types.CallToolResult(content=[_text("opened v-1")], structured_content=data)
        assert result_value(said, "t") == "opened v-1"
        shown = types.CallToolResult(content=[_text(""), image], structured_content=data)
        assert result_value(shown, "t") == ["", Image.from_base64(image.data, "image/gif")]
    finally:
        CONTENT_FOR_MODEL.reset(token)


def test_a_wrapped_value_with_other_keys_or_parts_is_not_unwrapped() -> None:
    token = READ_BY_MODEL.set(True)
    try:
        more = types.CallToolResult(
            content=[_text("x")], structured_content={"result": "x", "n": 1}
        )
        assert result_value(more, "t") == {"result": "x", "n": 1}
        annotated = types.TextContent(
            type="text", text="x", annotations=types.Annotations(audience=["user"])
        )
        marked = types.CallToolResult(content=[annotated], structured_content={"result": "x"})
        assert result_value(marked, "t") == {"result": "x"}
    finally:
        READ_BY_MODEL.reset(token)


async def test_a_wrapped_string_reaches_the_model_as_the_servers_text() -> None:
    # FastMCP and the SDK's MCPServer send a `-> str` tool's value as structuredContent
    # {"result": s} beside s as text. Before: the model read {"result":"---\ntitle: ..."},
    # one line with every newline and quote escaped (2,912 characters for 2,694).
    from .conftest import SERVERS

    transport = StdioTransport(sys.executable, [str(SERVERS / "wrapped_server.py")])
    async with McpClient("notes", transport, timeout=15) as client:
        registry = ToolRegistry()
        registry.register_all(client.into_tools(prefix=True))
        calls = [
            {
                "id": name,
                "type": "function",
                "function": {"name": f"notes__{name}", "arguments": args},
            }
            for name, args in [
                ("read_note", "{}"),
                ("count", '{"text": "one two three"}'),
                ("summary", "{}"),
                ("verdict", "{}"),
                ("tags", "{}"),
                ("sizes", "{}"),
                ("grid", "{}"),
            ]
        ]
        read = {m["tool_call_id"]: m["content"] for m in await registry.run_tool_calls(calls)}
        wrapped = await client.call_tool("read_note")  # as documented: the object

    note = wrapped["result"]
    assert note.startswith("---\ntitle: Runbook\n") and note.count('"') == 160
    assert read["read_note"] == note
    assert read["count"] == "3"
    # A text that says less than the value, and an object whose one field is "result"
    # (its text is the object's JSON), keep the object.
    assert json.loads(read["summary"]) == {"result": note}
    assert read["verdict"] == '{"result":"pass"}'
    # A list the SDK sends as a text part per item. Before: {"result":["ops","db"]}.
    assert read["tags"] == '["ops","db"]'
    assert read["sizes"] == "[3,40]"
    # Its parts are the grid's four numbers, which do not say its two rows.
    assert read["grid"] == '{"result":[[1,2],[3,4]]}'


def test_is_error_raises_with_the_text() -> None:
    result = types.CallToolResult(content=[_text("no such file: /x")], is_error=True)
    with pytest.raises(ToolExecutionError, match="tool 'read' failed: no such file: /x") as info:
        result_value(result, "read")
    assert info.value.is_recoverable()


def test_is_error_without_text_still_says_something() -> None:
    image = types.ImageContent(type="image", data="AA==", mime_type="image/png")
    with pytest.raises(ToolExecutionError, match="image/png"):
        result_value(types.CallToolResult(content=[image], is_error=True), "draw")


async def test_an_mcp_image_reaches_the_model_whole_as_an_image() -> None:
    # Before: the image part became JSON text, cut at 16 KB in the middle of its base64.
    response, sent = await _one_call_through_the_fixture(
        "chart", {"kb": 40}, "Show me the sales chart."
    )

    png = b"\x89PNG\r\n\x1a\n" + bytes(i % 251 for i in range(40 * 1024))
    caption, image = response.invocations[0].output
    assert (caption, image) == ("sales by month:", Image(png, "image/png"))
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "user"]
    assert sent[2]["content"] == (
        "sales by month:\n[image 1 (image/png, 40.0 KB) is attached in the next user message]"
    )
    parts = sent[3]["content"]
    assert parts[1] == {"type": "text", "text": "image 1 of tool call call_chart (chart):"}
    assert parts[2] == {"type": "image_url", "image_url": {"url": image.data_url}}


def test_annotated_text_keeps_its_annotations() -> None:
    annotated = types.TextContent(
        type="text", text="for you", annotations=types.Annotations(audience=["user"], priority=0.9)
    )
    result = types.CallToolResult(content=[_text("for everyone"), annotated])
    assert result_value(result, "t") == [
        "for everyone",
        {"type": "text", "text": "for you", "annotations": {"audience": ["user"], "priority": 0.9}},
    ]


def test_an_annotated_error_is_still_its_text() -> None:
    annotated = types.TextContent(
        type="text", text="disk full", annotations=types.Annotations(priority=1.0)
    )
    with pytest.raises(ToolExecutionError, match=r"tool 'save' failed: disk full$"):
        result_value(types.CallToolResult(content=[annotated], is_error=True), "save")


@pytest.mark.parametrize(
    ("tool", "args", "why"),
    [
        ("weather", {"city": "Oslo"}, "Invalid structured content returned by tool weather"),
        ("echo", {"text": "hi"}, "has an output schema but did not return structured content"),
        ("subscriptions", {}, "Invalid schema for tool subscriptions"),
    ],
)
async def test_a_result_off_its_own_output_schema_is_a_recoverable_error(
    tool: str, args: dict[str, object], why: str
) -> None:
    # Before: an unrecoverable McpError, which stopped the tool loop with LlmError.
    from .conftest import SERVERS

    transport = StdioTransport(sys.executable, [str(SERVERS / "schema_proxy.py")])
    async with McpClient("wrong", transport, timeout=15) as client:
        registry = ToolRegistry()
        registry.register_all(client.into_tools())
        invocation = await registry.invoke(tool, args)
        error = invocation.error
        assert isinstance(error, McpError) and error.is_recoverable()
        assert invocation.may_have_run is True
        assert str(error).startswith(
            f"MCP server 'wrong': tools/call '{tool}' answered with a result that does not "
            "match the tool's own output schema, so the result was dropped: "
        )
        assert why in str(error)
        assert str(error).endswith(
            "the call may have run on the server, so do not assume it had no effect"
        )
        # The connection stays up.
        assert await client.call_tool("two_texts", {}) == "first\nsecond"
