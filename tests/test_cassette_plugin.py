"""The cassette pytest plugin in a pytest run of its own: how it is loaded beside
pytest-recording, and the names it gives cassettes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from ._replay_runs import ROOT

ONE_TEST = """
from agcore_tools import CycleConfig, LlmCycle
from agcore_tools.testing import ScriptedChatServer

async def test_hello(cassette):
    if cassette.recording:
        with ScriptedChatServer([ScriptedChatServer.reply_text("Hello!")]) as server:
            async with cassette.client(base_url=server.base_url, api_key="k") as client:
                response = await LlmCycle(CycleConfig("m"), client=client).submit("Hi")
    else:
        async with cassette.client() as client:
            response = await LlmCycle(CycleConfig("m"), client=client).submit("Hi")
    assert response.text == "Hello!"
    print("RECORDING" if cassette.recording else "REPLAYING")
"""

# What pytest-recording 0.15 does at load time that matters here: its pytest11 entry
# point, named "recording", adds --record-mode with no dest of its own.
RECORDING_STAND_IN = """
RECORD_MODES = ("once", "new_episodes", "none", "all", "rewrite")

def pytest_addoption(parser):
    group = parser.getgroup("recording")
    group.addoption("--record-mode", action="store", default=None, choices=RECORD_MODES,
                    help="VCR.py record mode.")
"""


def _install_recording_stand_in(site: Path) -> None:
    (site / "pytest_recording").mkdir(parents=True)
    (site / "pytest_recording" / "__init__.py").write_text("")
    (site / "pytest_recording" / "plugin.py").write_text(RECORDING_STAND_IN)
    info = site / "pytest_recording-0.15.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: pytest-recording\nVersion: 0.15.0\n"
    )
    (info / "entry_points.txt").write_text("[pytest11]\nrecording = pytest_recording.plugin\n")


def _pytest(
    folder: Path,
    test: str,
    *args: str,
    site: Path | None = None,
    conftest: bool = True,
    env: dict[str, str] | None = None,
) -> str:
    conftest_file = folder / "conftest.py"
    if conftest:
        conftest_file.write_text('pytest_plugins = ["agcore_tools.testing.pytest_plugin"]\n')
    elif conftest_file.exists():
        conftest_file.unlink()
    (folder / "test_plugin_run.py").write_text(textwrap.dedent(test))
    path = os.pathsep.join(str(p) for p in (ROOT, site) if p is not None)
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "-o", "asyncio_mode=auto", *args],
        cwd=folder, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": path, **(env or {})},
    )  # fmt: skip
    return out.stdout + out.stderr


def test_the_plugin_loaded_with_p_runs_beside_pytest_recording(tmp_path: Path) -> None:
    # Loaded with -p (addopts, or the guide's pytest.main), the plugin added --record-mode
    # before pytest-recording loaded, which then failed to add it: pytest did not start.
    site = tmp_path / "site"
    _install_recording_stand_in(site)
    project = tmp_path / "project"
    project.mkdir()
    plugin = ("-p", "agcore_tools.testing.pytest_plugin")
    out = _pytest(project, ONE_TEST, *plugin, site=site, conftest=False)
    assert "1 passed" in out and "RECORDING" in out, out
    out = _pytest(project, ONE_TEST, *plugin, "--record-mode=none", site=site, conftest=False)
    assert "1 passed" in out and "REPLAYING" in out, out
    # Loaded after it, from a conftest.py: pytest-recording's option, its "all" read too.
    out = _pytest(project, ONE_TEST, "--record-mode=all", site=site)
    assert "1 passed" in out and "RECORDING" in out, out
    # pytest-recording installed but not loaded: the plugin's own option.
    out = _pytest(
        project, ONE_TEST, *plugin, "-p", "asyncio", "--record-mode=none", site=site,
        conftest=False, env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
    )  # fmt: skip
    assert "1 passed" in out and "REPLAYING" in out, out
