"""From a tool's output to text plus images, audio and files, for each API."""

from __future__ import annotations

import collections
import dataclasses
import logging
from typing import Any

import pytest
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    SerializerFunctionWrapHandler,
    computed_field,
    field_serializer,
    model_serializer,
)
from pydantic.dataclasses import dataclass as pydantic_dataclass
from pydantic_core import to_jsonable_python

from agcore_tools import Audio, File, Image, ToolError
from agcore_tools._attachments import (
    Rendered,
    attachments_message,
    function_call_output,
    is_attachments_message,
    normalise,
    render,
)

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 80  # 20.0 KB and a bit
PDF = b"%PDF-1.7\n" + bytes(100)
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(16)


def chat(output: Any, text_limit: int | None = 16384, limit: int | None = 10**6) -> Rendered:
    rendered = render(
        output, api="chat", max_text_bytes=text_limit, max_attachment_bytes=limit, tool="t"
    )
    assert rendered is not None
    return rendered


def responses(output: Any, limit: int | None = 10**6) -> Rendered:
    rendered = render(
        output, api="responses", max_text_bytes=16384, max_attachment_bytes=limit, tool="t"
    )
    assert rendered is not None
    return rendered


# -- normalise (what @tool makes of a return value) ---------------------------------------


def test_values_without_binary_parts_convert_as_before() -> None:
    from pydantic_core import to_jsonable_python

    value = {"a": (1, 2), "b": {3}, 4: "x"}
    assert normalise(value) == to_jsonable_python(value)


def test_image_bytes_become_images_anywhere_and_text_bytes_stay_text() -> None:
    assert normalise(PNG) == Image(PNG)
    assert normalise({"chart": PNG, "n": (1, 2), 5: b"caption"}) == {
        "chart": Image(PNG),
        "n": [1, 2],
        "5": "caption",
    }
    image = Image(PNG)
    assert normalise(["x", image])[1] is image


def test_binary_values_are_found_in_long_lists_and_tables_of_rows() -> None:
    # Long lists are first looked at whole (all scalars, or rows of scalars): a binary
    # value anywhere in them still sends them down the item-by-item walk.
    rows = [{"id": n, "name": f"row {n}", "score": n / 2} for n in range(100)]
    assert normalise(rows) == rows
    assert normalise([*rows, {"id": 100, "chart": PNG}])[-1] == {"id": 100, "chart": Image(PNG)}
    assert normalise([*rows, {"tags": ["a", PNG]}])[-1] == {"tags": ["a", Image(PNG)]}
    assert normalise((*range(100), PNG))[-1] == Image(PNG)
    assert normalise([*range(100), [1, Image(PNG)]])[-1] == [1, Image(PNG)]
    assert normalise([[n, "x"] for n in range(100)]) == [[n, "x"] for n in range(100)]
    assert chat([*rows, {"chart": PNG}]).attachments[0].value == Image(PNG)


def test_a_model_or_dataclass_holding_an_image_is_a_dict_of_its_fields() -> None:
    # Refused as "not JSON-compatible" before, while a dict holding the image worked.
    class Chart(BaseModel):
        model_config = ConfigDict(arbitrary_types_allowed=True)
        title: str
        image: Image

    @dataclasses.dataclass
    class Shot:
        caption: str
        png: bytes

    chart = Chart(title="sales", image=Image(PNG))
    assert normalise(chart) == {"title": "sales", "image": Image(PNG)}
    assert normalise([Shot("home", PNG)]) == [{"caption": "home", "png": Image(PNG)}]
    assert normalise(Shot("home", b"text")) == {"caption": "home", "png": "text"}
    # A tool that is not @tool hands its model to render() as it is.
    rendered = chat(chart)
    assert rendered.text == (
        '{"title":"sales","image":"[image 1 (image/png, 20.0 KB) is attached in the next '
        'user message]"}'
    )
    assert [a.value for a in rendered.attachments] == [Image(PNG)]


class _Avatar(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    picture: Image | None
    uploader_id: str = Field(exclude=True)


class _Account(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    user_name: str = Field(serialization_alias="userName")
    api_token: str = Field(exclude=True)
    password: SecretStr
    avatar: Image | None = None
    history: list[_Avatar] = []

    @computed_field  # type: ignore[prop-decorator]
    @property
    def initial(self) -> str:
        return self.user_name[0]


def test_a_model_holding_an_image_is_written_as_pydantic_writes_it() -> None:
    # Before: once it held an image, the model was read field by field: its excluded
    # api_token (and the nested uploader_id) reached the model, userName became
    # user_name and the computed field was lost.
    plain = _Account(user_name="ann", api_token="tok_live_1", password=SecretStr("hunter2"))
    account = plain.model_copy(
        update={"avatar": Image(PNG), "history": [_Avatar(picture=Image(PNG), uploader_id="u7")]}
    )
    expected = to_jsonable_python(plain)
    assert expected == {
        "userName": "ann",
        "password": "**********",
        "avatar": None,
        "history": [],
        "initial": "a",
    }
    assert normalise(account) == {
        **expected,
        "avatar": Image(PNG),
        "history": [{"picture": Image(PNG)}],
    }
    # A tool that is not @tool hands its model to render() as it is.
    text = chat(account).text
    assert "tok_live_1" not in text and "u7" not in text and "hunter2" not in text
    assert text.startswith('{"userName":"ann","password":"**********","avatar":"[image 1 ')
    assert text.endswith(
        '"history":[{"picture":"[image 2 (image/png, 20.0 KB) is attached '
        'in the next user message]"}],"initial":"a"}'
    )


def test_an_excluded_field_holding_the_only_image_sends_nothing() -> None:
    class Scan(BaseModel):
        model_config = ConfigDict(arbitrary_types_allowed=True)
        pages: int
        original: Image = Field(exclude=True)

    scan = Scan(pages=2, original=Image(PNG))
    assert normalise(scan) == {"pages": 2}
    assert chat(scan) == Rendered('{"pages":2}')


@pydantic_dataclass(config=ConfigDict(arbitrary_types_allowed=True))
class _Upload:
    file_name: str = Field(serialization_alias="fileName")
    api_token: str = Field(exclude=True)
    picture: Image | None = None
    taken: int = 0

    @field_serializer("taken")
    def _taken(self, taken: int) -> str:
        return f"day {taken}"


@dataclasses.dataclass
class _Gallery:
    owner: str
    uploads: list[_Upload]
    cover: Image | None = None
    secret: str = dataclasses.field(default="s3", repr=False)


def test_a_pydantic_dataclass_holding_an_image_is_written_as_pydantic_writes_it() -> None:
    # Before: a pydantic dataclass holding an image was read field by field: its
    # excluded api_token reached the model, fileName became file_name and the field
    # serializer was skipped.
    plain = _Upload(file_name="a.png", api_token="tok_live_1", taken=3)
    upload = dataclasses.replace(plain, picture=Image(PNG))
    expected = to_jsonable_python(plain)
    assert expected == {"fileName": "a.png", "picture": None, "taken": "day 3"}
    assert normalise(upload) == {**expected, "picture": Image(PNG)}
    # A tool that is not @tool hands its dataclass to render() as it is.
    assert chat(upload).text == (
        '{"fileName":"a.png","picture":"[image 1 (image/png, 20.0 KB) is attached in '
        'the next user message]","taken":"day 3"}'
    )


def test_a_dataclass_holding_an_image_is_its_fields_as_pydantic_writes_one() -> None:
    # pydantic writes a standard-library dataclass by inference, every field by name:
    # holding an image changes nothing but the image, and a pydantic record in it is
    # still written as pydantic writes it.
    plain = _Gallery("ann", [_Upload(file_name="a.png", api_token="tok_live_1")])
    gallery = _Gallery(
        "ann", [_Upload(file_name="a.png", api_token="tok_live_1", picture=Image(PNG))], Image(PNG)
    )
    expected = to_jsonable_python(plain)
    assert expected == {
        "owner": "ann",
        "uploads": [{"fileName": "a.png", "picture": None, "taken": "day 0"}],
        "cover": None,
        "secret": "s3",
    }
    assert normalise(gallery) == {
        **expected,
        "uploads": [{"fileName": "a.png", "picture": Image(PNG), "taken": "day 0"}],
        "cover": Image(PNG),
    }
    assert "tok_live_1" not in chat(gallery).text


def test_a_model_serializers_own_keys_hold_the_binary_value() -> None:
    # Before: the value was put back under the field's alias or name only, so under a
    # key of the model serializer's own the audio stayed as pydantic's Python mode
    # writes it, a dict of its bytes, and was sent as that text.
    class Clip(BaseModel):
        model_config = ConfigDict(arbitrary_types_allowed=True)
        title: str
        sound: Audio

        @model_serializer(mode="wrap")
        def _tagged(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
            return {"kind": "clip", **{f"clip_{key}": v for key, v in handler(self).items()}}

    clip = Clip(title="intro", sound=Audio(WAV))
    assert normalise(clip) == {"kind": "clip", "clip_title": "intro", "clip_sound": Audio(WAV)}


def test_other_bytes_are_an_error_that_says_what_to_do() -> None:
    with pytest.raises(
        ToolError, match=r"wrap them in Image\(\.\.\.\), Audio\(\.\.\.\) or File"
    ) as info:
        normalise({"blob": b"\x00\xff\xfe"})
    assert isinstance(info.value, ValueError)
    assert "returned 3 bytes that are neither a PNG, JPEG, GIF or WebP image nor UTF-8" in str(
        info.value
    )


# -- render -------------------------------------------------------------------------------


def test_output_without_binary_parts_is_not_rendered_here() -> None:
    for output in ("text", {"a": 1}, [1, "x"], None):
        assert (
            render(output, api="chat", max_text_bytes=100, max_attachment_bytes=100, tool="t")
            is None
        )


def test_an_image_alone_is_a_label_and_the_image() -> None:
    rendered = chat(Image(PNG))
    assert rendered.text == "[image 1 (image/png, 20.0 KB) is attached in the next user message]"
    [attachment] = rendered.attachments
    assert (attachment.value, attachment.label, attachment.dropped) == (Image(PNG), "image 1", None)
    assert responses(PNG).text == "[image 1 (image/png, 20.0 KB) is attached below]"


def test_a_content_list_reads_in_order_one_item_per_line() -> None:
    rendered = chat(["Two charts:", Image(PNG), {"total": 3}, Image(b"GIF89a"), 7])
    assert rendered.text.splitlines() == [
        "Two charts:",
        "[image 1 (image/png, 20.0 KB) is attached in the next user message]",
        '{"total":3}',
        "[image 2 (image/gif, 6 B) is attached in the next user message]",
        "7",
    ]
    assert [a.label for a in rendered.attachments] == ["image 1", "image 2"]


def test_images_inside_other_structures_become_labels_in_the_json() -> None:
    # The failure this fixes: a base64 image in a dict was cut at 16 KB mid-base64.
    rendered = chat([{"caption": "sales", "chart": Image(PNG)}, {"n": 1}])
    assert rendered.text == (
        '[{"caption":"sales","chart":"[image 1 (image/png, 20.0 KB) is attached in the next '
        'user message]"},{"n":1}]'
    )
    assert rendered.attachments[0].value == Image(PNG)


def test_truncation_cuts_the_text_only() -> None:
    rendered = chat(["x" * 5000, Image(PNG)], text_limit=1000)
    assert len(rendered.text.encode()) <= 1000 and "bytes omitted" in rendered.text
    assert rendered.attachments[0].value.data == PNG  # 20 KB, sent whole


@pytest.mark.parametrize("render", [chat, responses], ids=["chat", "responses"])
def test_an_image_the_model_apis_do_not_take_is_not_sent(render: Any) -> None:
    # An MCP server's SVG, or bytes that are no image under an image's label: sent, the
    # API would refuse the whole request over one tool result.
    svg = Image(b"<svg xmlns='http://www.w3.org/2000/svg'/>", "image/svg+xml")
    fake = Image(b"hello world", "image/png")
    rendered = render(["two:", svg, fake, Image(PNG)])
    assert [a.dropped is None for a in rendered.attachments] == [False, False, True]
    assert "[image 1 (image/svg+xml, 41 B) was not sent: it is not a PNG, JPEG, GIF or WebP" in (
        rendered.text
    )


@pytest.mark.parametrize(
    "holder",
    [lambda images: {"a": images[0], "b": images[1]}.values(), collections.deque, frozenset],
    ids=["dict values", "deque", "frozenset"],
)
def test_images_in_any_array_like_value_are_attached(holder: Any) -> None:
    # Before: "returned a dict_values that is not JSON-compatible: 'utf-8' codec can't
    # decode", or (bytes that happen to be UTF-8) the bytes sent as text.
    gif = Image(b"GIF89a\x01\x00\x01\x00\x00\x00\x00;")
    rendered = chat({"thumbs": holder([Image(PNG), gif])})
    assert sorted(a.value.media_type for a in rendered.attachments) == ["image/gif", "image/png"]
    assert rendered.text.count("is attached in the next user message") == 2


def test_audio_or_a_pdf_whose_bytes_are_not_what_they_claim_is_not_sent() -> None:
    # A proxy's error page under an audio or PDF label was sent, and the API refused
    # the request (and every later one holding it), as for a fake image.
    page = b"<html>502 Bad Gateway</html>"
    rendered = chat([Audio(page, "audio/wav"), File(page, "application/pdf", "r.pdf"), Audio(WAV)])
    assert [a.dropped is None for a in rendered.attachments] == [False, False, True]
    assert (
        "[audio 1 (audio/wav, 28 B) was not sent: its bytes are text, not WAV or MP3"
        in rendered.text
    )
    assert "was not sent: its bytes are not a PDF, though its media type says so" in rendered.text
    assert chat(File(PDF, "application/pdf", "ok.pdf")).attachments[0].dropped is None
    # A header after a BOM, and audio whose header is not known here but is no text,
    # are sent; a label's case or parameters do not hide an error page.
    assert (
        chat(File(b"\xef\xbb\xbf" + PDF, "application/pdf", "bom.pdf")).attachments[0].dropped
        is None
    )
    assert chat(Audio(bytes(8) + WAV[4:], "audio/mpeg")).attachments[0].dropped is None
    odd = chat(File(page, "application/PDF; charset=binary", "r.pdf")).attachments[0]
    assert odd.dropped == "its bytes are not a PDF, though its media type says so"


def test_audio_goes_under_the_format_its_bytes_tell() -> None:
    # WAV bytes labelled audio/mpeg went out as format "mp3".
    message = attachments_message([("c1", "say")], [chat(Audio(WAV, "audio/mpeg"))])
    assert message is not None
    [part] = [p for p in message["content"] if p["type"] == "input_audio"]
    assert part["input_audio"]["format"] == "wav"


def test_an_image_goes_under_the_media_type_its_bytes_tell() -> None:
    # MCP servers often label PNG bytes "image/jpg": a strict API refuses the data URL.
    rendered = chat(Image(PNG, "image/jpg"))
    assert rendered.text.startswith("[image 1 (image/png, 20.0 KB) is attached")
    message = attachments_message([("c1", "shot")], [rendered])
    assert message is not None
    assert message["content"][2]["image_url"]["url"].startswith("data:image/png;base64,iVBOR")
    output = function_call_output(responses(Image(PNG, "image/jpg")))
    assert output[1]["image_url"].startswith("data:image/png;base64,")


def test_a_value_over_its_limit_is_not_sent_and_the_text_says_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, "agcore_tools.toolcalls"):
        rendered = chat(["big:", Image(PNG), Image(b"GIF89a")], limit=1024)
    assert rendered.text.splitlines()[1] == (
        "[image 1 (image/png, 20.0 KB) was not sent: it is larger than the 1.0 KB limit for "
        "binary tool results]"
    )
    assert [a.dropped is None for a in rendered.attachments] == [False, True]
    assert "tool 't': image 1 (image/png, 20.0 KB) was not sent" in caplog.text
    message = attachments_message([("c1", "t")], [rendered])
    assert message is not None
    assert [p["type"] for p in message["content"]] == ["text", "text", "image_url"]


def test_audio_goes_to_chat_completions_as_wav_or_mp3_only() -> None:
    rendered = chat([Audio(WAV), Audio(b"OggS", "audio/ogg")])
    assert rendered.text.splitlines()[1] == (
        "[audio 2 (audio/ogg, 4 B) was not sent: Chat Completions takes WAV or MP3 audio only]"
    )
    message = attachments_message([("c1", "speak")], [rendered])
    assert message is not None
    assert message["content"][2] == {
        "type": "input_audio",
        "input_audio": {"data": "UklGRiQAAABXQVZFZm10IAAAAAAAAAAAAAAAAAAAAAA=", "format": "wav"},
    }
    assert len(message["content"]) == 3  # the OGG sound is left out


def test_the_responses_api_gets_images_and_files_but_no_audio() -> None:
    rendered = responses(["Report:", File(PDF, filename="q3.pdf"), Audio(WAV), Image(PNG)])
    assert rendered.text.splitlines() == [
        "Report:",
        "[file 1 (q3.pdf) (application/pdf, 109 B) is attached below]",
        "[audio 1 (audio/wav, 32 B) was not sent: the Responses API takes no audio in tool "
        "results]",
        "[image 1 (image/png, 20.0 KB) is attached below]",
    ]
    assert function_call_output(rendered) == [
        {"type": "input_text", "text": rendered.text},
        {
            "type": "input_file",
            "file_data": File(PDF, filename="q3.pdf").data_url,
            "filename": "q3.pdf",
        },
        {"type": "input_image", "image_url": Image(PNG).data_url},
    ]
    # With nothing to send, the output stays a plain string.
    assert function_call_output(responses(Audio(WAV))) == responses(Audio(WAV)).text


def test_one_user_message_carries_every_call_s_values_after_the_tool_messages() -> None:
    results = [chat(Image(PNG)), None, chat(["a", File(PDF), Image(b"GIF89a")])]
    message = attachments_message([("c1", "plot"), ("c2", "add"), ("c3", "scan")], results)
    assert message is not None and message["role"] == "user"
    texts = [p["text"] for p in message["content"] if p["type"] == "text"]
    assert texts == [
        "Attachments of the tool results above:",
        "image 1 of tool call c1 (plot):",
        "file 1 (file.pdf) of tool call c3 (scan):",
        "image 1 of tool call c3 (scan):",
    ]
    assert message["content"][4] == {
        "type": "file",
        "file": {"file_data": File(PDF).data_url, "filename": "file.pdf"},
    }
    assert attachments_message([("c2", "add")], [None]) is None
    tool = {"role": "tool", "tool_call_id": "c3", "content": "..."}
    assert is_attachments_message(message, tool)
    assert is_attachments_message(message, message)  # a resume's, after the turn's first
    assert not is_attachments_message(message, {"role": "assistant", "content": "hi"})
    assert not is_attachments_message({"role": "user", "content": "Next question"}, tool)
