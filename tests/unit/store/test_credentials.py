"""Provider keys in the store: keys set before they were per user stay the owner's through
the migration, and each holder has at most one key per provider."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from paddockd.store.credentials import CredentialRepository, Key, Sealer, load_key
from paddockd.store.db import MIGRATIONS, Database

pytestmark = pytest.mark.anyio

SECRET = "sk-ant-before-accounts-0123456789"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def database_before_per_user_keys(tmp_path: Path) -> Path:
    """A database as paddockd left it at schema 10, with one key set."""
    path = tmp_path / "paddock.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY)")
        for version, statements in MIGRATIONS:
            if version <= 10:
                for statement in statements:
                    conn.execute(statement)
                conn.execute("INSERT INTO schema_migrations VALUES (?)", (version,))
        sealed = Fernet(load_key(tmp_path / "credentials.key")).encrypt(SECRET.encode())
        conn.execute(
            "INSERT INTO credentials (provider, secret, base_url, created_at) "
            "VALUES ('anthropic', ?, 'http://127.0.0.1:9', 1.0)",
            (sealed,),
        )
        conn.execute(
            "INSERT INTO boxes (id, name, type, image, state, desired, created_at, ttl, "
            "ttl_action, cpus, memory_mb, pids) VALUES ('b1', 'b1', 'small', 'paddock-box', "
            "'stopped', 'stopped', 1.0, 0, 'stop', 1, 1024, 512)"
        )
        conn.execute("INSERT INTO box_credentials VALUES ('b1', 'anthropic')")
        # A deleted box's attachment, from before they went with their box.
        conn.execute("INSERT INTO box_credentials VALUES ('gone', 'anthropic')")
    return path


async def test_keys_from_before_stay_the_owners(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{database_before_per_user_keys(tmp_path)}")
    db.migrate()
    repo = CredentialRepository(db, Sealer(tmp_path / "credentials.key"))
    assert await repo.keys(None, ["anthropic"]) == {
        "anthropic": Key(SECRET, "http://127.0.0.1:9", "gateway")  # the new default mode
    }
    assert await repo.keys("bob-id", ["anthropic"]) == {}
    assert await repo.attached("b1") == ["anthropic"]
    assert await repo.attached("gone") == []
    # The key is (holder, provider): a member's of the same provider stands beside it,
    # and setting one again replaces only that holder's.
    await repo.put("bob-id", "anthropic", "sk-ant-bob-0123456789", None)
    await repo.put("bob-id", "anthropic", "sk-ant-bob-9876543210", None)
    assert [c.provider for c in await repo.all(None)] == ["anthropic"]
    assert (await repo.keys("bob-id", ["anthropic"]))["anthropic"].secret.endswith("9876543210")
    assert (await repo.keys(None, ["anthropic"]))["anthropic"].secret == SECRET
    # Forgetting the member's leaves the owner's, and its attachment to the owner's box.
    assert await repo.delete("bob-id", [], "anthropic") == 1
    assert await repo.delete("bob-id", [], "anthropic") == 0
    assert [c.provider for c in await repo.all(None)] == ["anthropic"]
    assert await repo.attached("b1") == ["anthropic"]
    db.close()
