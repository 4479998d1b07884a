"""Every README and guide snippet that talks to a model, run unchanged against each real
server: llama-cpp-python's, and LiteLLM's proxy in front of it.

``tests/test_docs_snippets.py`` runs each snippet against a scripted model that obeys
and checks its output. Here the same snippets meet a real small model that may not
obey (SmolLM2-135M, which answers without calling a tool as often as it calls one),
through the defaults only: ``OPENAI_BASE_URL`` set, nothing else changed. Each must
exit 0: a snippet that indexes into ``invocations`` unchecked, or assumes the server
takes OpenAI's ``json_schema``, fails here. The output is the model's, so it is not
compared. About 2 minutes a server, so ``make test-interop`` runs them (CI runs both
targets). The Responses API's snippets run against the proxy only: llama-cpp-python's
server has no Responses API.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._scripts import run_script
from tests.test_docs_snippets import RUNNABLE, SNIPPETS, Block

from .conftest import RealServer

# The Responses API's snippets: llama-cpp-python's server has none (a 404, or the
# loop's LlmConfigError naming api='chat', as its profile says).
RESPONSES = {"drop-in-responses", "streaming-responses"}
# Snippets that talk to a model (they have a scripted one) and need nothing else.
TALKING = [
    block
    for block in RUNNABLE
    if block.name and SNIPPETS[block.name].script and SNIPPETS[block.name].http_server is None
]
pytestmark = [pytest.mark.timeout(300), pytest.mark.real_snippets]


def _run(block: Block, server: RealServer, tmp_path: Path) -> None:
    script = tmp_path / f"snippet_{block.line}.py"
    script.write_text(block.code, encoding="utf-8")
    env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": server.api_key}

    result = run_script(script, env=env, timeout=240)

    where = f"{block.document}, block at line {block.line}"
    assert result.returncode == 0, f"{where} failed against {server.name}:\n{result.stderr}"


@pytest.mark.parametrize(
    "block", [b for b in TALKING if b.name not in RESPONSES], ids=lambda block: block.id
)
def test_snippet_runs_against_the_llama_server(
    block: Block, llama_server: RealServer, tmp_path: Path
) -> None:
    _run(block, llama_server, tmp_path)


@pytest.mark.parametrize("block", TALKING, ids=lambda block: block.id)
def test_snippet_runs_against_the_litellm_proxy(
    block: Block, litellm_proxy: RealServer, tmp_path: Path
) -> None:
    _run(block, litellm_proxy, tmp_path)


def test_the_snippets_that_talk_to_a_model_are_all_here() -> None:
    assert len(TALKING) >= 10, [block.id for block in TALKING]
    assert {block.name for block in RUNNABLE} >= RESPONSES  # still snippets of the docs
