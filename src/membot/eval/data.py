"""Finding the benchmark data (LoCoMo, LongMemEval) that sits beside the project.

The data is read in place, never copied into the repository. Looked for, in order: the
``MEMBOT_DATA`` environment variable, ``../shared/data`` from the working directory, from the
project's checkout, and the workplace's shared folder.
"""

from __future__ import annotations

import os
from pathlib import Path

from membot.errors import ConfigError

_CHECKOUT = Path(__file__).resolve().parents[3]
_WORKPLACE = Path("/work/shared/data")


def shared_data_dir() -> Path:
    configured = os.environ.get("MEMBOT_DATA")
    candidates = [Path(configured)] if configured else []
    candidates += [Path.cwd().parent / "shared" / "data", _CHECKOUT.parent / "shared" / "data"]
    candidates.append(_WORKPLACE)
    for folder in candidates:
        if (folder / "locomo").is_dir():
            return folder
    raise ConfigError(
        "benchmark data not found (looked in "
        + ", ".join(str(folder) for folder in candidates)
        + "): set MEMBOT_DATA to the folder holding locomo/ and longmemeval/"
    )
