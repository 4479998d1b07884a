"""The bounded stderr reader on its own."""

from __future__ import annotations

import logging

import pytest

from agcore_tools.mcp._stderr import StderrLog


def test_lines_are_logged_and_the_tail_kept(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="agcore_tools.mcp.stderr")
    log = StderrLog("srv")
    log.feed(b"one\ntw")
    log.feed(b"o\n\nthree")
    log.flush()
    assert [r.getMessage() for r in caplog.records] == ["[srv] one", "[srv] two", "[srv] three"]
    assert log.tail() == "one | two | three"


def test_a_flood_is_counted_not_logged_and_memory_stays_bounded(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="agcore_tools.mcp.stderr")
    log = StderrLog("srv")
    for i in range(100):
        log.feed(b"".join(b"line %d-%d\n" % (i, j) for j in range(1000)))
    log.flush()
    notices = [r for r in caplog.records if "stderr lines not logged" in r.getMessage()]
    assert notices and len(caplog.records) - len(notices) <= 200
    # At the lines' own level: before, a WARNING that Python printed to stderr on every
    # connect of a chatty server, in apps that configured no logging.
    assert {r.levelno for r in notices} == {logging.INFO}
    assert log.tail().endswith("line 99-999")
    assert len(log.tail().split(" | ")) == 20


def test_an_endless_line_is_cut_saying_how_much() -> None:
    log = StderrLog("srv")
    log.feed(b"x" * 10_000)
    log.flush()
    assert log.tail() == "x" * 2000 + "... [cut 8000 chars]"


def test_control_characters_are_shown_as_escapes_in_the_log_and_the_tail(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A \r, or an escape that erases the line, let a server's line overwrite its own
    # "[srv]" prefix on a terminal; an error message quoting the tail carried them too.
    caplog.set_level(logging.INFO, logger="agcore_tools.mcp.stderr")
    log = StderrLog("srv")
    log.feed("ready\x1b[2K\rCRITICAL app: all granted\x1b[8m hidden\x07\tnaïve\r\n".encode())
    log.flush()
    shown = "ready\\x1b[2K\\rCRITICAL app: all granted\\x1b[8m hidden\\x07\tnaïve"
    assert [r.getMessage() for r in caplog.records] == [f"[srv] {shown}"]
    assert log.tail() == shown  # a line's own \r\n ending is no part of it


def test_the_childs_env_values_are_masked_in_the_log_and_the_tail(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A server failing at start-up echoed its token into the error and the log.
    caplog.set_level(logging.INFO, logger="agcore_tools.mcp.stderr")
    log = StderrLog("gh", secrets=["ghp_S3CRETt0ken", "ghp_S3CRET", "1"])
    log.feed(b"bad credentials: ghp_S3CRETt0ken\nprefix ghp_S3CRET, 1 try\n")
    log.feed(b"x" * 1995 + b"ghp_S3CRETt0ken\n")  # across the 2000-character cut
    log.flush()
    logged = [r.getMessage() for r in caplog.records]
    assert logged[:2] == ["[gh] bad credentials: ***", "[gh] prefix ***, 1 try"]
    assert "ghp_" not in log.tail() and "ghp_" not in "".join(logged)
    assert log.tail().startswith("bad credentials: *** | prefix ***, 1 try | xxx")
