"""paddockd's log holds no secret. Its own messages name no token or key; what needs a
filter is uvicorn's: it logs every WebSocket's URL with its query string (`"WebSocket
/v1/boxes/…/desktop/ws?token=…" [accepted]`), and a desktop link's token travels there.
(The HTTP access log, which would log the desktop page's `?token=`, is off.)"""

from __future__ import annotations

import logging
import re

# A query parameter whose name says it is a secret, or a bearer credential.
_SECRET = re.compile(
    r"(?i)(?P<keep>[?&;](?:[\w.-]*token|[\w.-]*key|secret|password)=)[^&;\s\"'#]*"
    r"|(?P<bearer>\bbearer\s+)[^\s\"']+"
)
REDACTED = "[redacted]"


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
