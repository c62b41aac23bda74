"""E2B's template tags, each holder's own: `NAME:TAG` stands for one Paddock template (a
build), kept by its id. A build made under a tag is the Paddock template `NAME-TAG`; a tag
assigned later points at the build its target stands for. A build rebuilt or deleted is
another id: its tags stand for nothing (and are dropped when next read)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .credentials import whose
from .db import Database, e2b_template_tags

MAX_TAGS = 100  # per template name


@dataclass(frozen=True)
class Tag:
    tag: str
    template: str  # the id of the Paddock template it stands for
    created_at: float


class TemplateTagRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def put(self, holder: str | None, name: str, tags: list[str], template: str) -> bool:
        """Point these tags of `name` at `template`; False if that would pass MAX_TAGS."""

        def work(conn: Connection) -> bool:
            mine = whose(e2b_template_tags.c.user_id, holder) & (e2b_template_tags.c.name == name)
            have = {r[0] for r in conn.execute(sa.select(e2b_template_tags.c.tag).where(mine))}
            if len(have | set(tags)) > MAX_TAGS:
                return False
            conn.execute(e2b_template_tags.delete().where(mine, e2b_template_tags.c.tag.in_(tags)))
            now = time.time()
            for tag in tags:
                conn.execute(
                    e2b_template_tags.insert().values(
                        user_id=holder or "", name=name, tag=tag, template=template, created_at=now
                    )
                )
            return True

        return await self._db.run(work)

    async def all(self, holder: str | None, name: str) -> list[Tag]:
        def work(conn: Connection) -> list[Tag]:
            mine = whose(e2b_template_tags.c.user_id, holder) & (e2b_template_tags.c.name == name)
            rows = conn.execute(
                sa.select(
                    e2b_template_tags.c.tag,
                    e2b_template_tags.c.template,
                    e2b_template_tags.c.created_at,
                )
                .where(mine)
                .order_by(e2b_template_tags.c.created_at, e2b_template_tags.c.tag)
            ).all()
            return [Tag(str(r[0]), str(r[1]), float(r[2])) for r in rows]

        return await self._db.run(work)

    async def drop_templates(self, holder: str | None, template_ids: list[str]) -> None:
        """Every tag of the holder's that stands for one of these builds."""

        def work(conn: Connection) -> None:
            mine = whose(e2b_template_tags.c.user_id, holder)
            gone = e2b_template_tags.c.template.in_(template_ids)
            conn.execute(e2b_template_tags.delete().where(mine, gone))

        await self._db.run(work)

    async def delete(self, holder: str | None, name: str, tags: list[str] | None) -> int:
        """These tags of `name` (None: all of them, as the name goes)."""

        def work(conn: Connection) -> int:
            mine = whose(e2b_template_tags.c.user_id, holder) & (e2b_template_tags.c.name == name)
            if tags is not None:
                mine = mine & e2b_template_tags.c.tag.in_(tags)
            return int(conn.execute(e2b_template_tags.delete().where(mine)).rowcount)

        return await self._db.run(work)
