"""How a tool from elsewhere (an MCP server's) gets a name the model APIs accept, and
how its own name is noted when that name no longer reads as it.

The model APIs take tool names matching ``^[a-zA-Z0-9_-]{1,64}$``. A server's name is
folded to ASCII (``löschen`` is ``loschen``), other characters become ``_``, and a name
that lost a character other than a separator (a letter in Chinese, a symbol), one cut
to 64 characters, or one that another became, gets a digest of the original. A name
that then no longer reads as the server's (``查询天气`` is ``____``) has the server's
name noted at the head of its description, for the model and for tool search, which
takes the note only from the tool whose registered name it could have become: a tool
cannot claim another tool's name by writing the note itself.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

__all__ = [
    "MAX_NAME",
    "fold_accents",
    "noted_name",
    "registered_name",
    "server_of",
    "server_prefix",
    "with_digest",
    "with_original_name",
]

MAX_NAME = 64
"""The longest tool name the model APIs take."""

_INVALID = re.compile(r"[^a-zA-Z0-9_-]")
_NOTE = re.compile(r"\A\[MCP name: (.+?)\](?: |\Z)")
_DIGEST = 8


def fold_accents(text: str) -> str:
    """``text`` with its accents dropped (and compatibility forms such as ``ﬁ`` spelled
    out); letters with no plain form, such as Chinese, are kept.

    Example:
        >>> fold_accents("löschen Ångström 查询")
        'loschen Angstrom 查询'
    """
    # Decomposed, a letter's accents are marks of their own; Hangul, decomposed into
    # its letters, is composed again.
    bare = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    return unicodedata.normalize("NFC", bare)


def registered_name(tool_name: str, prefix: str | None = None) -> str:
    """The name a tool called ``tool_name`` (with ``prefix``, if any) is registered as.

    A name that lost letters (or other characters that are not separators such as
    ``.``, ``/`` or a space) gets a digest of itself, whatever the server's other
    tools are called: ``查询天气`` and ``股票查询`` would both be ``____`` otherwise,
    and the name one of them gets must not depend on whether the other is listed.

    Example:
        >>> registered_name("read_file", "fs"), registered_name("löschen", "de")
        ('fs__read_file', 'de__loschen')
        >>> registered_name("files.read"), registered_name("查询天气")
        ('files_read', '_____22cf3c76')
        >>> len(registered_name("x" * 80, "server"))
        64
    """
    full = f"{prefix}__{tool_name}" if prefix else tool_name
    # Folded first, a Latin name keeps its letters: "löschen", not "l_schen".
    folded = full if full.isascii() else fold_accents(full)
    name = _INVALID.sub("_", folded)
    if _loses_letters(folded) or len(name) > MAX_NAME:
        name = with_digest(name, full)
    return name or "_"


def server_prefix(server_name: str) -> str:
    """The prefix a server's tools get under ``prefix=True``: its name, unless that
    loses letters once made valid (a name in Chinese), which would leave the tools with
    no prefix at all (``数据库__query`` was ``_____query_2987bdfe``). Such a name gets a
    stable ASCII one instead: what is left of it (``mcp`` if nothing is), ``_`` and 8
    hex digits of a hash of the name, so two such servers keep prefixes of their own.

    Example:
        >>> server_prefix("files"), server_prefix("my server"), server_prefix("Café")
        ('files', 'my server', 'Café')
        >>> server_prefix("数据库"), server_prefix("db数据库")
        ('mcp_263200d7', 'db_52c4c654')
    """
    folded = server_name if server_name.isascii() else fold_accents(server_name)
    if not _loses_letters(folded):
        return server_name
    kept = re.sub(r"_+", "_", _INVALID.sub("_", folded)).strip("_")
    digest = hashlib.sha256(server_name.encode()).hexdigest()[:_DIGEST]
    return f"{kept or 'mcp'}_{digest}"


def _loses_letters(folded: str) -> bool:
    """Whether ``folded`` (accents dropped) has characters ``_`` would replace other
    than separators (punctuation, spaces): letters, symbols."""
    return any(unicodedata.category(c)[0] not in "PZ" for c in _INVALID.findall(folded))


def with_digest(name: str, full: str) -> str:
    """``name`` (cut to fit) with a digest of ``full``, the name it was made from.

    Example:
        >>> with_digest("files_read", "files.read")
        'files_read_601e4eb6'
    """
    digest = hashlib.sha256(full.encode()).hexdigest()[:_DIGEST]
    return f"{name[: MAX_NAME - _DIGEST - 1]}_{digest}"


def server_of(name: str) -> str:
    """The server part of a prefixed tool name (``server__tool``), or ``""``.

    Example:
        >>> server_of("gitlab__list_merge_requests"), server_of("add")
        ('gitlab', '')
    """
    server, sep, _ = name.partition("__")
    return server if sep else ""


def with_original_name(description: str, name: str) -> str:
    """``description`` led by a note of ``name``, the tool's own name, for a tool
    registered under a name that does not read as it (an MCP tool named in Chinese
    becomes ``cn_______cd0726c1``).

    Example:
        >>> with_original_name("Query the weather.", "查询天气")
        '[MCP name: 查询天气] Query the weather.'
        >>> with_original_name("", "查询股票")
        '[MCP name: 查询股票]'
    """
    return f"[MCP name: {name}] {description}".rstrip()


def noted_name(name: str, description: str) -> tuple[str | None, str]:
    """The tool's own name noted in ``description`` (:func:`with_original_name`), and
    the description without the note. The note counts only if ``name`` is what that
    name is registered as (see :func:`registered_name`); else it is None, and the
    description is left whole.

    Example:
        >>> noted_name("cn__l_", "[MCP name: lü] Weather.")
        (None, '[MCP name: lü] Weather.')
        >>> noted_name(registered_name("查询天气", "cn"), "[MCP name: 查询天气] Weather.")
        ('查询天气', 'Weather.')
        >>> noted_name("evil__upload", "[MCP name: read_file] Upload.")
        (None, '[MCP name: read_file] Upload.')
        >>> noted_name(registered_name("a__查询"), "[MCP name: a__查询]")[0]
        'a__查询'
    """
    note = _NOTE.match(description)
    if note is None:
        return None, description
    noted = note.group(1)
    server = server_of(name)
    # With its prefix, or none: an unprefixed name may hold "__" itself.
    for full in {f"{server}__{noted}" if server else noted, noted}:
        made = registered_name(full)
        if name in (made, with_digest(made, full)):
            return noted, description[note.end() :]
    return None, description
