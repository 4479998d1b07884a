"""An MCP server behind OAuth, with its own authorization server, for the tests and docs.

Built with the SDK's MCPServer and its authorization-server routes (metadata, dynamic
client registration, authorize, token, revoke). The authorization endpoint approves at
once, as if the user had clicked "Allow": it redirects straight to the client's
``redirect_uri`` with a code. Tokens live in memory, so they die with the process.

Run on a socket the test already bound: ``python oauth_server.py --http-fd FD``.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import socket
import time

from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from mcp.shared.exceptions import MCPError

SCOPE = "tools"
LIFETIME = 3600


class ApproveEverything:
    """An in-memory OAuth authorization server that approves every request."""

    def __init__(self) -> None:
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        self.clients[client_info.client_id] = client_info

    async def authorize(
        self, client: OAuthClientInformationFull, params: AuthorizationParams
    ) -> str:
        code = AuthorizationCode(
            code=secrets.token_urlsafe(32),
            scopes=params.scopes or [SCOPE],
            expires_at=time.time() + 300,
            client_id=client.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        self.codes[code.code] = code
        return construct_redirect_uri(str(params.redirect_uri), code=code.code, state=params.state)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        del self.codes[authorization_code.code]
        return self._issue(client.client_id, authorization_code.scopes, authorization_code.resource)

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> RefreshToken | None:
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        del self.refresh[refresh_token.token]  # rotated
        return self._issue(client.client_id, scopes or refresh_token.scopes, refresh_token.resource)

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is None or (found.expires_at is not None and found.expires_at < time.time()):
            return None
        return found

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)

    def _issue(self, client_id: str, scopes: list[str], resource: str | None) -> OAuthToken:
        access = f"at-{secrets.token_urlsafe(24)}"
        refresh = f"rt-{secrets.token_urlsafe(24)}"
        expires_at = int(time.time()) + LIFETIME
        self.access[access] = AccessToken(
            token=access,
            client_id=client_id,
            scopes=scopes,
            expires_at=expires_at,
            resource=resource,
        )
        self.refresh[refresh] = RefreshToken(
            token=refresh, client_id=client_id, scopes=scopes, resource=resource
        )
        return OAuthToken(
            access_token=access,
            expires_in=LIFETIME,
            scope=" ".join(scopes),
            refresh_token=refresh,
        )


def build(base_url: str) -> MCPServer:
    server = MCPServer(
        "oauth-demo",
        version="1.0.0",
        log_level="WARNING",
        auth_server_provider=ApproveEverything(),
        auth=AuthSettings(
            issuer_url=base_url,  # type: ignore[arg-type]
            resource_server_url=f"{base_url}/mcp",  # type: ignore[arg-type]
            validate_token_resource=True,
            required_scopes=[SCOPE],
            client_registration_options=ClientRegistrationOptions(
                enabled=True, valid_scopes=[SCOPE], default_scopes=[SCOPE]
            ),
            revocation_options=RevocationOptions(enabled=True),
        ),
    )

    @server.tool(structured_output=False)
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool(structured_output=False)
    async def log_credentials(ctx: Context) -> str:
        """Log the Authorization header it got, and its token alone, as a server whose
        upstream refused it does."""
        authorization = (ctx.headers or {}).get("authorization", "")
        token = authorization.split()[-1]
        await ctx.log("warning", f"upstream rejected credentials: {authorization}; token {token}")
        return "logged"

    @server.tool(structured_output=False)
    def reject_credentials(ctx: Context) -> str:
        """Fail with a JSON-RPC error quoting the Authorization header it got, as a
        server whose upstream refused the credential does."""
        authorization = (ctx.headers or {}).get("authorization", "")
        raise MCPError(0, f"upstream rejected credentials: {authorization}")

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http-fd", type=int, required=True)
    options = parser.parse_args()
    import uvicorn

    sock = socket.socket(fileno=options.http_fd)
    host, port = sock.getsockname()[:2]
    app = build(f"http://{host}:{port}").streamable_http_app()
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))


if __name__ == "__main__":
    main()
