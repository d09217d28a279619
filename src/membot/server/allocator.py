"""glibc's allocator, tuned for a long-lived server.

With its defaults a ``membot serve`` process kept growing under load (docs/reliability.md,
"Soak"): glibc gives each thread that allocates at once an arena of its own (up to eight a
core), and after a large block (a scope's vector matrix, a batch of token ids) is freed it
raises the size from which blocks are mapped on their own, so later large blocks come from
the arenas, whose freed pages are rarely handed back. Two arenas, large blocks always mapped
on their own (and unmapped when freed), and free memory at the top of the heap handed back
early keep the server's memory flat. Settings an operator gave in the environment win.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform

# mallopt(3) parameters, and the environment variables glibc reads for them at start.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8
SETTINGS = {
    "MALLOC_ARENA_MAX": (_M_ARENA_MAX, 2),
    "MALLOC_MMAP_THRESHOLD_": (_M_MMAP_THRESHOLD, 128 * 1024),
    "MALLOC_TRIM_THRESHOLD_": (_M_TRIM_THRESHOLD, 128 * 1024),
}


def tune_allocator() -> dict[str, int]:
    """Apply :data:`SETTINGS` to this process (``mallopt``) and to the processes it starts
    (the environment glibc reads at their start), each unless the environment names it
    already; what was set. Nothing off glibc (macOS, musl)."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return {}
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return {}  # no C library to tune: the server runs with the allocator's defaults
    applied = {}
    for name, (parameter, value) in SETTINGS.items():
        if name in os.environ:
            continue  # the operator's choice, already read by glibc at this process's start
        if libc.mallopt(parameter, value) == 1:  # mallopt returns 1 on success
            os.environ[name] = str(value)
            applied[name] = value
    return applied
