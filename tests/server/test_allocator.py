"""``membot serve`` tunes glibc's allocator for itself and its workers, unless told otherwise."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

from membot.server.allocator import SETTINGS

pytestmark = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc only"
)

PROBE = (
    "import json, os; from membot.server.allocator import tune_allocator; "
    "applied = tune_allocator(); "
    "print(json.dumps({'applied': applied, "
    "'env': {k: v for k, v in os.environ.items() if k.startswith('MALLOC_')}}))"
)


def probe(**env: str) -> dict:
    """tune_allocator in a new process whose environment holds no MALLOC_ setting but ``env``."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env={**clean, **env}, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_every_setting_is_applied_and_handed_to_the_processes_started_after():
    result = probe()
    assert result["applied"] == {name: value for name, (_, value) in SETTINGS.items()}
    assert result["env"] == {name: str(value) for name, (_, value) in SETTINGS.items()}


def test_a_setting_the_operator_gave_is_kept():
    result = probe(MALLOC_ARENA_MAX="4")
    assert "MALLOC_ARENA_MAX" not in result["applied"]
    assert result["env"]["MALLOC_ARENA_MAX"] == "4"
    assert result["env"]["MALLOC_MMAP_THRESHOLD_"] == str(128 * 1024)
