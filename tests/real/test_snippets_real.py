"""Every README and guide snippet that talks to a model, run unchanged against the real
llama-cpp-python server.

``tests/test_docs_snippets.py`` runs each snippet against a scripted model that obeys
and checks its output. Here the same snippets meet a real small model that may not
obey (SmolLM2-135M, which answers without calling a tool as often as it calls one),
through the defaults only: ``OPENAI_BASE_URL`` set, nothing else changed. Each must
exit 0: a snippet that indexes into ``invocations`` unchecked, or assumes the server
takes OpenAI's ``json_schema``, fails here. The output is the model's, so it is not
compared. About 2 minutes, so ``make test-interop`` runs them (CI runs both targets).
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
    if block.name
    and SNIPPETS[block.name].script
    and SNIPPETS[block.name].http_server is None
    and block.name not in RESPONSES
]
pytestmark = [pytest.mark.timeout(300), pytest.mark.real_snippets]


@pytest.mark.parametrize("block", TALKING, ids=lambda block: block.id)
def test_snippet_runs_against_the_real_server(
    block: Block, llama_server: RealServer, tmp_path: Path
) -> None:
    script = tmp_path / f"snippet_{block.line}.py"
    script.write_text(block.code, encoding="utf-8")
    env = {"OPENAI_BASE_URL": llama_server.base_url, "OPENAI_API_KEY": "sk-local"}

    result = run_script(script, env=env, timeout=240)

    where = f"{block.document}, block at line {block.line}"
    assert result.returncode == 0, f"{where} failed against {llama_server.name}:\n{result.stderr}"


def test_the_snippets_that_talk_to_a_model_are_all_here() -> None:
    assert len(TALKING) >= 8, [block.id for block in TALKING]
    assert {block.name for block in RUNNABLE} >= RESPONSES  # still snippets of the docs
