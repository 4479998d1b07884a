"""Binary tool results: :class:`Image`, :class:`Audio` and :class:`File`.

A tool returns one of these values, a list mixing them with text and other values,
or a dict, list, pydantic model or dataclass holding them anywhere, and each API
receives them the way it accepts binary input:

- **Chat Completions**: a tool message carries text only, so it says where each
  value went (``[image 1 (image/png, 12.3 KB) is attached in the next user
  message]``), and one user message after the turn's tool messages carries the
  values: ``image_url`` data URLs, ``input_audio`` (WAV and MP3) and ``file``
  parts.
- **Responses**: the ``function_call_output`` output is a list of ``input_text``,
  ``input_image`` and ``input_file`` parts. That API takes no audio in tool output,
  so an :class:`Audio` value is left out and the text says so.

Raw ``bytes`` that start like a PNG, JPEG, GIF or WebP image are an :class:`Image`;
other bytes that are UTF-8 text are that text; any other bytes are an error that
asks for a wrapper with a media type. A base64 string is text like any other: wrap it
with ``Image.from_base64(text)`` (data URLs work too) for the model to see a picture.
Only the text of a result is cut at the result byte limit (``max_result_bytes``).
Each binary value has its own limit
(``max_tool_attachment_bytes``, 5 MB by default); a larger one is not sent, and the
text tells the model why.

Example:
    >>> from agcore_tools import Image
    >>> png = b"\\x89PNG\\r\\n\\x1a\\n" + bytes(20)
    >>> image = Image(png)  # the media type is read from the bytes
    >>> image
    Image(media_type='image/png', size=28)
    >>> image.data_url[:30]
    'data:image/png;base64,iVBORw0K'
    >>> Image.from_base64(image.data_url) == image
    True
"""

from __future__ import annotations

import base64
import binascii
import os
from dataclasses import dataclass, field
from typing import Any

from .error import _BadContent, _BadContentType

__all__ = ["Audio", "File", "Image"]

# Magic numbers of the image types every vision API accepts.
_IMAGE_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)
_IMAGE_SUFFIXES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}
_AUDIO_SUFFIXES = {".wav": "audio/wav", ".mp3": "audio/mpeg"}


def sniff_image(data: bytes) -> str | None:
    """The media type of an image by its magic number (PNG, JPEG, GIF, WebP), or None."""
    for magic, media_type in _IMAGE_MAGIC:
        if data.startswith(magic):
            return media_type
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def sniff_audio(data: bytes) -> str | None:
    """The media type of WAV or MP3 audio by its header, or None."""
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        return "audio/wav"
    # An ID3 tag, or an MPEG audio frame header (11 sync bits, then layer III).
    if data.startswith(b"ID3") or (len(data) > 1 and data[0] == 0xFF and data[1] & 0xE6 == 0xE2):
        return "audio/mpeg"
    return None


def _bytes(owner: str, data: Any) -> bytes:
    if isinstance(data, bytes):
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    hint = "; for base64 text use .from_base64()" if isinstance(data, str) else ""
    raise _BadContentType(f"{owner}.data must be bytes, got {type(data).__name__}{hint}")


_ASCII_WHITESPACE = str.maketrans("", "", " \t\n\r\v\f")


def _decode(owner: str, text: str) -> tuple[bytes, str]:
    """Bytes and media type ("" when not given) of base64 text or a base64 data URL."""
    media_type = ""
    if text.startswith("data:"):
        header, comma, text = text.partition(",")
        if not comma or not header.endswith(";base64"):
            raise _BadContent(f"{owner}.from_base64() needs a base64 data URL, got {header!r:.60}")
        media_type = header[5:].split(";", 1)[0]
    # Line-wrapped base64 (RFC 2045's 76-character lines: base64.encodebytes, Java's
    # MIME encoder) is valid; anything else that is not base64 stays refused.
    text = text.translate(_ASCII_WHITESPACE)
    try:
        return base64.b64decode(text, validate=True), media_type
    except (binascii.Error, ValueError) as exc:
        raise _BadContent(f"{owner}.from_base64(): the text is not valid base64: {exc}") from exc


def _read(owner: str, path: str | os.PathLike[str]) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise _BadContent(f"{owner}.from_path() cannot read {os.fspath(path)!r}: {exc}") from exc


def _suffix(path: str | os.PathLike[str]) -> str:
    return os.path.splitext(os.fspath(path))[1].lower()


@dataclass(frozen=True, slots=True)
class Image:
    """An image a tool returns: its bytes and media type.

    Without ``media_type``, it is read from the bytes' magic number (PNG, JPEG, GIF,
    WebP); bytes of another kind need it given. The model sees the image itself (see
    :mod:`agcore_tools.content` for how each API receives it).

    Example:
        >>> from agcore_tools import Image, ToolRegistry
        >>> registry = ToolRegistry()
        >>> @registry.tool
        ... def logo() -> Image:
        ...     '''The company logo.'''
        ...     return Image(b"GIF89a" + bytes(10))
        >>> import asyncio
        >>> image = asyncio.run(registry.invoke("logo", {})).output
        >>> image.media_type, image.size
        ('image/gif', 16)
        >>> Image(b"not an image")
        Traceback (most recent call last):
        ...
        agcore_tools.error._BadContent: Image: the bytes are not a PNG, JPEG, GIF or WebP image; give media_type
    """

    data: bytes = field(repr=False)
    """The encoded image (PNG, JPEG, ...)."""
    media_type: str = ""
    """``image/png``, ``image/jpeg``, ...; read from the bytes when not given."""

    def __post_init__(self) -> None:
        data = _bytes("Image", self.data)
        media_type = self.media_type or sniff_image(data)
        if media_type is None:
            raise _BadContent(
                "Image: the bytes are not a PNG, JPEG, GIF or WebP image; give media_type"
            )
        if not media_type.startswith("image/"):
            raise _BadContent(f"Image.media_type must be an image/* type, got {media_type!r}")
        object.__setattr__(self, "data", data)
        object.__setattr__(self, "media_type", media_type)

    @classmethod
    def from_path(cls, path: str | os.PathLike[str], media_type: str = "") -> Image:
        """An image read from a file (blocking: call it from a sync tool or a thread).

        The media type comes from ``media_type``, else the file's suffix, else its bytes.

        Example:
            >>> import pathlib, tempfile
            >>> path = pathlib.Path(tempfile.mkdtemp()) / "chart.png"
            >>> _ = path.write_bytes(b"\\x89PNG\\r\\n\\x1a\\n")
            >>> Image.from_path(path).media_type
            'image/png'
        """
        return cls(_read("Image", path), media_type or _IMAGE_SUFFIXES.get(_suffix(path), ""))

    @classmethod
    def from_base64(cls, text: str, media_type: str = "") -> Image:
        """An image from base64 text or a ``data:image/...;base64,`` URL. Whitespace in
        the base64 (line breaks every 76 characters, say) is skipped.

        Example:
            >>> Image.from_base64("R0lGODlhAQABAAAAACw=").media_type
            'image/gif'
            >>> Image.from_base64("R0lGODlh\\nAQABAAAAACw=\\n").size
            14
        """
        data, given = _decode("Image", text)
        return cls(data, media_type or given)

    @property
    def size(self) -> int:
        """Length of :attr:`data` in bytes."""
        return len(self.data)

    @property
    def data_url(self) -> str:
        """The image as a ``data:`` URL with base64 data, as the APIs take it."""
        return _data_url(self.media_type, self.data)

    def __repr__(self) -> str:
        return f"Image(media_type={self.media_type!r}, size={self.size})"


@dataclass(frozen=True, slots=True)
class Audio:
    """A sound a tool returns: its bytes and media type.

    Chat Completions takes WAV (``audio/wav``) and MP3 (``audio/mpeg``); without
    ``media_type``, those two are recognised from the bytes. The Responses API takes
    no audio in tool output (the model is told the sound was left out).

    Example:
        >>> from agcore_tools import Audio
        >>> wav = b"RIFF" + bytes(4) + b"WAVEfmt " + bytes(16)
        >>> Audio(wav)
        Audio(media_type='audio/wav', size=32)
        >>> Audio.from_base64("SUQzBAAAAAAA").media_type  # an MP3 with an ID3 tag
        'audio/mpeg'
        >>> Audio(wav).size
        32
    """

    data: bytes = field(repr=False)
    """The encoded sound."""
    media_type: str = ""
    """``audio/wav``, ``audio/mpeg``, ...; read from the bytes when not given."""

    def __post_init__(self) -> None:
        data = _bytes("Audio", self.data)
        media_type = self.media_type or sniff_audio(data)
        if media_type is None:
            raise _BadContent("Audio: the bytes are not WAV or MP3; give media_type")
        if not media_type.startswith("audio/"):
            raise _BadContent(f"Audio.media_type must be an audio/* type, got {media_type!r}")
        object.__setattr__(self, "data", data)
        object.__setattr__(self, "media_type", media_type)

    @classmethod
    def from_path(cls, path: str | os.PathLike[str], media_type: str = "") -> Audio:
        """A sound read from a file (blocking: call it from a sync tool or a thread).

        Example:
            >>> import pathlib, tempfile
            >>> path = pathlib.Path(tempfile.mkdtemp()) / "beep.mp3"
            >>> _ = path.write_bytes(b"ID3" + bytes(7))
            >>> Audio.from_path(path).media_type
            'audio/mpeg'
        """
        return cls(_read("Audio", path), media_type or _AUDIO_SUFFIXES.get(_suffix(path), ""))

    @classmethod
    def from_base64(cls, text: str, media_type: str = "") -> Audio:
        """A sound from base64 text or a ``data:audio/...;base64,`` URL (whitespace in
        the base64 is skipped)."""
        data, given = _decode("Audio", text)
        return cls(data, media_type or given)

    @property
    def size(self) -> int:
        """Length of :attr:`data` in bytes."""
        return len(self.data)

    def __repr__(self) -> str:
        return f"Audio(media_type={self.media_type!r}, size={self.size})"


@dataclass(frozen=True, slots=True)
class File:
    """A document a tool returns (a PDF, say): its bytes, media type and file name.

    The media type comes from ``media_type``, else the file name's suffix, else the
    bytes (PDF only). Without a file name, one is made from the media type. Chat
    Completions sends it as a ``file`` part (OpenAI accepts PDFs there), the Responses
    API as ``input_file``.

    Example:
        >>> from agcore_tools import File
        >>> report = File(b"%PDF-1.7\\n...")
        >>> report
        File(media_type='application/pdf', filename='file.pdf', size=12)
        >>> File(b"a,b\\n1,2\\n", filename="table.csv").media_type
        'text/csv'
        >>> File.from_base64("JVBERi0xLjQ=", filename="a.pdf").size
        8
    """

    data: bytes = field(repr=False)
    """The file's contents."""
    media_type: str = ""
    """``application/pdf``, ...; from the file name or the bytes when not given."""
    filename: str = ""
    """The name the model sees; made from the media type when not given."""

    def __post_init__(self) -> None:
        import mimetypes  # its tables load on first use, not at `import agcore_tools`

        data = _bytes("File", self.data)
        media_type = (
            self.media_type
            or (mimetypes.guess_type(self.filename)[0] if self.filename else None)
            or ("application/pdf" if data.startswith(b"%PDF-") else None)
        )
        if not media_type or "/" not in media_type:
            raise _BadContent(
                "File: cannot tell the media type; give media_type or a filename with a suffix"
            )
        filename = self.filename or "file" + (mimetypes.guess_extension(media_type) or "")
        object.__setattr__(self, "data", data)
        object.__setattr__(self, "media_type", media_type)
        object.__setattr__(self, "filename", filename)

    @classmethod
    def from_path(cls, path: str | os.PathLike[str], media_type: str = "") -> File:
        """A file read from disk, named after it (blocking: call it from a sync tool or a
        thread).

        Example:
            >>> import pathlib, tempfile
            >>> path = pathlib.Path(tempfile.mkdtemp()) / "notes.txt"
            >>> _ = path.write_text("hello")
            >>> File.from_path(path)
            File(media_type='text/plain', filename='notes.txt', size=5)
        """
        return cls(_read("File", path), media_type, os.path.basename(os.fspath(path)))

    @classmethod
    def from_base64(cls, text: str, media_type: str = "", filename: str = "") -> File:
        """A file from base64 text or a ``data:...;base64,`` URL (whitespace in the
        base64 is skipped)."""
        data, given = _decode("File", text)
        return cls(data, media_type or given, filename)

    @property
    def size(self) -> int:
        """Length of :attr:`data` in bytes."""
        return len(self.data)

    @property
    def data_url(self) -> str:
        """The file as a ``data:`` URL with base64 data, as the APIs take it."""
        return _data_url(self.media_type, self.data)

    def __repr__(self) -> str:
        return f"File(media_type={self.media_type!r}, filename={self.filename!r}, size={self.size})"


Content = Image | Audio | File
"""A binary value a tool may return."""

CONTENT_TYPES = (Image, Audio, File)
"""The classes of :data:`Content`, for ``isinstance``."""

CONTENT_KINDS = ("image", "audio", "file")
"""The kinds of :data:`Content`, as a server profile names the ones it takes."""


def _data_url(media_type: str, data: bytes) -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"
