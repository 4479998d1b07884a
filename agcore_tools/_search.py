"""Local tool search: BM25 (the ``bm25s`` package) over tool names, descriptions and
parameter names, and the ``search_tools`` tool a :class:`~agcore_tools.ToolSearch` run
offers the model.

Words are lower-cased, names split at ``_``, ``-`` and camelCase, English stop words
dropped and the rest stemmed with the Snowball English stemmer (``PyStemmer``), so
"commits" finds ``git_commit``. Both packages are the optional ``search`` extra
(``pip install 'agcore-tools[search]'``), imported only when a search runs.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import re
from collections.abc import Callable, Sequence
from typing import Any

from .base import BaseTool, ToolContext
from .error import LlmConfigError

__all__ = ["SEARCH_TOOL_NAME", "SearchTool", "ToolIndex", "require_bm25s", "words"]

SEARCH_TOOL_NAME = "search_tools"

logger = logging.getLogger("agcore_tools.search")

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_WORD = re.compile(r"[a-z0-9]+")


def require_bm25s() -> None:
    """Raise :class:`LlmConfigError` when ``bm25s`` or ``PyStemmer`` (the ``search``
    extra) is missing."""
    missing = [name for name in ("bm25s", "Stemmer") if importlib.util.find_spec(name) is None]
    if missing:
        raise LlmConfigError(
            "ToolSearch ranks tools with the bm25s and PyStemmer packages; missing: "
            f"{', '.join(missing)}: pip install 'agcore-tools[search]'"
        )


def words(text: str) -> list[str]:
    """Lower-case words of ``text``, with ``snake_case``, ``kebab-case`` and
    ``camelCase`` names split apart.

    Example:
        >>> words("readFile: list_dir-entries, 2 URLs")
        ['read', 'file', 'list', 'dir', 'entries', '2', 'urls']
    """
    return _WORD.findall(_CAMEL.sub(" ", text).lower())


def _document(definition: dict[str, Any]) -> list[str]:
    function = definition.get("function", definition)
    parameters = function.get("parameters") or {}
    properties = parameters.get("properties") if isinstance(parameters, dict) else None
    names = " ".join(properties) if isinstance(properties, dict) else ""
    text = f"{function.get('name', '')} {function.get('description') or ''} {names}"
    return words(text)


class ToolIndex:
    """A BM25 index of tool definitions (Chat Completions form), built once.

    Example:
        >>> index = ToolIndex([
        ...     {"type": "function", "function": {"name": "get_time", "description": "Current time in a timezone."}},
        ...     {"type": "function", "function": {"name": "read_file", "description": "Read a file."}},
        ... ])
        >>> index.search("what time is it in Tokyo?", 5)
        ['get_time']
    """

    def __init__(self, definitions: Sequence[dict[str, Any]]) -> None:
        import bm25s
        import Stemmer
        from bm25s.stopwords import STOPWORDS_EN

        self._stop = frozenset(STOPWORDS_EN)
        self._stem = Stemmer.Stemmer("english").stemWords
        self._names = [str(d.get("function", d).get("name", "")) for d in definitions]
        corpus = [self._terms(_document(d)) for d in definitions]
        self._retriever = bm25s.BM25()
        if self._names:
            self._retriever.index(corpus, show_progress=False)

    def _terms(self, found: list[str]) -> list[str]:
        return list(self._stem([w for w in found if w not in self._stop]))

    def search(self, query: str, limit: int) -> list[str]:
        """Names of the tools matching ``query`` best, at most ``limit``, best first;
        a tool no query word matches is never returned."""
        terms = self._terms(words(query))
        if not terms or not self._names:
            return []
        k = min(limit, len(self._names))
        results = self._retriever.retrieve([terms], k=k, show_progress=False)
        found = zip(results.documents[0], results.scores[0], strict=True)
        return [self._names[int(doc)] for doc, score in found if score > 0]


class SearchTool(BaseTool):
    """The ``search_tools`` tool: finds tools by words and makes them callable.

    ``on_found`` receives the names found, and adds them to the tools the run offers
    from the next request on; ``candidates`` gives the definitions to search (those not
    offered yet), read at each call.
    """

    name = SEARCH_TOOL_NAME
    description = (
        "Find more tools. Only some tools are listed; describe the task in a few words "
        "and the best matching tools are returned and become callable from your next step."
    )
    parameters = {  # noqa: RUF012
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "Words describing the tool you need."}
        },
        "required": ["query"],
    }

    def __init__(
        self,
        candidates: Callable[[], list[dict[str, Any]]],
        on_found: Callable[[list[str]], None],
        limit: int,
    ) -> None:
        self._candidates = candidates
        self._on_found = on_found
        self._limit = limit
        self._index: tuple[tuple[str, ...], ToolIndex] | None = None

    async def _search(self, query: str) -> list[dict[str, Any]]:
        candidates = self._candidates()
        key = tuple(str(d["function"]["name"]) for d in candidates)
        if self._index is None or self._index[0] != key:
            # Indexing and ranking are CPU work: off the event loop.
            self._index = (key, await asyncio.to_thread(ToolIndex, candidates))
        index = self._index[1]
        names = await asyncio.to_thread(index.search, query, self._limit)
        # Fewer than the limit: fewer tools were left to offer, or no more of them
        # share a word with the query (a BM25 score of 0 is never returned).
        logger.debug(
            "search_tools(%r): %d of %d tools not offered yet matched (max_results=%d)",
            query,
            len(names),
            len(candidates),
            self._limit,
        )
        by_name = {d["function"]["name"]: d for d in candidates}
        return [by_name[name] for name in names]

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        """Search, record what was found, and describe it to the model."""
        query = args.get("query")
        if not isinstance(query, str) or not query.strip():
            return "Give a query: a few words describing the tool you need."
        found = await self._search(query)
        if not found:
            return f"No other tool matches {query!r}; try other words."
        self._on_found([d["function"]["name"] for d in found])
        lines = [
            f"- {d['function']['name']}: {d['function'].get('description') or ''}".rstrip()
            for d in found
        ]
        return "These tools can be called from your next step:\n" + "\n".join(lines)
