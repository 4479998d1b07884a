"""The transports' auth, headers, env and args: what they accept, and what their repr and
messages show."""

from __future__ import annotations

import contextlib
import http.server
import logging
import shlex
import socket
import sys
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from agcore_tools import (
    McpClient,
    McpError,
    StdioTransport,
    StreamableHttpTransport,
    ToolConfigError,
    ToolError,
)
from agcore_tools._redact import url_secrets, url_without_secrets
from agcore_tools.mcp._stderr import transport_secrets

from .conftest import fixture_stdio, handwritten


def test_auth_takes_an_httpx2_auth_and_nothing_else() -> None:
    auth = httpx2.BasicAuth("user", "pass")
    assert StreamableHttpTransport("http://127.0.0.1:1/mcp", auth=auth).auth is auth
    with pytest.raises(TypeError, match=r"auth must be an httpx2\.Auth, .* got str") as caught:
        StreamableHttpTransport("http://127.0.0.1:1/mcp", auth="Bearer abc")  # type: ignore[arg-type]
    assert isinstance(caught.value, ToolError)


def test_repr_leaves_out_headers_and_auth_which_may_hold_secrets() -> None:
    transport = StreamableHttpTransport(
        "http://127.0.0.1:1/mcp",
        headers={"Authorization": "Bearer s3cret"},
        auth=httpx2.BasicAuth("user", "pa55"),
    )
    shown = repr(transport)
    assert shown.startswith("StreamableHttpTransport(url='http://127.0.0.1:1/mcp'")
    assert "s3cret" not in shown and "Authorization" not in shown and "BasicAuth" not in shown
    assert transport.headers == {"Authorization": "Bearer s3cret"}


def test_no_secret_of_a_transport_shows_in_its_repr_or_in_messages() -> None:
    # A stdio server's env values, a URL's password and its query's keys, and a
    # proxy's password: each is a secret someone will paste into a bug report.
    from agcore_tools import McpClient, StdioTransport

    stdio = StdioTransport("python", ["server.py"], env={"GITHUB_TOKEN": "ghp-SECRET1"})
    assert repr(stdio) == (
        "StdioTransport(command='python', args=('server.py',), env={'GITHUB_TOKEN': '***'}, "
        "cwd=None, stop_grace=2.0, max_message_size=33554432)"
    )
    http = StreamableHttpTransport(
        "https://user:SECRET2@mcp.example.com/mcp?token=SECRET3&v=2",
        proxy="http://me:SECRET4@proxy:3128",
    )
    shown = [repr(http), http.describe(), repr(McpClient("h", http))]
    assert not [text for text in shown if "SECRET" in text], shown
    assert http.describe() == "https://mcp.example.com/mcp?token=***&v=***"
    assert "proxy='http://proxy:3128'" in repr(http)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            "ftp://me:SECRET1@mcp.example.com/mcp?token=SECRET2",
            "ftp://mcp.example.com/mcp?token=***",
        ),
        ("mcp.example.com/mcp?api_key=SECRET3", "mcp.example.com/mcp?api_key=***"),
        (
            "wss://mcp.example.com/u/4b7f2a1e-9c3d-4e5f-8a6b-1c2d3e4f5a6b/mcp",
            "wss://mcp.example.com/u/***/mcp",
        ),
    ],
)
def test_a_url_that_is_not_http_is_refused_without_its_secrets(url: str, shown: str) -> None:
    # Its refusal quoted the URL whole: the password and the key in its query with it.
    with pytest.raises(ToolConfigError) as caught:
        StreamableHttpTransport(url)
    assert str(caught.value) == f"StreamableHttpTransport needs an http(s) URL, got {shown!r}"
    with pytest.raises(ToolConfigError) as caught:
        StreamableHttpTransport(httpx2.URL("https://me:SECRET5@mcp.example.com/mcp"))  # type: ignore[call-overload]
    assert str(caught.value) == "StreamableHttpTransport needs an http(s) URL as a str, got URL"


def test_a_url_urlsplit_cannot_read_is_refused_or_shown_masked_not_a_crash() -> None:
    # A bracketed host that is no IPv6 address: repr() and describe() of a stdio
    # transport with such an argument raised urlsplit's bare ValueError, and the HTTP
    # transport took such a URL and failed when it was shown.
    stdio = StdioTransport("srv", ["--db", "http://[::1:SECRET6@x/db"])
    assert repr(stdio).startswith("StdioTransport(command='srv', args=('--db', '***'), ")
    assert stdio.describe() == "`srv --db '***'`"
    with pytest.raises(ToolConfigError) as caught:
        StreamableHttpTransport("http://[::1:SECRET6@x/mcp")
    assert str(caught.value) == (
        "StreamableHttpTransport needs an http(s) URL, got one whose host in brackets is no address"
    )
    assert isinstance(caught.value.__cause__, ValueError)


SLACK = "ghyQ7Ysl6WtM5lbTxVrX0mIa"
TELEGRAM = "bot1234567:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"
HEX_KEY = "3f9a1c2e7b4d5a6f8091a2b3c4d5e6f7"
UUID_KEY = "4b7f2a1e-9c3d-4e5f-8a6b-1c2d3e4f5a6b"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        # Hidden: a webhook's or hosted server's key in the path.
        (
            f"https://hooks.slack.com/services/T01ABCD2EFG/B02HIJK3LMN/{SLACK}",
            "https://hooks.slack.com/services/T01ABCD2EFG/B02HIJK3LMN/***",
        ),
        (f"https://api.telegram.org/{TELEGRAM}/getMe", "https://api.telegram.org/***/getMe"),
        (f"https://mcp.example.com/u/{HEX_KEY}/mcp", "https://mcp.example.com/u/***/mcp"),
        (
            f"https://eu2.make.com/mcp/api/v1/u/{UUID_KEY}/sse",
            "https://eu2.make.com/mcp/api/v1/u/***/sse",
        ),
        # Kept: ordinary paths, names with digits, numeric ids, long words.
        ("https://mcp.example.com/mcp", "https://mcp.example.com/mcp"),
        (
            "https://api.openai.com/v1/chat/completions",
            "https://api.openai.com/v1/chat/completions",
        ),
        (
            "https://api.github.com/repos/octocat/hello-world",
            "https://api.github.com/repos/octocat/hello-world",
        ),
        (
            "https://r.openai.azure.com/openai/deployments/gpt-4o-mini-2024-07-18",
            "https://r.openai.azure.com/openai/deployments/gpt-4o-mini-2024-07-18",
        ),
        (
            "https://router.huggingface.co/models/meta-llama/Meta-Llama-3.1-8B-Instruct/v1",
            "https://router.huggingface.co/models/meta-llama/Meta-Llama-3.1-8B-Instruct/v1",
        ),
        (
            "https://discord.com/api/webhooks/123456789012345678/internationalization",
            "https://discord.com/api/webhooks/123456789012345678/internationalization",
        ),
    ],
)
def test_a_key_in_the_urls_path_is_hidden_and_ordinary_paths_are_kept(url: str, shown: str) -> None:
    # Webhooks and hosted MCP servers take their key in the path: the query's values and
    # the password were hidden, and such a path was shown whole.
    transport = StreamableHttpTransport(url)
    assert transport.describe() == shown
    assert f"url={shown!r}" in repr(transport)


@pytest.mark.parametrize(
    ("url", "shown", "masked"),
    [
        # OAuth's implicit flow puts the token in the fragment: it was shown whole.
        (
            "https://mcp.example.com/mcp#access_token=ya29.S3cretT0ken&expires_in=3600",
            "https://mcp.example.com/mcp#access_token=***&expires_in=***",
            ["ya29.S3cretT0ken"],
        ),
        (f"https://mcp.example.com/mcp#{HEX_KEY}", "https://mcp.example.com/mcp#***", [HEX_KEY]),
        # An anchor is no secret.
        ("https://mcp.example.com/mcp#section-2", "https://mcp.example.com/mcp#section-2", []),
    ],
)
def test_a_secret_in_the_urls_fragment_is_hidden_and_an_anchor_kept(
    url: str, shown: str, masked: list[str]
) -> None:
    transport = StreamableHttpTransport(url)
    assert transport.describe() == shown
    # And masked in what the server writes back.
    assert transport_secrets(transport) == masked


@pytest.mark.parametrize(
    ("url", "shown", "masked"),
    [
        # A key given bare was shown as "<key>=***": the key, with "=***" after it.
        (f"https://mcp.example.com/sse?{HEX_KEY}", "https://mcp.example.com/sse?***", [HEX_KEY]),
        (
            f"https://mcp.example.com/sse?workspace=w1&{SLACK}",
            "https://mcp.example.com/sse?workspace=***&***",
            [SLACK],
        ),
        (
            f"https://mcp.example.com/cb#state=s1&{HEX_KEY}",
            "https://mcp.example.com/cb#state=***&***",
            [HEX_KEY],
        ),
        # A flag, a short word, stays as written; a plain parameter's name too.
        (
            "https://mcp.example.com/sse?debug&format",
            "https://mcp.example.com/sse?debug&format",
            [],
        ),
    ],
)
def test_a_query_part_with_no_value_is_hidden_unless_a_flag(
    url: str, shown: str, masked: list[str]
) -> None:
    assert url_without_secrets(url) == shown
    assert set(masked) <= set(url_secrets(url))
    # A bare part has no name for `named` to accept.
    assert not set(masked) & set(url_secrets(url, named=lambda name: True))
    transport = StreamableHttpTransport(url)
    assert transport.describe() == shown and f"url={shown!r}" in repr(transport)
    assert transport_secrets(transport) == masked


async def _upstream_refused(env: dict[str, str]) -> tuple[str, ToolError]:
    """The fixture server's ``upstream`` tool run with ``env`` and ``UPSTREAM_URL`` set to
    an endpoint that refuses connections: that endpoint, and the error the call raised."""
    refusing = socket.socket()  # bound, never listening: a connection is refused
    refusing.bind(("127.0.0.1", 0))
    endpoint = f"http://127.0.0.1:{refusing.getsockname()[1]}"
    try:
        stdio = fixture_stdio(env={"UPSTREAM_URL": endpoint, **env})
        async with McpClient("graf", stdio, timeout=20) as client:
            with pytest.raises(ToolError) as failed:
                await client.call_tool("upstream")
    finally:
        refusing.close()
    return endpoint, failed.value


async def test_a_servers_error_shows_its_endpoint_and_path_but_no_secret_of_its_env(
    tmp_path: Path,
) -> None:
    # Every env value of 8 characters or more was masked: mcp-grafana's error read
    # 'Get "***/api/datasources": ... connection refused', and the model lost the one
    # fact that told what was wrong, while no secret was kept from it.
    data = str(tmp_path / "chdb")
    env = {
        "DATA_PATH": data,
        "MIRROR_URL": "https://svc:pw-S3CRET-1@mirror.example.com/v1?api_key=k-S3CRET-2",
        "UPSTREAM_ORG": "org-S3CRET-3",  # no name or shape says what it is: masked
        "UPSTREAM_AUTH": "/run/secrets/S3CRET-4",  # a path, but named a secret: masked
    }
    endpoint, failed = await _upstream_refused(env)
    message = str(failed)
    assert f'Get "{endpoint}/api/datasources": [Errno 111] Connection refused' in message
    assert f"DATA_PATH={data}," in message
    assert "MIRROR_URL=https://***@mirror.example.com/v1?api_key=***," in message
    assert "UPSTREAM_ORG=***, UPSTREAM_AUTH=***)" in message
    assert "S3CRET" not in "".join(traceback.format_exception(failed))


@pytest.mark.parametrize(
    ("mirror", "shown", "secret"),
    [
        # A generated password with an unencoded "/" and "#": urlsplit ends the user info
        # at the "/", found no password, and the URL was shown whole.
        (
            "postgresql://app:Xy7/q#R2pL9w@db.internal:5432/prod",
            "postgresql://***@db.internal:5432/prod",
            "Xy7/q#R2pL9w",
        ),
        ("redis://:p/w#1@cache:6379/0", "***@cache:6379/0", "p/w#1"),
        # A key given as a bare query part was shown, as "<key>=***" was in describe().
        (
            "https://api.example.com/v1?sk9Ab8Cd7Ef6Gh5Ij4Kl3Mn2",
            "https://api.example.com/v1?***",
            "sk9Ab8Cd7Ef6Gh5Ij4Kl3Mn2",
        ),
        # Read no further: an unencoded "#" in a query value ends it, the rest read as an
        # anchor; an IPv6 host never closed. Masked whole, as any other value.
        ("https://api.example.com/v1?key=Ab3#S3CRET9kLmN", "***", "S3CRET9kLmN"),
        ("http://[fe80::1/v1?token=S3CRET-7", "***", "S3CRET-7"),
    ],
)
async def test_a_url_env_value_the_url_rule_reads_wrong_shows_no_secret(
    mirror: str, shown: str, secret: str
) -> None:
    # The env values had been masked whole; then only the parts a URL's rule hides were,
    # and a password or a key that urlsplit reads as a path, an anchor or a bare query
    # part showed in the server's error.
    _, failed = await _upstream_refused({"MIRROR_URL": mirror})
    assert f"(MIRROR_URL={shown}, DATA_PATH=-," in str(failed)
    assert secret not in "".join(traceback.format_exception(failed))


@pytest.mark.parametrize(
    ("value", "masked"),
    [
        ("http://127.0.0.1:18999", []),
        ("/usr/bin:/bin", []),
        ("C:\\ProgramData\\chdb", []),
        # A URL's password, short as it is, with the user (and scheme) before it.
        ("redis://:pw@cache:6379/0", ["redis://:pw"]),
        ("postgresql://app:hunter2-pw@db/prod", ["app:hunter2-pw", "hunter2-pw"]),
        # A user name is no secret; a token standing as the user is.
        ("postgresql://postgres@db/prod", []),
        (f"https://{HEX_KEY}@github.com/org/repo", [HEX_KEY]),
        # A path holding a key, or with base64's signs, is masked whole, as an opaque value.
        (f"/var/lib/app/{UUID_KEY}", [f"/var/lib/app/{UUID_KEY}"]),
        ("/k3J+abc/DEF123==", ["/k3J+abc/DEF123=="]),
        ("db.internal", ["db.internal"]),
        # A password urlsplit does not read ("/", "?" or "#" unencoded): the user info
        # up to the last "@", with the scheme when short.
        (
            "postgresql://app:Xy7/q#R2pL9w@db.internal:5432/prod",
            ["app:Xy7/q#R2pL9w", "Xy7/q#R2pL9w"],
        ),
        # A replica set's host list; a password of digits and a "/" (no port outside the
        # web); and the start clients read as the port.
        (
            "mongodb://app:Xy7/q9RzT2pL@db1:27017,db2:27017/prod",
            ["app:Xy7/q9RzT2pL", "Xy7/q9RzT2pL"],
        ),
        ("postgresql://app:2024/S3cretPw@db/prod", ["app:2024/S3cretPw", "2024/S3cretPw"]),
        # urlsplit's own reading is masked too ("w@cache:6379/0", a bare query part), in
        # case the "@" was not the user info's end: more hidden, never less.
        ("redis://:p?w@cache:6379/0", ["w@cache:6379/0", "redis://:p?w"]),
        # An "@" after the host (an e-mail in the query, a "/@alice" path) ends no user
        # info: the query's values and the path's keys are masked, the endpoint shown.
        (
            f"https://api.example.com/v1/send?to=ops@example.com&apikey={HEX_KEY}",
            [HEX_KEY, "ops@example.com"],
        ),
        (f"https://mcp.example.com/u/{UUID_KEY}/mcp?by=@jane", [UUID_KEY]),
        ("https://mastodon.social/@alice", []),
        # A bare query part: the key itself; a short word is a flag.
        (f"https://api.example.com/v1?{HEX_KEY}&debug", [HEX_KEY]),
        # What the URL rule cannot read: whole.
        (
            "https://api.example.com/v1?key=Ab3#xYz9kLmN",
            ["https://api.example.com/v1?key=Ab3#xYz9kLmN"],
        ),
        ("http://[fe80::1/v1", ["http://[fe80::1/v1"]),
        ("//[fe80::1/data", ["//[fe80::1/data"]),
    ],
)
def test_which_env_values_a_servers_text_is_masked_with(value: str, masked: list[str]) -> None:
    assert transport_secrets(StdioTransport("srv", env={"SETTING": value})) == masked
    # Whatever the value, a name that marks a secret masks it whole.
    assert transport_secrets(StdioTransport("srv", env={"DB_PASSWORD": value})) == [value]


@pytest.mark.parametrize(
    ("url", "shown", "secret"),
    [
        # A generated password with an unencoded "/" and "#": urlsplit ended the user info
        # at the "/", found the password "Xy7", and describe() showed the rest whole.
        ("postgresql://app:Xy7/q#R2pL9w@db/prod", "postgresql://db/prod", "Xy7/q#R2pL9w"),
        ("postgresql://app:Xy7q?R2pL9w@db/prod", "postgresql://db/prod", "Xy7q?R2pL9w"),
        ("mysql://root:S3cr/et-pw@localhost:3306/app", "mysql://localhost:3306/app", "S3cr/et-pw"),
        # A replica set's or a multi-host URL's host list; a password of digits and a "/"
        # (outside web URLs, not a port and a path).
        (
            "mongodb://app:Xy7/q9RzT2pL@db1:27017,db2:27017/prod",
            "mongodb://db1:27017,db2:27017/prod",
            "Xy7/q9RzT2pL",
        ),
        ("postgresql://app:2024/S3cretPw@db/prod", "postgresql://db/prod", "2024/S3cretPw"),
        # An "@" in a web URL's path after a port, or in a query (after a user name that
        # cannot be one), ends no user info: the URL was shown with another host.
        ("https://social.example:8443/@alice", "https://social.example:8443/@alice", None),
        ("http://127.0.0.1:9?notify=ops@example.com", "'http://127.0.0.1:9?notify=***'", None),
        (
            "https://a.example/s?t=10:30&to=b@example.com",
            "'https://a.example/s?t=***&to=***'",
            None,
        ),
        (
            "https://web.archive.org/web/2020/https://x.example/@alice",
            "https://web.archive.org/web/2020/https://x.example/@alice",
            None,
        ),
    ],
)
def test_a_password_urlsplit_misreads_in_a_stdio_argument_is_hidden(
    url: str, shown: str, secret: str | None
) -> None:
    # Stop 48 hid such passwords in env values, and the same URL given as an argument
    # still showed in describe() and repr(), and was not masked in the server's stderr.
    transport = StdioTransport("srv", ["--db", url])
    assert transport.describe() == f"`srv --db {shown}`"
    assert f"args=('--db', {shown.strip(chr(39))!r})" in repr(transport)
    assert secret is None or secret in transport_secrets(transport)


def test_an_http_url_whose_password_holds_a_slash_is_refused_without_it() -> None:
    # Every client read the password's start as the port: the connection failed with
    # "Invalid port: 'LongPrefix12'", that part of the password in the error and logs.
    with pytest.raises(ToolConfigError) as caught:
        StreamableHttpTransport("http://user:LongPrefix12/x@127.0.0.1:9/mcp")
    assert str(caught.value) == (
        "StreamableHttpTransport got a URL whose password holds an unencoded '/', '?' or "
        "'#' ('http://127.0.0.1:9/mcp'): percent-encode them (%2F, %3F, %23)"
    )


@pytest.mark.parametrize(
    ("url", "echoed"),
    [
        # A short password, hidden in describe(), showed where the server echoed the URL.
        ("mysql://root:pw@localhost:3306/app", "mysql://root:pw@localhost:3306/app"),
        # The start of a misread password is what a driver reads as the port.
        ("postgresql://app:LongPrefix12/x@db/prod", 'invalid integer value "LongPrefix12"'),
    ],
)
def test_a_stdio_argument_urls_password_is_masked_in_what_the_server_writes(
    url: str, echoed: str
) -> None:
    hidden = [
        secret for secret in transport_secrets(StdioTransport("srv", [url])) if secret in echoed
    ]
    assert hidden, f"nothing of {echoed!r} is masked"


@contextlib.contextmanager
def express_404() -> Iterator[str]:
    """An HTTP endpoint answering every POST with 404 and, as text, Express's words for
    a route it lacks: ``Cannot POST <path>``, the path echoed. Yields its base URL."""

    class NoRoute(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            body = f"Cannot POST {self.path}".encode()
            self.send_response(404)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    with handwritten(NoRoute) as url:
        yield url.removesuffix("/mcp")


async def test_a_key_in_the_urls_path_is_hidden_in_errors_and_in_what_the_server_echoes() -> None:
    with express_404() as base:
        client = McpClient("keyed", StreamableHttpTransport(f"{base}/u/{HEX_KEY}/mcp"), timeout=20)
        with pytest.raises(McpError) as failed:
            await client.connect()
    message = str(failed.value)
    assert message.startswith(f"MCP server 'keyed': cannot connect to {base}/u/***/mcp: ")
    assert "Cannot POST /u/***/mcp" in message
    assert HEX_KEY not in "".join(traceback.format_exception(failed.value))


async def test_a_secret_in_a_stdio_servers_args_shows_neither_in_its_repr_nor_in_messages() -> None:
    # server-postgres takes its password in a URL argument: it was in the start-up
    # error and in repr(), while env values and the HTTP URL's password were hidden.
    args = ["-c", "import sys; sys.exit('cannot reach database')"]
    secrets = ["postgresql://app:SECRET1@db.internal/prod", "--api-key=SECRET2", "--token"]
    stdio = StdioTransport(sys.executable, [*args, *secrets, "SECRET3", "--db=redis://:SECRET4@r"])
    assert stdio.args[2:] == (*secrets, "SECRET3", "--db=redis://:SECRET4@r")
    assert repr(stdio).startswith(
        f"StdioTransport(command={sys.executable!r}, args=('-c', \"import sys; "
        "sys.exit('cannot reach database')\", 'postgresql://db.internal/prod', "
        "'--api-key=***', '--token', '***', '--db=redis://r'), env=None"
    )
    assert stdio.describe().endswith(
        " postgresql://db.internal/prod '--api-key=***' --token '***' --db=redis://r`"
    )
    client = McpClient("pg", stdio, timeout=10)
    with pytest.raises(McpError, match="exited with code 1 during start-up") as caught:
        await client.connect()
    shown = [str(caught.value), repr(stdio), stdio.describe(), repr(client)]
    assert not [text for text in shown if "SECRET" in text], shown


async def test_a_url_argument_with_nothing_to_hide_is_shown_as_written() -> None:
    # sqlite:///var/data/app.db was shown as sqlite:/var/data/app.db: a user copying the
    # command from the start-up error ran another argument than the one that failed.
    words = ["sqlite:///var/data/app.db", "file:///home/me/notes", "HTTPS://Example.com/x?"]
    hiding = "sqlite:///var/data/app.db?key=SECRET1"
    stdio = StdioTransport(sys.executable, ["-c", "import sys; sys.exit(1)", *words, hiding])
    shown = ", ".join(repr(word) for word in words)
    assert repr(stdio).startswith(
        f"StdioTransport(command={sys.executable!r}, args=('-c', 'import sys; sys.exit(1)', "
        f"{shown}, 'sqlite:///var/data/app.db?key=***'), env=None"
    )
    with pytest.raises(McpError, match="exited with code 1 during start-up") as caught:
        await McpClient("db", stdio, timeout=10).connect()
    assert " sqlite:///var/data/app.db file:///home/me/notes " in str(caught.value)
    assert "sqlite:///var/data/app.db?key=***" in str(caught.value)
    assert "SECRET1" not in str(caught.value)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: StdioTransport("node", env={"MEMORY_FILE_PATH": None, "K": "s3cret"}),
            "StdioTransport env['MEMORY_FILE_PATH'] must be a string, got None",
        ),
        (
            lambda: StdioTransport("node", ["server.js", None]),
            "StdioTransport args[1] must be a string, got None",
        ),
        (
            lambda: StreamableHttpTransport(
                "http://127.0.0.1:1/mcp", headers={"X-Key": "s3cret", "Authorization": None}
            ),
            "StreamableHttpTransport headers['Authorization'] must be a string, got None",
        ),
        (
            lambda: StreamableHttpTransport("http://127.0.0.1:1/mcp", headers={"X": b"s3cret"}),
            "StreamableHttpTransport headers['X'] must be a string, got bytes",
        ),
    ],
)
def test_a_value_that_is_no_string_is_refused_not_sent_as_its_repr(
    make: Callable[[], object], message: str
) -> None:
    # An unset variable read with os.environ.get() was sent as "None": server-memory
    # saved its graph to a file named None, and "Authorization: None" went out.
    with pytest.raises(ToolConfigError) as caught:
        make()
    assert str(caught.value) == message
    assert isinstance(caught.value, ValueError) and "s3cret" not in str(caught.value)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: StdioTransport("node", env="TOKEN=s3cret"),
            "StdioTransport env must be a dict of names to strings, got str: use "
            "env={'NAME': 'value'}",
        ),
        (
            lambda: StreamableHttpTransport(
                "http://127.0.0.1:1/mcp", headers="Authorization: Bearer s3cret"
            ),
            "StreamableHttpTransport headers must be a dict of names to strings, got str: "
            "use headers={'Authorization': 'Bearer ...'}",
        ),
    ],
)
def test_env_or_headers_as_one_string_are_refused_without_showing_them(
    make: Callable[[], object], message: str
) -> None:
    # An AttributeError: 'str' object has no attribute 'items'.
    with pytest.raises(ToolConfigError) as caught:
        make()
    assert str(caught.value) == message
    assert isinstance(caught.value, ValueError)


def test_a_header_token_read_from_a_file_loses_its_newline() -> None:
    # Path("~/.token").read_text() ends in "\n": the HTTP library refused the header
    # with "Illegal header value b'Bearer s3cret\\n'", token and all, in the McpError.
    transport = StreamableHttpTransport(
        "http://127.0.0.1:1/mcp", headers={"Authorization": "Bearer s3cret\n", "X-Key": " k \r\n"}
    )
    assert transport.headers == {"Authorization": "Bearer s3cret", "X-Key": "k"}


@pytest.mark.parametrize("value", ["Bearer s3cret\nX-Evil: 1", "s3cret\x00", "s3cr\u00e9t"])
def test_a_header_value_http_cannot_carry_is_refused_without_showing_it(value: str) -> None:
    with pytest.raises(ToolConfigError) as caught:
        StreamableHttpTransport("http://127.0.0.1:1/mcp", headers={"Authorization": value})
    message = str(caught.value)
    assert message.startswith("StreamableHttpTransport headers['Authorization'] holds a line")
    assert isinstance(caught.value, ValueError) and "s3cr" not in message


def test_numbers_and_paths_are_still_taken_as_strings(tmp_path: Path) -> None:
    stdio = StdioTransport("python", [tmp_path / "s.py", 8080], env={"PORT": 8080})
    assert stdio.args == (str(tmp_path / "s.py"), "8080") and stdio.env == {"PORT": "8080"}


async def test_docker_env_values_and_mcp_remote_headers_show_neither_in_repr_nor_in_messages() -> (
    None
):
    # The GitHub server's documented launch is `docker run -e GITHUB_PERSONAL_ACCESS_TOKEN=...`
    # and mcp-remote's is `--header "Authorization: Bearer ..."`: both showed their token.
    args = ["-c", "import sys; sys.exit('cannot reach database')"]
    docker = ["-e", "GITHUB_PERSONAL_ACCESS_TOKEN=SECRET1", "-e", "LOG=S", "-e", "GITHUB_HOST"]
    named = [
        "--env=DB_PASSWORD=SECRET2",
        "API_KEY=SECRET3",
        "DATABASE_URL=postgresql://a:SECRET4@db",
    ]
    headers = ["--header", "Authorization: Bearer SECRET5", "-H", "X-Api-Key:SECRET6"]
    harmless = ["--header=Accept: text/event-stream", "--key-file=/etc/k.pem", "ghcr.io/x/y"]
    stdio = StdioTransport(sys.executable, [*args, *docker, *named, *headers, *harmless])
    assert stdio.args[2:] == (*docker, *named, *headers, *harmless)
    assert repr(stdio).startswith(
        f"StdioTransport(command={sys.executable!r}, args=('-c', \"import sys; "
        "sys.exit('cannot reach database')\", '-e', 'GITHUB_PERSONAL_ACCESS_TOKEN=***', "
        "'-e', 'LOG=***', '-e', 'GITHUB_HOST', '--env=DB_PASSWORD=***', 'API_KEY=***', "
        "'DATABASE_URL=postgresql://db', '--header', 'Authorization: ***', '-H', "
        "'X-Api-Key: ***', '--header=Accept: ***', '--key-file=/etc/k.pem', 'ghcr.io/x/y'), "
        "env=None"
    )
    assert stdio.describe().endswith(
        " -e 'GITHUB_PERSONAL_ACCESS_TOKEN=***' -e 'LOG=***' -e GITHUB_HOST "
        "'--env=DB_PASSWORD=***' 'API_KEY=***' DATABASE_URL=postgresql://db "
        "--header 'Authorization: ***' -H 'X-Api-Key: ***' '--header=Accept: ***' "
        "--key-file=/etc/k.pem ghcr.io/x/y`"
    )
    client = McpClient("gh", stdio, timeout=10)
    with pytest.raises(McpError, match="exited with code 1 during start-up") as caught:
        await client.connect()
    shown = [str(caught.value), repr(stdio), stdio.describe(), repr(client)]
    assert not [text for text in shown if "SECRET" in text], shown


def test_mcp_proxys_two_word_headers_and_env_are_masked_but_docker_images_shown() -> None:
    # mcp-proxy takes `-H NAME VALUE`, `--headers NAME VALUE` and `-e NAME VALUE`: their
    # values were shown in clear in repr(), describe() and the start-up error.
    token = "Zq8pLr2Xv9Tn4Wm7Kc1Hs5"  # no known prefix
    proxy = StdioTransport(
        "mcp-proxy",
        [
            *("-H", "Authorization", f"Bearer {token}"),
            *("--headers", "X-Api-Key", token),
            *("-e", "GITHUB_TOKEN", token),
            *("-e", "DATA_DIR", "/srv/data"),  # a plain path, shown as env= shows it
            "http://127.0.0.1:9/mcp",
        ],
    )
    assert proxy.describe() == (
        "`mcp-proxy -H Authorization '***' --headers X-Api-Key '***' -e GITHUB_TOKEN '***' "
        "-e DATA_DIR /srv/data http://127.0.0.1:9/mcp`"
    )
    assert token not in repr(proxy)
    # docker run's -e NAME passes the host's value: the image after it is no value.
    docker = StdioTransport("docker", ["run", "-i", "--rm", "-e", "GITHUB_TOKEN", "ghcr.io/o/s"])
    assert docker.describe() == "`docker run -i --rm -e GITHUB_TOKEN ghcr.io/o/s`"


async def test_docker_env_values_are_shown_and_masked_as_the_servers_env_values_are(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Every -e/--env value was hidden whole: the endpoint docker passed to the server
    # (-e GRAFANA_URL=http://127.0.0.1:3000) was "***" in describe() and in the start-up
    # error, where the env= rule shows an endpoint and a path and hides a URL's password.
    caplog.set_level(logging.INFO, logger="agcore_tools.mcp.stderr")
    code = "import sys; print('rejected:', *sys.argv[1:], file=sys.stderr); sys.exit(3)"
    args = [
        *("-e", "GRAFANA_URL=http://127.0.0.1:3000"),
        *("--env", "DATA_PATH=/data/chdb"),
        "--env=DB_URL=postgresql://app:S3CRET-pw-1@db/prod",
        "-eMIRROR_URL=https://svc:S3CRET-pw-2@mirror.example.com/v1?api_key=S3CRET-key-3",
        *("-e", "API_TOKEN=S3CRET-4"),  # a secret's name: whole, whatever the value
        *("-e", "UPSTREAM_AUTH=/run/secrets/S3CRET-5"),
        *("-e", "UPSTREAM_ORG=S3CRET-org-6"),  # no name or shape says what it is
        f"-eMCP_URL=https://mcp.example.com/u/{HEX_KEY}/mcp",
        # A webhook's URL is its credential, with no key-shaped part to find.
        *("-e", "SLACK_WEBHOOK_URL=https://hooks.zapier.com/hooks/catch/1234567/S3CRET7/"),
        *("-e", f"GIT_URL=https://{UUID_KEY}@github.com/o/r"),  # a token as the user
        "-eNODE_ENV=production",
    ]
    stdio = StdioTransport(sys.executable, ["-c", code, *args])
    shown = (
        "-e GRAFANA_URL=http://127.0.0.1:3000 --env DATA_PATH=/data/chdb "
        "--env=DB_URL=postgresql://db/prod "
        "'-eMIRROR_URL=https://mirror.example.com/v1?api_key=***' -e 'API_TOKEN=***' "
        "-e 'UPSTREAM_AUTH=***' -e 'UPSTREAM_ORG=***' '-eMCP_URL=https://mcp.example.com/u/***/mcp' "
        "-e 'SLACK_WEBHOOK_URL=***' "
        "-e GIT_URL=https://github.com/o/r '-eNODE_ENV=***'"
    )
    assert stdio.describe().endswith(f" {shown}`")
    assert repr(stdio).startswith(
        f"StdioTransport(command={sys.executable!r}, args=('-c', {code!r}, "
        + ", ".join(repr(arg) for arg in shlex.split(shown))
        + "), env=None"
    )
    client = McpClient("srv", stdio, timeout=10)
    with pytest.raises(McpError, match="exited with code 3 during start-up") as caught:
        await client.connect()
    message = str(caught.value)
    # What the server echoes is masked with the same values: the endpoint stays readable.
    assert message.endswith(
        "stderr: rejected: -e GRAFANA_URL=http://127.0.0.1:3000 --env DATA_PATH=/data/chdb "
        "--env=DB_URL=postgresql://***@db/prod "
        "-eMIRROR_URL=https://***@mirror.example.com/v1?api_key=*** "
        "-e API_TOKEN=*** -e UPSTREAM_AUTH=*** -e UPSTREAM_ORG=*** "
        "-eMCP_URL=https://mcp.example.com/u/***/mcp -e SLACK_WEBHOOK_URL=*** "
        "-e GIT_URL=https://***@github.com/o/r "
        "-eNODE_ENV=***"
    )
    texts = [message, repr(stdio), stdio.describe(), repr(client), client.stderr_tail, caplog.text]
    secrets = ["S3CRET", HEX_KEY, UUID_KEY, "production"]
    assert not [(s, t) for s in secrets for t in texts if s in t]


async def test_connection_string_passwords_pats_and_prefixed_keys_are_hidden_and_masked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A SQL Server connection string's Password=, --pat (GitHub, Azure DevOps) and a key
    # passed bare showed in full in repr() and messages, and in the echoed stderr.
    caplog.set_level(logging.INFO, logger="agcore_tools.mcp.stderr")
    secrets = ["hunter2hunter2", "azdo-pat-0123456789", "sk-proj-abcdef1234567890abcdef"]
    more = ["s3cretPwd99", "ghp_abcdef1234567890XYZ", "AKIAIOSFODNN7EXAMPLE", "abc+def/ghi=="]
    args = [
        *("--connection-string", f"Server=db;User Id=app;Password={secrets[0]}"),
        *("--pat", secrets[1], "-y", "@modelcontextprotocol/server-github", secrets[2]),
        f"--db=Data Source=db; Pwd={more[0]};Encrypt=True",
        f'{{"token": "{more[1]}"}}',
        *("--aws", more[2]),
        f"AccountName=acc;AccountKey={more[3]};EndpointSuffix=core.windows.net",
    ]
    harmless = ["--path", "/srv/sk-data", "sk-learn", "hf_transfer", "https://gw.example/v1/x"]
    code = "import sys; print('rejected:', *sys.argv[1:], file=sys.stderr); sys.exit(3)"
    stdio = StdioTransport(sys.executable, ["-c", code, *args, *harmless])
    assert stdio.describe().endswith(
        " --connection-string 'Server=db;User Id=app;Password=***' --pat '***' -y "
        "@modelcontextprotocol/server-github '***' '--db=Data Source=db; Pwd=***;Encrypt=True' "
        "'{\"token\": \"***\"}' --aws '***' "
        "'AccountName=acc;AccountKey=***;EndpointSuffix=core.windows.net' "
        "--path /srv/sk-data sk-learn hf_transfer https://gw.example/v1/x`"
    )
    client = McpClient("srv", stdio, timeout=10)
    with pytest.raises(McpError, match="exited with code 3 during start-up") as caught:
        await client.connect()
    message = str(caught.value)
    assert message.endswith(
        "stderr: rejected: --connection-string Server=db;User Id=app;Password=*** --pat *** -y "
        "@modelcontextprotocol/server-github *** --db=Data Source=db; Pwd=***;Encrypt=True "
        '{"token": "***"} --aws *** AccountName=acc;AccountKey=***;EndpointSuffix=core.windows.net '
        "--path /srv/sk-data sk-learn hf_transfer https://gw.example/v1/x"
    )
    shown = [message, repr(stdio), stdio.describe(), repr(client), client.stderr_tail, caplog.text]
    assert not [(s, t) for s in [*secrets, *more] for t in shown if s in t]
