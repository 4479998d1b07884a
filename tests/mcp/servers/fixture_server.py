"""A test MCP server written with the SDK's MCPServer: tools, resources (with a
template and subscriptions), prompts, completions, instructions, logging/setLevel and
roots change notifications.

Run over stdio: ``python fixture_server.py``; over Streamable HTTP on a socket the test
already bound: ``python fixture_server.py --http-fd FD`` (no port race).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import hashlib
import hmac
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Annotated

from mcp.server.caching import CacheHint
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.prompts.base import AssistantMessage, Message, UserMessage
from mcp.server.mcpserver.utilities.types import Image
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    Annotations,
    AudioContent,
    BlobResourceContents,
    Completion,
    CompletionArgument,
    CompletionContext,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    EmbeddedResource,
    EmptyResult,
    ImageContent,
    InputRequiredResult,
    NotificationParams,
    PromptReference,
    ResourceLink,
    ResourceTemplateReference,
    SetLevelRequestParams,
    SubscribeRequestParams,
    TextContent,
    TextResourceContents,
    ToolAnnotations,
    UnsubscribeRequestParams,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, Field

TTL_MS = int(os.environ.get("FIXTURE_TOOLS_TTL_MS", "60000"))

INSTRUCTIONS = "The fixture server of agcore_tools' tests."

server = MCPServer(
    "fixture",
    version="1.0.0",
    instructions=INSTRUCTIONS,
    cache_hints={"tools/list": CacheHint(ttl_ms=TTL_MS)},
    log_level="WARNING",
)


class Weather(BaseModel):
    city: str
    temperature: float = Field(description="Degrees Celsius")


@server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
def weather(city: str) -> Weather:
    """The weather in a city (structured output)."""
    return Weather(city=city, temperature=21.5)


@server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
def word_count(text: str) -> int:
    """How many words a text has (a plain value: the SDK wraps it as {"result": ...})."""
    return len(text.split())


@server.tool(structured_output=False)
def echo(text: str) -> str:
    """Return the text (unstructured text content)."""
    return text


@server.tool(structured_output=False)
def two_texts() -> list[TextContent]:
    """Two text parts."""
    return [TextContent(type="text", text="first"), TextContent(type="text", text="second")]


@server.tool(structured_output=False)
def mixed() -> list[TextContent | ImageContent]:
    """A text part and an image part."""
    return [
        TextContent(type="text", text="a picture:"),
        ImageContent(type="image", data="iVBORw0KGgo=", mime_type="image/png"),
    ]


@server.tool(structured_output=False)
def chart(kb: int) -> list[TextContent | ImageContent]:
    """A caption and a PNG of about ``kb`` KiB (its pixel bytes count up from 0)."""
    png = b"\x89PNG\r\n\x1a\n" + bytes(i % 251 for i in range(kb * 1024))
    return [
        TextContent(type="text", text="sales by month:"),
        ImageContent(type="image", data=base64.b64encode(png).decode(), mime_type="image/png"),
    ]


@server.tool(structured_output=False)
def snapshot(kb: int) -> list[TextContent | EmbeddedResource]:
    """A page's screenshot (a PNG of about ``kb`` KiB), its PDF and its notes, as
    embedded resources: the MCP way many browser and document servers return them."""
    png = b"\x89PNG\r\n\x1a\n" + bytes(i % 251 for i in range(kb * 1024))
    pdf = b"%PDF-1.7\n" + bytes(kb * 1024)

    def blob(uri: str, mime_type: str, data: bytes) -> EmbeddedResource:
        contents = BlobResourceContents(
            uri=uri, mime_type=mime_type, blob=base64.b64encode(data).decode()
        )
        return EmbeddedResource(type="resource", resource=contents)

    notes = TextResourceContents(uri="page://1/notes", mime_type="text/plain", text="2 charts")
    return [
        TextContent(type="text", text="page 1:"),
        blob("screenshot://page/1", "image/png", png),
        blob("file:///exports/page%201.pdf", "application/pdf", pdf),
        EmbeddedResource(type="resource", resource=notes),
    ]


@server.tool(structured_output=False)
def beep() -> list[AudioContent]:
    """A tiny WAV file."""
    wav = b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(16)
    return [AudioContent(type="audio", data=base64.b64encode(wav).decode(), mime_type="audio/wav")]


@server.tool()
def fail(message: str) -> str:
    """Fail with the message (isError)."""
    raise ToolError(message)


@server.tool()
def open_vault(vault: str) -> str:
    """Refuse any vault with a JSON-RPC error (-32602), not isError, as TypeScript
    servers on the low-level Server refuse a wrong argument; on 2026-07-28 over HTTP it
    comes with HTTP 400."""
    raise MCPError(INVALID_PARAMS, f"Unknown vault: {vault}. Available vaults: notes")


def _credentials(ctx: Context) -> str:
    """The credentials the request came with: its ``Authorization``, and its URL's
    ``?token=`` (over HTTP) when it has one."""
    said = (ctx.headers or {}).get("authorization", "(none)")
    query = getattr(ctx.request_context.request, "query_params", None)
    token = query.get("token") if query is not None else None
    return f"{said}; ?token={token}" if token else said


def _rejected(ctx: Context) -> MCPError:
    return MCPError(0, f"upstream rejected credentials: {_credentials(ctx)}")


@server.tool(structured_output=False)
def whoami(ctx: Context) -> str:
    """Say which credential the request carried, as an account tool may."""
    return f"signed in with {(ctx.headers or {}).get('authorization', '(none)')}"


@server.tool()
def reject_credentials(ctx: Context) -> str:
    """Fail with a JSON-RPC error (code 0, as mcp-go answers a failed handler) quoting
    the Authorization header it got, as a server whose upstream refused it does."""
    raise _rejected(ctx)


@server.tool()
def refuse_credentials(ctx: Context) -> str:
    """Fail with isError quoting the credentials it got, as a tool whose upstream refused
    them does (reject_credentials answers a JSON-RPC error instead)."""
    raise ToolError(f"upstream rejected credentials: {_credentials(ctx)}")


@server.tool(structured_output=False)
async def slow(seconds: float, marker: str = "") -> str:
    """Sleep; if cancelled and `marker` is set, write 'cancelled' to that file."""
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        if marker:
            # A synchronous write on purpose: the task is being cancelled, so awaiting
            # a thread here would be cancelled too. Written aside and renamed, so a test
            # that sees the file never reads it empty (write_text creates, then writes).
            part = Path(marker + ".part")
            part.write_text("cancelled")  # noqa: ASYNC240
            os.replace(part, marker)
        raise
    return f"slept {seconds}"


@server.tool()
def die(code: int = 3) -> str:
    """Exit the server process at once."""
    sys.stdout.flush()
    os._exit(code)


@server.tool(structured_output=False)
async def add_tool(name: str, ctx: Context) -> str:
    """Register a new tool and tell the client its tool list changed."""
    server.add_tool(lambda: f"I am {name}", name=name, description=f"Added at run time: {name}")
    await ctx.notify_tools_changed()  # 2026-07-28: to subscriptions/listen streams
    await ctx.session.send_tool_list_changed()  # 2025-11-25: a plain notification
    return f"added {name}"


def routed(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]) -> str:
    """Mirrors `region` into an Mcp-Param-Region header (2026-07-28, over HTTP)."""
    return f"routed to {region}"


@server.tool(structured_output=False)
def add_routed_tool() -> str:
    """Register `routed` without telling the client, which has therefore not listed it."""
    server.add_tool(routed, name="routed", structured_output=False)
    return "added routed"


@server.tool(structured_output=False)
async def progress(steps: int, ctx: Context, label: str = "step") -> str:
    """Report progress `steps` times ("<label> <n>"), and log one message."""
    for i in range(steps):
        await ctx.report_progress(i + 1, steps, f"{label} {i + 1}")
    await ctx.warning("progress tool finished")
    return "done"


@server.tool()
def environment() -> dict[str, str]:
    """The environment variables this process sees."""
    return dict(os.environ)


@server.tool(structured_output=False)
def upstream(path: str = "/api/datasources") -> str:
    """Fetch ``path`` from the ``UPSTREAM_URL`` of this process's environment, failing
    as mcp-grafana does: its error quotes the URL, and the other settings it was given
    (``MIRROR_URL``, ``DATA_PATH``, ``UPSTREAM_ORG``, ``UPSTREAM_AUTH``)."""
    url = os.environ["UPSTREAM_URL"] + path
    try:
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no proxy
        with direct.open(url, timeout=10) as answer:
            return str(answer.status)
    except urllib.error.URLError as exc:
        settings = ", ".join(
            f"{name}={os.environ.get(name, '-')}"
            for name in ("MIRROR_URL", "DATA_PATH", "UPSTREAM_ORG", "UPSTREAM_AUTH")
        )
        raise ToolError(f'Get "{url}": {exc.reason} ({settings})') from exc


@server.tool(structured_output=False)
def flood_stderr(megabytes: float) -> str:
    """Write that much to stderr from a background thread, then return at once."""

    def flood() -> None:
        line = b"x" * 199 + b"\n"
        for _ in range(int(megabytes * 1024 * 1024 / 200)):
            os.write(2, line)

    threading.Thread(target=flood, daemon=True).start()
    return "flooding"


@server.tool()
def spawn_grandchild() -> int:
    """Start a long-lived `sleep` in this server's process group; return its pid."""
    child = subprocess.Popen(["sleep", "300"], stdin=subprocess.DEVNULL)
    return child.pid


class Answer(BaseModel):
    answer: str


@server.tool(structured_output=False)
async def ask(question: str, ctx: Context) -> str:
    """Ask the client (elicitation)."""
    result = await ctx.elicit(question, Answer)
    return f"{result.action}: {result.data.answer if result.data else ''}"


@server.tool(structured_output=False)
async def ask_twice(question: str, ctx: Context) -> str:
    """Ask the client two questions at once, as a tool gathering two answers does; say
    how each was answered."""

    async def one(text: str) -> str:
        result = await ctx.elicit(text, Answer)
        data = getattr(result, "data", None)
        return f"{result.action}: {data.answer if data else ''}"

    first, second = await asyncio.gather(one(question), one(f"{question} (again)"))
    return f"{first}; {second}"


@server.tool(structured_output=False)
async def ask_then_progress(question: str, steps: int, ctx: Context) -> str:
    """Ask the client, then report progress ``steps`` times."""
    answered = await ask(question, ctx)
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step}")
    return answered


_WITHDRAWN: dict[str, asyncio.Event] = {}
"""The events of the question ``ask_withdrawable`` asks: "withdraw" it, and "ended"."""


@server.tool(structured_output=False)
async def ask_withdrawable(question: str, ctx: Context) -> str:
    """Ask the client, and withdraw the question (``notifications/cancelled``) once
    ``withdraw_question`` is called, as a server that stops waiting does."""
    withdraw = _WITHDRAWN["withdraw"] = asyncio.Event()
    ended = _WITHDRAWN["ended"] = asyncio.Event()
    try:
        asking = asyncio.ensure_future(ask(question, ctx))
        waiting = asyncio.ensure_future(withdraw.wait())
        await asyncio.wait({asking, waiting}, return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
        if asking.done():
            return asking.result()
        asking.cancel()  # the SDK tells the client: notifications/cancelled
        await asyncio.wait({asking})
        return "withdrawn: went on without an answer"
    finally:
        ended.set()


@server.tool(structured_output=False)
async def withdraw_question() -> str:
    """Withdraw the question ``ask_withdrawable`` asked, once its call has ended."""
    _WITHDRAWN["withdraw"].set()
    await asyncio.wait_for(_WITHDRAWN["ended"].wait(), 10)
    return "withdrawn"


@server.tool(structured_output=False)
async def ask_then_reject(question: str, ctx: Context) -> str:
    """Ask the client, then fail as reject_credentials does."""
    await ctx.elicit(question, Answer)
    raise _rejected(ctx)


@server.tool(structured_output=False)
async def sample(prompt: str, ctx: Context) -> str:
    """Ask the client's model (sampling)."""
    from mcp_types import SamplingMessage

    result = await ctx.session.create_message(
        messages=[SamplingMessage(role="user", content=TextContent(type="text", text=prompt))],
        max_tokens=20,
    )
    content = result.content
    return content.text if isinstance(content, TextContent) else str(content)


_LATER: dict[str, str] = {}
"""How the last ``sample_later`` request went ("waiting" until it is answered)."""
_ASKING: set[asyncio.Task[None]] = set()


@server.tool(structured_output=False)
async def sample_later(prompt: str, ctx: Context) -> str:
    """Ask the client's model (sampling) once this call has returned, as a server's own
    background work does; ``sampled_later`` tells how it went."""
    from mcp_types import SamplingMessage

    session = ctx.session
    _LATER["outcome"] = "waiting"

    async def ask() -> None:
        # Over HTTP a request sent outside any call goes on the client's GET stream, which
        # the client opens after connecting, in its own time, and one sent before it is
        # open is dropped. An answered ping says it is open; one dropped (no answer within
        # its 0.2 s) is sent again: a ping does no harm twice.
        for _ in range(100):
            try:
                await asyncio.wait_for(session.send_ping(), 0.2)
                break
            except asyncio.TimeoutError:
                continue
        try:
            result = await session.create_message(
                messages=[
                    SamplingMessage(role="user", content=TextContent(type="text", text=prompt))
                ],
                max_tokens=20,
            )
        except MCPError as exc:
            _LATER["outcome"] = f"refused: {exc.message}"
            return
        except Exception as exc:
            _LATER["outcome"] = f"failed: {type(exc).__name__}: {exc}"
            return
        content = result.content
        _LATER["outcome"] = f"answered: {content.text if isinstance(content, TextContent) else ''}"

    task = asyncio.get_running_loop().create_task(ask())
    _ASKING.add(task)
    task.add_done_callback(_ASKING.discard)
    return "asking"


@server.tool(structured_output=False)
def sampled_later() -> str:
    """How the last ``sample_later`` request went."""
    return _LATER.get("outcome", "never asked")


@server.tool(structured_output=False)
async def roots(ctx: Context) -> str:
    """The client's roots."""
    result = await ctx.session.list_roots()
    return ",".join(str(root.uri) for root in result.roots)


@server.tool(structured_output=False)
def request_meta(ctx: Context) -> str:
    """The ``_meta`` this request carried, as JSON."""
    meta = ctx.request_context.meta
    return json.dumps(dict(meta) if meta else {}, default=str, sort_keys=True)


@server.tool(structured_output=False)
def capabilities(ctx: Context) -> str:
    """The client capabilities this server was told about."""
    caps = ctx.client_capabilities
    return caps.model_dump_json(exclude_none=True) if caps is not None else "{}"


@server.tool(structured_output=False)
async def ask_each_era(question: str, ctx: Context) -> str | InputRequiredResult:
    """Ask the client in the way the negotiated era allows (2026-07-28: input_required)."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return await ask(question, ctx)
    responses = ctx.input_responses
    if not responses:
        schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
        request = ElicitRequest(
            params=ElicitRequestFormParams(message=question, requested_schema=schema)
        )
        return InputRequiredResult(input_requests={"q": request})
    answer = responses["q"]
    assert isinstance(answer, ElicitResult)
    return f"{answer.action}: {(answer.content or {}).get('answer', '')}"


BOOKING_KEY = b"fixture booking key"


def _clock() -> float:
    """Wall time, plus the seconds in FIXTURE_CLOCK_FILE: a test moves the server's
    clock forward (a day) without waiting for it."""
    path = os.environ.get("FIXTURE_CLOCK_FILE")
    offset = float(Path(path).read_text() or 0) if path and Path(path).exists() else 0.0
    return time.time() + offset


@server.tool(structured_output=False)
async def book_table(party: str, ctx: Context) -> str | InputRequiredResult:
    """Book a table; asks how many seats (2026-07-28 input_required with requestState)."""
    responses = ctx.input_responses
    if not responses:
        body = json.dumps({"party": party, "asked_at": _clock(), "nonce": os.urandom(8).hex()})
        mac = hmac.new(BOOKING_KEY, body.encode(), hashlib.sha256).hexdigest()
        schema = {
            "type": "object",
            "properties": {"seats": {"type": "integer", "minimum": 1, "maximum": 12}},
            "required": ["seats"],
        }
        request = ElicitRequest(
            params=ElicitRequestFormParams(
                message=f"How many seats for {party}?", requested_schema=schema
            )
        )
        return InputRequiredResult(input_requests={"seats": request}, request_state=body + mac)
    state = ctx.request_state or ""
    body, mac = state[:-64], state[-64:]
    good = hmac.new(BOOKING_KEY, body.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(mac, good):
        raise ValueError("the requestState came back changed")
    asked = json.loads(body)
    answer = responses["seats"]
    assert isinstance(answer, ElicitResult)
    if answer.action != "accept":
        return f"no booking for {asked['party']}: the user chose {answer.action}"
    hours = (_clock() - asked["asked_at"]) / 3600
    seats = (answer.content or {}).get("seats")
    return f"booked {seats} seats for {asked['party']}; asked {hours:.0f} h ago; state intact"


@server.tool(structured_output=False)
async def ping_client(ctx: Context) -> str:
    """Ping the client."""
    await ctx.session.send_ping()
    return "pong"


@server.tool(structured_output=False)
def picture() -> Image:
    """An image only."""
    return Image(data=b"\x89PNG\r\n", format="png")


# -- resources, prompts, completion ---------------------------------------------------

counter = 0


@server.resource(
    "fixture://readme",
    mime_type="text/plain",
    description="What this server is.",
    annotations=Annotations(audience=["user"], priority=0.5),
)
def readme() -> str:
    return "A fixture server."


@server.resource("fixture://logo", mime_type="image/png")
def logo() -> bytes:
    # PNG's whole signature: the tool loop attaches only what it knows to be an image.
    return b"\x89PNG\r\n\x1a\n"


@server.resource("fixture://counter", mime_type="text/plain")
def counter_value() -> str:
    return str(counter)


@server.resource("fixture://notes/{name}", mime_type="text/plain", description="A note.")
def note(name: str) -> str:
    return f"Note {name}"


@server.prompt()
def greet(name: str) -> str:
    """Greet someone."""
    return f"Say hello to {name}."


@server.prompt(title="Trip")
def trip(country: str, city: str = "") -> list[Message]:
    """Plan a trip."""
    return [
        UserMessage(f"Plan a trip to {city or 'the capital'}, {country}."),
        AssistantMessage("Where would you like to stay?"),
    ]


CITIES = {"France": ["Paris", "Lyon", "Lille"], "Peru": ["Lima", "Cusco"]}


@server.completion()
async def complete(
    ref: PromptReference | ResourceTemplateReference,
    argument: CompletionArgument,
    context: CompletionContext | None,
) -> Completion | None:
    if isinstance(ref, ResourceTemplateReference):
        names = ["groceries", "gifts", "garden"]
    elif ref.name == "trip" and argument.name == "country":
        names = sorted(CITIES)
    elif ref.name == "trip" and argument.name == "city":
        country = (context.arguments or {}).get("country", "") if context else ""
        names = CITIES.get(country, [])
    else:
        return None
    values = [n for n in names if n.startswith(argument.value)]
    return Completion(values=values, total=len(values), has_more=False)


@server.tool(
    structured_output=False,
    annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
)
def link() -> list[TextContent | ResourceLink]:
    """A resource link to the readme."""
    return [
        TextContent(type="text", text="see:"),
        ResourceLink(type="resource_link", uri="fixture://readme", name="readme"),
    ]


@server.tool(structured_output=False)
def annotated() -> list[TextContent]:
    """Text parts, one with annotations."""
    return [
        TextContent(type="text", text="for everyone"),
        TextContent(
            type="text", text="for you", annotations=Annotations(audience=["user"], priority=0.9)
        ),
    ]


# 2025-11-25 and earlier: resources/subscribe, logging/setLevel and roots/list_changed,
# which MCPServer does not serve itself, registered on its low-level server.
subscribed: set[str] = set()
log_level = "debug"
roots_changes = 0
LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]


async def on_subscribe(ctx: object, params: SubscribeRequestParams) -> EmptyResult:
    subscribed.add(params.uri)
    return EmptyResult()


async def on_unsubscribe(ctx: object, params: UnsubscribeRequestParams) -> EmptyResult:
    subscribed.discard(params.uri)
    return EmptyResult()


def _set_level_mode() -> str:
    path = os.environ.get("FIXTURE_SET_LEVEL_FILE")
    return Path(path).read_text() if path and Path(path).exists() else ""


set_level_arrived = asyncio.Event()  # hold:LEVEL mode: another setLevel arrived


async def on_set_level(ctx: object, params: SetLevelRequestParams) -> EmptyResult:
    """Set the level; once a test has written ``hang`` (or ``fail``) into the file named
    by FIXTURE_SET_LEVEL_FILE, never answer (or refuse, quoting API_TOKEN) instead. With
    ``hold:LEVEL``, a setLevel to LEVEL waits for another setLevel to arrive and take
    effect, or for the test to write ``release`` into the file (5 s at most), and takes
    effect after it."""
    global log_level
    mode = _set_level_mode()
    if mode == "hang":
        await asyncio.Event().wait()
    if mode.startswith("hold:"):
        if params.level == mode.removeprefix("hold:"):
            # Released by the test, or none came within 5 s: this one takes effect now.
            for _ in range(100):
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(set_level_arrived.wait(), 0.05)
                if set_level_arrived.is_set() or _set_level_mode() == "release":
                    break
        else:
            log_level = params.level
            set_level_arrived.set()
            return EmptyResult()
    if mode == "fail":
        raise MCPError(0, f"level refused for {os.environ.get('API_TOKEN', '-')}")
    log_level = params.level
    return EmptyResult()


async def on_roots_changed(ctx: object, params: NotificationParams) -> None:
    global roots_changes
    roots_changes += 1


lowlevel = server._lowlevel_server
lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, on_subscribe)
lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, on_unsubscribe)
lowlevel.add_request_handler("logging/setLevel", SetLevelRequestParams, on_set_level)
lowlevel.add_notification_handler(
    "notifications/roots/list_changed", NotificationParams, on_roots_changed
)


@server.tool(structured_output=False)
async def bump(ctx: Context, uri: str = "fixture://counter") -> str:
    """Add one to the counter and tell subscribers that `uri` changed."""
    global counter
    counter += 1
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        await ctx.notify_resource_updated(uri)  # to subscriptions/listen streams
    elif any(uri == s or uri.startswith(s + "/") for s in subscribed):
        await ctx.session.send_resource_updated(uri)
    return str(counter)


@server.tool()
def subscriptions() -> list[str]:
    """The URIs subscribed with resources/subscribe."""
    return sorted(subscribed)


@server.tool(structured_output=False)
def roots_changed_count() -> str:
    """How many notifications/roots/list_changed arrived."""
    return str(roots_changes)


@server.tool(structured_output=False)
async def log_each_level(ctx: Context) -> str:
    """Log one message at debug, info, warning and error."""
    for level in ("debug", "info", "warning", "error"):
        # 2026-07-28: the SDK drops levels below the request's; before, setLevel's.
        if LEVELS.index(level) >= LEVELS.index(log_level):
            await ctx.log(level, f"a {level} message")  # type: ignore[arg-type]
    return "logged"


@server.tool(structured_output=False)
async def log_credentials(ctx: Context) -> str:
    """Log the credentials it was given, as servers log their start-up settings: the
    API_TOKEN environment variable, and over HTTP the Authorization header (and the
    last word of an X-Client header, no secret)."""
    await ctx.log("warning", f"authenticating with {os.environ.get('API_TOKEN', '-')}")
    authorization = (ctx.headers or {}).get("authorization")
    if authorization is not None:
        await ctx.log("warning", f"header: {authorization}; token {authorization.split()[-1]}")
    client = (ctx.headers or {}).get("x-client")
    if client is not None:
        await ctx.log("warning", f"client deployment: {client.split()[-1]}")
    return "logged"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http-fd", type=int, default=None)
    parser.add_argument("--print-stderr", default="")
    options = parser.parse_args()
    if options.print_stderr:
        print(options.print_stderr, file=sys.stderr, flush=True)
    if options.http_fd is None:
        server.run()
        return
    import uvicorn

    sock = socket.socket(fileno=options.http_fd)
    app = server.streamable_http_app()
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))


if __name__ == "__main__":
    main()
