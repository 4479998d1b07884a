"""Where a benchmark ran: the versions of the packages measured and the machine.

Why this file exists: every benchmark's JSON result records both, so that a figure can
be read against the versions and the machine (its CPU, its load) that made it. One
definition keeps the records alike across the scripts.

Example::

    from run_info import machine, versions

    record = {"versions": versions("agcore-tools", "pydantic"), "machine": machine()}
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
from typing import Any

__all__ = ["machine", "versions"]


def versions(*dists: str) -> dict[str, str]:
    """Each distribution's installed version, or ``"missing"``."""
    found: dict[str, str] = {}
    for dist in dists:
        try:
            found[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            found[dist] = "missing"
    return found


def machine() -> dict[str, Any]:
    """The interpreter, the platform, the CPU's model and count, and the load average
    (the machines are shared: a figure taken under load reads differently)."""
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next(
                (line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu
            )
    except OSError:
        pass
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "load_average": [round(x, 2) for x in load] if load else None,
    }
