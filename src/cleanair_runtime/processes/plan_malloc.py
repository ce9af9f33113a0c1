"""How a process that plans asks glibc's malloc to hand freed memory back (issue 34).

A plan makes arrays over its corridor, some over the whole network, on threads; once it ends
they are garbage. With glibc's defaults that memory stayed in the process:

- each thread has an arena of its own, which kept the freed blocks of its plans' arrays
  (one arena: `MALLOC_ARENA_MAX=1`);
- malloc serves a block from the heap rather than a mapping of its own once a block that
  size was freed (its mmap threshold rises, to 32 MiB), and a heap's freed middle is never
  given back: a fixed threshold (`MALLOC_MMAP_THRESHOLD_`, glibc's own starting value) keeps
  every large array a mapping, unmapped when freed.

On the generated million-node city, seven walks left a plan process's heap at 183 MiB with the
rising threshold, 25 MiB with the fixed one (docs/routing.md). Plan processes get these in
their environment (`plan_processes.plan_process_environment`); `cleanair worker`, whose
process is the operator's, sets them with `mallopt` as it starts (`bound_malloc`). An
operator's own setting in the environment stands in both.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable, Mapping

#: The environment a plan process's malloc is tuned by, and glibc's `mallopt` parameter
#: (malloc.h) that sets each in a running process.
PLAN_MALLOC = {"MALLOC_ARENA_MAX": "1", "MALLOC_MMAP_THRESHOLD_": str(128 * 1024)}
_MALLOPT_PARAMETERS = {"MALLOC_ARENA_MAX": -8, "MALLOC_MMAP_THRESHOLD_": -3}

Mallopt = Callable[[int, int], int]


def glibc_mallopt(parameter: int, value: int) -> int:
    """glibc's `mallopt`: 1 when it took the value, 0 otherwise (and on another C library)."""
    name = ctypes.util.find_library("c")
    libc = ctypes.CDLL(name)
    mallopt = getattr(libc, "mallopt", None)
    return 0 if mallopt is None else int(mallopt(parameter, value))


def bound_malloc(environment: Mapping[str, str], mallopt: Mallopt | None = None) -> dict[str, str]:
    """Set `PLAN_MALLOC` in this process with `mallopt`, but for what `environment` sets
    itself (glibc read that at start); the settings it took. Call before threads start: an
    arena a thread already has stays."""
    setting = mallopt or glibc_mallopt
    taken = {}
    for name, value in PLAN_MALLOC.items():
        if name not in environment and setting(_MALLOPT_PARAMETERS[name], int(value)) == 1:
            taken[name] = value
    return taken
