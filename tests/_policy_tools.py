"""A tool that fails on demand, behind a breaker: shared by the policy tests."""

from __future__ import annotations

from agcore_tools import Breaker, ToolPolicy, ToolRegistry


def flaky_charge(registry: ToolRegistry) -> list[bool]:
    """Register ``charge(ok)``, which fails unless ``ok``, behind ``Breaker(failures=5,
    window=60, cool_down=30)``; return the list of its runs' ``ok``."""
    runs: list[bool] = []

    @registry.tool(policy=ToolPolicy(breaker=Breaker(failures=5, window=60.0, cool_down=30.0)))
    async def charge(ok: bool) -> str:
        """Charge the card."""
        # async on purpose: a sync tool runs in a worker thread, so a turn's five
        # concurrent calls could finish in any order and any of them could be the
        # one that opens the breaker; on the loop they finish in the order they start.
        runs.append(ok)
        if not ok:
            raise RuntimeError("payment service down")
        return "charged"

    return runs
