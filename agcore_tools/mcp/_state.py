"""The states of a connection, in a leaf module: the connection, the session, error
translation and resource subscriptions all check them."""

from __future__ import annotations

import enum

__all__ = ["State"]


class State(enum.Enum):
    """Where a connection is in its life."""

    STARTING = "starting"
    READY = "ready"
    LOST = "lost"
    CLOSED = "closed"
