"""/v1/tokens: the caller's API tokens (the owner: everyone's); /v1/members: the owner's
invitations and members."""

from __future__ import annotations

from datetime import datetime, timezone

from fastapi import APIRouter, Depends

from paddock.wire.models import (
    Invite,
    InviteCreate,
    Member,
    MemberLimits,
    MemberList,
    MemberRemoved,
    NewToken,
    TokenCreate,
    TokenInfo,
    TokenList,
)

from ...domain.accounts import Limits
from ...domain.accounts import TokenInfo as StoredToken
from ...services.members import Member as Stored
from ..deps import Caller, Owner, Svc, owner

router = APIRouter(tags=["accounts"])
# Owner-only: a refusal here (403) concerns no one's resource, so it reveals nothing.
admin = APIRouter(prefix="/members", tags=["accounts"], dependencies=[Depends(owner)])


def _time(t: float | None) -> datetime | None:
    return datetime.fromtimestamp(t, timezone.utc) if t is not None else None


def _token(t: StoredToken, names: dict[str, str]) -> TokenInfo:
    return TokenInfo(
        id=t.id,
        name=t.name,
        created_at=datetime.fromtimestamp(t.created_at, timezone.utc),
        last_used_at=_time(t.last_used_at),
        user=names.get(t.user_id, t.user_id) if t.user_id else None,
        expires_at=_time(t.expires_at),
        scope="metrics" if t.scope == "metrics" else None,
    )


async def _names(svc: Svc) -> dict[str, str]:
    return {m.user.id: m.user.username for m in await svc.members.listed()}


@router.get("/tokens", response_model=TokenList, summary="Your API tokens (the owner: all)")
async def list_tokens(svc: Svc, caller: Caller) -> TokenList:
    names = await _names(svc) if caller.is_owner else {caller.id: caller.username}
    return TokenList(tokens=[_token(t, names) for t in await svc.user_tokens.listed(caller)])


@router.post(
    "/tokens", status_code=201, response_model=NewToken, summary="Make an API token of yours"
)
async def create_token(body: TokenCreate, svc: Svc, caller: Caller) -> NewToken:
    token, info = await svc.user_tokens.create(caller, body.name, body.expires_in, body.scope)
    created = datetime.fromtimestamp(info.created_at, timezone.utc)
    return NewToken(
        id=info.id,
        name=info.name,
        token=token,
        created_at=created,
        expires_at=_time(info.expires_at),
        scope=body.scope,
    )


@router.delete("/tokens/{token_id}", status_code=204, summary="Revoke a token (at once)")
async def delete_token(token_id: str, svc: Svc, caller: Caller) -> None:
    await svc.user_tokens.revoke(caller, token_id)


@admin.post(
    "/invites", status_code=201, response_model=Invite, summary="A one-time invitation link"
)
async def invite(body: InviteCreate, svc: Svc) -> Invite:
    url, role, expires = await svc.members.invite(body.role)
    return Invite(
        url=url, role=role.value, expires_at=datetime.fromtimestamp(expires, timezone.utc)
    )


def _member(m: Stored) -> Member:
    return Member(
        username=m.user.username,
        role=m.user.role.value,
        created_at=datetime.fromtimestamp(m.joined, timezone.utc),
        boxes=m.boxes,
        limits=MemberLimits(m.limits.max_boxes, m.limits.max_cpus, m.limits.max_memory_mb),
    )


@admin.get("", response_model=MemberList, summary="Everyone with an account")
async def list_members(svc: Svc) -> MemberList:
    return MemberList(members=[_member(m) for m in await svc.members.listed()])


@admin.put(
    "/{username}/limits",
    response_model=Member,
    summary="Set a member's limits (each null: none); running boxes are not stopped",
)
async def set_member_limits(username: str, body: MemberLimits, svc: Svc) -> Member:
    limits = Limits(body.max_boxes, body.max_cpus, body.max_memory_mb)
    return _member(await svc.members.set_limits(username, limits))


@admin.delete(
    "/{username}",
    response_model=MemberRemoved,
    summary="Remove a member: sessions end, tokens are revoked, boxes stop (and are kept)",
)
async def remove_member(username: str, svc: Svc, caller: Owner) -> MemberRemoved:
    done = await svc.members.remove(caller, username)
    return MemberRemoved(
        username=done.user.username, tokens_revoked=done.tokens, boxes_stopped=done.stopped
    )
