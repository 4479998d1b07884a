"""Reading a function's docstring: its description, and what it says of each parameter.

Why: a tool's description and its parameters' descriptions are what the model reads to
choose and fill a call, and people write them in the docstring in one of three styles.
Google's (``Args:``), NumPy's (``Parameters`` over a line of dashes) and Sphinx's
(``:param name: text``, or epydoc's ``@param``) are all read; a docstring in none of
them is all description.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass

__all__ = ["Docstring", "parse_docstring"]

_ARG_SECTIONS = {"args", "arguments", "parameters", "params", "keyword args", "keyword arguments"}
_OTHER_SECTIONS = {
    "returns",
    "return",
    "yields",
    "raises",
    "example",
    "examples",
    "note",
    "notes",
    "attributes",
    "see also",
    "warning",
    "warnings",
    "todo",
}
_SECTION_RE = re.compile(r"^\s*([A-Za-z][A-Za-z ]*):\s*$")
# One name, or several sharing an entry ("x, y (float): ...").
_NAMES = r"(\*{0,2}[A-Za-z_][A-Za-z0-9_]*(?:\s*,\s*\*{0,2}[A-Za-z_][A-Za-z0-9_]*)*)"
# The type may hold parentheses of its own, one level deep: "point (tuple(int, int)):".
_ARG_RE = re.compile(rf"^\s*{_NAMES}\s*(?:\((?:[^()]|\([^()]*\))*\))?\s*:\s*(.*)$")


def _names(group: str) -> list[str]:
    return [name.strip().lstrip("*") for name in group.split(",")]


@dataclass(frozen=True)
class Docstring:
    """What a docstring says about a function.

    Example:
        >>> Docstring("Add two numbers.", {"a": "The first."}).params["a"]
        'The first.'
    """

    description: str
    """The text before the first section (or field), paragraphs kept."""
    params: dict[str, str]
    """Parameter name to its description (``Args:``, ``Parameters`` or ``:param:``)."""


def _google(lines: list[str]) -> Docstring:
    description: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: list[str] = []
    arg_indent: int | None = None
    after_blank = False
    for line in lines:
        header = _SECTION_RE.match(line)
        if header and header.group(1).strip().lower() in _ARG_SECTIONS | _OTHER_SECTIONS:
            section = header.group(1).strip().lower()
            current, arg_indent, after_blank = [], None, False
            continue
        if section is None:
            description.append(line)
        elif section in _ARG_SECTIONS:
            if not line.strip():
                after_blank = True
                continue
            indent = len(line) - len(line.lstrip())
            match = _ARG_RE.match(line)
            if match and (arg_indent is None or indent <= arg_indent):
                arg_indent = indent
                current = _names(match.group(1))
                for name in current:
                    params[name] = match.group(2).strip()
            elif after_blank and (arg_indent is None or indent <= arg_indent):
                current = []  # after a blank line, text no deeper than an entry is none's
            else:  # a continuation, a paragraph of its own included (indented deeper)
                for name in current:
                    params[name] = f"{params[name]} {line.strip()}".strip()
            after_blank = False
    return Docstring(_paragraphs(description), params)


def parse_docstring(doc: str | None) -> Docstring:
    """Split a docstring into its description and its parameters' entries, in Google's,
    NumPy's or Sphinx's style.

    Example:
        >>> parse_docstring('''Forecast for a city.
        ...
        ... :param city: The city name.
        ... :type city: str
        ... :returns: The forecast.
        ... ''')
        Docstring(description='Forecast for a city.', params={'city': 'The city name.'})
    """
    if not doc:
        return Docstring("", {})
    lines = inspect.cleandoc(doc).splitlines()
    if any(_SPHINX_RE.match(line) for line in lines):
        return _sphinx(lines)
    if any(_is_numpy_header(lines, i) for i in range(len(lines) - 1)):
        return _numpy(lines)
    return _google(lines)


_SPHINX_RE = re.compile(r"^\s*[:@](param|parameter|arg|argument|key|keyword)\b")
_SPHINX_FIELD_RE = re.compile(r"^\s*[:@]([A-Za-z]+)\b([^:]*):\s?(.*)$")


def _sphinx(lines: list[str]) -> Docstring:
    description: list[str] = []
    params: dict[str, str] = {}
    current: str | None = None
    in_fields = False
    for line in lines:
        field = _SPHINX_FIELD_RE.match(line)
        if field:
            in_fields = True
            kind, subject, text = field.group(1).lower(), field.group(2).split(), field.group(3)
            is_param = kind in {"param", "parameter", "arg", "argument", "key", "keyword"}
            # ":param str city: text" names the type before the name: the name is last.
            current = subject[-1].lstrip("*") if is_param and subject else None
            if current is not None:
                params[current] = text.strip()
        elif not in_fields:
            description.append(line)
        elif current is not None and line.strip():
            params[current] = f"{params[current]} {line.strip()}".strip()
    return Docstring(_paragraphs(description), params)


_NUMPY_PARAMS = {"parameters", "other parameters", "keyword arguments", "params", "args"}
_NUMPY_ENTRY_RE = re.compile(rf"^{_NAMES}\s*(?::.*)?$")


_NUMPY_SECTIONS = _NUMPY_PARAMS | {
    "returns", "yields", "receives", "raises", "warns", "warnings", "see also", "notes",
    "references", "examples", "attributes", "methods",
}  # fmt: skip


def _is_numpy_header(lines: list[str], i: int) -> bool:
    # A section's name over a line of dashes; a rule under other text is text.
    underline = lines[i + 1].strip()
    return (
        lines[i].strip().lower() in _NUMPY_SECTIONS
        and len(underline) >= 3
        and set(underline) == {"-"}
    )


def _numpy(lines: list[str]) -> Docstring:
    description: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: list[str] = []
    skip = False
    for i, line in enumerate(lines):
        if skip:  # the header's line of dashes
            skip = False
            continue
        if i + 1 < len(lines) and _is_numpy_header(lines, i):
            section, current, skip = lines[i].strip().lower(), [], True
            continue
        if section is None:
            description.append(line)
        elif section in _NUMPY_PARAMS and line.strip():
            entry = _NUMPY_ENTRY_RE.match(line) if not line[0].isspace() else None
            if entry:
                current = _names(entry.group(1))
                params.update(dict.fromkeys(current, ""))
            else:
                for name in current:
                    params[name] = f"{params[name]} {line.strip()}".strip()
    return Docstring(_paragraphs(description), params)


def _paragraphs(lines: list[str]) -> str:
    # Rejoin wrapped lines inside paragraphs; keep paragraph breaks, and the line
    # breaks before list items, table rows and doctest prompts, which the model reads
    # as structure ("- a - b" reads as one run-on sentence).
    text = "\n".join(lines).strip()
    return "\n\n".join(_paragraph(p) for p in re.split(r"\n\s*\n", text) if p.strip())


_ITEM = re.compile(r"\s*(?:[-*+\u2022]|\d{1,3}[.)])\s")
_ENDS_LINE = (":", ".", "!", "?", ";")


def _paragraph(text: str) -> str:
    # A list item or table row starts a line where one can start (the paragraph's
    # first line, after a colon or a sentence, after another item or row, or in a run
    # of two or more such lines), so prose wrapped before a lone "+" or "1." still
    # joins; an example keeps every line from its first ">>>" to the paragraph's end
    # (its "..." lines and its output).
    lines = [line for line in text.splitlines() if line.strip()]
    items = [bool(_ITEM.match(line)) for line in lines]
    rows = [line.lstrip().startswith("|") for line in lines]
    kept: list[str] = []
    example = in_list = False
    for at, line in enumerate(lines):
        words = " ".join(line.split())
        example = example or words.startswith(">>>")
        after = kept[-1] if kept else ""
        if example:
            kept.append(words)
        elif items[at] and (
            not kept or in_list or after.endswith(_ENDS_LINE) or _in_run(items, at)
        ):
            kept.append(words)
            in_list = True
        elif rows[at] and (
            not kept or after.startswith("|") or after.endswith(":") or _in_run(rows, at)
        ):
            kept.append(words)
        elif kept:
            kept[-1] = f"{after} {words}"
        else:
            kept.append(words)
    return "\n".join(kept)


def _in_run(marks: list[bool], at: int) -> bool:
    """Whether line ``at`` is marked and so is the line before or after it."""
    return marks[at] and ((at > 0 and marks[at - 1]) or (at + 1 < len(marks) and marks[at + 1]))
