"""An E2B sandbox's ports at `PORT-SANDBOXID.DOMAIN`, as E2B's `get_host(port)` builds
them: Paddock's preview proxy answers that form (api/preview_proxy.py), and for a
sandbox's box it needs no preview made first.

- Public traffic (E2B's default): anyone with the address reaches the port, as on E2B.
- `allowPublicTraffic=False`: only a request carrying the sandbox's traffic token in
  `e2b-traffic-access-token` (the `trafficAccessToken` its create answered), which the
  box's app never sees.
- `autoResume`: a request to a paused sandbox's port resumes it (the proxy answers a
  holding page meanwhile); without it, a paused sandbox's port answers 502, as E2B's.

A preview made with `paddock host` for the same port takes precedence."""

from __future__ import annotations

import hmac

from ...domain.previews import Preview
from ...store.sandboxes import SandboxRepository
from ..boxes import BoxService
from .envd_tokens import EnvdTokens


class SandboxHosts:
    def __init__(self, repo: SandboxRepository, boxes: BoxService, tokens: EnvdTokens) -> None:
        self._repo = repo
        self._boxes = boxes
        self._tokens = tokens

    async def find(self, box_id: str, port: int) -> Preview | None:
        if not 1 <= port <= 65535:
            return None
        extras = await self._repo.find(box_id)
        if extras is None:
            return None  # a box made outside E2B: its ports need a preview
        box = await self._boxes.get(box_id)
        if box is None:
            return None
        return Preview(
            id=f"e2b-{box_id}",
            box_id=box_id,
            port=port,
            public=extras.public_traffic,
            created_at=0.0,
            owner_id=box.owner_id,
            wakes=extras.auto_resume,
        )

    def admits(self, preview: Preview, token: str) -> bool:
        if not preview.id.startswith("e2b-"):
            return False
        expected = self._tokens.traffic(preview.box_id).encode()
        return hmac.compare_digest(token.encode("latin-1", "replace"), expected)
