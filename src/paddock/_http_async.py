"""The one HTTP stack (`_http`) driven from asyncio: each blocking step runs in a thread.

`AsyncClient` sends through the same `ConnectionPool` as `Client`, so connection reuse,
stale keep-alive retries, timeouts, proxies and TLS are written once and behave the same
in both clients. A request waits in a worker thread while it connects and sends, and a
body while it is read; the event loop stays free. A stream (an exec, a follow) holds its
thread for as long as it lasts, so the thread pool is wide and its threads are made only
when needed.

Cancelling a coroutine cannot stop a thread in `recv`; so a body abandoned mid-read has
its socket shut down, which makes that read fail at once, and a request whose caller
went away has its answer closed when it arrives.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Future, ThreadPoolExecutor

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterable, Iterator
    from typing import TypeVar

    from ._http import ConnectionPool, Response, _Unset

    _T = TypeVar("_T")

# Streams in flight at once, each waiting in a thread of its own.
MAX_IN_FLIGHT = 256


class AsyncPool:
    """A `ConnectionPool` for coroutines."""

    def __init__(self, pool: ConnectionPool) -> None:
        self.pool = pool
        self._threads = ThreadPoolExecutor(MAX_IN_FLIGHT, thread_name_prefix="paddock-http")

    async def request(
        self,
        method: str,
        target: str,
        headers: dict[str, str],
        body: bytes | Iterable[bytes] | None,
        *,
        read_timeout: float | _Unset | None,
    ) -> AsyncResponse:
        """`ConnectionPool.request`: a streamed `body` is read in the worker thread too."""

        def send() -> Response:
            return self.pool.request(method, target, headers, body, read_timeout=read_timeout)

        future = self._threads.submit(send)
        try:
            resp = await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            future.add_done_callback(_close_answer)
            raise
        return AsyncResponse(resp, self)

    async def run(self, fn: Callable[[], _T]) -> _T:
        return await asyncio.wrap_future(self._threads.submit(fn))

    def close(self) -> None:
        self.pool.close()
        self._threads.shutdown(wait=False)


def _close_answer(future: Future[Response]) -> None:
    if not future.cancelled() and future.exception() is None:
        future.result().close()


class AsyncResponse:
    """A `Response` read from coroutines; `aclose` abandons an unread body."""

    def __init__(self, resp: Response, pool: AsyncPool) -> None:
        self._resp = resp
        self._pool = pool
        self._chunks = resp.iter_bytes()
        self._reading = False  # a worker thread is inside `next(self._chunks)`
        self.status = resp.status
        self.headers = resp.headers

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        while True:
            self._reading = True
            chunk = await self._pool.run(lambda: next(self._chunks, None))
            self._reading = False
            if chunk is None:
                return
            yield chunk

    async def consume(self, fn: Callable[[dict[str, str], Iterator[bytes]], _T]) -> _T:
        """`fn(headers, chunks)` run in a worker thread: a blocking reader of the whole
        body (an archive extracted, a file written) off the event loop."""
        self._reading = True
        result = await self._pool.run(lambda: fn(self.headers, self._chunks))
        self._reading = False
        return result

    async def aread(self) -> bytes:
        return b"".join([chunk async for chunk in self.aiter_bytes()])

    async def aclose(self) -> None:
        if self._reading:
            # The thread's recv fails at once; the body's own cleanup closes the connection.
            self._resp.abort()
        else:
            self._resp.close()
