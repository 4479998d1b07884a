"""Lone surrogates are replaced so that text always encodes as UTF-8."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agcore_tools._unicode import scrub, scrub_json

TEXT = st.text(st.characters() | st.characters(categories=["Cs"]))


def _expected(text: str) -> str:
    # A high surrogate then a low one spell one character; any other surrogate is lone.
    out: list[str] = []
    i = 0
    while i < len(text):
        code = ord(text[i])
        if 0xD800 <= code <= 0xDBFF and i + 1 < len(text) and 0xDC00 <= ord(text[i + 1]) <= 0xDFFF:
            out.append(chr(0x10000 + ((code - 0xD800) << 10) + ord(text[i + 1]) - 0xDC00))
            i += 2
            continue
        out.append("\ufffd" if 0xD800 <= code <= 0xDFFF else text[i])
        i += 1
    return "".join(out)


@given(TEXT)
def test_scrubbed_text_encodes_and_keeps_every_other_character(text: str) -> None:
    cleaned = scrub(text)
    cleaned.encode("utf-8")
    assert cleaned == _expected(text)


def test_a_surrogate_pair_split_across_pieces_is_joined_once_they_are() -> None:
    # A stream that split the escapes of one character across chunks: each half alone
    # became a U+FFFD.
    assert scrub("thumbs \ud83d" + "\udc4d up") == "thumbs \U0001f44d up"
    assert scrub("\udc4d\ud83d") == "\ufffd\ufffd"  # the wrong order pairs nothing


def test_clean_text_is_returned_as_it_is() -> None:
    for text in ("plain", "北京 🌧", ""):
        assert scrub(text) is text


def test_scrub_json_cleans_keys_and_values_and_copies_only_what_changed() -> None:
    clean = {"role": "assistant", "tool_calls": [{"id": "c1"}]}
    assert scrub_json(clean) is clean
    dirty = {"content": "a\ud800", "tool_calls": [{"id": "c\udc00"}, {"id": "ok"}], "k\udfff": 1}
    cleaned = scrub_json(dirty)
    assert cleaned == {
        "content": "a\ufffd",
        "tool_calls": [{"id": "c\ufffd"}, {"id": "ok"}],
        "k\ufffd": 1,
    }
    assert cleaned["tool_calls"][1] is dirty["tool_calls"][1]
    assert dirty["content"] == "a\ud800"  # the input is not changed
    assert scrub_json(None) is None and scrub_json(3) == 3
