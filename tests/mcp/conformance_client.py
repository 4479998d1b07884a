"""The client program the MCP conformance suite runs (client side), for every scenario.

Usage: ``python conformance_client.py <server-url>``; the scenario's name is in
``MCP_CONFORMANCE_SCENARIO`` and its data (client credentials, keys, an identity
provider's token) in ``MCP_CONFORMANCE_CONTEXT``, a JSON object. Built on
:class:`agcore_tools.McpClient`; every ``auth/*`` scenario authenticates through the
transport's ``auth=``, with the MCP SDK's OAuth providers and agcore_tools' token store.

The suite's authorization servers approve at once: their authorization endpoint
redirects straight to the ``redirect_uri`` with a code. So the "browser" here is one
GET that reads the code from the redirect, where a real app would open a browser and
wait for the redirect on its callback URL.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
import mcp_types as types
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.extensions.client_credentials import (
    ClientCredentialsOAuthProvider,
    PrivateKeyJWTOAuthProvider,
    SignedJWTParameters,
)
from mcp.client.auth.extensions.identity_assertion import IdentityAssertionOAuthProvider
from mcp.client.auth.utils import build_protected_resource_metadata_discovery_urls
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata

from agcore_tools import McpClient, StreamableHttpTransport
from agcore_tools.mcp import InMemoryTokenStorage

log = logging.getLogger("conformance_client")

REDIRECT_URI = "http://localhost:3000/callback"
# A client ID metadata document's URL (SEP-991): used as the client_id when the
# authorization server supports it, instead of registering.
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"
HTTP_TIMEOUT = 20.0


async def accept_with_defaults(
    context: Any, params: types.ElicitRequestParams
) -> types.ElicitResult:
    """Accept an elicitation, filling every field from its schema's default (SEP-1034)."""
    schema = getattr(params, "requested_schema", None) or {}
    content = {
        name: spec["default"]
        for name, spec in schema.get("properties", {}).items()
        if isinstance(spec, dict) and "default" in spec
    }
    return types.ElicitResult(action="accept", content=content)


class AutoApprovingBrowser:
    """The redirect and callback handlers of an OAuth flow whose server approves at once."""

    def __init__(self) -> None:
        self._result: AuthorizationCodeResult | None = None

    async def open(self, authorization_url: str) -> None:
        async with httpx2.AsyncClient(timeout=HTTP_TIMEOUT) as http:
            response = await http.get(authorization_url, follow_redirects=False)
        location = response.headers.get("location")
        if not response.is_redirect or not location:
            raise RuntimeError(
                f"authorization endpoint answered {response.status_code}, no redirect"
            )
        query = parse_qs(urlsplit(location).query)
        if "code" not in query:
            raise RuntimeError("the redirect after authorization carries no code")
        self._result = AuthorizationCodeResult(
            code=query["code"][0],
            state=query.get("state", [None])[0],
            iss=query.get("iss", [None])[0],
        )

    async def callback(self) -> AuthorizationCodeResult:
        result, self._result = self._result, None
        if result is None:
            raise RuntimeError("no authorization response to hand back")
        return result


def context() -> dict[str, Any]:
    raw = os.environ.get("MCP_CONFORMANCE_CONTEXT")
    return json.loads(raw) if raw else {}


async def authorization_code(url: str) -> httpx2.Auth:
    """The SDK's OAuthClientProvider: registration (or CIMD, or pre-registered), PKCE, refresh."""
    storage = InMemoryTokenStorage()
    ctx = context()
    if "client_id" in ctx:  # pre-registered credentials
        await storage.set_client_info(
            OAuthClientInformationFull(
                client_id=ctx["client_id"],
                client_secret=ctx.get("client_secret"),
                redirect_uris=[REDIRECT_URI],  # type: ignore[list-item]
                token_endpoint_auth_method=(
                    "client_secret_basic" if ctx.get("client_secret") else "none"
                ),
            )
        )
    browser = AutoApprovingBrowser()
    return OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata(
            client_name="agcore-tools conformance client",
            redirect_uris=[REDIRECT_URI],  # type: ignore[list-item]
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
        ),
        storage=storage,
        redirect_handler=browser.open,
        callback_handler=browser.callback,
        client_metadata_url=CLIENT_METADATA_URL,
    )


async def client_credentials_basic(url: str) -> httpx2.Auth:
    ctx = context()
    return ClientCredentialsOAuthProvider(
        server_url=url,
        storage=InMemoryTokenStorage(),
        client_id=ctx["client_id"],
        client_secret=ctx["client_secret"],
        token_endpoint_auth_method="client_secret_basic",
    )


async def client_credentials_jwt(url: str) -> httpx2.Auth:
    ctx = context()
    signing = SignedJWTParameters(
        issuer=ctx["client_id"],
        subject=ctx["client_id"],
        signing_algorithm=ctx.get("signing_algorithm", "ES256"),
        signing_key=ctx["private_key_pem"],
    )
    return PrivateKeyJWTOAuthProvider(
        server_url=url,
        storage=InMemoryTokenStorage(),
        client_id=ctx["client_id"],
        assertion_provider=signing.create_assertion_provider(),
    )


async def identity_assertion(url: str) -> httpx2.Auth:
    """SEP-990: an ID-JAG from the identity provider, exchanged at the authorization server."""
    ctx = context()
    # The provider takes the authorization server as configuration; the suite does not
    # pass it, so read it from the resource's metadata (RFC 9728) as an app would once.
    metadata_url = build_protected_resource_metadata_discovery_urls(None, url)[0]
    async with httpx2.AsyncClient(timeout=HTTP_TIMEOUT) as http:
        metadata = (await http.get(metadata_url)).raise_for_status().json()

    async def id_jag(audience: str, resource: str) -> str:
        async with httpx2.AsyncClient(timeout=HTTP_TIMEOUT) as http:
            response = await http.post(
                ctx["idp_token_endpoint"],
                data={
                    "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
                    "requested_token_type": "urn:ietf:params:oauth:token-type:id-jag",
                    "subject_token": ctx["idp_id_token"],
                    "subject_token_type": "urn:ietf:params:oauth:token-type:id_token",
                    "audience": audience,
                    "resource": resource,
                    "client_id": ctx["idp_client_id"],
                },
            )
        token: str = response.raise_for_status().json()["access_token"]
        return token

    return IdentityAssertionOAuthProvider(
        server_url=url,
        storage=InMemoryTokenStorage(),
        client_id=ctx["client_id"],
        client_secret=ctx["client_secret"],
        issuer=metadata["authorization_servers"][0],
        assertion_provider=id_jag,
        token_endpoint_auth_method="client_secret_basic",
    )


AUTH: dict[str, Callable[[str], Awaitable[httpx2.Auth]]] = {
    "auth/client-credentials-basic": client_credentials_basic,
    "auth/client-credentials-jwt": client_credentials_jwt,
    "auth/cross-app-access-complete-flow": identity_assertion,
}

# The tool each scenario's server offers, and the arguments it expects; an auth
# scenario calls the first tool listed, with no arguments.
CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "tools_call": ("add_numbers", {"a": 5, "b": 3}),
    "sse-retry": ("test_reconnection", {}),
    "elicitation-sep1034-client-defaults": ("test_client_elicitation_defaults", {}),
}


async def run(url: str, scenario: str) -> None:
    auth = None
    if scenario.startswith("auth/"):
        auth = await AUTH.get(scenario, authorization_code)(url)
    client = McpClient(
        "conformance",
        StreamableHttpTransport(url, auth=auth),
        timeout=HTTP_TIMEOUT,
        elicitation_handler=accept_with_defaults,
    )
    async with client:
        log.info("connected: %s, protocol %s", client.server_info, client.protocol_version)
        tools = [d["function"]["name"] for d in await client.list_tools()]
        log.info("tools: %s", tools)
        name, args = CALLS.get(scenario, (tools[0] if tools else "", {}))
        if name:
            result = await client.call_tool(name, args)
            log.info("%s -> %r", name, result)


def main() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    asyncio.run(run(sys.argv[-1], scenario))


if __name__ == "__main__":
    main()
