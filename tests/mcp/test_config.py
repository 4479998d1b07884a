"""load_mcp_servers: the mcpServers JSON of Claude Desktop, Cursor and VS Code."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from agcore_tools import (
    AgcoreError,
    McpClient,
    StdioTransport,
    StreamableHttpTransport,
    ToolConfigError,
    ToolError,
    ToolRegistry,
    load_mcp_servers,
)

from .conftest import FIXTURE, HttpServer

CLAUDE_DESKTOP = {
    "mcpServers": {
        "filesystem": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop"],
        },
        "github": {
            "command": "docker",
            "args": ["run", "-i", "--rm", "ghcr.io/github/github-mcp-server"],
            "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "token"},
        },
        "remote": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer t"}},
        "off": {"command": "whatever", "disabled": True},
    }
}


def test_reads_a_dict_in_order() -> None:
    clients = load_mcp_servers(CLAUDE_DESKTOP, timeout=7)
    assert [c.server_name for c in clients] == ["filesystem", "github", "remote"]
    fs, gh, remote = clients
    assert fs.transport == StdioTransport(
        "npx", ["-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop"]
    )
    assert isinstance(gh.transport, StdioTransport)
    assert gh.transport.env == {"GITHUB_PERSONAL_ACCESS_TOKEN": "token"}
    assert remote.transport == StreamableHttpTransport(
        "https://mcp.example.com/mcp", {"Authorization": "Bearer t"}
    )
    assert all(isinstance(c, McpClient) and c.timeout == 7 and not c.connected for c in clients)


def test_reads_a_file(tmp_path: Path) -> None:
    path = tmp_path / "claude_desktop_config.json"
    path.write_text(json.dumps(CLAUDE_DESKTOP))
    assert [c.server_name for c in load_mcp_servers(path)] == ["filesystem", "github", "remote"]
    assert len(load_mcp_servers(str(path))) == 3


def test_vs_code_servers_key_and_type_field() -> None:
    clients = load_mcp_servers(
        {
            "servers": {
                "local": {
                    "type": "stdio",
                    "command": "python",
                    "args": ["server.py"],
                    "cwd": "/srv",
                },
                "web": {"type": "http", "url": "http://127.0.0.1:8000/mcp"},
            }
        }
    )
    assert isinstance(clients[0].transport, StdioTransport) and clients[0].transport.cwd == "/srv"
    assert isinstance(clients[1].transport, StreamableHttpTransport)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"args": ["x"]}, "server 'bad' needs a 'command' \\(stdio\\) or a 'url'"),
        ({"command": ""}, "'command' must be a non-empty string"),
        ({"command": "x", "args": "not a list"}, "'args' must be a list of strings"),
        ({"command": "x", "env": {"A": ["list"]}}, "'env' must map names to strings"),
        ({"url": "ftp://x"}, "needs an http\\(s\\) URL"),
        ({"type": "sse", "url": "http://x/sse"}, "deprecated HTTP\\+SSE transport"),
        ("just a string", "server 'bad' must be an object"),
        ({"command": "x", "disabled": "yes"}, "'disabled' must be true or false, got 'yes'"),
        ({"command": "x", "url": "http://h/mcp"}, "has both a 'command' and a 'url'"),
        # These once started the server some other way than the file says, silently.
        ({"type": "stdio", "command": "x", "envFile": "/home/me/.env"}, "'envFile' is not"),
        ({"type": "streamable", "url": "https://x/mcp"}, "server 'bad': unknown 'type'"),
        ({"type": "websocket", "url": "wss://x/mcp"}, "server 'bad': unknown 'type'"),
        ({"command": "x", "env": ["TOKEN=abc"]}, "'env' must map names to strings"),
        ({"command": "x", "env": []}, "'env' must map names to strings"),
        ({"command": "x", "env": ""}, "'env' must map names to strings"),
        ({"url": "https://x/mcp", "headers": []}, "'headers' must map names to strings"),
    ],
)
def test_malformed_entries_name_the_server_and_field(entry: object, message: str) -> None:
    with pytest.raises(ToolError, match=message):
        load_mcp_servers({"mcpServers": {"bad": entry}})


def test_an_entry_that_is_not_an_object_is_not_echoed() -> None:
    # The whole entry was in the message, token and all.
    with pytest.raises(ToolError) as info:
        load_mcp_servers({"mcpServers": {"gh": "npx srv --token sk-S3CRET"}})
    assert str(info.value) == "MCP config: server 'gh' must be an object, got str"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"timout": 5}, "load_mcp_servers() got an unknown keyword 'timout': did you mean "),
        ({"colour": "red"}, "load_mcp_servers() got an unknown keyword 'colour'; its keywords "),
        (
            {"transport": None},
            "load_mcp_servers() got an unknown keyword 'transport': the config gives each "
            "server its name and transport; its keywords are elicitation_handler, log_level, ",
        ),
    ],
)
def test_a_keyword_no_client_takes_is_refused_naming_load_mcp_servers(
    options: dict[str, object], message: str
) -> None:
    # Python's bare TypeError, naming McpClient.__init__, which the caller never called
    # (and for "transport", "got multiple values"); none with an empty config.
    empty: dict[str, object] = {"mcpServers": {}}
    for config in (CLAUDE_DESKTOP, empty):
        with pytest.raises(TypeError) as info:
            load_mcp_servers(config, **options)
        assert str(info.value).startswith(message), str(info.value)
        assert isinstance(info.value, ToolConfigError) and isinstance(info.value, AgcoreError)


@pytest.mark.parametrize("config", [5, b"mcp.json", ["mcp.json"], None])
def test_a_config_that_is_no_path_or_mapping_is_refused(config: object) -> None:
    # Python's bare TypeError from pathlib.
    with pytest.raises(ToolConfigError) as info:
        load_mcp_servers(config)  # type: ignore[arg-type]
    assert str(info.value) == (
        "load_mcp_servers() takes the path of an MCP config file (a str or a Path) or the "
        f"parsed document (a dict), got {type(config).__name__}"
    )


@pytest.mark.parametrize("indent", [None, 2])
def test_the_text_of_a_config_given_for_its_path_is_not_echoed(indent: int | None) -> None:
    # It was taken as a file name, and the error quoted it whole, tokens and all.
    remote = {"url": "https://mcp.example.com/mcp", "headers": {"X-Api-Key": "k-S3CRET-0123"}}
    config = {"mcpServers": {**CLAUDE_DESKTOP["mcpServers"], "keyed": remote}}
    text = json.dumps(config, indent=indent)
    with pytest.raises(ToolConfigError) as info:
        load_mcp_servers(text)
    assert "S3CRET" not in str(info.value)
    assert str(info.value) == (
        "load_mcp_servers() takes the path of an MCP config file or the parsed document, "
        "got the text of one, not a path: pass json.loads(text)"
    )
    assert load_mcp_servers(json.loads(text))[0].server_name == "filesystem"


def test_json_scalars_in_env_and_args_reach_the_server_as_json_spells_them() -> None:
    # JSON true reached the server as Python's "True".
    entry = {"command": "x", "env": {"DEBUG": True, "PORT": 8080}, "args": ["--v", False, 2]}
    [client] = load_mcp_servers({"mcpServers": {"a": entry}})
    assert isinstance(client.transport, StdioTransport)
    assert client.transport.env == {"DEBUG": "true", "PORT": "8080"}
    assert client.transport.args == ("--v", "false", "2")


def test_a_vs_code_file_with_comments_trailing_commas_and_a_bom_is_read(tmp_path: Path) -> None:
    # VS Code's mcp.json is JSON with comments; Windows editors write a BOM.
    path = tmp_path / "mcp.json"
    path.write_text(
        '\ufeff{\n  // my servers\n  "servers": {\n'
        '    "fs": {"command": "npx", "args": ["-y", "a//b", "/*x*/"],},  /* the web one */\n'
        '    "web": {"type": "http", "url": "https://mcp.example.com/mcp",},\n  },\n}\n',
        encoding="utf-8",
    )
    clients = load_mcp_servers(path)
    assert [c.server_name for c in clients] == ["fs", "web"]
    assert clients[0].transport.args == ("-y", "a//b", "/*x*/")  # type: ignore[union-attr]


def test_unreadable_or_invalid_files(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="cannot read"):
        load_mcp_servers(tmp_path / "missing.json")
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(ToolError, match="is not valid JSON"):
        load_mcp_servers(broken)
    with pytest.raises(ToolError, match="expected an 'mcpServers' object"):
        load_mcp_servers({"mcpServers_typo": 1})
    latin = tmp_path / "latin1.json"
    latin.write_bytes(b'{"mcpServers": {"caf\xe9": {"command": "x"}}}')
    with pytest.raises(ToolError, match="is not UTF-8 text"):
        load_mcp_servers(latin)


async def test_one_call_feeds_every_servers_tools_into_a_registry(tmp_path: Path) -> None:
    http = HttpServer()
    try:
        config = tmp_path / "mcp.json"
        config.write_text(
            json.dumps(
                {
                    "mcpServers": {
                        "local": {"command": sys.executable, "args": [str(FIXTURE)]},
                        "web": {"url": http.url},
                    }
                }
            )
        )
        registry = ToolRegistry()
        clients = load_mcp_servers(config, timeout=15)
        try:
            for client in clients:
                await client.connect()
                registry.register_all(client.into_tools(prefix=True))
            assert "local__echo" in registry and "web__echo" in registry
            local = await registry.invoke("local__echo", {"text": "from stdio"})
            web = await registry.invoke("web__echo", {"text": "from http"})
            assert (local.result(), web.result()) == ("from stdio", "from http")
        finally:
            for client in clients:
                await client.close()
    finally:
        http.stop()


def test_a_type_says_which_of_command_and_url_is_used() -> None:
    both = {"command": "npx", "url": "http://127.0.0.1:9/mcp"}
    stdio, http = load_mcp_servers(
        {"servers": {"a": {**both, "type": "stdio"}, "b": {**both, "type": "http"}}}
    )
    assert type(stdio.transport).__name__ == "StdioTransport"
    assert type(http.transport).__name__ == "StreamableHttpTransport"
