"""`paddockd backup` and `paddockd restore`: the server's state in one file, made while it
runs, and brought back onto a fresh install.

The file is a tar of:

    manifest.json            what it holds (`Manifest`), and the schema it was made at
    paddock.db               the database, copied by SQLite's online backup (consistent
                             while paddockd writes: accounts, tokens, members, boxes,
                             snapshots, secrets sealed, previews, templates, webhooks, ...)
    keys/NAME                paddockd's keys: what seals secrets and provider keys, signs
                             desktop links, preview secrets and envd tokens
    keys/gateway/NAME        the credential gateway's CA (boxes trust it)
    disks/BOX/KEY.paddock    each box's current disk (what it resumes from), in the
                             portable box format (services/box_archive.py: sparse, zstd,
                             checksummed); with --with-snapshots, every snapshot's too
    drives/VOLUME.tar        with --with-drives, each named drive's files (owners, modes,
                             links as they are), copied while boxes may write to them

Restoring writes them back while paddockd is stopped, onto an install that has no
accounts or boxes yet (or with --force, over whatever it has). Every box comes back
stopped: `paddock resume` starts it from its disk. A snapshot whose disk is not in the
file is left out (its row too). Drives come back with their files, as theirs. Engine
commits (servers whose engine cannot copy disks) are not in a backup: docs/operations.md
says what to do for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import socket
import sqlite3
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

import sqlalchemy as sa

from . import __version__, drive_archive
from .config import Config
from .domain.errors import InvalidRequest, PaddockError
from .domain.snapshot import validate_drive_name
from .runtime import diskfile
from .runtime.base import LABEL_DRIVE, LABEL_INSTANCE, LABEL_OWNER
from .services import box_archive
from .services.drives import LABEL_CAPACITY, capacity_mb
from .services.reconciler import drive_volume
from .store.db import MIGRATIONS, Database, boxes, snapshots

FORMAT = 1
KEY_FILES = ("credentials.key", "desktop.key", "envd.key", "preview.key", "volume.key")
KEY_DIRS = ("gateway",)
_MAX_MANIFEST = 16 << 20


@dataclass
class Manifest:
    paddock: str
    schema: int
    created_at: float
    host: str
    uid_base: int
    with_snapshots: bool
    boxes: list[str] = field(default_factory=list)  # box names
    disks: list[str] = field(default_factory=list)  # saved disks' keys in the file
    # Named drives in the file: {"volume": engine volume, "labels": its labels but the
    # instance's} (backups made without --with-drives have none).
    drives: list[dict[str, Any]] = field(default_factory=list)
    # SHA-256 of every other file in it: a changed or cut backup is refused before use
    # (it guards against damage; whoever can write the file can write this too).
    files: dict[str, str] = field(default_factory=dict)
    format: int = FORMAT


@dataclass(frozen=True)
class Restored:
    boxes: int
    disks: int
    dropped_snapshots: int
    drives: int = 0


def backup(
    cfg: Config,
    out: IO[bytes],
    with_snapshots: bool,
    say: Any = print,
    with_drives: bool = False,
) -> Manifest:
    """Write the backup tar to `out` (a file, or a pipe: it is streamed)."""
    from .wiring import wire

    with tempfile.TemporaryDirectory(prefix="paddock-backup-", dir=_spool(cfg)) as tmp:
        work = Path(tmp)
        db_copy = work / "paddock.db"
        _copy_database(cfg.data_dir / "paddock.db", db_copy)
        schema = _schema(db_copy)
        if schema != MIGRATIONS[-1][0]:
            # Wiring migrates: never the database of a paddockd of another version.
            raise InvalidRequest(
                f"the running paddockd's database is at schema {schema}, this paddockd's "
                f"at {MIGRATIONS[-1][0]}: back up with the same version (./install.sh "
                "brings them together)"
            )
        rows = _disk_rows(db_copy, with_snapshots)
        wired = wire(cfg)

        async def save_all() -> tuple[int, list[tuple[str, Path]]]:
            base = await _uid_base(wired.runtime)
            saved = []
            for key, name, seq in rows:
                target = work / "disks" / f"{key}.paddock"
                target.parent.mkdir(parents=True, exist_ok=True)
                say(f"box {name}: " + (f"snapshot {seq}'s disk" if seq else "its disk"))
                await _save_disk(wired.runtime, key, name, base, target)
                saved.append((key, target))
            return base, saved

        async def save_drives() -> list[tuple[dict[str, Any], Path]]:
            saved = []
            for volume in await wired.runtime.volumes({LABEL_INSTANCE: cfg.instance}):
                if LABEL_DRIVE not in volume.labels:
                    continue
                name = volume.labels[LABEL_DRIVE]
                say(f"drive {name} ({volume.name})")
                target = work / "drives" / f"{volume.name}.tar"
                target.parent.mkdir(parents=True, exist_ok=True)
                try:
                    folder = Path(await wired.runtime.volume_folder(volume))
                    # What a copy may take: what the drive holds (its size, or what its
                    # files use now) and room for writes meanwhile. Sparse files that
                    # claim more are a box's way to fill this disk, not data.
                    capacity = capacity_mb(volume.labels)
                    held = (
                        (capacity << 20) if capacity else await wired.runtime.volume_usage(volume)
                    )
                    await asyncio.to_thread(_save_folder, folder, target, held + (64 << 20))
                except (drive_archive.TooBig, OSError, PaddockError) as exc:
                    # One drive's trouble (a box's doing, or a drive removed meanwhile)
                    # leaves that drive out, not the whole backup.
                    target.unlink(missing_ok=True)
                    why = exc.message if isinstance(exc, PaddockError) else str(exc)
                    say(f"drive {name} ({volume.name}) is LEFT OUT of this backup: {why}")
                    continue
                labels = {k: v for k, v in volume.labels.items() if k != LABEL_INSTANCE}
                saved.append(({"volume": volume.name, "labels": labels}, target))
            return saved

        try:
            uid_base, disks = asyncio.run(save_all())
            drives = asyncio.run(save_drives()) if with_drives else []
        finally:
            wired.db.close()
        members = {"paddock.db": db_copy}
        for name in KEY_FILES:
            if (cfg.data_dir / name).is_file():
                members[f"keys/{name}"] = cfg.data_dir / name
        for folder in KEY_DIRS:
            for path in sorted((cfg.data_dir / folder).glob("*")):
                if path.is_file() and not path.is_symlink():
                    members[f"keys/{folder}/{path.name}"] = path
        for key, path in disks:
            members[f"disks/{key}.paddock"] = path
        for drive, path in drives:
            members[f"drives/{drive['volume']}.tar"] = path
        manifest = Manifest(
            paddock=__version__,
            schema=MIGRATIONS[-1][0],
            created_at=time.time(),
            host=socket.gethostname(),
            uid_base=uid_base,
            with_snapshots=with_snapshots,
            boxes=sorted({name for _, name, _ in rows}),
            disks=[key for key, _ in disks],
            drives=[drive for drive, _ in drives],
            files={name: _sha256(path) for name, path in members.items()},
        )
        with tarfile.open(fileobj=out, mode="w|") as tar:
            _add_bytes(tar, "manifest.json", json.dumps(asdict(manifest), indent=1).encode())
            for name, path in members.items():
                tar.add(path, name)
    return manifest


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def restore(cfg: Config, source: IO[bytes], force: bool, say: Any = print) -> Restored:
    """Bring a backup back into this install's data folder and engine (paddockd stopped)."""
    from .wiring import wire

    if _serving(cfg):
        raise InvalidRequest(
            f"paddockd is running on port {cfg.port}: stop it first (restore writes its "
            "database), then start it again"
        )
    target = cfg.data_dir / "paddock.db"
    if target.exists() and not force and _has_state(target):
        raise InvalidRequest(
            "this server has accounts or boxes already: restore onto a fresh install, or "
            "add --force to replace them all"
        )
    with tempfile.TemporaryDirectory(prefix="paddock-restore-", dir=_spool(cfg)) as tmp:
        work = Path(tmp)
        manifest = _unpack(source, work)
        # The disks first, each checked whole as it is written: a damaged file is refused
        # before anything of this server's is replaced.
        wired = wire(cfg)

        async def load_all() -> list[str]:
            uid_base = await _uid_base(wired.runtime)
            if (manifest.disks or manifest.drives) and uid_base != manifest.uid_base:
                raise InvalidRequest(
                    f"the boxes' files are owned from host uid {manifest.uid_base}, this "
                    f"server's boxes from {uid_base}: their files would have other owners"
                )
            there = set(manifest.disks) & await wired.runtime.saved_disks()
            volumes = {d["volume"] for d in manifest.drives}
            there |= volumes & {v.name for v in await wired.runtime.volumes({})}
            if there:
                raise InvalidRequest(
                    f"this install has {len(there)} of the backup's disks or drives already "
                    "(it was restored here before, or is the server it was made on): restore "
                    "onto a fresh install"
                )
            loaded: list[str] = []
            made: list[str] = []
            try:
                for key in manifest.disks:
                    say(f"disk {key}")
                    await _load_disk(wired.runtime, key, work / "disks" / f"{key}.paddock")
                    loaded.append(key)
                for drive in manifest.drives:
                    say(f"drive {drive['labels'][LABEL_DRIVE]} ({drive['volume']})")
                    await _load_drive(wired.runtime, cfg.instance, drive, work, made)
            except BaseException:
                for key in loaded:
                    with contextlib.suppress(Exception):
                        await wired.runtime.drop_disk(key)
                for volume in made:
                    with contextlib.suppress(Exception):
                        await wired.runtime.remove_volume(volume)
                raise
            return loaded

        try:
            loaded = asyncio.run(load_all())
        finally:
            wired.db.close()
        for leftover in ("paddock.db", "paddock.db-wal", "paddock.db-shm"):
            (cfg.data_dir / leftover).unlink(missing_ok=True)
        _copy_database(work / "paddock.db", target)
        for path in sorted((work / "keys").rglob("*")):
            if path.is_file():
                _put_key(path, cfg.data_dir / path.relative_to(work / "keys"))
        Database(cfg.db_url).migrate()
        count, dropped = _settle(target, set(loaded))
    return Restored(count, len(loaded), dropped, len(manifest.drives))


def _put_key(source: Path, dest: Path) -> None:
    """Written beside, then renamed: nothing at `dest` (a link) is followed."""
    dest.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    partial = dest.with_name(dest.name + ".restoring")
    partial.unlink(missing_ok=True)
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(source.read_bytes())
    os.replace(partial, dest)


def _allowed(name: str) -> bool:
    """The members a backup has: nothing else is taken from a file."""
    parts = name.split("/")
    if name in ("manifest.json", "paddock.db"):
        return True
    if parts[0] == "keys":
        return (len(parts) == 2 and parts[1] in KEY_FILES) or (
            len(parts) == 3 and parts[1] in KEY_DIRS and _plain(parts[2])
        )
    if parts[0] == "drives":
        return len(parts) == 2 and _plain(parts[1]) and name.endswith(".tar")
    return (
        parts[0] == "disks"
        and len(parts) == 3
        and all(_plain(p) for p in parts[1:])
        and name.endswith(".paddock")
    )


def _plain(part: str) -> bool:
    return bool(part) and part not in (".", "..") and all(c.isalnum() or c in "._-" for c in part)


def _schema(db_file: Path) -> int:
    with contextlib.closing(sqlite3.connect(f"file:{db_file}?mode=ro", uri=True)) as conn:
        row = conn.execute("SELECT MAX(version) FROM schema_migrations").fetchone()
    return int(row[0] or 0)


# -- the database ------------------------------------------------------------------------
def _copy_database(source: Path, dest: Path) -> None:
    """SQLite's online backup: a consistent copy while paddockd writes (WAL included)."""
    src = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    try:
        out = sqlite3.connect(dest)
        try:
            src.backup(out)
        finally:
            out.close()
    finally:
        src.close()
    dest.chmod(0o600)


def _disk_rows(db_file: Path, every_snapshot: bool) -> list[tuple[str, str, int | None]]:
    """(saved disk key, box name, snapshot seq) of each disk the backup holds: each box's
    newest snapshot's and the one it was last made from, and with `every_snapshot` all
    its snapshots'."""
    engine = sa.create_engine(f"sqlite:///{db_file}")
    try:
        with engine.connect() as conn:
            found: dict[str, tuple[str, str, int | None]] = {}
            names = {}
            for r in conn.execute(sa.select(boxes.c.id, boxes.c.name, boxes.c.current_disk)):
                names[r.id] = r.name
                if r.current_disk:
                    found[r.current_disk] = (r.current_disk, r.name, None)
            newest: dict[str, tuple[int, str]] = {}
            rows = conn.execute(sa.select(snapshots.c.box_id, snapshots.c.seq, snapshots.c.disk))
            for r in rows:
                if not r.disk or r.box_id not in names:
                    continue
                if every_snapshot:
                    found.setdefault(r.disk, (r.disk, names[r.box_id], r.seq))
                if r.seq > newest.get(r.box_id, (-1, ""))[0]:
                    newest[r.box_id] = (r.seq, r.disk)
            for box_id, (seq, disk) in newest.items():
                found.setdefault(disk, (disk, names[box_id], seq))
            return sorted(found.values())
    finally:
        engine.dispose()


def _has_state(db_file: Path) -> bool:
    with contextlib.closing(sqlite3.connect(f"file:{db_file}?mode=ro", uri=True)) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        for table in ("boxes", "accounts"):
            if table in tables and conn.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone():
                return True
    return False


def _settle(db_file: Path, loaded: set[str]) -> tuple[int, int]:
    """Every box stopped, with no container (this engine has none of them), to be made
    from the disk it was last made from, or else its newest snapshot's; snapshots whose
    disk is not here are left out.
    (boxes restored, snapshots dropped)"""
    with contextlib.closing(sqlite3.connect(db_file)) as conn, conn:
        dropped = 0
        newest: dict[str, tuple[int, str, str]] = {}
        rows = conn.execute("SELECT box_id, seq, image, disk FROM snapshots").fetchall()
        for box_id, seq, image, disk in rows:
            if disk and disk not in loaded:
                conn.execute("DELETE FROM snapshots WHERE box_id = ? AND seq = ?", (box_id, seq))
                dropped += 1
            elif disk and seq > newest.get(box_id, (-1, "", ""))[0]:
                newest[box_id] = (seq, image, disk)
        for box_id, disk in conn.execute("SELECT id, current_disk FROM boxes").fetchall():
            note = "restored from a backup"
            image = None
            if disk in loaded:
                pass  # what it was made from last: its own files
            elif box_id in newest:
                seq, image, disk = newest[box_id]
                note += f", as of its snapshot {seq}"
            elif disk is not None:
                disk, note = None, note + " (its files were not in it)"
            conn.execute(
                "UPDATE boxes SET state = 'stopped', desired = 'stopped', container_id = NULL, "
                "expires_at = NULL, current_disk = ?, message = ? WHERE id = ?",
                (disk, note, box_id),
            )
            if image is not None:
                conn.execute("UPDATE boxes SET current_snapshot = ? WHERE id = ?", (image, box_id))
        count = conn.execute("SELECT COUNT(*) FROM boxes").fetchone()[0]
    return int(count), dropped


# -- disks ---------------------------------------------------------------------------------
async def _uid_base(runtime: Any) -> int:
    return int((await runtime.info()).userns_base or 0)


async def _save_disk(runtime: Any, key: str, name: str, uid_base: int, target: Path) -> None:
    """The saved disk `key` as a box file at `target`, from a copy of its own whose journal
    is replayed: a stopped box's disk is saved while its filesystem is still mounted
    (crash-consistent, its journal to be replayed on the next mount), and a restore takes
    clean filesystems only, as an import does."""
    source = await runtime.open_disk(key)
    image = target.with_name(target.name + ".img")

    def work() -> None:
        fd = os.open(image, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            os.ftruncate(fd, source.size)
            for offset, data in source.chunks():
                os.pwrite(fd, data, offset)
        finally:
            os.close(fd)
        fsck = subprocess.run(["e2fsck", "-f", "-y", str(image)], capture_output=True, text=True)
        if fsck.returncode >= 4:  # 1 and 2: corrected (the journal replayed)
            raise InvalidRequest(
                f"box {name}'s disk {key} could not be checked: {fsck.stdout.strip()[-300:]}"
            )
        clean = diskfile.DiskReader(image)
        try:
            manifest = box_archive.Manifest(
                name=name, type="", image="", uid_base=uid_base, disk_size=clean.size
            )
            with target.open("wb") as f:
                for piece in box_archive.write(manifest, clean):
                    f.write(piece)
        finally:
            clean.close()

    try:
        await asyncio.to_thread(work)
    finally:
        source.close()
        image.unlink(missing_ok=True)


async def _load_disk(runtime: Any, key: str, path: Path) -> None:
    with path.open("rb") as f:
        manifest, extract = box_archive.open_archive(f.read)
        sink = await runtime.new_disk(key, manifest.disk_size)
        try:
            await asyncio.to_thread(extract, sink)
            await asyncio.to_thread(sink.commit)
        except ValueError as exc:  # not a filesystem this server makes
            sink.abort()
            raise InvalidRequest(f"the backup's disk {key} is refused: {exc}") from None
        except BaseException:
            sink.abort()
            raise


# -- drives ----------------------------------------------------------------------------------
def _drive_entry(drive: object) -> bool:
    """A manifest's drive as a backup writes it: its volume the one its labels name."""
    if not isinstance(drive, dict) or set(drive) != {"volume", "labels"}:
        return False
    labels = drive["labels"]
    if not isinstance(labels, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
    ):
        return False
    name, holder = labels.get(LABEL_DRIVE), labels.get(LABEL_OWNER)
    try:
        validate_drive_name(str(name))
    except InvalidRequest:
        return False
    if LABEL_CAPACITY in labels and capacity_mb(labels) is None:
        return False
    return bool(
        (holder is None or _plain(holder))
        and _plain(str(drive["volume"]))
        and drive["volume"] == drive_volume(str(name), holder)
    )


async def _load_drive(
    runtime: Any, instance: str, drive: dict[str, Any], work: Path, made: list[str]
) -> None:
    labels = {**drive["labels"], LABEL_INSTANCE: instance}
    capacity = capacity_mb(labels)
    volume = await runtime.create_volume(
        drive["volume"], labels, capacity << 20 if capacity else None
    )
    made.append(volume.name)
    folder = Path(await runtime.volume_folder(volume))
    await asyncio.to_thread(_load_folder, work / "drives" / f"{volume.name}.tar", folder)


def _save_folder(folder: Path, target: Path, budget: int) -> None:
    with target.open("wb") as out:
        drive_archive.write(str(folder), out, budget)


def _load_folder(source: Path, folder: Path) -> None:
    try:
        with source.open("rb") as f:
            drive_archive.read(f, str(folder))
    except (drive_archive.Refused, OSError) as exc:
        raise InvalidRequest(f"the backup's drive {source.stem} is refused: {exc}") from None


# -- the file ------------------------------------------------------------------------------
def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), 0o600, int(time.time())
    with tempfile.SpooledTemporaryFile() as f:
        f.write(data)
        f.seek(0)
        tar.addfile(info, f)


def _members(tar: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
    for member in tar:
        name = member.name
        parts = Path(name).parts
        if name.startswith("/") or ".." in parts or not (member.isfile() or member.isdir()):
            raise InvalidRequest(f"not a Paddock backup: it holds {name!r}")
        yield member


def _unpack(source: IO[bytes], work: Path) -> Manifest:
    """The backup's files under `work`, its manifest checked; nothing else is taken."""
    try:
        with tarfile.open(fileobj=source, mode="r|") as tar:
            for member in _members(tar):
                if member.isdir():
                    continue
                if member.name == "manifest.json" and member.size > _MAX_MANIFEST:
                    raise InvalidRequest("not a Paddock backup: its manifest is too large")
                if not _allowed(member.name):
                    raise InvalidRequest(f"not a Paddock backup: it holds {member.name!r}")
                dest = work / member.name
                dest.parent.mkdir(parents=True, exist_ok=True)
                data = tar.extractfile(member)
                assert data is not None
                with dest.open("wb") as f:
                    while chunk := data.read(1 << 20):
                        f.write(chunk)
    except tarfile.TarError as exc:
        raise InvalidRequest(f"not a Paddock backup, or a damaged one: {exc}") from None
    try:
        raw = json.loads((work / "manifest.json").read_text())
        manifest = Manifest(**raw)
    except (OSError, ValueError, TypeError) as exc:
        raise InvalidRequest(f"not a Paddock backup: no manifest it can read ({exc})") from None
    shapes_ok = (
        isinstance(manifest.files, dict)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in manifest.files.items())
        and isinstance(manifest.disks, list)
        and all(isinstance(k, str) for k in manifest.disks)
        and isinstance(manifest.schema, int)
        and isinstance(manifest.uid_base, int)
    )
    if not shapes_ok:
        raise InvalidRequest("not a Paddock backup: its manifest is of the wrong shape")
    if manifest.format != FORMAT:
        raise InvalidRequest(f"a backup of format {manifest.format}: this Paddock reads {FORMAT}")
    if manifest.schema > MIGRATIONS[-1][0]:
        raise InvalidRequest(
            f"the backup is of a newer Paddock ({manifest.paddock}, schema {manifest.schema}): "
            "install that version or later to restore it"
        )
    if "paddock.db" not in manifest.files:
        raise InvalidRequest("not a Paddock backup: it has no database")
    for key in manifest.disks:
        if f"disks/{key}.paddock" not in manifest.files:
            raise InvalidRequest(f"not a Paddock backup: its disk {key} is not listed")
    if not isinstance(manifest.drives, list) or not all(map(_drive_entry, manifest.drives)):
        raise InvalidRequest("not a Paddock backup: its drives are of the wrong shape")
    for drive in manifest.drives:
        if f"drives/{drive['volume']}.tar" not in manifest.files:
            raise InvalidRequest(f"not a Paddock backup: its drive {drive['volume']} is not listed")
    for name, digest in manifest.files.items():
        path = work / name
        if ".." in Path(name).parts or not path.is_file():
            raise InvalidRequest(f"the backup is cut short: {name} is missing")
        if _sha256(path) != digest:
            raise InvalidRequest(f"the backup was changed or damaged: {name} does not match")
    return manifest


def _serving(cfg: Config) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", cfg.port), 1):
        return True
    return False


def _spool(cfg: Config) -> str:
    """Where the disks are written before they go into the file: beside the data folder
    (its filesystem has room for disks; /tmp may be a small tmpfs)."""
    cfg.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    return str(cfg.data_dir)
