"""The CallToolResult -> value mapping, on the SDK's own result objects."""

from __future__ import annotations

import mcp_types as types
import pytest

from agcore_tools import ToolExecutionError
from agcore_tools.mcp._results import result_value


def _text(text: str) -> types.TextContent:
    return types.TextContent(type="text", text=text)


def test_structured_content_wins_over_text() -> None:
    result = types.CallToolResult(content=[_text('{"a": 1}')], structured_content={"a": 1})
    assert result_value(result, "t") == {"a": 1}


def test_text_parts_are_joined() -> None:
    assert result_value(types.CallToolResult(content=[_text("one")]), "t") == "one"
    assert result_value(types.CallToolResult(content=[_text("a"), _text("b")]), "t") == "a\nb"
    assert result_value(types.CallToolResult(content=[]), "t") == ""


def test_non_text_parts_are_kept_as_typed_json() -> None:
    resource = types.EmbeddedResource(
        type="resource",
        resource=types.TextResourceContents(
            uri="file:///a.txt", text="hello", mime_type="text/plain"
        ),
    )
    link = types.ResourceLink(type="resource_link", uri="file:///b.txt", name="b")
    audio = types.AudioContent(type="audio", data="UklGRg==", mime_type="audio/wav")
    result = types.CallToolResult(content=[_text("see:"), resource, link, audio])
    assert result_value(result, "t") == [
        {"type": "text", "text": "see:"},
        {
            "type": "resource",
            "resource": {"uri": "file:///a.txt", "mimeType": "text/plain", "text": "hello"},
        },
        {"type": "resource_link", "uri": "file:///b.txt", "name": "b"},
        {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"},
    ]


def test_is_error_raises_with_the_text() -> None:
    result = types.CallToolResult(content=[_text("no such file: /x")], is_error=True)
    with pytest.raises(ToolExecutionError, match="tool 'read' failed: no such file: /x") as info:
        result_value(result, "read")
    assert info.value.is_recoverable()


def test_is_error_without_text_still_says_something() -> None:
    image = types.ImageContent(type="image", data="AA==", mime_type="image/png")
    with pytest.raises(ToolExecutionError, match="image/png"):
        result_value(types.CallToolResult(content=[image], is_error=True), "draw")


def test_annotated_text_keeps_its_annotations() -> None:
    annotated = types.TextContent(
        type="text", text="for you", annotations=types.Annotations(audience=["user"], priority=0.9)
    )
    result = types.CallToolResult(content=[_text("for everyone"), annotated])
    assert result_value(result, "t") == [
        {"type": "text", "text": "for everyone"},
        {"type": "text", "text": "for you", "annotations": {"audience": ["user"], "priority": 0.9}},
    ]


def test_an_annotated_error_is_still_its_text() -> None:
    annotated = types.TextContent(
        type="text", text="disk full", annotations=types.Annotations(priority=1.0)
    )
    with pytest.raises(ToolExecutionError, match=r"tool 'save' failed: disk full$"):
        result_value(types.CallToolResult(content=[annotated], is_error=True), "save")
