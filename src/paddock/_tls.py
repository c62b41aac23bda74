"""TLS for every way the SDK reaches a server (its HTTP client, WebSocket sessions, the
async client): the system's CAs, or the bundle named by PADDOCK_CA_BUNDLE (a server
behind Caddy's local CA, or a company's TLS proxy)."""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    import ssl

CA_BUNDLE_ENV = "PADDOCK_CA_BUNDLE"


def context() -> ssl.SSLContext:
    import ssl  # only for https: ~10 ms that plain-HTTP commands need not pay

    bundle = os.environ.get(CA_BUNDLE_ENV) or None
    if bundle is not None and not os.path.isfile(bundle):
        raise FileNotFoundError(f"{CA_BUNDLE_ENV} names {bundle}, which is not a file")
    return ssl.create_default_context(cafile=bundle)
