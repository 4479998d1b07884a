"""A small MCP server for the offline demo, written with the MCP SDK's MCPServer.

Run it over stdio (what ``McpClient`` with a ``StdioTransport`` does)::

    python examples/mcp_server.py

Its tools are read-only and touch nothing outside the process, and say so in their
annotations, so agcore_tools' default permission policy asks only for ``read``. It also
offers resources (``demo://capitals``, and ``demo://capitals/{country}`` for one
country), a prompt (``weekend_trip``), completion of country names, and instructions.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp_types import (
    Completion,
    CompletionArgument,
    CompletionContext,
    PromptReference,
    ResourceTemplateReference,
    ToolAnnotations,
)
from pydantic import BaseModel, Field

server = MCPServer(
    "demo-tools",
    version="1.0.0",
    instructions="Offline demo tools: capitals, text statistics, temperature conversion.",
    log_level="WARNING",
)

SAFE = ToolAnnotations(read_only_hint=True, open_world_hint=False)

CAPITALS = {
    "france": "Paris",
    "germany": "Berlin",
    "japan": "Tokyo",
    "kenya": "Nairobi",
    "peru": "Lima",
}


class TextStats(BaseModel):
    """Counts for a piece of text."""

    words: int = Field(description="Whitespace-separated words")
    characters: int = Field(description="Characters, spaces included")
    sentences: int = Field(description="Sentences ending in . ! or ?")


@server.tool(annotations=SAFE)
def text_stats(text: str) -> TextStats:
    """Count the words, characters and sentences of a text."""
    sentences = sum(text.count(mark) for mark in ".!?") or (1 if text.strip() else 0)
    return TextStats(words=len(text.split()), characters=len(text), sentences=sentences)


@server.tool(annotations=SAFE, structured_output=False)
def capital_of(country: str) -> str:
    """The capital city of a country (a small offline table)."""
    capital = CAPITALS.get(country.strip().lower())
    if capital is None:
        known = ", ".join(sorted(c.title() for c in CAPITALS))
        # ToolError's message reaches the client (and the model); others are hidden.
        raise ToolError(f"unknown country {country!r}; known: {known}")
    return capital


@server.tool(annotations=SAFE, structured_output=False)
def celsius_to_fahrenheit(celsius: float) -> str:
    """Convert a temperature from degrees Celsius to degrees Fahrenheit."""
    return f"{celsius * 9 / 5 + 32:g} °F"


@server.resource("demo://capitals", mime_type="text/plain", description="Every capital known.")
def capitals() -> str:
    return "\n".join(f"{country.title()}: {city}" for country, city in sorted(CAPITALS.items()))


@server.resource("demo://capitals/{country}", mime_type="text/plain", description="A capital.")
def capital(country: str) -> str:
    city = CAPITALS.get(country.lower())
    if city is None:
        raise ResourceError(f"unknown country {country!r}")
    return city


@server.prompt(title="Weekend trip")
def weekend_trip(country: str) -> str:
    """Plan a weekend in the capital of a country."""
    return f"Plan a weekend in the capital of {country}. Find the capital with capital_of first."


@server.completion()
async def complete_country(
    ref: PromptReference | ResourceTemplateReference,
    argument: CompletionArgument,
    context: CompletionContext | None,
) -> Completion | None:
    if argument.name != "country":
        return None
    names = [c.title() for c in sorted(CAPITALS) if c.startswith(argument.value.lower())]
    return Completion(values=names, total=len(names), has_more=False)


if __name__ == "__main__":
    server.run()
