"""Agent runs: /v1/boxes/{ref}/runs (start, list) and /v1/runs/{id} (show, log, stop)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import datetime, timezone

from fastapi import APIRouter
from fastapi.responses import StreamingResponse

from paddock.wire.models import RunInfo, RunList, RunRequest

from ...domain.runs import Run
from ..deps import Caller, Svc

router = APIRouter(tags=["runs"])


def _time(t: float | None) -> datetime | None:
    return datetime.fromtimestamp(t, timezone.utc) if t is not None else None


def present(run: Run) -> RunInfo:
    return RunInfo(
        id=run.id,
        box=run.box_name,
        agent=run.agent,
        instruction=run.instruction,
        workdir=run.workdir,
        model=run.model,
        status=run.status,
        started_at=datetime.fromtimestamp(run.started_at, timezone.utc),
        ended_at=_time(run.ended_at),
        exit_code=run.exit_code,
    )


@router.post(
    "/boxes/{ref}/runs",
    status_code=201,
    response_model=RunInfo,
    summary="Run a coding agent headless in the box (it goes on if the client leaves)",
)
async def start_run(ref: str, body: RunRequest, svc: Svc, caller: Caller) -> RunInfo:
    if body.wake:
        await svc.boxes.wake(ref, caller)
    run = await svc.runs.start(
        ref, body.agent, body.instruction, body.workdir, body.model, body.json, caller
    )
    return present(run)


@router.get("/boxes/{ref}/runs", response_model=RunList, summary="A box's agent runs")
async def list_runs(ref: str, svc: Svc, caller: Caller) -> RunList:
    return RunList(runs=[present(r) for r in await svc.runs.list(ref, caller)])


@router.get("/runs/{run_id}", response_model=RunInfo, summary="One run")
async def get_run(run_id: str, svc: Svc, caller: Caller) -> RunInfo:
    return present(await svc.runs.get(run_id, caller))


@router.get(
    "/runs/{run_id}/log",
    summary="The run's output as newline-delimited JSON events (with follow, live until it ends)",
    response_class=StreamingResponse,
    responses={200: {"content": {"application/x-ndjson": {}}}},
)
async def run_log(run_id: str, svc: Svc, caller: Caller, follow: bool = True) -> StreamingResponse:
    await svc.runs.get(run_id, caller)  # a 404 before the stream starts

    async def events() -> AsyncIterator[bytes]:
        async for event in svc.runs.follow(run_id, live=follow, caller=caller):
            yield json.dumps(event).encode() + b"\n"

    return StreamingResponse(events(), media_type="application/x-ndjson")


@router.post("/runs/{run_id}/stop", response_model=RunInfo, summary="Stop a run")
async def stop_run(run_id: str, svc: Svc, caller: Caller) -> RunInfo:
    return present(await svc.runs.stop(run_id, caller))
