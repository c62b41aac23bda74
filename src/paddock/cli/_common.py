"""What every command shares: the client, the `current` box, and errors."""

from __future__ import annotations

import argparse

from .._config import ClientConfig
from .._exceptions import InvalidRequest

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .. import Client


def client(args: argparse.Namespace) -> Client:
    from .. import Client

    return Client(url=getattr(args, "url", None) or None, token=None)


def box_ref(ref: str) -> str:
    """`current` means the box made or chosen last (`paddock new` / `paddock use`)."""
    if ref != "current":
        return ref
    current = ClientConfig.load().current
    if not current:
        raise InvalidRequest(
            "there is no current box: create one with `paddock new` "
            "or pick one with `paddock use BOX`"
        )
    return current


def set_current(name: str | None) -> None:
    cfg = ClientConfig.load(apply_env=False)
    cfg.current = name
    cfg.save()


def add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")
