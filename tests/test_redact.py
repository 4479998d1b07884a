"""Which parts of a URL's path are taken for keys: a webhook's or a hosted server's key
of letters only is hidden, and words, names and slugs are kept."""

from __future__ import annotations

import random
import shlex
import string

import pytest

from agcore_tools import StdioTransport, StreamableHttpTransport
from agcore_tools._redact import url_secrets, url_without_secrets
from agcore_tools.mcp._stderr import transport_secrets

# Keys of letters only: a base62 key of 24 characters comes out with no digit once in
# 70, and some services draw theirs from letters alone.
LETTER_KEYS = [
    "abcdefghijklmnopqrstuvwx",  # Slack's docs' placeholder for a webhook's secret
    "ghyQYslWtMlbTxVrXmIaqwer",
    "QmZxTnVbWkRjHpLsYcGfDaEu",
    "kqzvtwxjpmfhgbnrdslcyuae",
    "XKQZVTWJPMFHGBNRDSLCYUAE",
    "hZkPqWvXmNbTrLsJdFgC",  # 20: the shortest run taken for a key
]
# Long runs of letters that are words or names made of words, in any case.
WORDS = [
    "internationalization",
    "counterrevolutionaries",
    "antidisestablishmentarianism",
    "uncharacteristically",
    "institutionalization",
    "electroencephalographically",
    "gettingstartedwithauthentication",
    "Datenschutzgrundverordnung",
    "Rechtsschutzversicherungsgesellschaften",
    "supercalifragilisticexpialidocious",
    "StreamableHttpTransport",
    "ListToolsRequestHandler",
    "XMLHttpRequestUpload",
    "getAllUserPreferencesForAccount",
    "ModelContextProtocolServer",
    "VisualStudioCodeInsiders",
    "SHOWALLRESOURCEGROUPSNOW",
]
ORDINARY_PATHS = [
    "/repos/octocat/hello-world",
    "/api/v1/completions",
    "/v1/chat/completions",
    "/models/gpt-4o-mini",
    "/openai/deployments/gpt-4o-mini-2024-07-18",
    "/models/meta-llama/Meta-Llama-3.1-8B-Instruct/v1",
    "/docs/getting-started-with-authentication",
    "/api/webhooks/123456789012345678/internationalization",
    "/admin/realms/master/protocol/openid-connect/token",
    "/subscriptions/x/resourceGroups/rg/providers/Microsoft.CognitiveServices/accounts",
]


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            f"https://hooks.slack.com/services/TABCDEFGH/BABCDEFGH/{LETTER_KEYS[0]}",
            "https://hooks.slack.com/services/TABCDEFGH/BABCDEFGH/***",
        ),
        (f"https://mcp.example.com/u/{LETTER_KEYS[1]}/mcp", "https://mcp.example.com/u/***/mcp"),
        (
            f"https://api.telegram.org/bot1234567:{LETTER_KEYS[2]}/getMe",
            "https://api.telegram.org/***/getMe",
        ),
    ],
)
def test_a_key_of_letters_only_in_the_urls_path_is_hidden_and_masked(url: str, shown: str) -> None:
    # The path rule wanted a digit in a run before it took it for a key: a key that had
    # none was shown in describe(), repr() and every message naming the server.
    transport = StreamableHttpTransport(url)
    assert transport.describe() == shown
    assert f"url={shown!r}" in repr(transport)
    # And masked where the server echoes it ("Cannot POST /u/<key>/mcp").
    key = next(key for key in LETTER_KEYS if key in url)
    assert key in transport_secrets(transport)
    # In a stdio server's argument, and as a path in its env, too.
    stdio = StdioTransport("srv", [url], env={"HOOK_DIR": f"/var/hooks/{key}"})
    assert stdio.describe() == f"`srv {shlex.quote(shown)}`"
    assert {key, f"/var/hooks/{key}"} <= set(transport_secrets(stdio))


def test_random_letters_in_a_path_are_keys_and_words_and_names_are_not() -> None:
    draw = random.Random(20261206)
    drawn = [
        "".join(draw.choice(letters) for _ in range(size))
        for letters in (string.ascii_letters, string.ascii_lowercase, string.ascii_uppercase)
        for size in (20, 24, 32, 43)
        for _ in range(50)
    ]
    hidden = [
        key for key in drawn if url_without_secrets(f"https://x/h/{key}") == "https://x/h/***"
    ]
    # 97% of random strings of 20 letters read as no words do, 99% of 32: with this draw,
    # 597 of the 600.
    assert len(hidden) == 597
    for key in LETTER_KEYS:
        assert url_without_secrets(f"https://x/h/{key}/mcp") == "https://x/h/***/mcp", key
        assert url_secrets(f"https://x/h/{key}") == [key]
    for word in WORDS:
        url = f"https://x/h/{word}/mcp"
        assert url_without_secrets(url) == url, word
        assert url_secrets(url) == [], word
    for path in ORDINARY_PATHS:
        url = f"https://api.example.com{path}"
        assert url_without_secrets(url) == url, path
        assert url_secrets(url) == [], path
