"""The states of a connection (kept apart so the client can check them without importing
the connection machinery at ``import agcore_tools`` time)."""

from __future__ import annotations

import enum

__all__ = ["State"]


class State(enum.Enum):
    """Where a connection is in its life."""

    STARTING = "starting"
    READY = "ready"
    LOST = "lost"
    CLOSED = "closed"
