"""Token expiry against a real SQLite file: an expired token is refused, whether or not
paddockd had it in its cache."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from paddockd.domain.accounts import SERVER, Role, User
from paddockd.domain.errors import InvalidRequest
from paddockd.services.members import TokenService
from paddockd.store import tokens as tokens_module
from paddockd.store.db import Database
from paddockd.store.tokens import TokenRepository

pytestmark = pytest.mark.anyio


@pytest.fixture
def repo(tmp_path: Path) -> TokenRepository:
    db = Database(f"sqlite:///{tmp_path / 'paddock.db'}")
    db.migrate()
    return TokenRepository(db)


async def test_an_expiring_token_works_until_then_even_from_the_cache(
    repo: TokenRepository, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = await repo.create("ci", None, expires_at=time.time() + 120)
    forever = await repo.create("laptop")
    assert await repo.verify(token) == SERVER  # now cached
    later = time.time() + 121
    monkeypatch.setattr(tokens_module.time, "time", lambda: later)
    assert await repo.verify(token) is None
    assert await repo.verify(forever) == SERVER
    listed = {t.name: t.expires_at for t in await repo.listed(None)}
    assert listed["laptop"] is None and listed["ci"] is not None


async def test_token_lifetimes_are_checked(repo: TokenRepository) -> None:
    svc = TokenService(repo)
    ada = User("u1", "ada", Role.MEMBER)
    for bad in (0, 59, -5, 3651 * 86400):
        with pytest.raises(InvalidRequest, match="expires in"):
            await svc.create(ada, "ci", bad)
    assert await repo.listed("u1") == []
    token, info = await svc.create(ada, "ci", 3600)
    assert info.expires_at is not None and 3590 < info.expires_at - time.time() <= 3600
    assert await repo.verify(token) is None  # no such user in this database: refused


async def test_a_metrics_token_reads_the_metrics_and_is_no_token_anywhere_else(
    repo: TokenRepository,
) -> None:
    from paddockd.domain.errors import Forbidden

    svc = TokenService(repo)
    owner, bob = SERVER, User("u1", "bob", Role.MEMBER)
    with pytest.raises(Forbidden):
        await svc.create(bob, "scraper", scope="metrics")
    with pytest.raises(InvalidRequest, match="scope"):
        await svc.create(owner, "scraper", scope="admin")
    token, info = await svc.create(owner, "scraper", scope="metrics")
    assert info.scope == "metrics"
    for _ in range(2):  # from the database, then from the cache
        assert await repo.verify(token) is None
        assert await repo.verify(token, "metrics") is not None
    full = await repo.create("laptop")
    assert await repo.verify(full, "metrics") == SERVER  # an owner's token reads them too
