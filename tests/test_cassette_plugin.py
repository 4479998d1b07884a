"""The cassette pytest plugin in a pytest run of its own: how it is loaded beside
pytest-recording, and the names it gives cassettes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agcore_tools.testing import Cassette, CassetteError

from ._replay_runs import NO_HYPOTHESIS, ROOT

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
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", *NO_HYPOTHESIS, "-o", "asyncio_mode=auto", *args],
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


ASK = """
from agcore_tools import CycleConfig, LlmCycle
from agcore_tools.testing import ScriptedChatServer

async def ask(cassette, prompt):
    if not cassette.recording:
        async with cassette.client() as client:
            return (await LlmCycle(CycleConfig("m"), client=client).submit(prompt)).text
    with ScriptedChatServer([ScriptedChatServer.reply_text(f"re: {prompt}")]) as server:
        async with cassette.client(base_url=server.base_url, api_key="k") as client:
            return (await LlmCycle(CycleConfig("m"), client=client).submit(prompt)).text
"""


PARAMETRIZED = (
    ASK
    + """
import pytest

@pytest.mark.parametrize("prompt", ["What is 2+2?", "What is 2*2?", "What is 2-2?"])
async def test_math(cassette, prompt):
    assert await ask(cassette, prompt) == f"re: {prompt}"

@pytest.mark.parametrize("city", ["Paris", "paris"])
async def test_city(cassette, city):
    assert await ask(cassette, city) == f"re: {city}"
"""
)


def test_parametrized_tests_whose_ids_differ_in_punctuation_get_their_own_cassettes(
    tmp_path: Path,
) -> None:
    # [What is 2+2?] and [What is 2*2?] were both test_math_What_is_2_2.json: the second
    # replayed the first's cassette and failed.
    out = _pytest(tmp_path, PARAMETRIZED)
    assert "4 passed, 1 error" in out, out
    assert sorted(p.name for p in (tmp_path / "cassettes").iterdir()) == [
        "test_plugin_run.test_city_Paris.json",  # an id with nothing to replace keeps its name
        "test_plugin_run.test_math_What_is_2-2-37bd359d.json",
        "test_plugin_run.test_math_What_is_2_2-6f27123f.json",  # 2*2
        "test_plugin_run.test_math_What_is_2_2-b8e04007.json",  # 2+2
    ]
    # Names that differ only in case are one file on macOS and Windows: refused.
    assert (
        "cassette test_plugin_run.test_city_paris.json of test_plugin_run.py::test_city[paris] "
        "and test_plugin_run.test_city_Paris.json in "
    ) in out, out
    assert "differ only in case, which makes them one file on macOS and Windows" in out, out
    out = _pytest(tmp_path, PARAMETRIZED, "--record-mode=none")
    assert "4 passed, 1 error" in out, out


NAMESAKES = """
import pytest
from agcore_tools import CycleConfig, LlmCycle
from agcore_tools.testing import ScriptedChatServer

async def ask(cassette, prompt):
    if not cassette.recording:
        async with cassette.client() as client:
            return (await LlmCycle(CycleConfig("m"), client=client).submit(prompt)).text
    with ScriptedChatServer([ScriptedChatServer.reply_text(f"re: {prompt}")]) as server:
        async with cassette.client(base_url=server.base_url, api_key="k") as client:
            return (await LlmCycle(CycleConfig("m"), client=client).submit(prompt)).text

@pytest.mark.parametrize("mode", ["stream"])
async def test_chat(cassette, mode):
    assert await ask(cassette, "one") == "re: one"

async def test_chat_stream(cassette):
    assert await ask(cassette, "two") == "re: two"

@pytest.mark.cassette("test_plugin_run.test_chat_json")
async def test_marked(cassette):
    assert await ask(cassette, "three") == "re: three"

@pytest.mark.parametrize("mode", ["json"])
async def test_chat_again(cassette, mode):
    assert await ask(cassette, "four") == "re: four"
"""


def test_a_parametrized_test_and_a_test_of_its_cassettes_name_are_refused(
    tmp_path: Path,
) -> None:
    # test_chat[stream] and test_chat_stream were both test_chat_stream.json: the second
    # replayed the first's run (and a run it matched would have passed on another's).
    out = _pytest(tmp_path, NAMESAKES)
    assert "2 passed, 2 errors" in out, out
    assert (
        "cassette test_plugin_run.test_chat_stream.json of test_plugin_run.py::test_chat[stream] "
        "is also the cassette of test_plugin_run.py::test_chat_stream, so one would replay "
        "the other's run: name one with @pytest.mark.cassette"
    ) in out, out
    assert "of test_plugin_run.py::test_chat_stream is also the cassette of " in out, out
    # A name the marker gives is the writer's choice: test_marked and test_chat_again
    # (test_chat_json, test_chat_again_json) do not meet.
    assert sorted(p.name for p in (tmp_path / "cassettes").iterdir()) == [
        "test_plugin_run.test_chat_again_json.json",
        "test_plugin_run.test_chat_json.json",
    ]


LONG_IDS = """
import pytest
from agcore_tools import CycleConfig, LlmCycle
from agcore_tools.testing import ScriptedChatServer

PROMPTS = ["What is the capital of France? Answer in one word, please. " * 5, "Où est-ce ? " * 30]

@pytest.mark.parametrize("prompt", PROMPTS, ids=str)
async def test_long(cassette, prompt):
    if not cassette.recording:
        async with cassette.client() as client:
            response = await LlmCycle(CycleConfig("m"), client=client).submit(prompt)
    else:
        with ScriptedChatServer([ScriptedChatServer.reply_text("Paris")]) as server:
            async with cassette.client(base_url=server.base_url, api_key="k") as client:
                response = await LlmCycle(CycleConfig("m"), client=client).submit(prompt)
    assert response.text == "Paris"
"""


def test_a_test_id_too_long_for_a_file_name_gets_a_cassette_cut_to_fit(tmp_path: Path) -> None:
    # A long id made a name over 255 bytes: the test passed and then failed at teardown
    # (the cassette could not be saved), or failed at set-up with a bare OSError.
    out = _pytest(tmp_path, LONG_IDS)
    assert "2 passed" in out and "error" not in out, out
    names = sorted(p.name for p in (tmp_path / "cassettes").iterdir())
    assert len(names) == 2, names
    for name in names:
        assert len(name.encode()) == 237, name  # 232 bytes of name, ".json"
        assert name.startswith("test_plugin_run.test_long_"), name
        assert re.fullmatch(r".*-[0-9a-f]{8}\.json", name), name
    out = _pytest(tmp_path, LONG_IDS, "--record-mode=none")
    assert "2 passed" in out and "error" not in out, out


def test_a_cassette_whose_name_the_file_system_refuses_is_a_cassette_error(
    tmp_path: Path,
) -> None:
    with pytest.raises(CassetteError, match="cannot be opened: "):
        Cassette(tmp_path / ("x" * 300 + ".json"))


MARKED_AND_MOVED = """
import pytest
from agcore_tools import CycleConfig, LlmCycle
from agcore_tools.testing import ScriptedChatServer

@pytest.fixture
def cassette_dir(request):
    return str(request.path.parent / "tapes")  # a str, not a Path

async def ask(cassette, prompt):
    if not cassette.recording:
        async with cassette.client() as client:
            return (await LlmCycle(CycleConfig("m"), client=client).submit(prompt)).text
    with ScriptedChatServer([ScriptedChatServer.reply_text(f"re: {prompt}")]) as server:
        async with cassette.client(base_url=server.base_url, api_key="k") as client:
            return (await LlmCycle(CycleConfig("m"), client=client).submit(prompt)).text

async def test_plain(cassette):
    assert await ask(cassette, "one") == "re: one"

@pytest.mark.cassette(name="weather_run")
async def test_keyword(cassette):
    assert await ask(cassette, "two") == "re: two"
"""


def test_a_cassette_dir_given_as_a_str_and_a_marker_given_a_keyword(tmp_path: Path) -> None:
    # A cassette_dir fixture returning a str failed every test with an AttributeError
    # ('str' object has no attribute 'is_dir'); cassette(name="weather_run") was read as
    # no name, so the test took the default cassette, not weather_run.json.
    out = _pytest(tmp_path, MARKED_AND_MOVED)
    assert "1 passed, 1 error" in out, out
    assert [p.name for p in (tmp_path / "tapes").iterdir()] == ["test_plugin_run.test_plain.json"]
    assert (
        "test_plugin_run.py::test_keyword: @pytest.mark.cassette takes the cassette's name as "
        'its one argument, a str (@pytest.mark.cassette("weather_run")), '
        "got cassette(name='weather_run')"
    ) in out, out


def test_a_cassette_name_the_file_system_refuses_is_a_cassette_error_whatever_is_file_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Path.is_file() raises ENAMETOOLONG up to Python 3.13, but a pathlib built on
    # os.path.isfile() (as from 3.14) says False for any OSError: the cassette then
    # recorded, and failed only at teardown, the recording lost.
    monkeypatch.setattr(Path, "is_file", lambda self, **_: os.path.isfile(self))
    with pytest.raises(CassetteError, match="cannot be opened: "):
        Cassette(tmp_path / ("x" * 300 + ".json"))


def test_a_cassette_whose_file_name_fits_is_saved_though_its_name_is_long(
    tmp_path: Path,
) -> None:
    # A name the marker or Cassette(path) gives is not cut: one of 250 bytes fits a file
    # name, but the temporary file it was saved through (.<name>.json.<hex>.tmp) did not,
    # so the test passed and then failed at teardown, its recording lost.
    path = tmp_path / ("x" * 245 + ".json")
    with Cassette(path) as cassette:
        assert cassette.recording
    assert path.is_file()
    assert Cassette(path, "none").interactions == []
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left


def test_tests_in_two_folders_sharing_one_cassette_dir_are_refused(tmp_path: Path) -> None:
    # The check compared names folder by folder: a/test_chat.py::test_answer and
    # b/test_chat.py::test_answer both wrote <root>/cassettes/test_chat.test_answer.json,
    # so the second replayed the first's run (and failed on its prompt, or passed on it).
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text("")
        (tmp_path / folder / "test_chat.py").write_text(
            f"{ASK}\nimport pytest\n\n@pytest.fixture\ndef cassette_dir(request):\n"
            "    return request.config.rootpath / 'cassettes'\n\n"
            f"async def test_answer(cassette):\n"
            f"    assert await ask(cassette, {folder!r}) == 're: {folder}'\n"
        )
    out = _pytest(tmp_path, "")
    assert "1 passed, 1 error" in out, out
    assert (
        f"cassette {tmp_path / 'cassettes' / 'test_chat.test_answer.json'} of "
        "b/test_chat.py::test_answer is also the cassette of a/test_chat.py::test_answer, "
        "so one would replay the other's run"
    ) in out, out


@pytest.mark.parametrize("overridden_first", [False, True])
def test_a_default_cassette_dir_test_is_refused_beside_a_namesake_whatever_the_order(
    tmp_path: Path, overridden_first: bool
) -> None:
    # test_chat[stream] keeps the default cassette_dir; its namesake test_chat_stream gets
    # a folder of its own. Which file a test not yet run will get is not known, so the
    # default one is refused; the check asked only namesakes still to run, so it was
    # refused when it ran first and let through when it ran second.
    default = """
@pytest.mark.parametrize("mode", ["stream"])
async def test_chat(cassette, mode):
    assert await ask(cassette, "one") == "re: one"
"""
    overridden = """
async def test_chat_stream(cassette):
    assert await ask(cassette, "two") == "re: two"
"""
    first, second = (overridden, default) if overridden_first else (default, overridden)
    out = _pytest(
        tmp_path,
        f"""{ASK}
import pytest

@pytest.fixture
def cassette_dir(request):
    if request.node.originalname == "test_chat":
        return request.path.parent / "cassettes"
    return request.path.parent / "cassettes" / "own"
{first}{second}""",
    )
    assert "1 passed, 1 error" in out, out
    assert (
        "test_chat[stream] is also the cassette of test_plugin_run.py::test_chat_stream" in out
    ), out


def test_tests_of_one_default_name_in_cassette_dirs_of_their_own_are_not_refused(
    tmp_path: Path,
) -> None:
    # test_chat[stream] and test_chat_stream are both test_plugin_run.test_chat_stream, but
    # a cassette_dir of each test function's own keeps them apart: both were refused.
    out = _pytest(
        tmp_path,
        f"""{ASK}
import pytest

@pytest.fixture
def cassette_dir(request):
    return request.path.parent / "cassettes" / request.node.originalname

@pytest.mark.parametrize("mode", ["stream"])
async def test_chat(cassette, mode):
    assert await ask(cassette, "one") == "re: one"

async def test_chat_stream(cassette):
    assert await ask(cassette, "two") == "re: two"
""",
    )
    assert "2 passed" in out and "error" not in out, out
    out = _pytest(tmp_path, (tmp_path / "test_plugin_run.py").read_text(), "--record-mode=none")
    assert "2 passed" in out and "error" not in out, out
