"""Schemathesis hooks for the contract test: a tar upload is sent as raw bytes (mostly not
a tar at all: the server must answer that with a 400, never a 500)."""

from __future__ import annotations

import schemathesis
from hypothesis import strategies as st

schemathesis.openapi.media_type("application/x-tar", st.binary(max_size=4096))
