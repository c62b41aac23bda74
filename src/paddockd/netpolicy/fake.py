"""A network layer that records what it was asked to do."""

from __future__ import annotations


class FakePolicy:
    def __init__(self) -> None:
        self.ensured = 0

    async def ensure(self) -> None:
        self.ensured += 1
