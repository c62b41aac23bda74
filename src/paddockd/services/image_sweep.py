"""Removes images of this instance's own that no box or snapshot needs: what a snapshot
or fork killed between the engine's commit and its row left behind (and, when its tag
was taken again by the next snapshot, left untagged)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from ..domain.errors import PaddockError
from ..runtime.base import LABEL_INSTANCE, ImageInfo, Runtime
from ..store.boxes import BoxRepository
from .reconciler import SNAPSHOT_REPO, Reconciler

log = logging.getLogger("paddockd.images")

_OURS = SNAPSHOT_REPO.split("/")[0] + "/"


class ImageSweeper:
    def __init__(
        self,
        repo: BoxRepository,
        runtime: Runtime,
        reconciler: Reconciler,
        *,
        instance: str,
        keep: frozenset[str],
        grace: float,
        now: Callable[[], datetime],
    ) -> None:
        self._repo = repo
        self._rt = runtime
        self._reconciler = reconciler
        self._instance = instance
        self._keep = keep  # the box image: never ours to remove, whatever its labels
        self._grace = grace
        self._now = now

    async def sweep(self) -> list[str]:
        """One pass; returns the images removed. The order of the reads matters: an image
        listed and not yet committing has its row written by the time the rows are read."""
        images = await self._rt.list_images({LABEL_INSTANCE: self._instance})
        committing = set(self._reconciler.committing)
        needed = await self._reconciler.images_needed() | await self._repo.all_snapshot_images()
        young = self._now().timestamp() - self._grace
        removed = []
        for image in images:
            if image.created > young or not self._unclaimed(image, needed | committing):
                continue
            try:
                await self._rt.remove_image(image.id)
            except PaddockError as exc:  # in use by a container after all: the engine knows
                log.info("kept unreferenced image %s: %s", image.id[:19], exc.message)
                continue
            log.warning(
                "removed image %s %s: no box or snapshot needs it", image.id[:19], image.tags
            )
            removed.append(image.id)
        return removed

    def _unclaimed(self, image: ImageInfo, needed: set[str]) -> bool:
        # Only what paddockd commits: a tag of its snapshot repository, or none left.
        ours = all(tag.startswith(_OURS) for tag in image.tags)
        claimed = image.id in needed or any(t in needed or t in self._keep for t in image.tags)
        return ours and not claimed
