"""Server profiles: what an OpenAI-compatible server can do, as data the loop reads.

OpenAI-compatible servers differ in what they accept: llama-cpp-python's refuses
``response_format`` of type ``json_schema`` and ``tool_choice: "required"``, cannot
stream an ``"auto"`` tool choice, and leaves tool results out of the model's prompt.
Rather than ``if provider == ...`` branches through the loop, each server's quirks are
one frozen :class:`ServerProfile`, and one function per API, :func:`fit_request` and
:func:`fit_responses_request`, changes a request to fit it. The loop picks the profile: ``CycleConfig(profile=...)``, else what
the client's base URL tells (:func:`profile_for_url`), else what the server's
``GET /models`` answer tells (:func:`profile_for_models`, read once per client), else
OpenAI's; and logs it at INFO.

OpenAI's (the default, which changes nothing), llama-cpp-python's and LiteLLM's proxy
in front of it are pinned by tests against the real server (``tests/real``), and so is
llama.cpp's llama-server, by opt-in ones (``make test-llama-server``). The others
(Azure, vLLM, SGLang, Ollama, LM Studio, TGI, and Gemini's and Anthropic's
OpenAI-compatible endpoints) come from each server's documentation and source: the
comment above each one names, per field that differs from OpenAI's, where that is
written. Where the sources are silent a field keeps OpenAI's default rather than
a guess. A server without a built-in profile runs with OpenAI's; pass your own
``ServerProfile`` for it.

This module is the public face; each job lives in a private module of its own: the
record (``_profile.py``), the built-in table (``_builtin_profiles.py``), telling a
server's profile from its URL and model list (``_profile_detect.py``), and fitting a
request to a profile and reading a refusal (``_profile_fit.py``).
"""

from __future__ import annotations

from ._builtin_profiles import (
    ANTHROPIC,
    AZURE,
    GEMINI,
    LITELLM,
    LLAMA_CPP_PYTHON,
    LLAMA_SERVER,
    LM_STUDIO,
    OLLAMA,
    OPENAI,
    PROFILES,
    SGLANG,
    TGI,
    VLLM,
    resolve_profile,
)
from ._profile import ServerProfile
from ._profile import StructuredMode as StructuredMode
from ._profile_detect import profile_for_models, profile_for_url
from ._profile_fit import (
    Refusal,
    check_tool_count,
    fit_request,
    fit_responses_request,
    names_an_option,
    read_refusal,
    streams_auto_choice,
)

__all__ = [
    "ANTHROPIC",
    "AZURE",
    "GEMINI",
    "LITELLM",
    "LLAMA_CPP_PYTHON",
    "LLAMA_SERVER",
    "LM_STUDIO",
    "OLLAMA",
    "OPENAI",
    "PROFILES",
    "SGLANG",
    "TGI",
    "VLLM",
    "Refusal",
    "ServerProfile",
    "check_tool_count",
    "fit_request",
    "fit_responses_request",
    "names_an_option",
    "profile_for_models",
    "profile_for_url",
    "read_refusal",
    "resolve_profile",
    "streams_auto_choice",
]
