"""An HTTP client for the OpenAI SDK that stays cheap with many requests in flight.

One ``AsyncOpenAI`` shared by a thousand concurrent conversations sends all their
requests through one connection pool, whose bookkeeping grows with the number of
requests in flight (see ``docs/benchmarks.md``, "Scale"). :func:`sharded_http_client`
keeps the official SDK and its ``http_client=`` parameter, and splits the pool.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..error import LlmConfigError

if TYPE_CHECKING:
    import httpx2

__all__ = ["sharded_http_client"]


def sdk_is_httpx2_based() -> bool:
    """Whether the installed OpenAI SDK's http client is an ``httpx2`` one (openai 3 on),
    which :func:`sharded_http_client`'s transport needs; before 3 it is an ``httpx`` one,
    which cannot drive an ``httpx2`` transport.
    """
    import httpx2
    from openai import DefaultAsyncHttpxClient

    return issubclass(DefaultAsyncHttpxClient, httpx2.AsyncClient)


def sharded_http_client(shards: int = 64, connections_per_shard: int = 16) -> httpx2.AsyncClient:
    """An ``http_client`` for ``AsyncOpenAI`` that spreads requests over ``shards`` pools.

    Each request goes to the least busy of ``shards`` independent connection pools (the
    one with the fewest responses open, the first on a tie) of up to
    ``connections_per_shard`` connections each, all of which may stay open while idle.
    With many requests in flight (hundreds of concurrent conversations in one process)
    this keeps the client's CPU per request close to its cost at low concurrency; with a
    few it costs the same as the SDK's default client, and one conversation at a time
    reuses one connection, as that client does. ``LlmCycle`` builds the client it owns
    on the same transport (unless a proxy is set in the environment, or the OpenAI SDK
    is older than 3.0). The pools are made at the first request, with the TLS context
    every such client in the process shares, built once, in a worker thread. The
    defaults, 64 pools of 16 (1,024 connections, the SDK's default client allows
    1,000), keep each pool's walk over its connections short: at 1,000 requests in
    flight they cost about 30% less CPU per request than 8 pools of 128 (see
    ``docs/benchmarks.md``, "Scale"). The SDK's
    other defaults (timeouts, redirects) are kept. No thread or task is added: a
    request runs in its caller's task. Close it with the ``AsyncOpenAI`` that uses it
    (``await client.close()``) or on its own (``await http_client.aclose()``).

    Raises ``LlmConfigError`` (a ``ValueError``) unless both numbers are at least 1, or
    when the installed OpenAI SDK is older than 3.0 (its client is built on ``httpx``,
    not ``httpx2``): there, keep the SDK's default client.

    Example:
        >>> from openai import AsyncOpenAI
        >>> from agcore_tools.cycle import sharded_http_client
        >>> http_client = sharded_http_client(shards=10, connections_per_shard=100)
        >>> client = AsyncOpenAI(api_key="sk-...", http_client=http_client)
        >>> client.max_retries  # an ordinary client otherwise
        2
    """
    if shards < 1 or connections_per_shard < 1:
        raise LlmConfigError(
            f"sharded_http_client needs shards >= 1 and connections_per_shard >= 1, got "
            f"{shards} and {connections_per_shard}"
        )
    if not sdk_is_httpx2_based():
        import openai

        raise LlmConfigError(
            f"sharded_http_client needs openai>=3 (an httpx2-based client); openai "
            f"{openai.__version__} is httpx-based: use the SDK's default http_client"
        )
    from openai import DefaultAsyncHttpxClient

    from ._sharded import ShardedTransport

    return DefaultAsyncHttpxClient(transport=ShardedTransport(shards, connections_per_shard))
