"""A cassette's structure, checked when it is read, so that a hand-edited file with a
field missing or of the wrong type fails naming the file and the field's JSON path,
not with a ``KeyError`` in the middle of a replay."""

from __future__ import annotations

import base64
import binascii
import dataclasses
from collections.abc import Mapping
from typing import Any

from ..error import CassetteError
from ..mcp.models import McpToolInfo

__all__ = ["check_cassette"]

_KINDS: dict[type | tuple[type, ...], str] = {
    str: "a string",
    int: "an integer",
    bool: "true or false",
    list: "a list",
    dict: "an object",
    (str, type(None)): "a string or null",
    object: "a value",
}
_TOOL_FIELDS = frozenset(field.name for field in dataclasses.fields(McpToolInfo))
# Kept by encode_error (testing/_tape_mcp.py) beside "reason", and read back with it.
_ERROR_FIELDS = ("recoverable", "may_have_run", "status_code", "retry_after")


class _Bad(Exception):
    """A field the replay cannot use: its path and what is wrong with it."""


def check_cassette(data: Mapping[str, Any], source: str) -> None:
    """Raise :class:`~agcore_tools.testing.CassetteError` for the first field of a
    cassette's ``data`` that a replay cannot use, naming ``source`` (``cassette <path>``)
    and the field's JSON path.

    Example:
        >>> check_cassette({"interactions": [{"kind": "http", "request": {"url": "/v1"}}]},
        ...                "cassette run.json")
        Traceback (most recent call last):
        ...
        agcore_tools.error.CassetteError: cassette run.json: interactions[0].request has no "method" (record the cassette again, or mend the file)
    """
    try:
        _get(data, "", "base_url", (str, type(None)), optional=True)
        for number, url in enumerate(_get(data, "", "base_urls", list, optional=True) or []):
            _is(url, f"base_urls[{number}]", str)
        for number, interaction in enumerate(
            _get(data, "", "interactions", list, optional=True) or []
        ):
            _interaction(interaction, f"interactions[{number}]")
    except _Bad as bad:
        # The message is the whole story: a traceback into this module would add nothing.
        raise CassetteError(
            f"{source}: {bad} (record the cassette again, or mend the file)"
        ) from None


def _get(
    holder: Mapping[str, Any],
    where: str,
    key: str,
    kind: type | tuple[type, ...],
    *,
    optional: bool = False,
) -> Any:
    path = f"{where}.{key}" if where else key
    if key not in holder:
        if optional:
            return None
        raise _Bad(f'{where or "the file"} has no "{key}"')
    return _is(holder[key], path, kind)


def _is(value: Any, path: str, kind: type | tuple[type, ...]) -> Any:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise _Bad(f"{path} must be {_KINDS[kind]}, got {type(value).__name__}")
    return value


def _interaction(interaction: Any, where: str) -> None:
    _is(interaction, where, dict)
    kind = _get(interaction, where, "kind", str)
    if kind == "http":
        _http(interaction, where)
    elif kind == "mcp":
        _mcp(interaction, where)
    else:
        raise _Bad(f'{where}.kind must be "http" or "mcp", got {kind!r}')


def _http(interaction: dict[str, Any], where: str) -> None:
    request = _get(interaction, where, "request", dict)
    _get(request, f"{where}.request", "method", str)
    _get(request, f"{where}.request", "url", str)
    _body(request, f"{where}.request")
    response = _get(interaction, where, "response", dict, optional=True)
    if response is None:  # the request failed while recording: play() says so
        return
    inside = f"{where}.response"
    _get(response, inside, "status", int, optional=True)
    headers = _get(response, inside, "headers", dict, optional=True) or {}
    for name in headers:
        _get(headers, f"{inside}.headers", name, str)
    _get(response, inside, "error", str, optional=True)
    _get(response, inside, "incomplete", bool, optional=True)
    _body(response, inside)


def _body(entry: dict[str, Any], where: str) -> None:
    _get(entry, where, "text", str, optional=True)
    encoded = _get(entry, where, "base64", str, optional=True)
    if encoded is not None:
        try:  # as the replay decodes it
            base64.b64decode(encoded)
        except binascii.Error as exc:
            raise _Bad(f"{where}.base64 is not base64 ({exc})") from None
    events = _get(entry, where, "sse", list, optional=True) or []
    for number, event in enumerate(events):
        at = f"{where}.sse[{number}]"
        _is(event, at, dict)
        if "raw" in event:
            _get(event, at, "raw", str)
        else:
            _get(event, at, "event", str, optional=True)


def _mcp(interaction: dict[str, Any], where: str) -> None:
    _get(interaction, where, "server", str)
    method = _get(interaction, where, "method", str)
    if method == "tools/list":
        for number, tool in enumerate(_get(interaction, where, "tools", list)):
            at = f"{where}.tools[{number}]"
            _is(tool, at, dict)
            _get(tool, at, "name", str)
            unknown = sorted(set(tool) - _TOOL_FIELDS)
            if unknown:
                raise _Bad(f'{at} has a field "{unknown[0]}" a tool does not have')
    elif method != "tools/call":
        raise _Bad(f'{where}.method must be "tools/list" or "tools/call", got {method!r}')
    else:
        _get(interaction, where, "tool", str)
        _get(interaction, where, "arguments", dict)
        if "error" in interaction:
            error = _get(interaction, where, "error", dict)
            _get(error, f"{where}.error", "message", str)
            if "reason" in error:
                for name in _ERROR_FIELDS:
                    _get(error, f"{where}.error", name, object)
        elif "result" not in interaction:
            raise _Bad(f'{where} has no "result" or "error"')
