"""Interop sweep: 21 third-party MCP servers' tools at the model boundary, per server.

Run from the repository's root (the ``search`` extra for the search column; with the
``tokens`` extra and tiktoken's encoding data the counts are tiktoken's, otherwise the
documented estimate of one token per 4 bytes of UTF-8 JSON)::

    .venv/bin/python benchmarks/bench_interop.py

The tools are the recorded ``tools/list`` answers in ``benchmarks/data/interop/``
(``record_interop.py``), registered as ``McpClient.into_tools(prefix=True)`` would
register them. For each server:

- **strict-ready**: tools whose schema follows OpenAI's strict rules (every object
  closed, every property required, only the keywords and formats strict mode accepts,
  no ``$ref`` with siblings). *raw*: the schema as the server sent it;
  *strict transform*: ``ToolRegistry(strict=True)`` offers it with ``"strict": true``;
  *pipeline*: ``ToolRegistry(strict=True, schema_transforms=[portable_schema])`` does.
  Every schema offered as strict is checked against the same rules.
- **grammar-safe**: tools whose schema has none of the constructs that break
  llama-cpp-python's grammar (an enum or const value or a property name with ``"``; a
  ``minLength``/``maxLength``/``minItems``/``maxItems`` over ``GRAMMAR_BOUND_LIMIT``; a
  ``pattern`` not anchored with ``^...$``; a node naming no kind of value, which the
  converter refuses or, for ``{}``, reads as objects only), raw and through
  ``[portable_schema, grammar_safe_schema]``. ``tests/real/test_interop_llama.py``
  sends each of them to a real server.
- **tokens**: of all the server's definitions as one request sends them, raw and
  through ``portable_schema``; *with search*: the median, over the task prompts of
  ``benchmarks/data/search_tasks.json`` for that server's tools, of the request after
  one ``search_tools`` call (``search_tools`` plus up to 5 found), as ``bench_search.py``
  measures it on the server alone. The first request of a search run offers
  ``search_tools`` only, whatever the server.

Deterministic: no timing is involved. ``--json PATH`` saves the rows.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from bench_search import offered_after_search
from interop_data import adapters, load

from agcore_tools import (
    PermissionChecker,
    PermissionConfig,
    ToolRegistry,
    grammar_safe_schema,
    portable_schema,
)
from agcore_tools._budget import BYTES_PER_TOKEN, _counter, definition_costs
from agcore_tools.schema import GRAMMAR_BOUND_LIMIT
from agcore_tools.schema._jsonschema import subschemas
from agcore_tools.schema._strict import FORMATS, KEPT

ROOT = Path(__file__).resolve().parents[1]
MODEL = "gpt-4o"
# Annotations OpenAI's strict mode tolerates (pydantic's own strict schemas carry titles).
_TOLERATED = frozenset({"title", "$schema", "$id", "$comment"})
_BOUNDS = ("minLength", "maxLength", "minItems", "maxItems")
# The keywords llama-cpp-python's grammar converter tells a value's kind by.
_KINDS = ("type", "$ref", "anyOf", "oneOf", "allOf", "const", "enum", "properties", "items")
_KINDS += ("prefixItems", "pattern")


def strict_violations(schema: dict[str, Any]) -> list[str]:
    """Why ``schema`` is not strict-ready as it is (empty when it is)."""
    found: list[str] = []
    if schema.get("type") != "object":
        found.append("root not an object")

    def walk(node: dict[str, Any]) -> None:
        for key in node:
            if key not in KEPT and key not in _TOLERATED:
                found.append(f"keyword {key}")
        if "$ref" in node and len(set(node) - _TOLERATED - {"description"}) > 1:
            found.append("$ref with siblings")
        fmt = node.get("format")
        if isinstance(fmt, str) and fmt not in FORMATS:
            found.append(f"format {fmt}")
        if node.get("type") == "object" or "properties" in node:
            if node.get("additionalProperties") is not False:
                found.append("open object")
            props = node.get("properties") or {}
            if set(props) - set(node.get("required") or []):
                found.append("optional property")
        for _, sub in subschemas(node):
            walk(sub)

    walk(schema)
    return found


def grammar_hazards(schema: dict[str, Any]) -> list[str]:
    """The constructs of ``schema`` known to break llama-cpp-python's grammar."""
    found: list[str] = []

    def walk(node: dict[str, Any]) -> None:
        if not any(key in node for key in _KINDS):
            found.append("no kind of value")  # {} reads as objects only; else no grammar
        values = list(node.get("enum") or []) + ([node["const"]] if "const" in node else [])
        if any(isinstance(v, str) and '"' in v for v in values):
            found.append('" in enum/const')
        if any('"' in name for name in node.get("properties") or {}):
            found.append('" in property name')
        for key in _BOUNDS:
            if isinstance(node.get(key), int) and node[key] > GRAMMAR_BOUND_LIMIT:
                found.append(f"{key} {node[key]}")
        pattern = node.get("pattern")
        if isinstance(pattern, str) and not (pattern.startswith("^") and pattern.endswith("$")):
            found.append("unanchored pattern")
        for _, sub in subschemas(node):
            walk(sub)

    walk(schema)
    return found


def registry(server: dict[str, Any], **options: Any) -> ToolRegistry:
    reg = ToolRegistry(**options)
    reg.register_all(adapters(server))
    return reg


def tokens(definitions: list[dict[str, Any]]) -> int:
    return sum(count for _, count in definition_costs(definitions, MODEL))


def strict_count(definitions: list[dict[str, Any]]) -> int:
    strict = [d for d in definitions if d["function"].get("strict")]
    for d in strict:  # the library's strict output must pass the same rules
        wrong = strict_violations(d["function"]["parameters"])
        assert not wrong, (d["function"]["name"], wrong)
    return len(strict)


async def search_tokens(server: dict[str, Any], tasks: list[dict[str, Any]]) -> int | None:
    mine = [t for t in tasks if t["expected"].split("__", 1)[0] == server["server"]]
    if not mine:
        return None
    reg = registry(server)
    after = [(await offered_after_search(reg, t["prompt"], MODEL))["search_after"] for t in mine]
    return int(statistics.median(after))


async def row(server: dict[str, Any], tasks: list[dict[str, Any]]) -> dict[str, Any]:
    raw = registry(server).definitions()
    schemas = [d["function"]["parameters"] for d in raw]
    grammar = registry(server, schema_transforms=[portable_schema, grammar_safe_schema])
    return {
        "server": server["server"],
        "package": f"{server['package']} {server['version']}",
        "tools": len(raw),
        "strict_raw": sum(not strict_violations(s) for s in schemas),
        "strict_transform": strict_count(registry(server, strict=True).definitions()),
        "strict_pipeline": strict_count(
            registry(server, strict=True, schema_transforms=[portable_schema]).definitions()
        ),
        "grammar_raw": sum(not grammar_hazards(s) for s in schemas),
        "grammar_pipeline": sum(
            not grammar_hazards(d["function"]["parameters"]) for d in grammar.definitions()
        ),
        "offered_default_permissions": len(
            registry(server, permission_checker=PermissionChecker(PermissionConfig())).definitions()
        ),
        "tokens_raw": tokens(raw),
        "tokens_portable": tokens(
            registry(server, schema_transforms=[portable_schema]).definitions()
        ),
        "tokens_search": await search_tokens(server, tasks),
        "violations": Counter(
            reason for s in schemas for reason in sorted(set(strict_violations(s)))
        ),
        "hazards": Counter(reason for s in schemas for reason in grammar_hazards(s)),
    }


async def bench() -> dict[str, Any]:
    tasks = json.loads((ROOT / "benchmarks/data/search_tasks.json").read_text(encoding="utf-8"))
    rows = [await row(server, tasks) for server in load()]
    return {
        "model": MODEL,
        "counter": "tiktoken"
        if _counter(MODEL) is not None
        else f"estimate (bytes/{BYTES_PER_TOKEN})",
        "rows": rows,
    }


def _table(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| server | package | tools | strict-ready raw | strict transform | pipeline "
        "| grammar-safe raw | pipeline | offered, default permissions | tokens raw "
        "| tokens portable | tokens with search |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        search = "n/a" if r["tokens_search"] is None else f"{r['tokens_search']:,}"
        lines.append(
            f"| {r['server']} | {r['package']} | {r['tools']} | {r['strict_raw']} "
            f"| {r['strict_transform']} | {r['strict_pipeline']} | {r['grammar_raw']} "
            f"| {r['grammar_pipeline']} | {r['offered_default_permissions']} "
            f"| {r['tokens_raw']:,} | {r['tokens_portable']:,} "
            f"| {search} |"
        )
    summed = ("tools", "strict_raw", "strict_transform", "strict_pipeline", "grammar_raw")
    summed += ("grammar_pipeline", "offered_default_permissions", "tokens_raw", "tokens_portable")
    total = {k: sum(r[k] for r in rows) for k in summed}
    lines.append(
        f"| **all {len(rows)}** | | {total['tools']} | {total['strict_raw']} "
        f"| {total['strict_transform']} | {total['strict_pipeline']} | {total['grammar_raw']} "
        f"| {total['grammar_pipeline']} | {total['offered_default_permissions']} "
        f"| {total['tokens_raw']:,} | {total['tokens_portable']:,} | |"
    )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    result = asyncio.run(bench())
    print(f"token counter: {result['counter']} (model {result['model']})")
    print("\n".join(_table(result["rows"])))
    violations: Counter[str] = Counter()
    hazards: Counter[str] = Counter()
    for r in result["rows"]:
        violations.update(r["violations"])
        hazards.update(r["hazards"])
    print("raw schemas not strict-ready, by reason (tools):", dict(violations.most_common()))
    print("raw grammar hazards (occurrences):", dict(hazards.most_common()))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
