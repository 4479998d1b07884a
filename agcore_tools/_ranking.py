"""Ranking tools for a query: the pure part of tool search, with no loop or registry.

A tool is a document of weighted fields, because where a word appears says how much
it means: a word of the tool's own name says more than one of its fifth sentence.
BM25 (the ``bm25s`` package) scores fields one way only, so a field's weight is how
many times its words are repeated in the document:

========================== ======
field                      weight
========================== ======
the tool's name            3
the server's name          2
the description's first    2
sentence
the rest of the            1
description
parameter names and enum   1
values
========================== ======

A tool registered under a name that does not read as its own (an MCP tool named in
Chinese) has its own name noted in its description
(:func:`~agcore_tools._names.with_original_name`): that name is the one indexed, when the
tool's registered name is what it becomes (:func:`~agcore_tools._names.noted_name`). Names are split at ``_``, ``-``, ``.`` and camelCase;
English stop words are dropped and the rest stemmed (``PyStemmer``), so "commits" finds ``git_commit``. Letters of
any script make words, accents are folded ("loschen" finds "löschen"), and Chinese,
Japanese and Korean, written without spaces, are read as pairs of characters. Abbreviations
tool names and users use are expanded on both sides (:data:`ABBREVIATIONS`: "MR"
finds "merge request", "k8s" finds "kubernetes"). A query's references add what they
refer to (:data:`REFERENCES`: ``!482`` a merge request, ``ENG-12`` an issue).

An optional :class:`Embedder` (any callable from texts to vectors) adds a second,
semantic ranking; the two are fused by reciprocal rank fusion, which needs no score
calibration between them. Without one, the ranking is BM25's alone and works offline.
``bm25s``, ``PyStemmer`` and ``numpy`` (which ``bm25s`` needs) are the ``search``
extra, imported when an index is built.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Protocol

from ._names import fold_accents, noted_name, server_of
from .error import LlmConfigError

__all__ = [
    "ABBREVIATIONS",
    "REFERENCES",
    "Embedder",
    "ToolIndex",
    "fold_accents",
    "server_of",
    "summary",
    "words",
]

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z]{2,})")
_WORD = re.compile(r"[^\W_]+")  # letters and digits of any script; "_" splits
# Scripts written without spaces (Han, kana, Hangul): a run of them is read as its
# overlapping pairs of characters, as Lucene's CJK analyzer does, so that a query's
# "天气" finds a description's "查询天气".
_UNSPACED = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")
_UNSPACED_PARTS = re.compile(f"({_UNSPACED.pattern})")  # split, keeping the runs
_SENTENCE_END = re.compile(r"(?<=[.!?])\s|\n")

NAME_WEIGHT = 3
SERVER_WEIGHT = 2
SUMMARY_WEIGHT = 2
RRF_K = 20
"""Reciprocal rank fusion's constant (Cormack et al., 2009): a document's fused score
is the sum of ``1 / (RRF_K + rank)`` over the rankings. The paper's 60 flattens the
top of each ranking; on the sets tuned on, 10 to 30 found more tools than 60 for a
sentence encoder (recall@5 0.841 against 0.822 on the first set, 0.723 against 0.692
on dev) and no fewer for word vectors."""

ABBREVIATIONS: Mapping[str, tuple[str, ...]] = {
    "mr": ("merge", "request"),
    "mrs": ("merge", "request"),
    "pr": ("pull", "request"),
    "prs": ("pull", "request"),
    "k8s": ("kubernetes",),
    "kube": ("kubernetes",),
    "repo": ("repository",),
    "repos": ("repository",),
    "db": ("database",),
    "dbs": ("database",),
    "msg": ("message",),
    "dir": ("directory",),
    "dirs": ("directory",),
    "env": ("environment",),
    "envs": ("environment",),
    "config": ("configuration",),
    "doc": ("document",),
    "docs": ("document",),
    "img": ("image",),
    "pic": ("image",),
    "info": ("information",),
    "pg": ("postgres",),
    "postgresql": ("postgres",),
    "mongo": ("mongodb",),
    "gh": ("github",),
    "tz": ("timezone",),
    "xlsx": ("excel", "spreadsheet"),
    "xls": ("excel", "spreadsheet"),
    "docx": ("word", "document"),
    "pptx": ("powerpoint", "presentation"),
    "ppt": ("powerpoint", "presentation"),
    "url": ("link",),
    "urls": ("link",),
    "cpu": ("processor",),
    "ns": ("namespace",),
    "svc": ("service",),
    "deploy": ("deployment",),
    "auth": ("authentication",),
    "perms": ("permission",),
    "ts": ("timestamp",),
    "num": ("number",),
    "stats": ("statistics",),
    "ci": ("pipeline",),
}
"""Abbreviations and what they stand for; both sides of a search are expanded."""

SYNONYMS: tuple[tuple[str, ...], ...] = (
    ("read", "open", "show", "view", "display", "see"),
    ("edit", "modify", "change", "replace", "update", "alter", "rename"),
    ("delete", "remove", "erase", "drop", "purge"),
    ("create", "make", "new", "add", "insert"),
    ("directory", "folder"),
    ("image", "picture", "photo", "screenshot", "png", "jpg", "jpeg"),
    ("fetch", "download", "retrieve", "grab", "scrape"),
    ("search", "find", "lookup", "look", "query", "locate"),
    ("diff", "compare", "difference", "differences", "changed"),
    ("log", "logs", "history"),
    ("issue", "ticket", "bug", "incident"),
    ("calculate", "compute", "evaluate", "arithmetic", "math"),
    ("spreadsheet", "sheet", "workbook"),
    ("message", "chat", "post", "dm"),
    ("user", "person", "people", "member", "teammate", "colleague"),
    ("run", "execute", "launch", "start", "trigger"),
    ("stop", "kill", "terminate", "cancel", "abort", "halt"),
    ("list", "enumerate", "all"),
    ("size", "big", "large", "bytes"),
    ("approve", "approval", "approved", "signed", "sign"),
    ("error", "errors", "exception", "exceptions", "crash", "crashes", "failure"),
    ("deploy", "deployment", "release", "rollout", "ship"),
    ("schedule", "calendar", "meeting", "event"),
)
"""Words that name the same action or thing in tool descriptions and in requests: a
word of a group also adds the group's first word (its canonical form)."""
_CANONICAL = {word: group[0] for group in SYNONYMS for word in group[1:]}

REFERENCES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(?<![\w!])![0-9]+\b"), "merge request"),
    (re.compile(r"(?<![\w#])#[a-z][\w-]*"), "channel"),
    (re.compile(r"\b[A-Z][A-Z0-9]{1,9}-[0-9]+\b"), "issue"),
    (
        re.compile(
            r"(?<![\w:/.])(?:~|\.{1,2})?/[\w.-]+(?:/[\w.-]+)+"
            # From the start of a run of word characters and hyphens only: tried from
            # each word of "a-b-c-...", a long run took time quadratic in its length.
            r"|(?<![\w-])-*\w[\w-]*\.(?:txt|md|log|json|yaml|yml|csv|py|ts|js|toml|ini|pdf)\b"
        ),
        "file",
    ),
    (re.compile(r"\bhttps?://"), "url web page"),
)
"""How people refer to things in a request, and what the reference is: GitLab's
``!482`` is a merge request, ``#incidents`` a channel, ``ENG-2210`` an issue key,
``~/notes/todo.txt`` a file (a URL's path is not one), ``https://`` a web page. A
query that holds one also searches for the word, since the tool that acts on it names
the thing, not the reference."""


class Embedder(Protocol):
    """Turns texts into vectors, for the semantic half of a hybrid search.

    Any callable of this shape works, a local model's encode method for one; it runs
    in a worker thread, so it may block. Vectors need not be normalized.

    Example:
        >>> def letters(texts):  # a toy: counts of a, b and c
        ...     return [[t.count("a"), t.count("b"), t.count("c")] for t in texts]
        >>> letters(["abc", "cc"])
        [[1, 1, 1], [0, 0, 2]]
    """

    def __call__(self, texts: Sequence[str], /) -> Sequence[Sequence[float]]: ...


def words(text: str) -> list[str]:
    """Lower-case words of ``text``, with ``snake_case``, ``kebab-case``, dotted and
    ``camelCase`` names split apart. Accents are folded ("función" is "funcion"), and
    Chinese, Japanese and Korean, written without spaces, are read as pairs of
    characters.

    Example:
        >>> words("readFile: list_dir-entries, 2 URLs, HTTPServer")
        ['read', 'file', 'list', 'dir', 'entries', '2', 'urls', 'http', 'server']
        >>> words("Öffnet la función: 查询天气")
        ['offnet', 'la', 'funcion', '查询', '询天', '天气']
    """
    lowered = _CAMEL.sub(" ", text).lower()
    if lowered.isascii():
        return _WORD.findall(lowered)
    found: list[str] = []
    for word in _WORD.findall(fold_accents(lowered)):
        for part in _UNSPACED_PARTS.split(word):
            if len(part) > 1 and _UNSPACED.fullmatch(part):
                found.extend(part[i : i + 2] for i in range(len(part) - 1))
            elif part:
                found.append(part)
    return found


def summary(description: str, limit: int = 120) -> str:
    """The first sentence of a description, at most ``limit`` characters.

    Example:
        >>> summary("Read a file. Paths are relative to the root.")
        'Read a file.'
        >>> summary("x" * 200, 10)
        'xxxxxxxxx…'
    """
    first = _SENTENCE_END.split(description.strip(), maxsplit=1)[0].strip()
    return first if len(first) <= limit else first[: limit - 1] + "…"


def _query_words(query: str) -> list[str]:
    """The query's words, and the words of what it refers to (:data:`REFERENCES`).

    Example:
        >>> _query_words("Has anyone approved !482?")
        ['has', 'anyone', 'approved', '482', 'merge', 'request']
        >>> _query_words("summarize https://acme.io/blog/42")[-4:]
        ['42', 'url', 'web', 'page']
    """
    found = words(query)
    for pattern, meaning in REFERENCES:
        if pattern.search(query):
            found += meaning.split()
    return found


def _expand(found: list[str]) -> list[str]:
    out: list[str] = []
    for word in found:
        out.append(word)
        out.extend(ABBREVIATIONS.get(word, ()))
        canonical = _CANONICAL.get(word)
        if canonical is not None:
            out.append(canonical)
    return out


def _fields(definition: Mapping[str, Any]) -> list[str]:
    """The document's words, each field repeated by its weight."""
    function = definition.get("function", definition)
    name = str(function.get("name", ""))
    server = server_of(name)
    original, description = noted_name(name, str(function.get("description") or "").strip())
    tool = original if original is not None else name[len(server) + 2 :] if server else name
    first = _SENTENCE_END.split(description, maxsplit=1)[0]
    remainder = description[len(first) :]
    found = words(tool) * NAME_WEIGHT + words(server) * SERVER_WEIGHT
    found += words(first) * SUMMARY_WEIGHT + words(remainder)
    found += _parameter_words(function.get("parameters"))
    return _expand(found)


def _parameter_words(schema: Any) -> list[str]:
    if not isinstance(schema, Mapping):
        return []
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return []
    found: list[str] = []
    for key, spec in properties.items():
        found += words(str(key))
        if isinstance(spec, Mapping) and isinstance(spec.get("enum"), list):
            found += words(" ".join(str(value) for value in spec["enum"]))
    return found


EMBEDDED_DESCRIPTION = 300
"""How many characters of a tool's description an embedder reads. Small sentence
encoders average over every token, so a long description's usage notes drown what the
tool does. On the sets tuned on, all-MiniLM-L6-v2 fused with BM25 found more tools
with the first 300 characters and the server's name than with the whole description:
recall@5 0.804 against 0.757 on the first set, 0.677 against 0.662 on dev."""


def _text(definition: Mapping[str, Any]) -> str:
    """What an embedder reads of a tool: its server and its name, split, then the start
    of its description.

    Example:
        >>> _text({"name": "gitlab__get_mr", "description": "Get one merge request."})
        'gitlab get mr. Get one merge request.'
    """
    function = definition.get("function", definition)
    name = str(function.get("name", ""))
    description = str(function.get("description") or "").strip()
    return f"{' '.join(words(name))}. {description[:EMBEDDED_DESCRIPTION]}"


class ToolIndex:
    """A ranking of tool definitions (Chat Completions form) for queries, built once.

    With an ``embedder``, the tools' texts are embedded here and each query once per
    search; the BM25 and cosine rankings are fused (see the module docs). An embedder
    that raises, or returns vectors other than one per text, all of one size, of finite
    numbers and not empty, raises :class:`LlmConfigError` (here or in :meth:`search`).

    Example:
        >>> index = ToolIndex([
        ...     {"type": "function", "function": {"name": "get_time", "description": "Current time in a timezone."}},
        ...     {"type": "function", "function": {"name": "read_file", "description": "Read a file."}},
        ... ])
        >>> index.search("what time is it in Tokyo?", 5)
        ['get_time']
    """

    def __init__(
        self, definitions: Sequence[Mapping[str, Any]], embedder: Embedder | None = None
    ) -> None:
        first_import = "bm25s" not in sys.modules
        import bm25s
        import numpy
        import Stemmer
        from bm25s.stopwords import STOPWORDS_EN

        if first_import and logging.getLogger("bm25s").level == logging.DEBUG:
            # bm25s sets its own logger to DEBUG when imported: an app logging at
            # WARNING printed "Building index from tokens" at every search's index.
            logging.getLogger("bm25s").setLevel(logging.NOTSET)

        self._np = numpy
        self._stop = frozenset(STOPWORDS_EN)
        self._stem = Stemmer.Stemmer("english").stemWords
        self.names = [str(d.get("function", d).get("name", "")) for d in definitions]
        """The tools' names, in the order given."""
        corpus = [self._terms(_fields(d)) for d in definitions]
        self._named: dict[str, list[int]] = {}
        for i, (name, definition) in enumerate(zip(self.names, definitions, strict=True)):
            server = server_of(name)
            keys = {_name_key(name), _name_key(name[len(server) + 2 :] if server else name)}
            function = definition.get("function", definition)
            original, _ = noted_name(name, str(function.get("description") or "").strip())
            if original is not None and words(original):
                keys.add(_name_key(original))
            for key in keys:
                self._named.setdefault(key, []).append(i)
        self._retriever = bm25s.BM25()
        if self.names:
            self._retriever.index(corpus, show_progress=False)
        self._embedder = embedder
        self._vectors: Any = None
        if embedder is not None and self.names:
            texts = [_text(d) for d in definitions]
            self._vectors = _unit_rows(numpy, _embedded(embedder, texts), len(texts))

    def _terms(self, found: list[str]) -> list[str]:
        return list(self._stem([w for w in found if w not in self._stop]))

    def search(
        self,
        query: str,
        limit: int,
        *,
        server: str | None = None,
        exclude: Collection[str] = (),
    ) -> list[str]:
        """Names of the tools matching ``query`` best, at most ``limit``, best first.

        Without an embedder, a tool no query word matches is never returned. With
        ``server``, only that server's tools (``server__tool`` names) are; the tools
        named in ``exclude`` never are.
        """
        if not self.names or limit < 1:
            return []
        allowed = None
        if server is not None or exclude:
            allowed = {
                i
                for i, name in enumerate(self.names)
                if (server is None or server_of(name) == server) and name not in exclude
            }
        # A query that is a tool's name (a model asking for a tool it knows) finds it
        # first: tools sharing the name's words and a longer description outscored it.
        named = [
            i for i in self._named.get(_name_key(query), ()) if allowed is None or i in allowed
        ]
        if self._vectors is None or self._embedder is None:
            ranked = self._bm25(query, allowed, None if named else limit)
        else:
            ranked = _fuse([self._bm25(query, allowed, None), self._semantic(query, allowed)])
        if named:
            ranked = named + [i for i in ranked if i not in named]
        return [self.names[i] for i in ranked[:limit]]

    def named(self, query: str) -> list[str]:
        """The tools whose name ``query`` is (with or without its server's prefix, or as
        the server named it), in the order given: those :meth:`search` puts first.

        Example:
            >>> index = ToolIndex([{"type": "function", "function": {"name": "fs__read_file"}}])
            >>> index.named("read file"), index.named("read")
            (['fs__read_file'], [])
        """
        return [self.names[i] for i in self._named.get(_name_key(query), ())]

    def _bm25(self, query: str, allowed: set[int] | None, limit: int | None) -> list[int]:
        terms = self._terms(_expand(_query_words(query)))
        if not terms:
            return []
        scores = self._retriever.get_scores(terms)
        matched = self._np.flatnonzero(scores > 0)  # a handful of the tools, as a rule
        order = matched[self._np.argsort(-scores[matched], kind="stable")]
        found = [int(i) for i in order if allowed is None or int(i) in allowed]
        return found if limit is None else found[:limit]

    def _semantic(self, query: str, allowed: set[int] | None) -> list[int]:
        assert self._embedder is not None
        vector = _unit_rows(self._np, _embedded(self._embedder, [query]), 1)[0]
        if vector.shape[0] != self._vectors.shape[1]:
            raise LlmConfigError(
                f"the tool search's embedder returned a vector of {vector.shape[0]} numbers "
                f"for the query and of {self._vectors.shape[1]} for the tools; it must "
                "return vectors of one size (one model for both)"
            )
        scores = self._vectors @ vector
        order = self._np.argsort(-scores, kind="stable")
        return [int(i) for i in order if allowed is None or int(i) in allowed]


def _name_key(text: str) -> str:
    """A name's words, joined: ``get_merge_request``, ``getMergeRequest`` and "get merge
    request" are one key.

    Example:
        >>> _name_key("getMergeRequest") == _name_key(" get merge-request ")
        True
    """
    return " ".join(words(text))


def _embedded(embedder: Embedder, texts: Sequence[str]) -> Sequence[Sequence[float]]:
    try:
        return embedder(texts)
    except Exception as exc:
        # An embedder's failure is a configuration to fix, not a model's to work around.
        raise LlmConfigError(
            f"the tool search's embedder failed on {len(texts)} texts: {type(exc).__name__}: {exc}"
        ) from exc


def _unit_rows(numpy: Any, vectors: Sequence[Sequence[float]], count: int) -> Any:
    """The embedder's vectors as rows of length 1; it must give ``count`` of one size."""
    try:
        matrix = numpy.asarray(vectors, dtype=numpy.float32)
    except (TypeError, ValueError) as exc:
        raise LlmConfigError(f"the tool search's embedder returned no vectors: {exc}") from exc
    if matrix.ndim != 2 or matrix.shape[0] != count:
        raise LlmConfigError(
            f"the tool search's embedder returned an array of shape {matrix.shape} for "
            f"{count} texts; it must return one vector per text"
        )
    # Neither has a direction: every cosine would be NaN or 0, and the fused ranking
    # would then rank tools by nothing, with no word of why.
    if matrix.shape[1] == 0:
        raise LlmConfigError(
            f"the tool search's embedder returned empty vectors for {count} texts; it "
            "must return at least one number per text"
        )
    if not numpy.isfinite(matrix).all():
        raise LlmConfigError(
            f"the tool search's embedder returned NaN or infinite numbers for {count} "
            "texts; it must return finite ones"
        )
    norms = numpy.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / numpy.where(norms == 0, 1, norms)


def _fuse(rankings: Sequence[Sequence[int]]) -> list[int]:
    """Reciprocal rank fusion of rankings (best first), best first.

    Example:
        >>> _fuse([[1, 2, 3], [3, 1]])
        [1, 3, 2]
    """
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (RRF_K + rank)
    return sorted(scores, key=lambda item: -scores[item])
