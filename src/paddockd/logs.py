"""paddockd's log holds no secret, and does not grow without end.

Its own messages name no token or key; what needs a filter is uvicorn's: it logs every
WebSocket's URL with its query string (`"WebSocket /v1/boxes/…/desktop/ws?token=…"
[accepted]`), and a desktop link's token travels there, as a preview's secret does in its
URL and cookie. (The HTTP access log, which would log the desktop page's `?token=`, is
off.)

Where paddockd's output goes to a file (its supervisor's `>> paddockd.log`), that file is
rotated once it passes a size, as logrotate would name them (`.1` the newest); under
systemd it goes to the journal, which has limits of its own."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import stat
from collections import deque
from dataclasses import dataclass
from pathlib import Path

# A query parameter or cookie whose name says it is a secret, or a bearer credential.
_SECRET = re.compile(
    r"(?i)(?P<keep>[?&;\s](?:[\w.-]*token|[\w.-]*key|secret|password|paddock_preview[\w-]*)=)"
    r"[^&;\s\"'#]*"
    r"|(?P<bearer>\bbearer\s+)[^\s\"']+"
)
MAX_LOG = 16 << 20
KEEP = 4
REDACTED = "[redacted]"
MAX_LINE = 4096  # of a message kept for `paddock logs --server`


def _mask(match: re.Match[str]) -> str:
    return (match["keep"] or match["bearer"]) + REDACTED


def redact(text: str) -> str:
    return _SECRET.sub(_mask, text)


class RedactSecrets(logging.Filter):
    """Rewrites a record whose message carries a secret: the message is formatted here and
    redacted, so no argument keeps the secret for a later handler to print."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        return True


def keep_secrets_out() -> None:
    """Put the filter on every handler there is now: the root logger's and uvicorn's own
    (its loggers do not all propagate). Call it once uvicorn configured its logging."""
    secrets_filter = RedactSecrets()
    for name in ("", "uvicorn", "uvicorn.error", "uvicorn.access"):
        for handler in logging.getLogger(name).handlers:
            if not any(isinstance(f, RedactSecrets) for f in handler.filters):
                handler.addFilter(secrets_filter)


@dataclass(frozen=True)
class Line:
    at: float  # seconds since the epoch
    level: str
    logger: str
    message: str


class RecentLog(logging.Handler):
    """paddockd's last messages, in memory, for `paddock logs --server`: the same wherever
    its output goes (a file, the journal), and secret-free as the rest (RedactSecrets)."""

    def __init__(self, keep: int = 2000) -> None:
        super().__init__(logging.INFO)
        self._lines: deque[Line] = deque(maxlen=keep)
        self.addFilter(RedactSecrets())

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            message += f" ({type(record.exc_info[1]).__name__}: {record.exc_info[1]})"
        message = redact(message)[:MAX_LINE]  # the exception's text was not filtered yet
        self._lines.append(Line(record.created, record.levelname, record.name, message))

    def lines(self, count: int) -> list[Line]:
        """The last `count`, oldest first."""
        return list(self._lines)[-count:] if count > 0 else []


recent = RecentLog()


def remember() -> None:
    """Keep paddockd's messages (and uvicorn's, which do not all reach the root) in
    `recent` from now on."""
    for name in ("", "uvicorn.error"):
        logger = logging.getLogger(name)
        if recent not in logger.handlers:
            logger.addHandler(recent)


def rotate_if_large(max_bytes: int = MAX_LOG, keep: int = KEEP) -> bool:
    """If stderr is a regular file over `max_bytes`: shift it to `.1` (`.1` to `.2`, ...,
    `keep` kept) and point stdout and stderr at a new file of the old name. Whether it did."""
    try:
        info = os.fstat(2)
        if not stat.S_ISREG(info.st_mode) or info.st_size <= max_bytes:
            return False
        path = Path(os.readlink("/proc/self/fd/2"))
    except OSError:
        return False
    if not path.is_absolute() or path.name.endswith(" (deleted)"):
        return False
    with contextlib.suppress(FileNotFoundError):
        path.with_name(f"{path.name}.{keep}").unlink()
    for n in range(keep - 1, 0, -1):
        with contextlib.suppress(FileNotFoundError):
            path.with_name(f"{path.name}.{n}").rename(path.with_name(f"{path.name}.{n + 1}"))
    path.rename(path.with_name(f"{path.name}.1"))
    fresh = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        for fd in (1, 2):
            if stat.S_ISREG(os.fstat(fd).st_mode):
                os.dup2(fresh, fd)
    finally:
        os.close(fresh)
    logging.getLogger("paddockd").info("log rotated: the earlier lines are in %s.1", path)
    return True
