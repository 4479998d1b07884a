"""Which OpenAI SDK clients ``LlmCycle`` accepts, and the async twin of a sync one.

The loop is async (it runs tools concurrently while it reads the model's stream), so it
needs an ``AsyncOpenAI``. Most apps hold a sync ``OpenAI``; rather than a second,
blocking copy of the loop, the cycle builds an ``AsyncOpenAI`` with the same settings
and owns it (``aclose()``/``close_sync()`` close it; the caller's client stays theirs).

A client the cycle builds (from the environment, or a sync client's twin) sends through
:func:`~agcore_tools.cycle.sharded_http_client`: it costs what the SDK's default client
costs for one conversation at a time, and stays cheap with hundreds in flight (see
``docs/benchmarks.md``, "Scale"). Most users never read that page, so the default is the
one that scales. With a proxy in the environment the SDK's default client is kept: an
``http_client`` with its own transport would ignore ``HTTPS_PROXY``. So it is with an
OpenAI SDK older than 3.0, whose client is built on ``httpx``, not ``httpx2`` as the
sharded transport is.
"""

from __future__ import annotations

import logging
import urllib.request
from typing import TYPE_CHECKING, Any

from ..error import ClientTypeError, LlmError
from .transport import sdk_is_httpx2_based, sharded_http_client

if TYPE_CHECKING:
    from openai import AsyncOpenAI, OpenAI

__all__ = ["ClientTypeError", "accept_client", "client_from_env"]

logger = logging.getLogger("agcore_tools.cycle")


_ACCEPTED = "an openai.AsyncOpenAI or an openai.OpenAI client (or a subclass of AsyncOpenAI)"


def accept_client(client: Any) -> tuple[AsyncOpenAI, bool]:
    """The client the cycle drives, and whether the cycle owns (and closes) it.

    An ``AsyncOpenAI`` (or subclass, such as ``AsyncAzureOpenAI``) is used as given.
    A sync ``OpenAI`` gets an async twin with its API key, organization, project, base
    URL, timeout, retries, default headers and default query. Anything else is
    refused with a ``TypeError`` naming what is accepted.
    """
    from openai import AsyncOpenAI, AzureOpenAI, OpenAI

    if isinstance(client, AsyncOpenAI):
        _hint_sharding()
        return client, False
    if isinstance(client, AzureOpenAI):
        raise ClientTypeError(
            f"LlmCycle(client=...) takes {_ACCEPTED}; a sync AzureOpenAI cannot be "
            "converted (its authentication and API version are Azure's own): pass an "
            "AsyncAzureOpenAI"
        )
    if isinstance(client, OpenAI):
        return async_twin(client), True
    raise ClientTypeError(f"LlmCycle(client=...) takes {_ACCEPTED}, got {type(client).__name__}")


def async_twin(client: OpenAI) -> AsyncOpenAI:
    """An ``AsyncOpenAI`` with the same settings as ``client``.

    A custom ``http_client`` (proxies, certificates) cannot carry over: an async client
    needs an async transport, so pass your own ``AsyncOpenAI`` for that.
    """
    from openai import AsyncOpenAI

    return AsyncOpenAI(
        api_key=client.api_key,
        organization=client.organization,
        project=client.project,
        base_url=client.base_url,
        timeout=client.timeout,
        max_retries=client.max_retries,
        # What the caller passed as default_headers. The SDK has no public view of
        # those alone: its default_headers property mixes in its own sync-client headers
        # (User-Agent, X-Stainless-Async: false, the platform's, which it probes,
        # blocking, on first use), and copy()/with_options() only make a sync client.
        default_headers=getattr(client, "_custom_headers", None) or None,
        default_query=client.default_query or None,  # public: exactly the caller's
        http_client=_scaling_http_client(),
    )


def client_from_env() -> AsyncOpenAI:
    """An ``AsyncOpenAI`` from the environment (``OPENAI_API_KEY``, ``OPENAI_BASE_URL``)."""
    from openai import AsyncOpenAI, OpenAIError

    try:
        return AsyncOpenAI(http_client=_scaling_http_client())
    except OpenAIError as exc:
        raise LlmError(
            f"cannot create the OpenAI client from the environment: {exc}; pass client= or "
            "set OPENAI_API_KEY"
        ) from exc


def _scaling_http_client() -> Any:
    """The ``http_client`` of a client the cycle builds: sharded, unless a proxy is set
    or the SDK predates httpx2.

    ``None`` (the SDK's own client) when the environment names a proxy, which only a
    client without a transport of its own honors, or when the installed OpenAI SDK is
    older than 3.0 (httpx-based, so it cannot drive the sharded httpx2 transport).
    """
    if urllib.request.getproxies() or not sdk_is_httpx2_based():
        return None
    return sharded_http_client()


_hinted = False


def _hint_sharding() -> None:
    """Say once, at DEBUG, that a client of one's own scales better sharded."""
    global _hinted
    if not _hinted:
        _hinted = True
        logger.debug(
            "LlmCycle uses the AsyncOpenAI client given; past a few hundred concurrent "
            "conversations in one process, build it with "
            "http_client=agcore_tools.cycle.sharded_http_client() (docs/benchmarks.md, Scale)"
        )
