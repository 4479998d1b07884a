"""A pytest plugin for cassettes: the ``cassette`` fixture, its marker and ``--record-mode``.

Turn it on in a ``conftest.py``::

    pytest_plugins = ["agcore_tools.testing.pytest_plugin"]

A test that takes the ``cassette`` fixture gets a :class:`~agcore_tools.testing.Cassette`
stored in ``cassettes/<name>.json`` beside the test file (override the
``cassette_dir`` fixture to move them). ``<name>`` is the marker's argument,
``@pytest.mark.cassette("weather_run")``, or else ``<module>.<test name>``, or
``<module>.<Class>.<test name>`` for a test in a class. It is made file-name safe
(each run of characters other than letters, digits, ``.`` and ``-`` becomes ``_``), and
the name of a parametrized test whose parameters' id holds such characters
(``test_math[What is 2+2?]``) ends with a short hash of the id, so that ids which differ
only there keep cassettes of their own; a name longer than 232 bytes is cut there and
ends with that hash. Two names that differ only in case are refused (they are one file
on macOS and Windows), and so are two tests of the session given one cassette file, one
of them by default: ``test_chat[stream]`` and ``test_chat_stream`` in one folder, or
``a/test_chat.py::test_answer`` and ``b/test_chat.py::test_answer`` whose
``cassette_dir`` is one folder (compared by the file each test gets, so tests of one
name whose ``cassette_dir`` differs are not refused).

``--record-mode`` (or the ``AGCORE_RECORD_MODE`` variable) says when to record:
``once`` (the default: record a cassette that does not exist yet, replay the rest),
``rewrite`` (record them all again, against the real model and servers) or ``none``
(replay only; a missing cassette fails). With pytest-recording installed, its own
``--record-mode`` is read instead (its ``all`` means ``rewrite``), whichever of the two
plugins loads first.

A replaying test runs with the network blocked (:func:`~agcore_tools.testing.no_network`),
and fails at teardown on any difference the replay met, even one the code under test
caught. A recording is saved only when the test passed.

Example:
    >>> cassette_name("tests/test_agent.py", "test_weather[sse]")
    'test_agent.test_weather_sse'
    >>> cassette_name("tests/test_agent.py", "TestWeather.test_answer")
    'test_agent.TestWeather.test_answer'
    >>> cassette_name("tests/test_math.py", "test_math[What is 2+2?]")
    'test_math.test_math_What_is_2_2-b8e04007'
    >>> cassette_name("tests/test_math.py", "test_math[What is 2*2?]")
    'test_math.test_math_What_is_2_2-6f27123f'
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import os
import re
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any, cast, get_args

import pytest

from ..error import _CassetteConfigError
from ._cassette import Cassette, RecordMode
from ._network import no_network

__all__ = ["cassette", "cassette_dir", "cassette_name", "record_mode"]

_ENV = "AGCORE_RECORD_MODE"
_RECORDING = "recording"  # pytest-recording's name as a plugin (its pytest11 entry point)
_ALIASES = {"all": "rewrite", "new_episodes": "once", "none": "none", "once": "once"}
_PASSED = pytest.StashKey[bool]()
_NAMES = pytest.StashKey[dict[tuple[Path, str], set[str]]]()
_USES = pytest.StashKey["_Uses"]()
_UNSAFE = r"[^\w.-]+"  # what a cassette's file name does not keep
# The longest default name, in UTF-8 bytes: the longest that could be saved when the
# temporary file a cassette is saved through held its whole name
# (.<name>.json.<12 hex digits>.tmp, in the 255 bytes of a file's name).
_LONGEST = 232


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    """Add ``--record-mode``, unless pytest-recording adds it (it is installed and not
    disabled): then its option, with the same meaning, is read."""
    # A plugin loaded with -p registers before the installed ones load, so pytest-recording
    # may add the option after this; two plugins adding it stop pytest, whichever is second.
    if not _recording_may_load(pluginmanager):
        _add_record_mode(parser)


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(parser: pytest.Parser) -> Generator[None, None, None]:
    """Add ``--record-mode`` now if it was left to pytest-recording, which did not load
    (``-p no:recording`` in ``addopts``, or plugins not loaded automatically)."""
    yield
    _add_record_mode(parser)


def _recording_may_load(pluginmanager: pytest.PytestPluginManager) -> bool:
    if pluginmanager.has_plugin(_RECORDING):
        return True
    if pluginmanager.is_blocked(_RECORDING):
        return False
    return any(
        entry.name == _RECORDING and entry.module.partition(".")[0] == "pytest_recording"
        for entry in importlib.metadata.entry_points(group="pytest11")
    )


def _add_record_mode(parser: pytest.Parser) -> None:
    group = parser.getgroup("agcore_tools", "agcore_tools cassettes")
    with contextlib.suppress(ValueError):  # pytest-recording's option, with the same meaning
        group.addoption(
            "--record-mode",
            action="store",
            default=None,
            choices=("once", "rewrite", "none"),
            help="when cassettes record: once (missing ones; default), rewrite (all), "
            f"none (never); also ${_ENV}",
        )


def pytest_configure(config: pytest.Config) -> None:
    """Declare the ``cassette`` marker."""
    config.addinivalue_line(
        "markers", "cassette(name): the cassette file (cassettes/<name>.json) of the test"
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Note whether the test itself passed (a failed recording is not saved)."""
    outcome = yield
    report = cast(Any, outcome).get_result()
    if report.when == "call":
        item.stash[_PASSED] = report.passed


def cassette_name(path: str | os.PathLike[str], test: str) -> str:
    """The default cassette name of a test: ``<module>.<test>``, file-name safe; the
    fixture passes ``<Class>.<test>`` as ``test`` for a test in a class. When the
    parameters' id (``[...]``) holds characters a file name cannot, the name ends with a
    short hash of ``test``: ``[2+2]`` and ``[2*2]`` would both be ``_2_2``."""
    name = re.sub(_UNSAFE, "_", f"{Path(path).stem}.{test}").strip("_")
    _, bracket, params = test.partition("[")
    digest = hashlib.sha256(test.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    if bracket and re.search(_UNSAFE, params.removesuffix("]")):
        name = f"{name}-{digest}"
    if len(name.encode("utf-8", "surrogatepass")) > _LONGEST:
        # Cut where a file name (and the temporary file it is saved through) still fits.
        kept = name.encode("utf-8", "surrogatepass")[: _LONGEST - 9]
        name = f"{kept.decode('utf-8', 'ignore')}-{digest}"
    return name


def record_mode(config: pytest.Config) -> RecordMode:
    """The record mode: ``--record-mode``, else ``$AGCORE_RECORD_MODE``, else ``once``.

    Raises ``CassetteError`` (a ``ValueError`` too) naming where a value that is not a
    mode came from."""
    option = config.getoption("--record-mode", default=None)
    value = str(option or os.environ.get(_ENV) or "once")
    source = "--record-mode" if option else f"the environment variable {_ENV}"
    mode = _ALIASES.get(value, value)
    if mode not in get_args(RecordMode):
        raise _CassetteConfigError(
            f"{source} must be 'once', 'rewrite' or 'none' (or pytest-recording's 'all' or "
            f"'new_episodes'), got {value!r}"
        )
    return cast(RecordMode, mode)


@pytest.fixture
def cassette_dir(request: pytest.FixtureRequest) -> Path:
    """Where the test's cassettes live: ``cassettes/`` beside its file (an override
    may return a ``Path`` or a ``str``)."""
    return Path(request.path).parent / "cassettes"


@pytest.fixture
def cassette(request: pytest.FixtureRequest, cassette_dir: Path) -> Iterator[Cassette]:
    """The test's :class:`~agcore_tools.testing.Cassette`, recording or replaying."""
    cassette_dir = Path(cassette_dir)  # an override may give a str
    marker = request.node.get_closest_marker("cassette")
    if marker is not None and not _marker_ok(marker):
        # cassette(name="x") was read as no name: the test took the default cassette.
        given = ", ".join(
            [*map(repr, marker.args), *(f"{k}={v!r}" for k, v in marker.kwargs.items())]
        )
        raise _CassetteConfigError(
            f"{request.node.nodeid}: @pytest.mark.cassette takes the cassette's name as its "
            f'one argument, a str (@pytest.mark.cassette("weather_run")), got cassette({given})'
        )
    name, named = _name_of(request.node)
    file = f"{name}.json"
    other = _sharer(request, cassette_dir, name, named)
    if other is not None:
        shown = file if other[1] else str(cassette_dir / file)
        raise _CassetteConfigError(
            f"cassette {shown} of {request.node.nodeid} is also the cassette of "
            f"{other[0]}, so one would replay the other's run: name one with "
            '@pytest.mark.cassette("...")'
        )
    twin = _case_twin(cassette_dir, file)
    if twin is not None:
        raise _CassetteConfigError(
            f"cassette {file} of {request.node.nodeid} and {twin} in {cassette_dir} differ "
            "only in case, which makes them one file on macOS and Windows: remove the one "
            'no test uses, or name the test\'s cassette with @pytest.mark.cassette("...")'
        )
    tape = Cassette(cassette_dir / file, record_mode(request.config))
    if tape.recording:
        yield tape
        if request.node.stash.get(_PASSED, False):
            tape.save()
        return
    with no_network():
        yield tape
    if request.node.stash.get(_PASSED, False):
        tape.check()


def _name_of(item: pytest.Item) -> tuple[str, bool]:
    """The cassette name of ``item``, and whether its marker gave it."""
    marker = item.get_closest_marker("cassette")
    if marker is not None and _marker_ok(marker) and marker.args and marker.args[0]:
        return str(marker.args[0]), True
    classes = [node.name for node in item.listchain() if isinstance(node, pytest.Class)]
    return cassette_name(item.path, ".".join([*classes, item.name])), False


def _marker_ok(marker: pytest.Mark) -> bool:
    """Whether ``marker`` is ``cassette()`` or ``cassette("name")``."""
    args = marker.args
    return not marker.kwargs and (not args or (len(args) == 1 and isinstance(args[0], str)))


class _Uses:
    """The cassette files the session's tests took so far (resolved paths)."""

    def __init__(self) -> None:
        self.file_of: dict[str, Path] = {}
        """Each test's file, by node id."""
        self.takers: dict[Path, dict[str, bool]] = {}
        """The tests that took each file, with whether the marker named it."""


def _sharer(
    request: pytest.FixtureRequest, cassette_dir: Path, name: str, named: bool
) -> tuple[str, bool] | None:
    """Another test of the session whose cassette file is this test's too, when one of
    the two was given it by default (tests the marker gives one name share it on
    purpose): its node id, and whether it is still to run. Whatever the folders and
    ``cassette_dir``, a test that took the same file already; and, for a test given its
    name by default whose ``cassette_dir`` is the default (``cassettes/`` beside its
    file), any other of the same name in the same folder, as it may take the same file
    (so that each of the two names the other, even when they run in two workers). The
    other is named whether or not it ran, and whatever ``cassette_dir`` it got: what a
    test not yet run will get is not known, and asking only the ones still to run made
    the answer depend on the order the tests ran in."""
    node = request.node.nodeid
    uses = request.session.stash.setdefault(_USES, _Uses())
    path = Path(os.path.realpath(cassette_dir / f"{name}.json"))
    uses.file_of[node] = path
    takers = uses.takers.setdefault(path, {})
    takers[node] = named
    shared = sorted(n for n, by_marker in takers.items() if n != node and not (named and by_marker))
    if shared:
        return shared[0], False
    default = request.path.parent / "cassettes"
    if Path(os.path.realpath(cassette_dir)) != Path(os.path.realpath(default)):
        return None
    users = _namesakes(request.session).get((request.path.parent, name), set())
    others = sorted(n for n in users if n != node)
    return (others[0], others[0] not in uses.file_of) if others and not named else None


def _namesakes(session: pytest.Session) -> dict[tuple[Path, str], set[str]]:
    """The cassette names of the session's tests that take the fixture, by the folder
    of the test's file, each with the node ids of the tests using it; worked out once a
    session."""
    names = session.stash.get(_NAMES, None)
    if names is None:
        names = {}
        for item in session.items:
            if "cassette" in getattr(item, "fixturenames", ()):
                name, _ = _name_of(item)
                names.setdefault((item.path.parent, name), set()).add(item.nodeid)
        session.stash[_NAMES] = names
    return names


def _case_twin(folder: Path, file: str) -> str | None:
    """Another cassette in ``folder`` whose name differs from ``file`` only in case."""
    if not folder.is_dir():
        return None
    folded = file.casefold()
    return next((n for n in os.listdir(folder) if n != file and n.casefold() == folded), None)
