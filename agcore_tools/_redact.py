"""Secrets the library knows, masked in the text it logs or raises.

A leaf module: the MCP client masks a stdio server's ``env`` values and an HTTP
server's header values in what the server writes (its stderr, its log messages), and
the model loop masks its client's API key and header values in the errors a server's
answer becomes (a proxy that echoes the bearer token in its 401 body), and the query
values of the server's URL it names.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from urllib.parse import urlsplit, urlunsplit

__all__ = [
    "MIN_SECRET",
    "header_secrets",
    "mask",
    "secret_values",
    "url_without_secrets",
]

MIN_SECRET = 8
"""Shorter values ("1", "true", "en_US") are not masked: they would garble the text
without hiding anything worth guessing."""


def secret_values(values: Iterable[str]) -> list[str]:
    """The ``values`` worth masking (:data:`MIN_SECRET` characters or more), longest
    first, so that a secret containing another is masked whole.

    Example:
        >>> secret_values(["true", "ghp_S3CRETt0ken", "ghp_S3CRETt0ken_and_more"])
        ['ghp_S3CRETt0ken_and_more', 'ghp_S3CRETt0ken']
    """
    return sorted({s for s in values if len(s) >= MIN_SECRET}, key=len, reverse=True)


def header_secrets(values: Iterable[object]) -> list[str]:
    """HTTP header values and each word of one (the token of ``Bearer ...``), the
    strings among them only.

    Example:
        >>> header_secrets(["Bearer ghp_S3CRETt0ken", 3])
        ['Bearer ghp_S3CRETt0ken', 'Bearer', 'ghp_S3CRETt0ken']
    """
    strings = [value for value in values if isinstance(value, str)]
    return [*strings, *(word for value in strings for word in value.split())]


def mask(text: str, secrets: Sequence[str]) -> str:
    """``text`` with each of ``secrets`` (from :func:`secret_values`) shown as ``***``.

    Example:
        >>> mask("token ghp_S3CRETt0ken ok", secret_values(["ghp_S3CRETt0ken"]))
        'token *** ok'
    """
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


def url_without_secrets(url: str) -> str:
    """``url`` with no user or password, and its query's values shown as ``***``
    (gateways and hosted servers take keys as ``?api-key=...``).

    Example:
        >>> url_without_secrets("https://u:pw@gw.example.com:8443/v1?api-key=s3cret&x")
        'https://gw.example.com:8443/v1?api-key=***&x=***'
    """
    parts = urlsplit(url)
    query = "&".join(f"{part.partition('=')[0]}=***" for part in parts.query.split("&") if part)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, query, parts.fragment))
