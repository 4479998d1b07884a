"""Check the path of one tool call through the package: down the layers and back up,
no module entered twice.

A profiler hook watches ``LlmCycle.submit_with_tools`` run one tool call against the
offline scripted server, from the call of ``submit_with_tools`` to its return: the
request, the function, and the answer. At every call into a module of ``agcore_tools``
it reads the chain of callers (for a coroutine, the coroutines awaiting it) and keeps
its modules, in order. On that chain:

- **no module appears twice**: nothing calls back up into a module it came from;
- **the layers only go down**: each module is in the same layer as its caller or a
  lower one, by the ``layers`` contract of ``[tool.importlinter]`` in pyproject.toml.
  So each layer is visited at most once on the way down and once on the way up.

It prints the deepest chain, each module's layer, and every chain that breaks a rule,
and exits 1 if any does.

    PYTHONPATH=. .venv/bin/python scripts/call_path.py
"""

from __future__ import annotations

import asyncio
import logging
import re
import sys
from pathlib import Path
from types import FrameType
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pytest brings tomli on 3.10
    import tomli as tomllib

from agcore_tools import CycleConfig, LlmCycle, ToolRegistry
from agcore_tools.testing import ScriptedChatServer

logger = logging.getLogger("call_path")

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "agcore_tools"
TRANSPARENT = frozenset({f"{PACKAGE}._keywords"})
"""Modules of decorators whose wrappers only pass a call on to the function they wrap
(``checks_keywords`` turns a misspelt keyword into the library's error): no step of
the path, though the wrapper sits in a low layer and the function it wraps above it."""

registry = ToolRegistry()


@registry.tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _layer_table() -> dict[str, int]:
    """Each contract module (``registry``, ``cycle``) to its layer, 0 the highest."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    contract = next(c for c in config["contracts"] if c["type"] == "layers")
    rows = [re.split(r"\s*[|:]\s*", layer.strip("() ")) for layer in contract["layers"]]
    return {module: i for i, row in enumerate(rows) for module in row}


LAYERS = _layer_table()


def layer(module: str) -> int:
    """The layer of a module of the package: that of its nearest contract ancestor."""
    rest = module.removeprefix(PACKAGE + ".")
    while rest:
        if rest in LAYERS:
            return LAYERS[rest]
        rest = rest.rpartition(".")[0]
    raise LookupError(f"{module} is in no layer of the contract")


def chain(frame: FrameType | None) -> list[str]:
    """The package's modules on the stack, outermost first, repeats of a module by
    itself (a function calling its own module's helpers) folded into one."""
    modules: list[str] = []
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        ours = name.startswith(PACKAGE + ".") and not name.startswith(PACKAGE + ".testing")
        ours = ours and name not in TRANSPARENT
        if ours and (not modules or modules[-1] != name):
            modules.append(name)
        frame = frame.f_back
    modules.reverse()
    return modules


def faults(modules: list[str]) -> list[str]:
    """What is wrong with one chain: a module entered twice, or a step up the layers."""
    found = []
    for i, module in enumerate(modules):
        if module in modules[:i]:
            found.append(f"{module} entered twice")
        # A higher layer has a lower number; the same layer (modules of one package,
        # or siblings) is fine.
        if i and layer(module) < layer(modules[i - 1]):
            found.append(f"{modules[i - 1]} calls up into {module}")
    return found


chains: dict[tuple[str, ...], None] = {}


def _hook(frame: FrameType, event: str, arg: Any) -> None:
    name = frame.f_globals.get("__name__", "")
    if event == "call" and name.startswith(PACKAGE + ".") and name not in TRANSPARENT:
        chains.setdefault(tuple(chain(frame)), None)


async def main() -> None:
    with ScriptedChatServer() as server:
        server.add(server.reply_tool_calls([("add", {"a": 2, "b": 3}, "call_1")]))
        server.add(server.reply_text("5"))
        async with server.client() as client:
            cycle = LlmCycle(CycleConfig("test-model"), client=client)
            await cycle.submit_with_tools("2 + 3?", registry)  # warm: imports, caches
            server.add(server.reply_tool_calls([("add", {"a": 2, "b": 3}, "call_2")]))
            server.add(server.reply_text("5"))
            sys.setprofile(_hook)
            try:
                response = await cycle.submit_with_tools("2 + 3?", registry)
            finally:
                sys.setprofile(None)
            assert response.text == "5" and response.invocations[0].output == 5


def short(module: str) -> str:
    return module.removeprefix(PACKAGE + ".")


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    asyncio.run(main())
    seen = list(chains)
    modules = sorted({m for c in seen for m in c})
    deepest = max(seen, key=len)
    logger.info(
        "%d modules on %d distinct chains; the deepest (%d): %s",
        len(modules),
        len(seen),
        len(deepest),
        " > ".join(f"{short(m)} [{layer(m)}]" for m in deepest),
    )
    broken = [(c, faults(list(c))) for c in seen]
    broken = [(c, f) for c, f in broken if f]
    for c, found in broken:
        logger.info("BROKEN %s: %s", " > ".join(short(m) for m in c), "; ".join(found))
    logger.info("%d chain(s) break a rule", len(broken))
    sys.exit(1 if broken else 0)
