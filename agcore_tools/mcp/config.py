"""``load_mcp_servers``: clients from the ``mcpServers`` JSON of Claude Desktop, Cursor
and VS Code.

Each entry is either a stdio server (``command``, optional ``args``, ``env``, ``cwd``) or
an HTTP one (``url``, optional ``headers``). VS Code's ``"servers"`` key and its
``"type"`` field (``"stdio"``, ``"http"``) are accepted too; ``"sse"`` (the deprecated
HTTP+SSE transport), any other type and VS Code's ``"envFile"`` are refused. Entries with
``"disabled": true`` are skipped. Values are taken literally: placeholders such as
``${env:TOKEN}`` are not expanded.

Example:
    >>> clients = load_mcp_servers({"mcpServers": {
    ...     "fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."]},
    ...     "remote": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer x"}},
    ... }})
    >>> [(c.server_name, type(c.transport).__name__) for c in clients]
    [('fs', 'StdioTransport'), ('remote', 'StreamableHttpTransport')]
"""

from __future__ import annotations

import inspect
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._keywords import unknown_keyword
from ..error import ToolConfigError
from .client import McpClient
from .transport import StdioTransport, StreamableHttpTransport

__all__ = ["load_mcp_servers"]

_HTTP_TYPES = ("http", "streamable-http", "streamableHttp", "streamable_http")
_CLIENT_OPTIONS = frozenset(
    p.name for p in inspect.signature(McpClient).parameters.values() if p.kind is p.KEYWORD_ONLY
)
"""The keywords of :class:`McpClient` that ``load_mcp_servers`` passes on: not its
server name and transport, which each entry gives."""


def load_mcp_servers(
    config: str | os.PathLike[str] | Mapping[str, Any], **client_options: Any
) -> list[McpClient]:
    """One :class:`McpClient` per configured server, in the file's order (not connected).

    Args:
        config: A path to the JSON file, or the parsed document (with its
            ``mcpServers``/``servers`` key, or just the mapping of servers).
        client_options: Passed to every :class:`McpClient` (``timeout=``, ...).

    Raises:
        ToolError: The file cannot be read or parsed, or an entry is malformed; the
            message names the server and the field. A ``config`` that is no path or
            mapping (the JSON text itself, which holds tokens, is not quoted), and a
            keyword that :class:`McpClient` does not take, are refused before the file
            is read.

    Example:
        >>> import asyncio
        >>> from agcore_tools import ToolRegistry
        >>> async def main() -> None:
        ...     registry = ToolRegistry()
        ...     for client in load_mcp_servers("claude_desktop_config.json"):
        ...         await client.connect()
        ...         registry.register_all(client.into_tools(prefix=True))
    """
    _check_options(client_options)
    document = _read(config)
    servers = _servers(document)
    clients = []
    for name, entry in servers.items():
        if not isinstance(entry, Mapping):
            # Its type only: a one-line entry such as "npx srv --token sk-..." holds secrets.
            raise ToolConfigError(
                f"MCP config: server '{name}' must be an object, got {type(entry).__name__}"
            )
        disabled = entry.get("disabled", False)
        if not isinstance(disabled, bool):  # "yes" or "false" would be read one way
            raise ToolConfigError(
                f"MCP config: server '{name}': 'disabled' must be true or false, got {disabled!r}"
            )
        if disabled:
            continue
        clients.append(McpClient(str(name), _transport(str(name), entry), **client_options))
    return clients


def _check_options(options: Mapping[str, Any]) -> None:
    """Refuse a keyword each :class:`McpClient` would refuse, naming this function, not
    the class the caller never called."""
    for name in options:
        if name in ("server_name", "transport"):
            raise unknown_keyword(
                "load_mcp_servers()",
                name,
                _CLIENT_OPTIONS,
                reason="the config gives each server its name and transport",
            )
        if name not in _CLIENT_OPTIONS:
            raise unknown_keyword("load_mcp_servers()", name, _CLIENT_OPTIONS)


def _read(config: str | os.PathLike[str] | Mapping[str, Any]) -> Mapping[str, Any]:
    if isinstance(config, Mapping):
        return config
    if not isinstance(config, (str, os.PathLike)):
        raise ToolConfigError(
            "load_mcp_servers() takes the path of an MCP config file (a str or a Path) or "
            f"the parsed document (a dict), got {type(config).__name__}"
        )
    if isinstance(config, str) and (config.lstrip().startswith(("{", "[")) or "\n" in config):
        # Not quoted, unlike a path: a config's text holds its servers' tokens.
        raise ToolConfigError(
            "load_mcp_servers() takes the path of an MCP config file or the parsed "
            "document, got the text of one, not a path: pass json.loads(text)"
        )
    path = Path(config)
    try:
        text = path.read_text(encoding="utf-8-sig")  # a BOM, as Windows editors write one
    except OSError as exc:
        raise ToolConfigError(
            f"MCP config: cannot read {str(path)!r}: {exc.strerror or exc}"
        ) from exc
    except UnicodeDecodeError as exc:
        raise ToolConfigError(f"MCP config: {str(path)!r} is not UTF-8 text ({exc})") from exc
    try:
        document = json.loads(_without_comments(text))
    except json.JSONDecodeError as exc:
        raise ToolConfigError(f"MCP config: {str(path)!r} is not valid JSON: {exc}") from exc
    if not isinstance(document, Mapping):
        raise ToolConfigError(f"MCP config: {str(path)!r} must hold a JSON object")
    return document


_JSONC = re.compile(
    r'(?P<string>"(?:[^"\\]|\\.)*")|(?P<comment>//[^\n]*|/\*.*?\*/)|(?P<comma>,)(?=\s*[}\]])',
    re.DOTALL,
)


def _without_comments(text: str) -> str:
    r"""JSON with comments (VS Code's ``mcp.json`` is JSONC) as JSON: ``//`` and ``/* */``
    comments and trailing commas outside strings go; strings are kept as they are.

    Example:
        >>> _without_comments('{"a": "http://x", // the server\n "b": [1, 2,],}')
        '{"a": "http://x", \n "b": [1, 2]}'
    """
    # A trailing comma may stand before a comment: drop the comments first.
    text = _JSONC.sub(lambda m: m["string"] or ("" if m["comment"] else m[0]), text)
    return _JSONC.sub(lambda m: m["string"] or "", text)


def _servers(document: Mapping[str, Any]) -> Mapping[str, Any]:
    for key in ("mcpServers", "servers"):
        if key in document:
            servers = document[key]
            if not isinstance(servers, Mapping):
                raise ToolConfigError(f"MCP config: '{key}' must be an object of servers")
            return servers
    # A bare mapping of servers: every value describes one.
    if all(isinstance(v, Mapping) for v in document.values()):
        return document
    raise ToolConfigError("MCP config: expected an 'mcpServers' object")


def _transport(name: str, entry: Mapping[str, Any]) -> StdioTransport | StreamableHttpTransport:
    kind = entry.get("type")
    if kind == "sse":
        raise ToolConfigError(
            f"MCP config: server '{name}' uses the deprecated HTTP+SSE transport; "
            "use its Streamable HTTP endpoint instead"
        )
    if kind is not None and kind != "stdio" and kind not in _HTTP_TYPES:
        # Guessing from "command"/"url" would start a server some other way than asked.
        raise ToolConfigError(
            f"MCP config: server '{name}': unknown 'type' {kind!r:.40}; use "
            '"stdio" or "http" (Streamable HTTP)'
        )
    if "envFile" in entry:
        # Starting without the file's variables would run the server without its secrets.
        raise ToolConfigError(
            f"MCP config: server '{name}': 'envFile' is not supported; put the "
            "variables the server needs in 'env'"
        )
    if kind in _HTTP_TYPES:
        http = True
    elif kind == "stdio":
        http = False
    elif "url" in entry and "command" in entry:
        raise ToolConfigError(
            f"MCP config: server '{name}' has both a 'command' and a 'url'; keep the one "
            'it uses, or say which with "type": "stdio" or "http"'
        )
    else:
        http = "url" in entry
    if http:
        url = _string(name, entry, "url")
        return StreamableHttpTransport(url, _strings(name, entry, "headers"))
    if "command" in entry or kind == "stdio":
        command = _string(name, entry, "command")
        args = entry.get("args", [])
        if not isinstance(args, list) or not all(isinstance(a, (str, int, float)) for a in args):
            raise ToolConfigError(f"MCP config: server '{name}': 'args' must be a list of strings")
        cwd = entry.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            raise ToolConfigError(f"MCP config: server '{name}': 'cwd' must be a string")
        env = _strings(name, entry, "env")
        return StdioTransport(command, [_text(a) for a in args], env or None, cwd)
    raise ToolConfigError(
        f"MCP config: server '{name}' needs a 'command' (stdio) or a 'url' (HTTP)"
    )


def _string(name: str, entry: Mapping[str, Any], key: str) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value:
        raise ToolConfigError(f"MCP config: server '{name}': '{key}' must be a non-empty string")
    return value


def _strings(name: str, entry: Mapping[str, Any], key: str) -> dict[str, str]:
    value = entry.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, (str, int, float, bool)) for k, v in value.items()
    ):
        raise ToolConfigError(f"MCP config: server '{name}': '{key}' must map names to strings")
    return {k: _text(v) for k, v in value.items()}


def _text(value: str | float) -> str:
    """A JSON scalar as the server would read it: JSON's spelling, not Python's.

    Example:
        >>> _text(True), _text(8080), _text("x")
        ('true', '8080', 'x')
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
