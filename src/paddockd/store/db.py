"""The database: tables, ordered migrations, and the one thread hop for every query."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import anyio.to_thread
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

T = TypeVar("T")

metadata = sa.MetaData()

boxes = sa.Table(
    "boxes",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("name", sa.String(64), nullable=False, unique=True),
    sa.Column("type", sa.String(64), nullable=False),
    sa.Column("image", sa.String(255), nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("desired", sa.String(16), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("started_at", sa.Float),
    sa.Column("expires_at", sa.Float),
    sa.Column("ttl", sa.Integer, nullable=False),
    sa.Column("ttl_action", sa.String(16), nullable=False),
    sa.Column("cpus", sa.Float, nullable=False),
    sa.Column("memory_mb", sa.Integer, nullable=False),
    sa.Column("pids", sa.Integer, nullable=False),
    sa.Column("container_id", sa.String(80)),
    sa.Column("message", sa.Text),
    sa.Column("current_snapshot", sa.String(255)),
    # The saved disk its container is (re)made from, with current_snapshot as its image.
    sa.Column("current_disk", sa.String(255)),
    sa.Column("drives", sa.Text, nullable=False, server_default="[]"),
    sa.Column("network", sa.Text),
    sa.Column("agent", sa.String(32)),
    sa.Column("disk_mb", sa.Integer, nullable=False, server_default="0"),
    sa.Column("owner_id", sa.String(32), index=True),  # None: the owner's
    sa.Column("idle_stop", sa.Integer, nullable=False, server_default="0"),
    sa.Column("keep", sa.Integer),  # stop snapshots kept; None: the server's retention
    sa.Column("template", sa.String(32)),  # the template it was made from
    sa.Column("env", sa.Text, nullable=False, server_default="[]"),  # [[name, value], ...]
    sa.Column("user", sa.String(64)),  # its commands' default user and folder
    sa.Column("workdir", sa.Text),
    sa.Column("start_cmd", sa.Text),  # run at each boot
)

ssh_keys = sa.Table(
    "ssh_keys",
    metadata,
    # Whose (a member's id, or '' for the owner's, as provider keys).
    sa.Column("user_id", sa.String(32), primary_key=True, server_default=""),
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("public_key", sa.Text, nullable=False),  # one OpenSSH line, as parsed
    sa.Column("fingerprint", sa.String(64), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
)

box_ssh = sa.Table(
    "box_ssh",
    metadata,
    sa.Column("box_id", sa.String(32), primary_key=True),
    sa.Column("host_key", sa.Text, nullable=False),  # its private key, OpenSSH's format
    sa.Column("public_key", sa.Text, nullable=False),
)

templates = sa.Table(
    "templates",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    # Whose (a member's id, or '' for the owner's, as keys); names are each holder's own.
    sa.Column("user_id", sa.String(32), nullable=False, server_default=""),
    sa.Column("name", sa.String(64), nullable=False),
    sa.Column("shared", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("status", sa.String(16), nullable=False),  # building | ready | failed
    sa.Column("message", sa.Text),
    sa.Column("base", sa.String(64), nullable=False),  # paddock-box, or a template's id
    sa.Column("image", sa.String(255)),  # the image its disk is made over
    sa.Column("disk", sa.String(255)),  # its saved disk (runtime/base.py save_disk)
    sa.Column("built_on", sa.String(255)),  # the box image (id) when it was built
    sa.Column("env", sa.Text, nullable=False, server_default="[]"),
    sa.Column("user", sa.String(64)),
    sa.Column("workdir", sa.Text),
    sa.Column("start_cmd", sa.Text),
    sa.Column("defaults", sa.Text, nullable=False, server_default="{}"),  # JSON
    sa.Column("dockerfile", sa.Text),  # what it was built from (None: a box's files)
    sa.Column("build_args", sa.Text, nullable=False, server_default="{}"),
    sa.Column("size", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("built_at", sa.Float),
    sa.UniqueConstraint("user_id", "name"),
)

snapshots = sa.Table(
    "snapshots",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("box_id", sa.String(32), nullable=False, index=True),
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("image", sa.String(255), nullable=False),
    sa.Column("label", sa.String(128)),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("size", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("disk", sa.String(255)),  # a copy of the box's disk; `image` is its base
)

tokens = sa.Table(
    "tokens",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("name", sa.String(128), nullable=False),
    sa.Column("hash", sa.String(128), nullable=False, unique=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("last_used_at", sa.Float),
    sa.Column("user_id", sa.String(32), index=True),  # None: made on the server, the owner's
    sa.Column("expires_at", sa.Float),  # None: until revoked
    # None: the API as its user; "metrics": GET /metrics only (a scraper's).
    sa.Column("scope", sa.String(16)),
)

credentials = sa.Table(
    "credentials",
    metadata,
    # Whose key: a member's id, or '' for the owner's (shared by owner accounts and server
    # tokens; keys from before accounts). Not NULL: SQLite lets NULLs repeat in a key.
    sa.Column("user_id", sa.String(32), primary_key=True, server_default=""),
    sa.Column("provider", sa.String(64), primary_key=True),
    sa.Column("secret", sa.LargeBinary, nullable=False),  # Fernet token, never clear text
    sa.Column("base_url", sa.Text),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("last_used_at", sa.Float),
    # gateway: boxes get a placeholder and the gateway adds the key on the way out; env:
    # the key itself, in the environment of the box's commands.
    sa.Column("mode", sa.String(16), nullable=False, server_default="gateway"),
)

secrets = sa.Table(
    "secrets",
    metadata,
    sa.Column("user_id", sa.String(32), primary_key=True, server_default=""),  # as credentials
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("value", sa.LargeBinary, nullable=False),  # Fernet token, never clear text
    sa.Column("hosts", sa.Text, nullable=False),  # JSON list of host names it is bound to
    sa.Column("header", sa.String(128)),  # set whole to `format` (None: replaced in place)
    sa.Column("format", sa.Text),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("last_used_at", sa.Float),
)

box_secrets = sa.Table(
    "box_secrets",
    metadata,
    sa.Column("box_id", sa.String(32), nullable=False, index=True),
    sa.Column("name", sa.String(64), nullable=False),
)

# What a box holds in place of a key or secret: random, bound to that box and that name.
placeholders = sa.Table(
    "placeholders",
    metadata,
    sa.Column("value", sa.String(128), primary_key=True),
    sa.Column("box_id", sa.String(32), nullable=False, index=True),
    sa.Column("kind", sa.String(16), nullable=False),  # provider | secret
    sa.Column("name", sa.String(64), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
)

# Every use of a key or secret through the gateway, let through or refused.
credential_uses = sa.Table(
    "credential_uses",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("user_id", sa.String(32), nullable=False, index=True),  # whose key ('' owner)
    sa.Column("box_id", sa.String(32), nullable=False),
    sa.Column("box_name", sa.String(64), nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("name", sa.String(64), nullable=False),
    sa.Column("host", sa.String(255), nullable=False),
    sa.Column("method", sa.String(16), nullable=False),
    sa.Column("path", sa.String(255), nullable=False),
    sa.Column("status", sa.Integer, nullable=False),  # the upstream's, or the refusal's
    sa.Column("outcome", sa.String(16), nullable=False),  # used | refused
    sa.Column("reason", sa.Text),
    sa.Column("at", sa.Float, nullable=False, index=True),
)

box_credentials = sa.Table(
    "box_credentials",
    metadata,
    sa.Column("box_id", sa.String(32), nullable=False, index=True),
    sa.Column("provider", sa.String(64), nullable=False),
)

runs = sa.Table(
    "runs",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("box_id", sa.String(32), nullable=False, index=True),
    sa.Column("box_name", sa.String(64), nullable=False),
    sa.Column("agent", sa.String(32), nullable=False),
    sa.Column("instruction", sa.Text, nullable=False),
    sa.Column("workdir", sa.Text, nullable=False),
    sa.Column("model", sa.String(128)),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("started_at", sa.Float, nullable=False),
    sa.Column("ended_at", sa.Float),
    sa.Column("exit_code", sa.Integer),
)

users = sa.Table(
    "users",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("username", sa.String(64), nullable=False, unique=True),
    sa.Column("password_hash", sa.Text, nullable=False),  # argon2id, never the password
    sa.Column("role", sa.String(16), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    # A member's capacity limits (None: only the server's own capacity applies).
    sa.Column("max_boxes", sa.Integer),
    sa.Column("max_cpus", sa.Float),
    sa.Column("max_memory_mb", sa.Integer),
)

sessions = sa.Table(
    "sessions",
    metadata,
    sa.Column("hash", sa.String(128), primary_key=True),  # SHA-256 of the cookie's value
    sa.Column("user_id", sa.String(32), nullable=False, index=True),
    sa.Column("csrf", sa.String(64), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("seen_at", sa.Float, nullable=False),
)

# One-time links: the owner's setup link (kind "setup") and invitations (kind "invite",
# with the role the new account gets).
links = sa.Table(
    "links",
    metadata,
    sa.Column("hash", sa.String(128), primary_key=True),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("expires_at", sa.Float, nullable=False),
    sa.Column("used_at", sa.Float),
    sa.Column("role", sa.String(16)),
)

# `paddock login` from another machine: the CLI holds the device code, a logged-in person
# approves the short user code in a browser.
device_grants = sa.Table(
    "device_grants",
    metadata,
    sa.Column("hash", sa.String(128), primary_key=True),  # of the device code
    sa.Column("user_code", sa.String(16), nullable=False, unique=True),
    sa.Column("client", sa.String(128), nullable=False),
    sa.Column("address", sa.String(64), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("expires_at", sa.Float, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("user_id", sa.String(32)),
)

# Preview URLs: a box's port reachable from a browser (domain/previews.py).
previews = sa.Table(
    "previews",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("box_id", sa.String(32), nullable=False, index=True),
    sa.Column("port", sa.Integer, nullable=False),
    sa.Column("public", sa.Boolean, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("expires_at", sa.Float),
    sa.Column("owner_id", sa.String(32)),
    sa.UniqueConstraint("box_id", "port"),
)

# Ordered, append-only. Each entry is plain DDL so an old database can always be brought
# forward, whatever the tables above look like today.
# What an E2B client gave when it created a sandbox (store/sandboxes.py).
sandboxes = sa.Table(
    "e2b_sandboxes",
    metadata,
    sa.Column("box_id", sa.String(32), primary_key=True),
    sa.Column("template", sa.String(128), nullable=False),
    sa.Column("metadata", sa.Text, nullable=False),
    sa.Column("env_vars", sa.Text, nullable=False),
    # Its ports answer at PORT-ID.HOST without a token (E2B's allowPublicTraffic).
    sa.Column("public_traffic", sa.Boolean, nullable=False, server_default=sa.true()),
    # A request to one of its ports resumes it when paused (E2B's autoResume).
    sa.Column("auto_resume", sa.Boolean, nullable=False, server_default=sa.false()),
    # E2B's network.rules: headers the credential gateway sets per host (JSON, as E2B's).
    sa.Column("network_rules", sa.Text, nullable=False, server_default="{}"),
)

# E2B's template tags (store/template_tags.py): a tag of a template's name, and the Paddock
# template (a build) it stands for.
e2b_template_tags = sa.Table(
    "e2b_template_tags",
    metadata,
    sa.Column("user_id", sa.String(32), primary_key=True),  # '' for the owner's
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("tag", sa.String(64), primary_key=True),
    sa.Column("template", sa.String(64), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
)

# E2B's secrets (store/e2b_secrets.py): named per holder, sealed as provider keys are, used
# only by the gateway for the headers of a sandbox's network rules.
e2b_secrets = sa.Table(
    "e2b_secrets",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("user_id", sa.String(32), nullable=False),  # '' for the owner's, as credentials
    sa.Column("name", sa.String(128), nullable=False),
    sa.Column("value", sa.LargeBinary, nullable=False),  # Fernet token, never clear text
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("metadata", sa.Text, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
    sa.UniqueConstraint("user_id", "name"),
)

# Webhooks (services/webhooks.py): where each user's box events go, and each delivery.
webhooks = sa.Table(
    "webhooks",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("owner_id", sa.String(32), index=True),  # NULL: the server owner's
    sa.Column("url", sa.Text, nullable=False),
    sa.Column("events", sa.Text, nullable=False),  # JSON list; [] for every kind
    sa.Column("secret", sa.LargeBinary, nullable=False),  # sealed
    sa.Column("created_at", sa.Float, nullable=False),
)
webhook_deliveries = sa.Table(
    "webhook_deliveries",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("webhook_id", sa.String(32), nullable=False, index=True),
    sa.Column("event_id", sa.String(32), nullable=False),
    sa.Column("event_type", sa.String(32), nullable=False),
    sa.Column("box_id", sa.String(32), nullable=False),
    sa.Column("body", sa.LargeBinary, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("state", sa.String(16), nullable=False, index=True),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("next_at", sa.Float, nullable=False),
    sa.Column("status", sa.Integer),  # the receiver's last HTTP status
    sa.Column("error", sa.String(255)),
)

# The owner's changes to paddockd.toml's settings (settings.py): key -> JSON value.
settings = sa.Table(
    "settings",
    metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
)

# Who did what (services/audit.py): append-only, trimmed by age and count.
audit_log = sa.Table(
    "audit_log",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("at", sa.Float, nullable=False, index=True),
    sa.Column("actor", sa.String(64), nullable=False),
    sa.Column("user_id", sa.String(32), index=True),
    sa.Column("credential", sa.String(64), nullable=False),
    sa.Column("source", sa.String(64), nullable=False),
    sa.Column("action", sa.String(255), nullable=False),
    sa.Column("target", sa.String(255), nullable=False),
    sa.Column("status", sa.Integer, nullable=False),
)

# The schema as it grows: the tables above are what these build, and a test checks that a
# database made by them has exactly the tables above (tests/unit/store/test_schema.py).
MIGRATIONS: list[tuple[int, list[str]]] = [
    (
        1,
        [
            """CREATE TABLE boxes (
                id VARCHAR(32) PRIMARY KEY, name VARCHAR(64) NOT NULL UNIQUE,
                type VARCHAR(64) NOT NULL, image VARCHAR(255) NOT NULL,
                state VARCHAR(16) NOT NULL, desired VARCHAR(16) NOT NULL,
                created_at FLOAT NOT NULL, started_at FLOAT, expires_at FLOAT,
                ttl INTEGER NOT NULL, ttl_action VARCHAR(16) NOT NULL,
                cpus FLOAT NOT NULL, memory_mb INTEGER NOT NULL, pids INTEGER NOT NULL,
                container_id VARCHAR(80), message TEXT)""",
            """CREATE TABLE snapshots (
                id INTEGER PRIMARY KEY AUTOINCREMENT, box_id VARCHAR(32) NOT NULL,
                seq INTEGER NOT NULL, image VARCHAR(255) NOT NULL, label VARCHAR(128),
                kind VARCHAR(16) NOT NULL, created_at FLOAT NOT NULL)""",
            "CREATE INDEX ix_snapshots_box_id ON snapshots (box_id)",
            """CREATE TABLE tokens (
                id VARCHAR(32) PRIMARY KEY, name VARCHAR(128) NOT NULL,
                hash VARCHAR(128) NOT NULL UNIQUE, created_at FLOAT NOT NULL,
                last_used_at FLOAT)""",
        ],
    ),
    (
        2,
        [
            # The filesystem state a box's container is recreated from when it is gone:
            # its latest stop or live snapshot, or the snapshot it was restored to.
            "ALTER TABLE boxes ADD COLUMN current_snapshot VARCHAR(255)",
            "ALTER TABLE boxes ADD COLUMN drives TEXT NOT NULL DEFAULT '[]'",
            "ALTER TABLE snapshots ADD COLUMN size BIGINT NOT NULL DEFAULT 0",
        ],
    ),
    (3, ["ALTER TABLE boxes ADD COLUMN network TEXT"]),
    (
        4,
        [
            """CREATE TABLE credentials (
                provider VARCHAR(64) PRIMARY KEY, secret BLOB NOT NULL, base_url TEXT,
                created_at FLOAT NOT NULL, last_used_at FLOAT)""",
            """CREATE TABLE box_credentials (
                box_id VARCHAR(32) NOT NULL, provider VARCHAR(64) NOT NULL)""",
            "CREATE INDEX ix_box_credentials_box_id ON box_credentials (box_id)",
        ],
    ),
    (5, ["ALTER TABLE boxes ADD COLUMN agent VARCHAR(32)"]),
    (
        6,
        [
            # Agent runs were JSON files written in place: a crash mid-write left one that
            # stopped the next start. Existing files are imported by the run service.
            """CREATE TABLE runs (
                id VARCHAR(32) PRIMARY KEY, box_id VARCHAR(32) NOT NULL,
                box_name VARCHAR(64) NOT NULL, agent VARCHAR(32) NOT NULL,
                instruction TEXT NOT NULL, workdir TEXT NOT NULL, model VARCHAR(128),
                status VARCHAR(16) NOT NULL, started_at FLOAT NOT NULL, ended_at FLOAT,
                exit_code INTEGER)""",
            "CREATE INDEX ix_runs_box_id ON runs (box_id)",
        ],
    ),
    (7, ["ALTER TABLE boxes ADD COLUMN disk_mb INTEGER NOT NULL DEFAULT 0"]),
    (
        8,
        [
            """CREATE TABLE users (
                id VARCHAR(32) PRIMARY KEY, username VARCHAR(64) NOT NULL UNIQUE,
                password_hash TEXT NOT NULL, role VARCHAR(16) NOT NULL,
                created_at FLOAT NOT NULL)""",
            """CREATE TABLE sessions (
                hash VARCHAR(128) PRIMARY KEY, user_id VARCHAR(32) NOT NULL,
                csrf VARCHAR(64) NOT NULL, created_at FLOAT NOT NULL, seen_at FLOAT NOT NULL)""",
            "CREATE INDEX ix_sessions_user_id ON sessions (user_id)",
            """CREATE TABLE links (
                hash VARCHAR(128) PRIMARY KEY, kind VARCHAR(16) NOT NULL,
                created_at FLOAT NOT NULL, expires_at FLOAT NOT NULL, used_at FLOAT)""",
        ],
    ),
    (
        9,
        [
            "ALTER TABLE tokens ADD COLUMN user_id VARCHAR(32)",
            """CREATE TABLE device_grants (
                hash VARCHAR(128) PRIMARY KEY, user_code VARCHAR(16) NOT NULL UNIQUE,
                client VARCHAR(128) NOT NULL, address VARCHAR(64) NOT NULL,
                created_at FLOAT NOT NULL, expires_at FLOAT NOT NULL,
                status VARCHAR(16) NOT NULL, user_id VARCHAR(32))""",
        ],
    ),
    (
        10,
        [
            # Boxes made before accounts (NULL) are the owner's.
            "ALTER TABLE boxes ADD COLUMN owner_id VARCHAR(32)",
            "CREATE INDEX ix_boxes_owner_id ON boxes (owner_id)",
            "ALTER TABLE links ADD COLUMN role VARCHAR(16)",
            "CREATE INDEX ix_tokens_user_id ON tokens (user_id)",
        ],
    ),
    (
        11,
        [
            "ALTER TABLE tokens ADD COLUMN expires_at FLOAT",
            "ALTER TABLE users ADD COLUMN max_boxes INTEGER",
            "ALTER TABLE users ADD COLUMN max_cpus FLOAT",
            "ALTER TABLE users ADD COLUMN max_memory_mb INTEGER",
        ],
    ),
    (
        12,
        [
            # Provider keys per user. SQLite cannot change a primary key in place: a new
            # table, the keys copied as the owner's (''), the old one dropped.
            """CREATE TABLE credentials_new (
                user_id VARCHAR(32) NOT NULL DEFAULT '', provider VARCHAR(64) NOT NULL,
                secret BLOB NOT NULL, base_url TEXT, created_at FLOAT NOT NULL,
                last_used_at FLOAT, PRIMARY KEY (user_id, provider))""",
            """INSERT INTO credentials_new
                (user_id, provider, secret, base_url, created_at, last_used_at)
                SELECT '', provider, secret, base_url, created_at, last_used_at
                FROM credentials""",
            "DROP TABLE credentials",
            "ALTER TABLE credentials_new RENAME TO credentials",
        ],
    ),
    (
        13,
        [
            """CREATE TABLE previews (
                id VARCHAR(32) PRIMARY KEY, box_id VARCHAR(32) NOT NULL,
                port INTEGER NOT NULL, public BOOLEAN NOT NULL, created_at FLOAT NOT NULL,
                expires_at FLOAT, owner_id VARCHAR(32), UNIQUE (box_id, port))""",
            "CREATE INDEX ix_previews_box_id ON previews (box_id)",
            # How long a box may sit unused before it is stopped (0: never).
            "ALTER TABLE boxes ADD COLUMN idle_stop INTEGER NOT NULL DEFAULT 0",
        ],
    ),
    (
        20,
        [
            # What an E2B client gave at create (store/sandboxes.py): kept beside the box, gone
            # with it (deleted in the box row's own transaction).
            """CREATE TABLE e2b_sandboxes (
                box_id VARCHAR(32) PRIMARY KEY, template VARCHAR(128) NOT NULL,
                metadata TEXT NOT NULL, env_vars TEXT NOT NULL)""",
        ],
    ),
    (
        22,
        [
            # Rows of boxes deleted by the reaper or the native API before those deletes
            # took them along (BoxRepository's dependents).
            "DELETE FROM e2b_sandboxes WHERE box_id NOT IN (SELECT id FROM boxes)",
        ],
    ),
    (
        23,
        [
            # Snapshots as copies of a box's disk (runtime/diskcopy.py), not commits.
            "ALTER TABLE boxes ADD COLUMN current_disk VARCHAR(255)",
            "ALTER TABLE snapshots ADD COLUMN disk VARCHAR(255)",
        ],
    ),
    (24, ["ALTER TABLE boxes ADD COLUMN keep INTEGER"]),  # per-box stop-snapshot retention
    (
        25,
        [
            # The credential gateway: keys stay outside boxes unless set with --mode env.
            "ALTER TABLE credentials ADD COLUMN mode VARCHAR(16) NOT NULL DEFAULT 'gateway'",
            """CREATE TABLE secrets (
                user_id VARCHAR(32) NOT NULL DEFAULT '', name VARCHAR(64) NOT NULL,
                value BLOB NOT NULL, hosts TEXT NOT NULL, header VARCHAR(128), format TEXT,
                created_at FLOAT NOT NULL, last_used_at FLOAT, PRIMARY KEY (user_id, name))""",
            """CREATE TABLE box_secrets (
                box_id VARCHAR(32) NOT NULL, name VARCHAR(64) NOT NULL)""",
            "CREATE INDEX ix_box_secrets_box_id ON box_secrets (box_id)",
            """CREATE TABLE placeholders (
                value VARCHAR(128) PRIMARY KEY, box_id VARCHAR(32) NOT NULL,
                kind VARCHAR(16) NOT NULL, name VARCHAR(64) NOT NULL,
                created_at FLOAT NOT NULL)""",
            "CREATE INDEX ix_placeholders_box_id ON placeholders (box_id)",
            """CREATE TABLE credential_uses (
                id INTEGER PRIMARY KEY AUTOINCREMENT, user_id VARCHAR(32) NOT NULL,
                box_id VARCHAR(32) NOT NULL, box_name VARCHAR(64) NOT NULL,
                kind VARCHAR(16) NOT NULL, name VARCHAR(64) NOT NULL,
                host VARCHAR(255) NOT NULL, method VARCHAR(16) NOT NULL,
                path VARCHAR(255) NOT NULL, status INTEGER NOT NULL,
                outcome VARCHAR(16) NOT NULL, reason TEXT, at FLOAT NOT NULL)""",
            "CREATE INDEX ix_credential_uses_user_id ON credential_uses (user_id)",
            "CREATE INDEX ix_credential_uses_at ON credential_uses (at)",
            # Attachments of boxes deleted before they went with their box.
            "DELETE FROM box_credentials WHERE box_id NOT IN (SELECT id FROM boxes)",
        ],
    ),
    (
        26,
        [
            # Templates: boxes that start with a project's tools in them.
            "ALTER TABLE boxes ADD COLUMN template VARCHAR(32)",
            "ALTER TABLE boxes ADD COLUMN env TEXT NOT NULL DEFAULT '[]'",
            "ALTER TABLE boxes ADD COLUMN user VARCHAR(64)",
            "ALTER TABLE boxes ADD COLUMN workdir TEXT",
            "ALTER TABLE boxes ADD COLUMN start_cmd TEXT",
            """CREATE TABLE templates (
                id VARCHAR(32) PRIMARY KEY, user_id VARCHAR(32) NOT NULL DEFAULT '',
                name VARCHAR(64) NOT NULL, shared BOOLEAN NOT NULL DEFAULT 0,
                status VARCHAR(16) NOT NULL, message TEXT, base VARCHAR(64) NOT NULL,
                image VARCHAR(255), disk VARCHAR(255), built_on VARCHAR(255),
                env TEXT NOT NULL DEFAULT '[]', user VARCHAR(64), workdir TEXT,
                start_cmd TEXT, defaults TEXT NOT NULL DEFAULT '{}', dockerfile TEXT,
                build_args TEXT NOT NULL DEFAULT '{}', size BIGINT NOT NULL DEFAULT 0,
                created_at FLOAT NOT NULL, built_at FLOAT, UNIQUE (user_id, name))""",
        ],
    ),
    (
        27,
        [
            # SSH into boxes: each user's public keys, each box's host key.
            """CREATE TABLE ssh_keys (
                user_id VARCHAR(32) NOT NULL DEFAULT '', name VARCHAR(64) NOT NULL,
                public_key TEXT NOT NULL, fingerprint VARCHAR(64) NOT NULL,
                created_at FLOAT NOT NULL, PRIMARY KEY (user_id, name))""",
            """CREATE TABLE box_ssh (
                box_id VARCHAR(32) PRIMARY KEY, host_key TEXT NOT NULL,
                public_key TEXT NOT NULL)""",
        ],
    ),
    (
        28,
        [
            """CREATE TABLE audit_log (
                id INTEGER PRIMARY KEY AUTOINCREMENT, at FLOAT NOT NULL,
                actor VARCHAR(64) NOT NULL, user_id VARCHAR(32),
                credential VARCHAR(64) NOT NULL, source VARCHAR(64) NOT NULL,
                action VARCHAR(255) NOT NULL, target VARCHAR(255) NOT NULL,
                status INTEGER NOT NULL)""",
            "CREATE INDEX ix_audit_log_at ON audit_log (at)",
            "CREATE INDEX ix_audit_log_user_id ON audit_log (user_id)",
        ],
    ),
    (
        29,
        [
            # E2B's host routing (services/e2b/hosts.py): who may reach a sandbox's ports.
            "ALTER TABLE e2b_sandboxes ADD COLUMN public_traffic BOOLEAN NOT NULL DEFAULT 1",
            "ALTER TABLE e2b_sandboxes ADD COLUMN auto_resume BOOLEAN NOT NULL DEFAULT 0",
        ],
    ),
    (
        30,
        [
            """CREATE TABLE webhooks (
                id VARCHAR(32) PRIMARY KEY, owner_id VARCHAR(32), url TEXT NOT NULL,
                events TEXT NOT NULL, secret BLOB NOT NULL, created_at FLOAT NOT NULL)""",
            "CREATE INDEX ix_webhooks_owner_id ON webhooks (owner_id)",
            """CREATE TABLE webhook_deliveries (
                id INTEGER PRIMARY KEY AUTOINCREMENT, webhook_id VARCHAR(32) NOT NULL,
                event_id VARCHAR(32) NOT NULL, event_type VARCHAR(32) NOT NULL,
                box_id VARCHAR(32) NOT NULL, body BLOB NOT NULL, created_at FLOAT NOT NULL,
                state VARCHAR(16) NOT NULL, attempts INTEGER NOT NULL, next_at FLOAT NOT NULL,
                status INTEGER, error VARCHAR(255))""",
            "CREATE INDEX ix_webhook_deliveries_webhook_id ON webhook_deliveries (webhook_id)",
            "CREATE INDEX ix_webhook_deliveries_state ON webhook_deliveries (state)",
        ],
    ),
    (
        31,
        [
            """CREATE TABLE settings (
                key VARCHAR(64) PRIMARY KEY, value TEXT NOT NULL, updated_at FLOAT NOT NULL)""",
        ],
    ),
    (32, ["ALTER TABLE tokens ADD COLUMN scope VARCHAR(16)"]),
    (
        33,
        [
            "ALTER TABLE e2b_sandboxes ADD COLUMN network_rules TEXT NOT NULL DEFAULT '{}'",
            """CREATE TABLE e2b_secrets (
                id VARCHAR(32) PRIMARY KEY, user_id VARCHAR(32) NOT NULL,
                name VARCHAR(128) NOT NULL, value BLOB NOT NULL, version INTEGER NOT NULL,
                metadata TEXT NOT NULL, created_at FLOAT NOT NULL, updated_at FLOAT NOT NULL,
                UNIQUE (user_id, name))""",
        ],
    ),
    (
        34,
        [
            """CREATE TABLE e2b_template_tags (
                user_id VARCHAR(32) NOT NULL, name VARCHAR(64) NOT NULL,
                tag VARCHAR(64) NOT NULL, template VARCHAR(64) NOT NULL,
                created_at FLOAT NOT NULL, PRIMARY KEY (user_id, name, tag))""",
        ],
    ),
]


def _on_connect(dbapi_conn: object, _record: object) -> None:
    cur = dbapi_conn.cursor()  # type: ignore[attr-defined]
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA busy_timeout=10000")
    cur.close()


class Database:
    def __init__(self, url: str) -> None:
        self.engine: Engine = sa.create_engine(url, connect_args={"check_same_thread": False})
        if url.startswith("sqlite"):
            sa.event.listen(self.engine, "connect", _on_connect)

    def migrate(self) -> int:
        with self.engine.begin() as conn:
            conn.execute(
                sa.text(
                    "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY)"
                )
            )
            done = {
                row[0] for row in conn.execute(sa.text("SELECT version FROM schema_migrations"))
            }
            for version, statements in MIGRATIONS:
                if version in done:
                    continue
                for statement in statements:
                    conn.execute(sa.text(statement))
                conn.execute(sa.text("INSERT INTO schema_migrations VALUES (:v)"), {"v": version})
        return MIGRATIONS[-1][0]

    async def run(self, fn: Callable[[Connection], T]) -> T:
        """Run `fn` in a transaction on a worker thread, off the event loop."""
        return await anyio.to_thread.run_sync(self.run_here, fn)

    def run_here(self, fn: Callable[[Connection], T]) -> T:
        """Run `fn` in a transaction on this thread (blocking)."""
        with self.engine.begin() as conn:
            return fn(conn)

    def close(self) -> None:
        self.engine.dispose()
