"""Image, Audio and File: media types read from bytes, names and data URLs; clear errors."""

from __future__ import annotations

import base64
import dataclasses
from pathlib import Path

import pytest

from agcore_tools import Audio, File, Image, ToolError

PNG = b"\x89PNG\r\n\x1a\n" + bytes(8)
JPEG = b"\xff\xd8\xff\xe0" + bytes(8)
GIF = b"GIF87a" + bytes(8)
WEBP = b"RIFF\x10\x00\x00\x00WEBPVP8 " + bytes(4)
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(16)
MP3_FRAME = b"\xff\xfb\x90\x00" + bytes(8)


@pytest.mark.parametrize(
    ("data", "media_type"),
    [(PNG, "image/png"), (JPEG, "image/jpeg"), (GIF, "image/gif"), (WEBP, "image/webp")],
)
def test_an_image_media_type_is_read_from_the_magic_number(data: bytes, media_type: str) -> None:
    assert Image(data).media_type == media_type


def test_a_given_media_type_wins_and_other_image_types_need_one() -> None:
    svg = b"<svg xmlns='http://www.w3.org/2000/svg'/>"
    assert Image(svg, "image/svg+xml").media_type == "image/svg+xml"
    with pytest.raises(ValueError, match="not a PNG, JPEG, GIF or WebP image; give media_type"):
        Image(svg)


def test_a_media_type_of_the_wrong_kind_is_refused() -> None:
    with pytest.raises(ValueError, match=r"Image\.media_type must be an image/\* type"):
        Image(PNG, "application/pdf")
    with pytest.raises(ValueError, match=r"Audio\.media_type must be an audio/\* type"):
        Audio(WAV, "image/png")


def test_errors_are_tool_errors_and_value_or_type_errors() -> None:
    with pytest.raises(ToolError) as bad_value:
        Image(b"???")
    assert isinstance(bad_value.value, ValueError)
    with pytest.raises(ToolError) as bad_type:
        Image(base64.b64encode(PNG).decode())  # type: ignore[arg-type]
    assert isinstance(bad_type.value, TypeError)
    assert "Image.data must be bytes, got str; for base64 text use .from_base64()" in str(
        bad_type.value
    )


def test_bytearray_and_memoryview_become_bytes_and_values_are_frozen() -> None:
    image = Image(bytearray(PNG))
    assert type(image.data) is bytes and image == Image(memoryview(PNG)) == Image(PNG)
    with pytest.raises(dataclasses.FrozenInstanceError):
        image.media_type = "image/gif"  # type: ignore[misc]


def test_repr_shows_the_size_never_the_bytes() -> None:
    big = Image(PNG + bytes(100_000))
    assert repr(big) == "Image(media_type='image/png', size=100016)"
    assert repr(Audio(WAV)) == "Audio(media_type='audio/wav', size=32)"
    assert repr(File(b"%PDF-1.4", filename="a.pdf")) == (
        "File(media_type='application/pdf', filename='a.pdf', size=8)"
    )


def test_from_base64_takes_plain_base64_and_data_urls() -> None:
    text = base64.b64encode(PNG).decode()
    assert Image.from_base64(text) == Image(PNG)
    assert Image.from_base64(f"data:image/png;base64,{text}").data == PNG
    assert Image(PNG).data_url == f"data:image/png;base64,{text}"
    # A data URL's media type is used when none is given.
    svg = base64.b64encode(b"<svg/>").decode()
    assert Image.from_base64(f"data:image/svg+xml;base64,{svg}").media_type == "image/svg+xml"
    with pytest.raises(ValueError, match="not valid base64"):
        Image.from_base64("not base64!")
    with pytest.raises(ValueError, match="needs a base64 data URL"):
        Image.from_base64("data:image/png,rawtext")


def test_from_base64_skips_the_line_breaks_of_wrapped_base64() -> None:
    # RFC 2045's 76-character lines: Python's base64.encodebytes, Java's MIME encoder.
    wrapped = base64.encodebytes(PNG * 4).decode()
    assert "\n" in wrapped.rstrip("\n")
    assert Image.from_base64(wrapped) == Image(PNG * 4)
    assert Image.from_base64(f"data:image/png;base64,{wrapped}").data == PNG * 4
    assert Audio.from_base64(" UklG\r\nRg== ", "audio/wav").data == b"RIFF"
    with pytest.raises(ValueError, match="not valid base64"):
        Image.from_base64("iVBORw0K\u00a0Ggo=")  # only ASCII whitespace is skipped


def test_from_path_reads_the_file_and_its_suffix(tmp_path: Path) -> None:
    (tmp_path / "photo.JPG").write_bytes(b"no magic here")
    assert Image.from_path(tmp_path / "photo.JPG").media_type == "image/jpeg"
    (tmp_path / "unnamed").write_bytes(GIF)
    assert Image.from_path(tmp_path / "unnamed").media_type == "image/gif"
    (tmp_path / "song.wav").write_bytes(b"RIFF")
    assert Audio.from_path(tmp_path / "song.wav").media_type == "audio/wav"
    (tmp_path / "report.pdf").write_bytes(b"%PDF-1.7")
    assert File.from_path(tmp_path / "report.pdf") == File(
        b"%PDF-1.7", "application/pdf", "report.pdf"
    )
    with pytest.raises(ValueError, match=r"Image\.from_path\(\) cannot read '.*missing\.png'"):
        Image.from_path(tmp_path / "missing.png")


@pytest.mark.parametrize(("data", "media_type"), [(WAV, "audio/wav"), (MP3_FRAME, "audio/mpeg")])
def test_wav_and_mp3_are_recognised(data: bytes, media_type: str) -> None:
    assert Audio(data).media_type == media_type
    assert Audio.from_base64(base64.b64encode(data).decode()).media_type == media_type


def test_other_audio_needs_a_media_type() -> None:
    with pytest.raises(ValueError, match="not WAV or MP3; give media_type"):
        Audio(b"OggS")
    assert Audio(b"OggS", "audio/ogg").media_type == "audio/ogg"


def test_a_file_type_comes_from_its_name_or_a_pdf_header_and_it_always_has_a_name() -> None:
    assert File(b"%PDF-1.7").filename == "file.pdf"
    assert File(b"a,b", filename="t.csv").media_type == "text/csv"
    assert File(b"{}", "application/json").filename == "file.json"
    with pytest.raises(ValueError, match="cannot tell the media type"):
        File(b"\x00\x01")
