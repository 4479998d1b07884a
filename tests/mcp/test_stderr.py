"""The bounded stderr reader, on its own and in start-up errors."""

from __future__ import annotations

import logging
import sys
import unicodedata

import pytest

from agcore_tools import McpClient, McpError, StdioTransport
from agcore_tools.mcp._stderr import StderrLog

from .conftest import system_node


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
    shown = log.tail().split(" | ")
    assert shown[:2] == ["line 0-0", "line 0-1"] and shown[-1] == "line 99-999"
    assert shown[10] == "... 99970 lines ..." and len(shown) == 31


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


TROJAN = "if user == \u202eadmin\u2066 \u2069 ok\u200b\u200f\ufeff\u2028\u0085\U000e0041"
"""A line that reads other than it holds: a right-to-left override and isolates
("Trojan Source"), zero-width characters, a line separator, NEL, and a tag character."""
TROJAN_SHOWN = (
    "if user == \\u202eadmin\\u2066 \\u2069 ok\\u200b\\u200f\\ufeff\\u2028\\x85\\U000e0041"
)


def test_invisible_format_characters_are_shown_as_escapes_and_other_text_as_it_is(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Bidi overrides and isolates, zero-width characters and the tag characters went
    # to the log as they were: a line (or an error quoting it) read otherwise than it
    # held, or carried text no one saw.
    caplog.set_level(logging.INFO, logger="agcore_tools.mcp.stderr")
    log = StderrLog("srv")
    # A joiner inside Persian words and emoji sequences is part of the text: kept.
    kept = "naïve 東京 🚀 می\u200cخواهم 👩\u200d💻"
    # (On a line of its own: beside the Persian words, the right-to-left mark would stay.)
    log.feed(f"{TROJAN}\n{kept} | ad\u200dmin\n".encode())
    log.flush()
    shown = [TROJAN_SHOWN, f"{kept} | ad\\u200dmin"]
    assert [r.getMessage() for r in caplog.records] == [f"[srv] {line}" for line in shown]
    assert log.tail() == " | ".join(shown)


def test_bidi_marks_stay_in_right_to_left_text_and_overrides_are_escaped_there_too(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The left-to-right, right-to-left and Arabic letter marks were shown as escapes in
    # Hebrew and Arabic lines, which are written with them: "שלום!\u200f" could not be read.
    caplog.set_level(logging.INFO, logger="agcore_tools.mcp.stderr")
    log = StderrLog("srv")
    hebrew = "שגיאה: הקובץ config.json\u200f לא נמצא (קוד 2)\u200f"
    arabic = "خطأ\u061c: المنفذ 8080 مشغول\u200e C++ \u200f"
    # In such a line, the overrides, embeddings and isolates, which reverse letters,
    # are still escaped, as are the soft hyphen and the zero-width space.
    forged = "משתמש \u202enimda\u202c \u2067x\u2069 \u202bא\u202c ad\xadmin a\u200bb"
    # With no right-to-left letter, a mark serves no script and would only lay numbers
    # out otherwise than written ("port \u200f80 443" shows as "port 443 80"); a Syriac
    # abbreviation mark (of class AL, escaped) makes no line right-to-left.
    latin = "port \u200f80 443 \u061c1 2 \u200e3 \u070f"
    for line in (hebrew, arabic, forged, latin):
        log.feed(f"{line}\n".encode())
    log.flush()
    assert [r.getMessage() for r in caplog.records] == [
        f"[srv] {hebrew}",
        f"[srv] {arabic}",
        "[srv] משתמש \\u202enimda\\u202c \\u2067x\\u2069 \\u202bא\\u202c ad\\xadmin a\\u200bb",
        "[srv] port \\u200f80 443 \\u061c1 2 \\u200e3 \\u070f",
    ]


def test_every_control_format_and_separator_character_is_escaped() -> None:
    # The escaped set is listed by hand (re has no Unicode categories): held here to
    # the categories of the running Python's Unicode database.
    hidden = [
        chr(code)
        for code in range(sys.maxunicode + 1)
        if unicodedata.category(chr(code)) in ("Cc", "Cf", "Zl", "Zp") and chr(code) not in "\t\n"
    ]
    log = StderrLog("srv")
    log.feed("".join(hidden).encode() + b"\n")
    log.flush()
    tail = log.tail()
    assert not [char for char in tail if char in hidden]
    assert tail.count("\\") == len(hidden)


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


def test_the_first_lines_and_the_last_error_between_are_kept_with_the_last_lines() -> None:
    # A Node crash names its fault on its first line, then 20 and more lines of frames
    # and paths: the tail kept only those, and the fault was in no error message.
    log = StderrLog("db")
    log.feed(b"".join(b"banner %d\n" % n for n in range(10)))
    log.feed(b"Error: Could not locate the bindings file\n")
    log.feed(b"".join(b"    at frame %d\n" % n for n in range(30)))
    shown = log.tail().split(" | ")
    assert shown[:10] == [f"banner {n}" for n in range(10)]
    assert shown[10:13] == [
        "Error: Could not locate the bindings file",
        "... 10 lines ...",
        "    at frame 10",
    ]
    assert shown[-1] == "    at frame 29" and len(shown) == 32
    # A later error between the head and the tail is the one shown.
    log.feed(b"TypeError [ERR_X]: the second fault\n" + b"    at frame\n" * 30)
    assert (
        "... 31 lines ... | TypeError [ERR_X]: the second fault | ... 10 lines ... |" in log.tail()
    )


PROBE_REPORT = (
    b"WARNING - Failed to validate request: 30 validation errors for ClientRequest\n"
    + b"".join(
        b"Request%d.method\n  Input should be 'm%d' [input_value='server/discover']\n" % (n, n)
        for n in range(30)
    )
)
"""What an MCP Python SDK 1.x server logs for the server/discover probe (61 lines)."""


def test_only_the_probes_report_is_left_out_of_the_tail() -> None:
    # All the lines before the handshake were left out, those before the report too.
    log = StderrLog("sdk1x")
    log.feed(b"".join(b"starting %d\n" % n for n in range(12)))
    log.feed(
        b"Error: SEARCH_API_KEY is not set\n" + b"".join(b"config %d\n" % n for n in range(25))
    )
    log.feed(PROBE_REPORT)
    log.leave_out_probe_dump()
    log.feed(b"Traceback (most recent call last):\nOSError: disk full\n")
    shown = log.tail().split(" | ")
    assert shown[:10] == [f"starting {n}" for n in range(10)]
    assert shown[10:13] == [
        "... 2 lines ...",
        "Error: SEARCH_API_KEY is not set",
        "... 8 lines ...",
    ]
    assert shown[13:] == [  # the tail less the report's first 3 lines, which it held
        *(f"config {n}" for n in range(8, 25)),
        "... 61 lines for the server/discover probe ...",
        "Traceback (most recent call last):",
        "OSError: disk full",
    ]


@pytest.mark.parametrize(
    ("written", "shown"),
    [
        # Nothing names the probe (a TypeScript server answers it with -32601, silently).
        (b"Error: API_KEY is not set\n", "Error: API_KEY is not set"),
        (b"1 validation error for Settings\n", "1 validation error for Settings"),
        # A validation error well before the line naming the probe is not its report.
        (
            b"1 validation error for Settings\n"
            + b"ready\n" * 8
            + b"unknown method server/discover\n",
            "1 validation error for Settings | "
            + " | ".join(["ready"] * 8)
            + " | ... 1 line for the server/discover probe ...",
        ),
    ],
)
def test_the_lines_before_the_handshake_stay_unless_they_are_the_probes_report(
    written: bytes, shown: str
) -> None:
    log = StderrLog("srv")
    log.feed(written)
    log.leave_out_probe_dump()
    assert log.tail() == shown


def test_the_shown_lines_are_bounded_even_when_each_is_long() -> None:
    log = StderrLog("db")
    log.feed(b"".join(b"%d%s\n" % (n, b"h" * 1500) for n in range(10)))
    log.feed(b"Error: " + b"e" * 3000 + b"\n")
    log.feed(b"".join(b"%d%s\n" % (n, b"t" * 1500) for n in range(20)))
    shown = log.tail()
    assert len(shown) < 9000
    assert shown.startswith("0hhh") and shown.endswith("19" + "t" * 1500)
    # The first lines cut at their end, the last at their start, the error on its own.
    assert f" | 1{'h' * 995}... [cut 12537 chars] | Error: eee" in shown
    assert f"e... [cut 1007 chars] | [cut 26087 chars] ...{'t' * 990} | 18tt" in shown


NODE_CRASH = r"""
console.error('Connecting to 1 database source(s)...');
function load() {
  const e = new Error('Could not locate the bindings file');
  e.tries = Array.from({length: 13}, (_, i) => '/app/node_modules/better-sqlite3/build/' + i);
  throw e;
}
try { load(); } catch (e) {
  console.error('Failed to connect to SQLite database:', e);
  process.exit(1);
}
"""

# The fault, raised in a deep stack, is chained to the error the start-up raised in
# another deep stack: its line is neither among the first lines nor among the last.
PYTHON_CRASH = "\n".join(
    [
        *(f"def f{n}(): f{n + 1}()" for n in range(25)),
        "def f25(): open('/nonexistent/app.db')",
        *(f"def g{n}(): g{n + 1}()" for n in range(25)),
        "def g25():",
        "    try: f0()",
        "    except OSError as exc: raise RuntimeError('server failed to start') from exc",
        "g0()",
    ]
)


@pytest.mark.parametrize(
    ("command", "cause"),
    [
        ("node", "Failed to connect to SQLite database: Error: Could not locate the bindings file"),
        (
            sys.executable,
            "FileNotFoundError: [Errno 2] No such file or directory: '/nonexistent/app.db'",
        ),
    ],
    ids=["node", "python"],
)
async def test_a_start_up_crash_with_a_long_stack_names_its_cause(command: str, cause: str) -> None:
    if command == "node":
        transport = StdioTransport(system_node(), ["-e", NODE_CRASH])
    else:
        transport = StdioTransport(command, ["-c", PYTHON_CRASH])
    client = McpClient("db", transport, timeout=20)
    with pytest.raises(McpError, match="exited with code 1 during start-up") as caught:
        await client.connect()
    assert cause in str(caught.value)
    assert cause in client.stderr_tail
