"""Telling a server's profile from what it shows of itself: its base URL and its
``GET /models`` answer.

Its own module because this is guesswork from outside signs (host names, ``owned_by``
values, a proxy's headers, each read in the server's source), kept apart from the
profiles it picks (:mod:`._builtin_profiles`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from ._builtin_profiles import (
    ANTHROPIC,
    AZURE,
    GEMINI,
    LITELLM,
    LLAMA_CPP_PYTHON,
    LLAMA_SERVER,
    OLLAMA,
    OPENAI,
    SGLANG,
    VLLM,
)
from ._profile import ServerProfile

__all__ = ["profile_for_models", "profile_for_url"]

_HOSTS = {
    "api.openai.com": OPENAI,
    "generativelanguage.googleapis.com": GEMINI,
    "api.anthropic.com": ANTHROPIC,
}
_HOST_SUFFIXES = {".openai.azure.com": AZURE, ".services.ai.azure.com": AZURE}

# What a server says of itself in its GET /models entries' `owned_by`, read in its
# source: vLLM vllm/entrypoints/openai/engine/protocol.py (ModelCard, owned_by "vllm");
# SGLang python/sglang/srt/entrypoints/openai/protocol.py (ModelCard, owned_by
# "sglang"); llama-server tools/server/server-context.cpp ({"owned_by", "llamacpp"}).
# Every entry must say it. Not read: TGI (owned_by is the model id) and LM Studio
# (closed source, its docs show no listing).
_OWNERS = {"vllm": VLLM, "sglang": SGLANG, "llamacpp": LLAMA_SERVER}


@functools.lru_cache(maxsize=64)  # asked once per submit* call, with a few URLs
def profile_for_url(base_url: str) -> ServerProfile | None:
    """The profile a base URL tells, or None when it tells nothing (a local port, a
    proxy): the loop then runs with OpenAI's.

    Example:
        >>> profile_for_url("https://api.openai.com/v1").name
        'openai'
        >>> profile_for_url("https://my-resource.openai.azure.com/openai").name
        'azure'
        >>> profile_for_url("http://127.0.0.1:8000/v1") is None
        True
    """
    host = (urlsplit(base_url).hostname or "").lower()
    found = _HOSTS.get(host)
    if found is not None:
        return found
    for suffix, suffixed in _HOST_SUFFIXES.items():
        if host.endswith(suffix):
            return suffixed
    return None


_LITELLM_CREATED = 1677610602


def profile_for_models(listing: Any, headers: Mapping[str, str]) -> ServerProfile | None:
    """The profile a server's ``GET /models`` answer tells, or None.

    LiteLLM's proxy marks its answers with ``x-litellm-*`` headers (not its model list,
    as of 1.106), and gives every entry of that list the same ``created``
    (``DEFAULT_MODEL_CREATED_AT_TIME``, 1677610602, in ``litellm/constants.py``;
    OpenAI's own list has one model of that date among many); llama-cpp-python's
    server lists its model as ``owned_by: "me"`` with a ``permissions`` list; vLLM,
    SGLang and llama-server put their own name in every entry's ``owned_by``
    (``"vllm"``, ``"sglang"``, ``"llamacpp"``); Ollama's ``owned_by`` is the model's
    namespace, ``"library"`` for its own models (docs/api/openai-compatibility.mdx).

    Example:
        >>> entry = {"id": "m.gguf", "object": "model", "owned_by": "me", "permissions": []}
        >>> profile_for_models({"object": "list", "data": [entry]}, {}).name
        'llama-cpp-python'
        >>> profile_for_models({"data": []}, {"x-litellm-version": "1.106.12"}).name
        'litellm'
        >>> entry = {"id": "smollm", "created": 1677610602, "owned_by": "openai"}
        >>> profile_for_models({"data": [entry]}, {}).name
        'litellm'
        >>> profile_for_models({"data": [{"id": "Qwen/Qwen3-8B", "owned_by": "vllm"}]}, {}).name
        'vllm'
        >>> profile_for_models({"data": [{"id": "gpt-4o", "owned_by": "openai"}]}, {}) is None
        True
    """
    if any(key.lower().startswith("x-litellm") for key in headers):
        return LITELLM
    data = listing.get("data") if isinstance(listing, Mapping) else None
    entries = [e for e in data if isinstance(e, Mapping)] if isinstance(data, list) else []
    if entries and all(e.get("owned_by") == "me" and "permissions" in e for e in entries):
        return LLAMA_CPP_PYTHON
    if entries and all(e.get("created") == _LITELLM_CREATED for e in entries):
        return LITELLM
    # A server's owned_by may be any JSON (a list is no key): only a string names one.
    owners = {owner if isinstance(owner := e.get("owned_by"), str) else None for e in entries}
    if len(owners) == 1:
        owner = next(iter(owners))
        if isinstance(owner, str) and owner in _OWNERS:
            return _OWNERS[owner]
    if "library" in owners:
        return OLLAMA
    return None
