"""Schemathesis hooks for the contract test: a tar upload and a box import are sent as raw
bytes (mostly not a tar or a box file at all: the server must answer that with a 400,
never a 500)."""

from __future__ import annotations

import schemathesis
from hypothesis import strategies as st

for media in ("application/x-tar", "application/vnd.paddock.box+zstd"):
    schemathesis.openapi.media_type(media, st.binary(max_size=4096))
