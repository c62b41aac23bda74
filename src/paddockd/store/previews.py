"""Preview URLs' records; one per (box, port)."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Row

from ..domain.previews import Preview
from .db import Database, previews


def _preview(row: Row[tuple[object, ...]]) -> Preview:
    m = row._mapping
    return Preview(
        id=str(m["id"]),
        box_id=str(m["box_id"]),
        port=int(m["port"]),
        public=bool(m["public"]),
        created_at=float(m["created_at"]),
        expires_at=float(m["expires_at"]) if m["expires_at"] is not None else None,
        owner_id=str(m["owner_id"]) if m["owner_id"] is not None else None,
    )


class PreviewRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def put(self, preview: Preview) -> Preview:
        """Record `preview`, replacing the box's earlier one on the same port (whose URL
        then stops working: its secret came from its id)."""

        def work(conn: Connection) -> None:
            conn.execute(
                previews.delete().where(
                    previews.c.box_id == preview.box_id, previews.c.port == preview.port
                )
            )
            conn.execute(
                previews.insert().values(
                    id=preview.id,
                    box_id=preview.box_id,
                    port=preview.port,
                    public=preview.public,
                    created_at=preview.created_at,
                    expires_at=preview.expires_at,
                    owner_id=preview.owner_id,
                )
            )

        await self._db.run(work)
        return preview

    async def find(self, box_id: str, port: int) -> Preview | None:
        def work(conn: Connection) -> Preview | None:
            row = conn.execute(
                sa.select(previews).where(previews.c.box_id == box_id, previews.c.port == port)
            ).first()
            return _preview(row) if row else None

        return await self._db.run(work)

    async def get(self, preview_id: str) -> Preview | None:
        def work(conn: Connection) -> Preview | None:
            row = conn.execute(sa.select(previews).where(previews.c.id == preview_id)).first()
            return _preview(row) if row else None

        return await self._db.run(work)

    async def all(self) -> list[Preview]:
        def work(conn: Connection) -> list[Preview]:
            query = sa.select(previews).order_by(previews.c.created_at)
            return [_preview(row) for row in conn.execute(query)]

        return await self._db.run(work)

    async def delete(self, preview_id: str) -> bool:
        def work(conn: Connection) -> bool:
            return conn.execute(previews.delete().where(previews.c.id == preview_id)).rowcount > 0

        return await self._db.run(work)

    async def delete_box(self, box_id: str) -> None:
        await self._db.run(
            lambda conn: conn.execute(previews.delete().where(previews.c.box_id == box_id))
        )

    async def delete_expired(self, now: float) -> int:
        def work(conn: Connection) -> int:
            done = conn.execute(
                previews.delete().where(
                    previews.c.expires_at.is_not(None), previews.c.expires_at <= now
                )
            )
            return int(done.rowcount)

        return await self._db.run(work)
