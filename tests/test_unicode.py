"""Lone surrogates are replaced so that text always encodes as UTF-8."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agcore_tools._unicode import scrub, scrub_json

TEXT = st.text(st.characters() | st.characters(categories=["Cs"]))


@given(TEXT)
def test_scrubbed_text_encodes_and_keeps_every_other_character(text: str) -> None:
    cleaned = scrub(text)
    cleaned.encode("utf-8")
    assert len(cleaned) == len(text)
    for before, after in zip(text, cleaned, strict=True):
        assert after == ("\ufffd" if 0xD800 <= ord(before) <= 0xDFFF else before)


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
