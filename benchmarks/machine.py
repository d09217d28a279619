"""Which machine a benchmark ran on, printed beside its numbers.

The same code measures twice as fast on one 2-core machine as on another (a Zen 3 EPYC against
a Zen 5 one), so a timing quoted without its CPU says little. Printed to standard error, so a
script's ``--json`` output stays one JSON document.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def cpu() -> str:
    """The CPU's model name, family and model number (Linux), and how many CPUs there are."""
    fields: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    name = fields.get("model name", "unknown CPU")
    family, model = fields.get("cpu family", "?"), fields.get("model", "?")
    return f"{name} (family {family}, model {model}), {os.cpu_count()} CPUs"


def announce() -> None:
    """Print the machine and its load average before a benchmark starts."""
    print(f"# machine: {cpu()}; load average {os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)
