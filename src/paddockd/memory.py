"""What paddockd asks of glibc's allocator so its memory goes back after a burst.

Streams and pushes pass hundreds of MiB through paddockd in buffers of up to a few hundred
KiB, which glibc serves from its heaps; freed, they stay mapped in the process unless they
sit at a heap's very top. A long-running server with 50 boxes then carries the peak of its
busiest minute for good. Both calls are no-ops where the C library is not glibc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from typing import Any


@functools.cache
def _libc() -> Any:
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


def fewer_malloc_arenas(arenas: int = 2) -> None:
    """glibc gives each thread that allocates an arena of its own (up to 8 per core), and
    paddockd runs every engine call on a worker thread: memory freed after a burst stays
    spread over arenas it never returns from. A couple of arenas serve its few busy
    threads. Before any thread starts."""
    m_arena_max = -8  # malloc.h
    libc = _libc()
    if libc is not None and hasattr(libc, "mallopt"):
        libc.mallopt(m_arena_max, arenas)


def give_back() -> None:
    """Return the free pages inside glibc's heaps to the kernel (malloc_trim): a few ms
    with the allocator locked, so call it now and then, not per request."""
    libc = _libc()
    if libc is not None and hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)
