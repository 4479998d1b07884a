"""Every ```python block of the documents below runs, as written, as a script.

Fences:

- ```python (or ```python run) blocks run. ```py, ```python no-run and blocks with any
  other option are not run here: use them for fragments, such as a top-level ``await``
  or a config file's loop (```python notebook cells are run by test_guides.py);
- an HTML comment right above a fence names the block: ``<!-- snippet: quickstart -->``.
  A named block gets its entry in ``SNIPPETS``: a scripted model for it, and the
  lines its output must contain. An unnamed block must simply exit with status 0
  (make it assert what it shows, as the permissions guide does with pytest.raises).

Each block runs in a fresh ``python`` subprocess from the repository root, with no
``OPENAI_*`` variables from the outside. For a block with a script, a
:class:`ScriptedChatServer` plays the model and the block finds it the way user code
finds OpenAI: ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``. Every scripted turn must be
used, and no more.

README.md and every guide in docs/guides/ are covered; add other documents to
``DOCUMENTS``. Their relative links must point at files that exist.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agcore_tools.testing import ScriptedChatServer, ScriptItem
from tests._scripts import run_snippet
from tests.mcp.conftest import SERVERS, HttpServer

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [
    "README.md",
    *sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")),
    *sorted(f"docs/guides/{p.name}" for p in (ROOT / "docs" / "guides").glob("*.md")),
]

_FENCE = re.compile(r"^(`{3,}|~{3,})\s*([\w-]*)\s*(.*)$")
_NAME = re.compile(r"^<!--\s*snippet:\s*([\w-]+)\s*-->$")


@dataclass(frozen=True)
class Block:
    """One fenced code block of a document."""

    document: str
    line: int  # of the opening fence, from 1
    language: str
    options: str
    code: str
    name: str | None

    @property
    def runs(self) -> bool:
        return self.language == "python" and self.options.split() in ([], ["run"])

    @property
    def id(self) -> str:
        return f"{self.document}:{self.line}" + (f":{self.name}" if self.name else "")


def code_blocks(document: str, text: str | None = None) -> list[Block]:
    """The fenced blocks of a Markdown file (or of ``text``), with their names."""
    if text is None:
        text = (ROOT / document).read_text(encoding="utf-8")
    lines = text.splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        fence, language, options = opening.groups()
        above = next((lines[i].strip() for i in range(index - 1, -1, -1) if lines[i].strip()), "")
        named = _NAME.match(above)
        end = index + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            end += 1
        code = "\n".join(lines[index + 1 : end]) + "\n"
        blocks.append(
            Block(document, index + 1, language, options, code, named[1] if named else None)
        )
        index = end + 1
    return blocks


@dataclass(frozen=True)
class Setup:
    """What a named block needs and shows."""

    script: Sequence[ScriptItem] = ()
    """The model's turns, in order; empty for a block that needs no model."""
    output: Sequence[str] = ()
    """Pieces of text its stdout must contain, in this order."""
    sent: Sequence[str] = ()
    """Texts the model must have been sent (as a string value in a request body):
    tool results, for instance, which prove the tools ran and their output went back."""
    http_server: Path | None = None
    """An MCP server script run over HTTP for the block, which finds it at
    ``MCP_SERVER_URL``; the block then also gets a fresh ``HOME``."""


S = ScriptedChatServer
PARIS = {"city": "Paris", "celsius": 18, "sky": "light rain"}
PARIS_RESULT = '{"city":"Paris","celsius":18,"sky":"light rain"}'  # what the model reads

SNIPPETS: dict[str, Setup] = {
    "temporal-quickstart": Setup(
        script=[
            S.reply_tool_calls([("add", {"a": 2, "b": 3})]),
            S.reply_text("2 + 3 = 5."),
        ],
        output=["2 + 3 = 5.", "['user', 'assistant', 'tool', 'assistant']"],
        sent=["5"],
    ),
    "quickstart-loop": Setup(
        script=[
            S.reply_tool_calls([("get_weather", {"city": "Paris"})]),
            S.reply_text("It's 18 °C with light rain in Paris."),
        ],
        output=[
            "It's 18 °C with light rain in Paris.",
            f"get_weather({{'city': 'Paris'}}) -> {PARIS}",
        ],
        sent=[PARIS_RESULT],
    ),
    "quickstart-mcp": Setup(
        script=[
            S.reply_tool_calls([("capital_of", {"country": "Japan"})]),
            S.reply_tool_calls([("get_weather", {"city": "Tokyo"})]),
            S.reply_text("Japan's capital is Tokyo, where it is 24 °C and sunny."),
        ],
        output=[
            "Japan's capital is Tokyo, where it is 24 °C and sunny.",
            "capital_of -> Tokyo",  # ran in the MCP server process
            "get_weather -> {'city': 'Tokyo', 'celsius': 24, 'sky': 'sunny'}",
        ],
        sent=['{"city":"Tokyo","celsius":24,"sky":"sunny"}'],
    ),
    "drop-in-chat": Setup(
        script=[
            S.reply_tool_calls([("get_weather", {"city": "Paris"})]),
            S.reply_text("It's 18 °C with light rain in Paris."),
        ],
        output=["It's 18 °C with light rain in Paris."],
        sent=[PARIS_RESULT],
    ),
    "drop-in-responses": Setup(
        script=[
            S.reply_tool_calls([("get_weather", {"city": "Paris"})]),
            S.reply_text("Paris: 18 °C, light rain."),
        ],
        output=["Paris: 18 °C, light rain."],
        sent=[PARIS_RESULT],
    ),
    "images": Setup(
        script=[
            S.reply_tool_calls([("webcam", {"city": "Paris"})]),
            S.reply_text("Hard to say from one white pixel."),
        ],
        output=[
            "Hard to say from one white pixel.",
            # The tool turn's assistant message has content "" (no text), not None.
            "user: Is it sunny in Paris?\nassistant: \ntool: Paris, 09:00\n"
            "[image 1 (image/gif, 43 B) is attached in the next user message]",
            "user: ['text', 'text', 'image_url']",
            "assistant: Hard to say from one white pixel.",
        ],
        sent=["data:image/gif;base64,R0lGODlhAQABAIAAAP///wAAACH5BAEAAAAALAAAAAABAAEAAAICRAEAOw=="],
    ),
    "sync-drop-in": Setup(
        script=[
            S.reply_tool_calls([("get_weather", {"city": "Paris"})]),
            S.reply_text("It's 18 °C with light rain in Paris."),
        ],
        output=["It's 18 °C with light rain in Paris."],
        sent=[PARIS_RESULT],
    ),
    "sync-loop": Setup(
        script=[
            S.reply_tool_calls([("capital_of", {"country": "Japan"})]),
            S.reply_text("The capital of Japan is Tokyo."),
        ],
        output=[
            "Paris",  # the direct call_tool_sync
            "-> capital_of({'country': 'Japan'})",
            "The capital of Japan is Tokyo.",
            "[2 turns]",
        ],
        sent=["Tokyo"],  # the MCP server's answer went back to the model
    ),
    "mcp-config": Setup(
        output=["['demo__text_stats', 'demo__capital_of', 'demo__celsius_to_fahrenheit']"],
    ),
    "mcp-resources": Setup(
        output=[
            "demo://capitals text/plain",
            "Lima",
            "Plan a weekend in the capital of Peru.",
            "Tokyo",
        ],
    ),
    "mcp-guide-resources": Setup(
        output=[
            "Offline demo tools: capitals, text statistics, temperature conversion.",
            "['demo://capitals/{country}']",
            "Nairobi",
            "('Peru',)",
            "weekend_trip ['country']",
            "Plan a weekend in the capital of Japan.",
        ],
    ),
    "mcp-oauth": Setup(
        output=["5", "9", "signed in 1 time(s)"],
        http_server=SERVERS / "oauth_server.py",
    ),
    "permissions": Setup(
        output=["permission denied: tool 'delete_file' needs 'delete', which is denied"],
    ),
    "strict": Setup(
        script=[
            S.reply_tool_calls(
                [
                    (
                        "plan_trip",
                        {
                            "stops": [
                                {"city": "Oslo", "nights": None},
                                {"city": "Bergen", "nights": 2},
                            ],
                            "pace": None,
                        },
                    )
                ]
            ),
            S.reply_text("One night in Oslo, then two in Bergen, at a relaxed pace."),
        ],
        output=[
            "True ['stops', 'pace']",
            "{'anyOf': [{'type': 'string'}, {'type': 'null'}]}",
            "2 stops, 3 nights, relaxed pace",
            "One night in Oslo, then two in Bergen, at a relaxed pace.",
        ],
        sent=["2 stops, 3 nights, relaxed pace"],
    ),
    "observability": Setup(
        script=[
            S.reply_tool_calls([("get_weather", {"city": "Paris"})]),
            S.reply_text("It's 18 °C with light rain in Paris."),
        ],
        output=[
            "chat gpt-4o-mini  {'gen_ai.response.finish_reasons': ('tool_calls',)",
            "execute_tool get_weather  {'gen_ai.tool.call.id':",
            "chat gpt-4o-mini  {'gen_ai.response.finish_reasons': ('stop',)",
            "<- ----  invoke_agent  {'gen_ai.usage.input_tokens':",
            "It's 18 °C with light rain in Paris.",
        ],
        sent=[PARIS_RESULT],
    ),
    "structured-output": Setup(
        script=[
            S.reply_tool_calls([("get_weather", {"city": "Paris"})]),
            S.reply_text('{"city": "Paris", "celsius": 18, "umbrella": true}'),
        ],
        output=["Advice Paris 18 True", '{"city": "Paris", "celsius": 18, "umbrella": true}'],
        sent=[PARIS_RESULT],
    ),
    "structured-output-retries": Setup(
        script=[
            S.reply_text('{"result": "happy"}'),
            S.reply_text('{"result": "positive"}'),
            S.reply_tool_calls([("final_result", {"result": "bored"})]),
        ],
        output=[
            "positive 2",
            "1 {\"result\": \"bored\"} result: Input should be 'positive', 'neutral' or 'negative'",
        ],
        sent=[
            "Your answer is not a valid Literal['positive', 'neutral', 'negative']: result: "
            "Input should be 'positive', 'neutral' or 'negative'. Answer again with the "
            "corrected JSON only."
        ],
    ),
    "structured-readme": Setup(
        script=[S.reply_text('{"name": "Tokyo", "country": "Japan", "population": 37400000}')],
        output=["City(name='Tokyo', country='Japan', population=37400000)"],
    ),
    "streaming": Setup(
        script=[
            S.reply_tool_calls([("get_weather", {"city": "Paris"})], text="Checking."),
            S.reply_text("It's 18 °C in Paris."),
        ],
        output=[
            "Checking.",
            "[tool_calls]",
            "-> get_weather({'city': 'Paris'})",
            '<- get_weather: {"city":"Paris","celsius":18,"sky":"light rain"}',
            "It's 18 °C in Paris.",
            "[stop]",
        ],
    ),
    "streaming-responses": Setup(
        script=[
            S.reply_tool_calls([("get_weather", {"city": "Paris"})], reasoning="look it up"),
            S.reply_text("18 °C in Paris.", reasoning="answer"),
        ],
        output=[
            "(look it up)",
            "-> get_weather({'city': 'Paris'})",
            "(answer)18 °C in Paris.",
            "first turn: ['reasoning', 'function_call'] resumable: True",
        ],
        sent=['{"city":"Paris","celsius":18}', "encrypted:0:look it up"],
    ),
    "long-running": Setup(
        script=[
            S.reply_tool_calls([("scan", {"folders": ["docs", "src"]})]),
            S.reply_text("docs has 3 large files, src has 6."),
        ],
        output=[
            "1/2 docs",
            "so far: {'docs': 3}",
            "2/2 src",
            "so far: {'docs': 3, 'src': 6}",
            "docs has 3 large files, src has 6.",
        ],
        sent=['{"docs":3,"src":6}'],
    ),
    # docs/guides/long-running-tools.md
    "progress-bar": Setup(
        script=[
            S.reply_tool_calls([("index_files", {"count": 200})]),
            S.reply_text("All 200 files are indexed."),
        ],
        output=["index_files: 100%", "200/200", "All 200 files are indexed."],
        sent=["indexed 200 files"],
    ),
    "progress-drop-in": Setup(
        script=[
            S.reply_tool_calls([("back_up", {"tables": ["users", "orders"]})]),
            S.reply_text("Both tables are backed up."),
        ],
        output=[
            "[back_up] 1/2 backed up users",
            "[back_up] 2/2 backed up orders",
            "Both tables are backed up.",
        ],
        sent=["2 tables backed up"],
    ),
    "partial-results": Setup(
        script=[
            S.reply_tool_calls([("search", {"query": "sea"})]),
            S.reply_text("Four articles: tides, salt, rogue waves and currents."),
        ],
        output=[
            "so far: 2 hits",
            "so far: 4 hits",
            "final: 4 hits",
            "Four articles: tides, salt, rogue waves and currents.",
        ],
        sent=['["Tides explained","Why the sea is salty","Rogue waves","Deep currents"]'],
    ),
    "shared-state": Setup(
        script=[
            S.reply_tool_calls([("load_sales", {"month": "March"})]),
            S.reply_tool_calls([("total_sales", {})]),
            S.reply_text("March sales came to 510."),
        ],
        output=["March sales came to 510."],
        sent=["loaded 3 rows for March", "510"],
    ),
}

BLOCKS = [block for document in DOCUMENTS for block in code_blocks(document)]
RUNNABLE = [block for block in BLOCKS if block.runs]


def test_the_documents_have_runnable_blocks_and_every_setup_is_used() -> None:
    assert RUNNABLE, "no ```python blocks found"
    names = [block.name for block in BLOCKS if block.name]
    assert len(names) == len(set(names)), "two blocks share a snippet name"
    assert set(SNIPPETS) == {block.name for block in RUNNABLE if block.name}


def test_fences_and_names_are_read_as_documented() -> None:
    text = (
        "# t\n\n<!-- snippet: first -->\n```python\nprint(1)\n```\n\n"
        "```py\nawait x\n```\n````python no-run\n```\n````\n"
        "```python notebook\nx\n```\n```python run\ny\n```\n"
        "<!-- snippet: shown -->\n\n```bash\nmake\n```\n"
    )
    blocks = code_blocks("doc.md", text)
    assert [(b.line, b.language, b.name, b.runs) for b in blocks] == [
        (4, "python", "first", True),
        (8, "py", None, False),
        (11, "python", None, False),
        (14, "python", None, False),
        (17, "python", None, True),
        (22, "bash", "shown", False),
    ]
    assert blocks[0].code == "print(1)\n" and blocks[2].code == "```\n"


_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("document", DOCUMENTS)
def test_relative_links_point_at_files_that_exist(document: str) -> None:
    text = (ROOT / document).read_text(encoding="utf-8")
    targets = [t for t in _LINK.findall(text) if not re.match(r"[a-z]+:", t)]
    missing = [t for t in targets if not (ROOT / document).parent.joinpath(t).exists()]
    assert not missing, f"{document} links to missing files: {missing}"


@pytest.mark.parametrize("block", RUNNABLE, ids=lambda block: block.id)
def test_snippet_runs(block: Block, tmp_path: Path) -> None:
    setup = SNIPPETS.get(block.name or "", Setup())
    script_file = tmp_path / f"snippet_{block.line}.py"
    script_file.write_text(block.code, encoding="utf-8")
    env: dict[str, str] = {}
    with ScriptedChatServer(setup.script) as server, contextlib.ExitStack() as stack:
        if setup.script:
            env.update(OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="sk-scripted")
        if setup.http_server is not None:
            mcp_server = HttpServer(setup.http_server)
            stack.callback(mcp_server.stop)
            env.update(MCP_SERVER_URL=mcp_server.url, HOME=str(tmp_path))
        result = run_snippet(script_file, env=env)
    where = f"{block.document}, block at line {block.line}"
    assert result.returncode == 0, f"{where} failed:\n{result.stderr}"
    position = 0
    for piece in setup.output:
        found = result.stdout.find(piece, position)
        assert found >= 0, f"{where}: {piece!r} not in order in its output:\n{result.stdout}"
        position = found + len(piece)
    assert len(server.requests) == len(setup.script), f"{where}: not every scripted turn ran"
    sent = [text for request in server.requests for text in _strings(request.json)]
    for piece in setup.sent:
        assert piece in sent, f"{where}: the model was never sent {piece!r}"


def _strings(value: Any) -> list[str]:
    """Every string value in a JSON document."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return [text for item in value for text in _strings(item)]
    return []
