"""StreamableHttpTransport's auth and headers: what it accepts, and what its repr shows."""

from __future__ import annotations

import httpx2
import pytest

from agcore_tools import StreamableHttpTransport, ToolError


def test_auth_takes_an_httpx2_auth_and_nothing_else() -> None:
    auth = httpx2.BasicAuth("user", "pass")
    assert StreamableHttpTransport("http://127.0.0.1:1/mcp", auth=auth).auth is auth
    with pytest.raises(TypeError, match=r"auth must be an httpx2\.Auth, .* got str") as caught:
        StreamableHttpTransport("http://127.0.0.1:1/mcp", auth="Bearer abc")  # type: ignore[arg-type]
    assert isinstance(caught.value, ToolError)


def test_repr_leaves_out_headers_and_auth_which_may_hold_secrets() -> None:
    transport = StreamableHttpTransport(
        "http://127.0.0.1:1/mcp",
        headers={"Authorization": "Bearer s3cret"},
        auth=httpx2.BasicAuth("user", "pa55"),
    )
    shown = repr(transport)
    assert shown.startswith("StreamableHttpTransport(url='http://127.0.0.1:1/mcp'")
    assert "s3cret" not in shown and "Authorization" not in shown and "BasicAuth" not in shown
    assert transport.headers == {"Authorization": "Bearer s3cret"}
