"""The fixture server over stdio, behind a relay that spoils the answers to one request.

Run: ``python answer_proxy.py FAULT METHOD [TOOL]``. Lines pass both ways unchanged,
except for the requests of METHOD (of TOOL alone, for ``tools/call``):

- ``ignore``: the request is dropped, neither passed on nor answered, as a server does
  that ignores requests it does not know (instead of answering -32601);
- ``unknown``: the request is answered here, not passed on, with -32601 "Method not
  found", as a 2025-era server answers a method it does not know;
- ``unknown-no-code``: the same, but the error object has no ``code`` (an invalid answer);
- ``no-code``: the answer is an error object without ``code``;
- ``null-result``: the answer carries ``"result": null``;
- ``no-jsonrpc``: the answer lacks the ``"jsonrpc"`` member;
- ``bad-schema``: the second tool of a ``tools/list`` answer has the string
  ``"object"`` for its ``inputSchema`` (a valid answer, with a malformed tool);
- ``json-log``: the answer is left alone, but before the request is passed on, log
  lines carrying its id (as a server with a JSON logger on stdout writes them) are
  written to stdout: one with ``"id"`` alone, one with an ``"error"`` besides;
- ``huge``: the answer's text is ``ANSWER_BYTES`` (an environment variable) long;
- ``huge-id-last``: the same, written with ``"id"`` as its last member, as the JSON-RPC
  specification's examples write it;
- ``unended``: the same, but its line is not ended: the newline comes with the next
  line the relay writes;
- ``huge-log``: the answer is left alone, but a log notification ``ANSWER_BYTES`` long
  comes before it;
- ``info-top-level``: the ``serverInfo`` stamp of the answer's ``_meta`` is moved to a
  top-level ``serverInfo``, as the C# SDK's servers answer ``server/discover``;
- ``deep``: the answer's result carries a ``_meta`` nested 250 levels deep;
- ``huge-bad-id``, ``huge-bad-id-last``, ``deep-bad-id-last``: as ``huge`` or ``deep``,
  with an id that only looks like JSON: ``07`` first (a leading zero), ``"\\q7"`` last
  (an invalid escape), ``07`` last.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

from _relay import relay  # the script's directory is on sys.path

FIXTURE = Path(__file__).with_name("fixture_server.py")

IGNORED = b""  # what the relay writes in place of a request it drops (nothing)
SIZE = int(os.environ.get("ANSWER_BYTES", "200000"))


def nested(depth: int) -> object:
    tree: object = "leaf"
    for _ in range(depth):
        tree = [tree]
    return tree


def spoiled(fault: str, answer: dict[str, Any]) -> dict[str, Any]:
    if fault in ("huge", "unended"):
        return {**answer, "result": {"content": [{"type": "text", "text": "x" * SIZE}]}}
    if fault == "huge-id-last":
        result = {"content": [{"type": "text", "text": "x" * SIZE}]}
        return {"jsonrpc": "2.0", "result": result, "id": answer["id"]}
    if fault == "deep":
        return {**answer, "result": {**answer["result"], "_meta": {"tree": nested(250)}}}
    if fault == "info-top-level":
        result = dict(answer["result"])
        meta = dict(result.pop("_meta", None) or {})
        result["serverInfo"] = meta.pop("io.modelcontextprotocol/serverInfo")
        if meta:
            result["_meta"] = meta
        return {**answer, "result": result}
    if fault == "no-code":
        return {"jsonrpc": "2.0", "id": answer["id"], "error": {"message": "no code here"}}
    if fault == "null-result":
        return {"jsonrpc": "2.0", "id": answer["id"], "result": None}
    if fault == "no-jsonrpc":
        return {key: value for key, value in answer.items() if key != "jsonrpc"}
    if fault == "bad-schema":
        answer["result"]["tools"][1]["inputSchema"] = "object"
        return answer
    raise SystemExit(f"unknown fault {fault!r}")


# The fault spoiling the answer, where its id goes, and how it is written.
BAD_IDS = {
    "huge-bad-id": ("huge", "first", "0{}"),
    "huge-bad-id-last": ("huge", "last", '"\\q{}"'),
    "deep-bad-id-last": ("deep", "last", "0{}"),
}


def with_bad_id(fault: str, answer: dict[str, Any]) -> bytes:
    spoiling, where, form = BAD_IDS[fault]
    rest = {key: value for key, value in spoiled(spoiling, answer).items() if key != "id"}
    member = '"id": ' + form.format(answer["id"])
    text = json.dumps(rest)
    if where == "first":
        return ("{" + member + ", " + text[1:]).encode()
    return (text[:-1] + ", " + member + "}").encode()


def json_logs(request_id: object) -> list[dict[str, object]]:
    return [
        {"level": "info", "id": request_id, "msg": "handling tool call"},
        {"level": "error", "id": request_id, "error": "cache miss", "msg": "fetching"},
    ]


def main() -> None:
    fault, method, tool = sys.argv[1], sys.argv[2], (sys.argv[3:] or [None])[0]
    targets: set[object] = set()
    lock = threading.Lock()

    def note_target(line: bytes) -> bytes:
        message = json.loads(line)
        if message.get("method") != method or "id" not in message:
            return line
        if tool is not None and message["params"]["name"] != tool:
            return line
        if fault == "ignore":
            return IGNORED
        if fault in ("unknown", "unknown-no-code"):
            error: dict[str, object] = {"message": "Method not found"}
            if fault == "unknown":
                error["code"] = -32601
            answer = {"jsonrpc": "2.0", "id": message["id"], "error": error}
            # One write per line: the main thread writes the server's lines too.
            sys.stdout.buffer.write(json.dumps(answer).encode() + b"\n")
            sys.stdout.buffer.flush()
            return IGNORED
        if fault == "json-log":
            for log in json_logs(message["id"]):
                # One write per line: the main thread writes the server's lines too.
                sys.stdout.buffer.write(json.dumps(log).encode() + b"\n")
                sys.stdout.buffer.flush()
            return line
        with lock:
            targets.add(message["id"])
        return line

    unended: list[bytes] = []  # the newline owed to a line left unended

    def rewrite(line: bytes) -> bytes:
        message = json.loads(line)
        with lock:
            target = "method" not in message and message.get("id") in targets
        owed = unended.pop() if unended else b""
        if not target:
            return owed + line
        if fault == "huge-log":
            log = {"level": "info", "data": "y" * SIZE}
            notice = {"jsonrpc": "2.0", "method": "notifications/message", "params": log}
            return owed + json.dumps(notice).encode() + b"\n" + line
        if fault == "unended":
            unended.append(b"\n")
            return owed + json.dumps(spoiled(fault, message)).encode()
        if fault in BAD_IDS:
            return owed + with_bad_id(fault, message) + b"\n"
        return owed + json.dumps(spoiled(fault, message)).encode() + b"\n"

    relay(FIXTURE, note_target, rewrite)


if __name__ == "__main__":
    main()
