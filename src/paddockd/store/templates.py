"""Template rows <-> domain objects. Names are each holder's own (a member's, or '' for the
owner's, as provider keys)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..domain.errors import Conflict
from ..domain.templates import Defaults, Template
from .credentials import whose
from .db import Database, templates


def _to_row(t: Template) -> dict[str, Any]:
    return {
        "id": t.id,
        "user_id": t.owner_id or "",
        "name": t.name,
        "shared": t.shared,
        "status": t.status,
        "message": t.message,
        "base": t.base,
        "image": t.image,
        "disk": t.disk,
        "built_on": t.built_on,
        "env": json.dumps([list(p) for p in t.env]),
        "user": t.user,
        "workdir": t.workdir,
        "start_cmd": t.start_cmd,
        "defaults": t.defaults.to_json(),
        "dockerfile": t.dockerfile,
        "build_args": json.dumps(dict(t.build_args)),
        "size": t.size,
        "created_at": t.created_at,
        "built_at": t.built_at,
    }


def _from_row(row: sa.Row[Any]) -> Template:
    d = dict(row._mapping)
    return Template(
        id=d["id"],
        name=d["name"],
        owner_id=d["user_id"] or None,
        status=d["status"],
        base=d["base"],
        created_at=d["created_at"],
        shared=bool(d["shared"]),
        message=d["message"],
        image=d["image"],
        disk=d["disk"],
        built_on=d["built_on"],
        env=tuple((str(k), str(v)) for k, v in json.loads(d["env"] or "[]")),
        user=d["user"],
        workdir=d["workdir"],
        start_cmd=d["start_cmd"],
        defaults=Defaults.from_json(d["defaults"]),
        dockerfile=d["dockerfile"],
        build_args=tuple(json.loads(d["build_args"] or "{}").items()),
        size=int(d["size"] or 0),
        built_at=d["built_at"],
    )


class TemplateRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def add(self, t: Template) -> None:
        def work(conn: Connection) -> None:
            taken = conn.execute(
                sa.select(templates.c.id).where(
                    whose(templates.c.user_id, t.owner_id), templates.c.name == t.name
                )
            ).first()
            if taken:
                raise Conflict(f"you have a template named {t.name!r} already")
            conn.execute(templates.insert().values(**_to_row(t)))

        await self._db.run(work)

    async def update(self, t: Template, **changes: Any) -> Template:
        updated = replace(t, **changes)
        row = _to_row(updated)
        values = {key: row[key] for key in changes}
        where = templates.c.id == t.id
        await self._db.run(
            lambda conn: conn.execute(templates.update().where(where).values(**values))
        )
        return updated

    async def get(self, template_id: str) -> Template | None:
        where = templates.c.id == template_id
        row = await self._db.run(
            lambda conn: conn.execute(sa.select(templates).where(where)).first()
        )
        return _from_row(row) if row else None

    async def all(self) -> list[Template]:
        rows = await self._db.run(
            lambda conn: conn.execute(sa.select(templates).order_by(templates.c.name)).all()
        )
        return [_from_row(r) for r in rows]

    async def delete(self, template_id: str) -> None:
        await self._db.run(
            lambda conn: conn.execute(templates.delete().where(templates.c.id == template_id))
        )
