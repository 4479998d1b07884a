"""Where OAuth tokens for remote MCP servers live: the token stores the MCP SDK's
``OAuthClientProvider`` (and its client-credentials providers) read and write.

The provider does the OAuth itself (discovery, registration, PKCE, refresh, scope
step-up) and is what :class:`~agcore_tools.StreamableHttpTransport` takes as ``auth``.
It keeps the tokens and the client's registration in a store that implements the SDK's
``TokenStorage`` protocol; these are two such stores. Use one store per server.

Both remember when an access token expires. An expired token is handed back without
its access token, so the provider refreshes it (or, without a refresh token, signs in
again) before its first request, instead of sending a token the server will refuse.

Example:
    >>> import asyncio
    >>> from mcp.shared.auth import OAuthToken
    >>> store = InMemoryTokenStorage()
    >>> asyncio.run(store.set_tokens(OAuthToken(access_token="at-1", expires_in=3600)))
    >>> asyncio.run(store.get_tokens()).access_token
    'at-1'
"""

from __future__ import annotations

import json
import logging
import os
import stat
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ..error import ToolIOError

if TYPE_CHECKING:
    from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
    from pydantic import BaseModel

_Model = TypeVar("_Model", bound="BaseModel")

__all__ = ["FileTokenStorage", "InMemoryTokenStorage"]

logger = logging.getLogger("agcore_tools.mcp.auth")

_FORMAT = 1
"""The version of FileTokenStorage's JSON layout."""


def _expires_at(token: OAuthToken) -> float | None:
    return None if token.expires_in is None else time.time() + int(token.expires_in)


def _as_of_now(token: OAuthToken | None, expires_at: float | None) -> OAuthToken | None:
    """The stored token as the provider should see it now (see the module docstring)."""
    if token is None or expires_at is None:
        return token
    left = int(expires_at - time.time())
    if left > 0:
        return token.model_copy(update={"expires_in": left})
    if token.refresh_token:
        # The SDK's provider refreshes a token without an access token before sending.
        return token.model_copy(update={"access_token": "", "expires_in": 0})
    return None


class InMemoryTokenStorage:
    """Keeps tokens and the client registration in memory, for this process only.

    Each sign-in starts from nothing after a restart; use :class:`FileTokenStorage` to
    keep them. Pre-registered client credentials go in with ``set_client_info()``.

    Example:
        >>> import asyncio
        >>> from mcp.shared.auth import OAuthClientInformationFull
        >>> store = InMemoryTokenStorage()
        >>> asyncio.run(store.set_client_info(OAuthClientInformationFull(client_id="app")))
        >>> asyncio.run(store.get_client_info()).client_id
        'app'
        >>> asyncio.run(store.get_tokens()) is None
        True
    """

    def __init__(self) -> None:
        self._tokens: OAuthToken | None = None
        self._expires_at: float | None = None
        self._client_info: OAuthClientInformationFull | None = None

    def __repr__(self) -> str:
        return f"<InMemoryTokenStorage tokens={'yes' if self._tokens else 'no'}>"

    async def get_tokens(self) -> OAuthToken | None:
        """The stored tokens, with ``expires_in`` counted from now; None when there are none."""
        return _as_of_now(self._tokens, self._expires_at)

    async def set_tokens(self, tokens: OAuthToken) -> None:
        """Store the tokens the provider obtained."""
        self._tokens, self._expires_at = tokens, _expires_at(tokens)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        """The client's registration (dynamic or pre-registered); None when there is none."""
        return self._client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        """Store the client's registration."""
        self._client_info = client_info


class FileTokenStorage:
    """Keeps tokens and the client registration in a JSON file that only its owner can read.

    The file is written whole on every change: to a new file created with mode 0600 in
    the same directory, then renamed over the old one, so it is never readable by others
    and never half-written. A missing directory is created with mode 0700. A file that
    others can read is narrowed to 0600 when it is read, with a warning. Reads and writes
    run in a worker thread. Concurrent writers in one process are serialised; separate
    processes should not share a file, and clients of one server in one process share
    one provider on it (not one provider each): a provider refreshes with the refresh
    token it loaded, which another may have used up already.

    Example:
        >>> import asyncio, tempfile
        >>> from pathlib import Path
        >>> from mcp.shared.auth import OAuthToken
        >>> directory = tempfile.TemporaryDirectory()
        >>> path = Path(directory.name) / "tokens" / "example.json"
        >>> store = FileTokenStorage(path)
        >>> store.path == path
        True
        >>> asyncio.run(store.set_tokens(OAuthToken(access_token="at-1", refresh_token="rt-1")))
        >>> oct(path.stat().st_mode & 0o777)
        '0o600'
        >>> asyncio.run(FileTokenStorage(path).get_tokens()).refresh_token
        'rt-1'
        >>> from mcp.shared.auth import OAuthClientInformationFull
        >>> asyncio.run(store.set_client_info(OAuthClientInformationFull(client_id="app")))
        >>> asyncio.run(FileTokenStorage(path).get_client_info()).client_id
        'app'
        >>> directory.cleanup()
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = Path(path)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"FileTokenStorage({str(self._path)!r})"

    @property
    def path(self) -> Path:
        """The token file."""
        return self._path

    async def get_tokens(self) -> OAuthToken | None:
        """The stored tokens, with ``expires_in`` counted from now; None when there are none."""
        from mcp.shared.auth import OAuthToken

        data = await self._run(self._read)
        token = self._parse(OAuthToken, data.get("tokens"), "tokens")
        return _as_of_now(token, data.get("expires_at"))

    async def set_tokens(self, tokens: OAuthToken) -> None:
        """Store the tokens the provider obtained (rewrites the file)."""
        stored = tokens.model_dump(mode="json", exclude_none=True)
        await self._run(self._update, {"tokens": stored, "expires_at": _expires_at(tokens)})

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        """The client's registration (dynamic or pre-registered); None when there is none."""
        from mcp.shared.auth import OAuthClientInformationFull

        data = await self._run(self._read)
        return self._parse(OAuthClientInformationFull, data.get("client_info"), "client_info")

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        """Store the client's registration (rewrites the file)."""
        stored = client_info.model_dump(mode="json", exclude_none=True)
        await self._run(self._update, {"client_info": stored})

    # -- in a worker thread ----------------------------------------------------------

    @staticmethod
    async def _run(function: Any, *args: Any) -> Any:
        import anyio

        return await anyio.to_thread.run_sync(function, *args)

    def _read(self) -> dict[str, Any]:
        with self._lock:
            return self._load()

    def _update(self, changes: dict[str, Any]) -> None:
        with self._lock:
            data = {**self._load(), **changes, "format": _FORMAT}
            self._write(json.dumps(data, indent=2).encode())

    def _load(self) -> dict[str, Any]:
        try:
            with open(self._path, "rb") as file:
                mode = os.fstat(file.fileno()).st_mode
                if stat.S_IMODE(mode) & 0o077:
                    os.fchmod(file.fileno(), 0o600)
                    logger.warning(
                        "token file %s was readable by others (mode %o); narrowed it to 0600",
                        self._path,
                        stat.S_IMODE(mode),
                    )
                raw = file.read()
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise ToolIOError(f"cannot read token file {self._path}: {exc.strerror}") from exc
        try:
            data = json.loads(raw)
        except ValueError:
            # Not chained: the decoder's message quotes the file, which holds secrets.
            raise ToolIOError(
                f"token file {self._path} is not valid JSON; delete it to sign in again"
            ) from None
        if not isinstance(data, dict):
            raise ToolIOError(
                f"token file {self._path} does not hold a JSON object; delete it to sign in again"
            )
        return data

    def _write(self, content: bytes) -> None:
        directory = self._path.parent
        try:
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            # mkstemp creates the file with mode 0600 before anything is written to it.
            fd, temporary = tempfile.mkstemp(prefix=f".{self._path.name}.", dir=directory)
        except OSError as exc:
            raise ToolIOError(f"cannot write token file {self._path}: {exc.strerror}") from exc
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(content)
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, self._path)
        except OSError as exc:
            Path(temporary).unlink(missing_ok=True)
            raise ToolIOError(f"cannot write token file {self._path}: {exc.strerror}") from exc

    def _parse(self, model: type[_Model], value: Any, key: str) -> _Model | None:
        from pydantic import ValidationError

        if value is None:
            return None
        try:
            return model.model_validate(value)
        except ValidationError as exc:
            # Not chained: a validation error quotes the values, which are secrets.
            fields = ", ".join(".".join(map(str, e["loc"])) or key for e in exc.errors())
            raise ToolIOError(
                f"token file {self._path} has an invalid {key!r} entry (bad fields: {fields}); "
                "delete it to sign in again"
            ) from None
