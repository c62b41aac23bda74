"""One reader's share of what a box prints (a command's output, a shell's), queued for it.

What a box prints is the box's to choose, and a reader may stop reading (a client that
holds a stream and never iterates it, a browser tab in the background): so the producer
waits while a reader is more than `limit` bytes behind, as a pipe would make it wait, and
lets go of a reader that takes nothing for a while. paddockd then holds at most about
`limit` of a box's output per reader, however much the box prints.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")

# A reader that takes nothing for this long while behind is let go.
STALLED = 60.0


class Backlog(Generic[T]):
    def __init__(self, limit: int, size: Callable[[T], int]) -> None:
        self._items: asyncio.Queue[T] = asyncio.Queue()
        self._size = size
        self._limit = limit
        self._read = asyncio.Event()
        self.held = 0  # bytes put and not yet taken
        self.closed = False  # takes nothing more

    def put(self, item: T) -> None:
        if self.closed:
            return
        self.held += self._size(item)
        self._items.put_nowait(item)

    def finish(self, last: T) -> None:
        """`last` after what it holds, then nothing more."""
        self.put(last)
        self.close()

    def let_go(self, last: T) -> None:
        """What it holds goes unread; `last` is all it takes from now on."""
        while not self._items.empty():
            self._items.get_nowait()
        self.held = self._size(last)
        self._items.put_nowait(last)
        self.close()

    def close(self) -> None:
        """Nothing more goes in; a producer waiting for room goes on."""
        self.closed = True
        self._read.set()

    async def get(self) -> T:
        item = await self._items.get()
        self.held -= self._size(item)
        self._read.set()
        return item

    def qsize(self) -> int:
        return self._items.qsize()

    async def room(self) -> bool:
        """Wait while more than the limit is unread; False when the reader took nothing for
        STALLED seconds meanwhile (its producer lets it go then)."""
        while self.held > self._limit and not self.closed:
            self._read.clear()
            try:
                await asyncio.wait_for(self._read.wait(), STALLED)
            except asyncio.TimeoutError:
                return False
        return True
