"""The local BM25 tool index and the words it ranks on."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from typing import Any

import pytest

from agcore_tools import CycleConfig, LlmCycle, ToolContext, ToolRegistry, ToolSearch
from agcore_tools._ranking import ToolIndex, words
from agcore_tools._search import LoadTool, SearchTool
from agcore_tools.testing import ScriptedChatServer as S
from agcore_tools.testing import StaticTool


def _definition(name: str, description: str, *params: str) -> dict[str, Any]:
    properties = {p: {"type": "string"} for p in params}
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties},
        },
    }


TOOLS = [
    _definition("get_current_time", "Get the current time in a timezone.", "timezone"),
    _definition("readTextFile", "Read the complete contents of a file.", "path"),
    _definition("git_commit", "Record changes to the repository.", "repo_path", "message"),
    _definition("fetch", "Fetch a URL from the internet and return it as markdown.", "url"),
]


def test_words_split_names_in_every_case_style():
    assert words("readTextFile git_commit repo-path HTTPServer") == [
        "read", "text", "file", "git", "commit", "repo", "path", "http", "server",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("query", "best"),
    [
        ("what time is it in Tokyo", "get_current_time"),
        ("open the file and show its contents", "readTextFile"),
        ("commit my changes", "git_commit"),
        ("download this web page url", "fetch"),
        ("which repo_path", "git_commit"),  # parameter names are searched too
    ],
)
def test_the_best_match_comes_first(query, best):
    assert ToolIndex(TOOLS).search(query, 5)[0] == best


def test_only_tools_a_query_word_matches_are_returned_at_most_limit():
    index = ToolIndex(TOOLS)

    assert index.search("file", 5) == ["readTextFile"]
    assert len(index.search("the current contents of a file from a url", 2)) == 2
    assert index.search("zebra", 5) == []
    assert index.search("the a of", 5) == []  # stop words only


def test_an_empty_index_finds_nothing():
    assert ToolIndex([]).search("anything", 5) == []


def test_words_are_stemmed_so_other_forms_match():
    index = ToolIndex(TOOLS)

    assert index.search("commits", 1) == ["git_commit"]
    assert index.search("recording", 1) == ["git_commit"]


@pytest.mark.parametrize("package", ["bm25s", "Stemmer"])
def test_without_the_search_extra_opting_in_says_what_to_install(monkeypatch, package):
    import sys

    from agcore_tools import LlmConfigError, ToolSearch

    monkeypatch.setitem(sys.modules, package, None)  # as if not installed

    with pytest.raises(
        LlmConfigError, match=rf"missing: {package}: pip install 'agcore-tools\[search\]'"
    ):
        ToolSearch()


async def test_a_search_logs_how_many_candidates_matched_at_debug(caplog):
    # Fewer than max_results come back when fewer tools share a word with the query;
    # the DEBUG line says how many matched out of how many (issue 24 §7).
    found: list[list[str]] = []
    search = SearchTool(list(TOOLS), set, found.append, 5)

    with caplog.at_level("DEBUG", logger="agcore_tools.search"):
        text = await search.execute({"query": "read a file"}, ToolContext())

    assert found == [["readTextFile"]] and "readTextFile" in text
    [record] = [r for r in caplog.records if r.name == "agcore_tools.search"]
    assert record.levelname == "DEBUG"
    assert record.getMessage() == (
        "search_tools('read a file'): 1 of 4 tools not offered yet matched (max_results=5)"
    )


async def test_a_slow_embedder_is_run_once_for_searches_that_time_out_waiting_for_it():
    # The index was built inside the search, so a slow embedder made each search time
    # out, and each retry (or each run) started another full pass in one more thread.
    release, started = threading.Event(), threading.Event()
    passes: list[int] = []

    def slow(texts: list[str]) -> list[list[float]]:
        if len(texts) > 1:  # the tools, not a query
            passes.append(len(texts))
            started.set()
            assert release.wait(10)
        return [[1.0, float(len(text) % 3)] for text in texts]

    def run_search() -> SearchTool:
        return SearchTool(list(TOOLS), set, lambda names: None, 5, embedder=slow)

    first = run_search()
    # asyncio's own: before Python 3.11 it is not the builtin TimeoutError.
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(first.execute({"query": "time"}, ToolContext()), 0.05)
    assert await asyncio.to_thread(started.wait, 10)
    for search in (first, run_search()):  # a retry, and another run's first search
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(search.execute({"query": "time"}, ToolContext()), 0.05)

    release.set()
    text = await asyncio.wait_for(run_search().execute({"query": "time"}, ToolContext()), 10)

    assert "get_current_time" in text
    assert passes == [len(TOOLS)]


async def test_build_index_ahead_spares_the_first_search_the_embedder_pass():
    passes: list[int] = []

    def embedder(texts: list[str]) -> list[list[float]]:
        if len(texts) > 1:
            passes.append(len(texts))
        return [[1.0, float(len(text) % 3)] for text in texts]

    registry = ToolRegistry()
    for definition in TOOLS:
        function = definition["function"]
        registry.register(StaticTool(function["name"], "ok", function["description"]))
    search = ToolSearch(embedder=embedder)

    await asyncio.wait_for(search.build_index(registry), 10)
    assert passes == [len(TOOLS)]

    with S(
        [
            S.reply_tool_calls([("search_tools", {"query": "current time"}, "s1")]),
            S.reply_text("ok"),
        ]
    ) as server:
        async with server.client() as client:
            cycle = LlmCycle(CycleConfig("test-model"), client=client)
            await cycle.submit_with_tools("What time is it?", registry, select=search)

    assert "get_current_time" in cycle.messages[-2]["content"]
    assert passes == [len(TOOLS)]  # the run's search used the index built ahead


@pytest.mark.parametrize("server", [["git"], {"name": "git"}], ids=["list", "object"])
async def test_a_catalogue_search_given_a_server_that_is_no_string_says_to_give_a_name(server):
    # It failed with "TypeError: unhashable type: 'list'", which told the model nothing.
    tools = [_definition("git__git_commit", "Record changes."), _definition("web__fetch", "Fetch.")]
    search = SearchTool(tools, set, lambda names: None, 5, catalogue=True)

    text = await search.execute({"query": "commit", "server": server}, ToolContext())

    assert text == "Give server as one name (a string); the servers are git, web."


async def test_a_bound_method_embedder_finds_the_index_another_access_to_it_built():
    # `model.encode` is a new object at each access, and the index was kept by the
    # embedder's identity: each run's ToolSearch(embedder=model.encode) embedded every
    # tool again, and the index build_index made ahead was never used.
    class Model:
        def __init__(self) -> None:
            self.passes: list[int] = []

        def encode(self, texts: list[str]) -> list[list[float]]:
            if len(texts) > 1:
                self.passes.append(len(texts))
            return [[1.0, float(len(text) % 5)] for text in texts]

    model = Model()
    registry = ToolRegistry()
    for definition in TOOLS:
        function = definition["function"]
        registry.register(StaticTool(f"bound_{function['name']}", "ok", function["description"]))

    await asyncio.wait_for(ToolSearch(embedder=model.encode).build_index(registry), 10)
    with S(
        [
            S.reply_tool_calls([("search_tools", {"query": "current time"}, "s1")]),
            S.reply_text("ok"),
        ]
        * 2
    ) as server:
        async with server.client() as client:
            cycle = LlmCycle(CycleConfig("test-model"), client=client)
            for _ in range(2):
                search = ToolSearch(embedder=model.encode)
                await cycle.submit_with_tools("What time is it?", registry, select=search)
                assert "bound_get_current_time" in cycle.messages[-2]["content"]

    assert model.passes == [len(TOOLS)]  # the runs used the index built ahead

    other = Model()  # another model's encode is another embedder
    await asyncio.wait_for(ToolSearch(embedder=other.encode).build_index(registry), 10)
    assert other.passes == [len(TOOLS)]


async def test_a_search_by_the_name_of_a_tool_already_offered_says_so_and_adds_nothing():
    # The offered tool was skipped, and the tools sharing a word with its name were
    # added instead ("These tools can be called"), to every later request of the run.
    tools = [*TOOLS, _definition("upload_file", "Upload a file to a storage bucket.", "path")]
    found: list[list[str]] = []
    search = SearchTool(tools, lambda: {"readTextFile"}, found.append, 5)

    text = await search.execute({"query": "read_text_file"}, ToolContext())

    assert text == (
        "Already callable: readTextFile; call it. To find another tool, describe what it does."
    )
    assert found == []

    # A tool named and not offered yet is found first, as before.
    text = await search.execute({"query": "upload_file"}, ToolContext())
    assert found == [["upload_file"]] and "- upload_file: Upload a file" in text


async def test_a_long_query_that_matches_nothing_is_echoed_cut(caplog):
    # The answer repeated the whole query: 10 KB of it cost the model 10 KB of context.
    search = SearchTool(list(TOOLS), set, lambda names: None, 5)
    query = "zebra " * 2000

    with caplog.at_level("DEBUG", logger="agcore_tools.search"):
        text = await search.execute({"query": query}, ToolContext())

    assert text == f"No other tool matches {query[:100] + '…'!r}; try other words."
    [record] = [r for r in caplog.records if r.name == "agcore_tools.search"]
    assert len(record.getMessage()) < 200


async def test_a_catalogue_search_reads_a_server_name_in_any_case():
    # server="github" against a server named GitHub was refused ("No server is named
    # 'github'; the servers are GitHub, gitlab."), which cost the model a turn.
    tools = [
        _definition("GitHub__list_issues", "List the issues of a repository."),
        _definition("gitlab__list_pipelines", "List the pipelines of a project."),
        _definition("git__list_branches", "List the branches."),
        _definition("Git__list_tags", "List the tags."),
    ]
    found: list[list[str]] = []
    search = SearchTool(tools, set, found.append, 5, catalogue=True)

    await search.execute({"query": "list", "server": "github"}, ToolContext())
    await search.execute({"query": "list", "server": "GITLAB"}, ToolContext())
    assert found == [["GitHub__list_issues"], ["gitlab__list_pipelines"]]

    # Two servers whose names differ only in case: the exact name, or neither.
    await search.execute({"query": "list", "server": "Git"}, ToolContext())
    assert found[-1] == ["Git__list_tags"]
    text = await search.execute({"query": "list", "server": "GIT"}, ToolContext())
    assert text == "No server is named 'GIT'; the servers are Git, GitHub, git, gitlab."


@pytest.mark.parametrize("server", ["", "  "], ids=["empty", "blank"])
async def test_a_catalogue_search_given_an_empty_server_searches_every_server(server):
    # A model fills an optional parameter it does not use with "": it was told "No
    # server is named ''" and had to search again, a turn lost.
    tools = [_definition("git__git_commit", "Record changes."), _definition("web__fetch", "Fetch.")]
    found: list[list[str]] = []
    search = SearchTool(tools, set, found.append, 5, catalogue=True)

    text = await search.execute({"query": "record changes", "server": server}, ToolContext())

    assert found == [["git__git_commit"]]
    assert (
        text == "These tools can be called from your next step:\n- git__git_commit: Record changes."
    )


async def test_a_catalogue_search_reads_a_server_name_with_spaces_around_it():
    tools = [_definition("git__git_commit", "Record changes."), _definition("web__fetch", "Fetch.")]
    found: list[list[str]] = []
    search = SearchTool(tools, set, found.append, 5, catalogue=True)

    await search.execute({"query": "record changes", "server": " Git "}, ToolContext())

    assert found == [["git__git_commit"]]


async def test_a_description_with_a_list_in_it_does_not_read_as_more_tools_found():
    # Each line of a found tool's description came as written after "- name: ": a
    # markdown list in it ("- Single line: ...") read as more tools found.
    commit = _definition(
        "git_commit",
        "Create a commit.\n\n**Examples:**\n- Single line: feat: add login\n- Multi-line: fix",
        "message",
    )
    search = SearchTool([commit, TOOLS[0]], set, lambda names: None, 5)

    text = await search.execute({"query": "commit"}, ToolContext())

    assert text == (
        "These tools can be called from your next step:\n"
        "- git_commit: Create a commit.\n"
        "\n"
        "  **Examples:**\n"
        "  - Single line: feat: add login\n"
        "  - Multi-line: fix"
    )


def test_bm25s_leaves_an_apps_warning_level_logging_quiet():
    # bm25s sets its own logger to DEBUG when imported: an app logging at WARNING got
    # "DEBUG bm25s: Building index from tokens" at every index built.
    code = (
        "import logging; logging.basicConfig(level=logging.WARNING)\n"
        "from agcore_tools._ranking import ToolIndex\n"
        "tool = {'type': 'function', 'function': {'name': 'read_file', 'description': 'Read.'}}\n"
        "assert ToolIndex([tool]).search('read', 5) == ['read_file']\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert "bm25s" not in ran.stderr, ran.stderr


async def _weather_gone() -> set[str]:
    return {"weather"}


async def test_a_tool_offered_and_then_gone_mid_turn_is_not_called_callable() -> None:
    # Offered earlier in the run, unregistered (or refused) during this turn: the next
    # request leaves it out, so neither load_tools nor search_tools may say to call it.
    tools = [
        _definition("weather", "Weather forecast."),
        _definition("read_file", "Read."),
    ]
    load = LoadTool(tools, lambda: {"weather"}, lambda names: None, 5, gone=_weather_gone)
    search = SearchTool(tools, lambda: {"weather"}, lambda names: None, 5, gone=_weather_gone)

    loaded = await load.execute({"names": ["weather"]}, ToolContext())
    found = await search.execute({"query": "weather"}, ToolContext())

    assert loaded == "No tool is named 'weather'; use the names search_tools listed."
    assert found == "No other tool matches 'weather'; try other words."
