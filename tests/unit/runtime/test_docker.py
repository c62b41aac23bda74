"""The Docker driver's error translation: the engine's refusals of a pushed archive are the
caller's fault (400), not the server's."""

from __future__ import annotations

import docker.errors
import pytest

from paddockd.domain.errors import InvalidRequest, PaddockError
from paddockd.runtime.docker import translate


def engine_error(explanation: str) -> docker.errors.APIError:
    # No response: docker-py reports status None, which an engine 500 becomes here.
    return docker.errors.APIError("500 Server Error", explanation=explanation)


@pytest.mark.parametrize(
    ("why", "message"),
    [
        ("archive/tar: invalid tar header", "not a valid tar archive (archive/tar: invalid"),
        ("unexpected EOF", "not a valid tar archive (unexpected EOF)"),
        (
            'cannot overwrite directory "/config/x" with non-directory "/config"',
            "/config/x in the box is a folder: a file cannot replace it",
        ),
        (
            'cannot overwrite non-directory "/config/f" with directory "/config"',
            "/config/f in the box is a file: a folder cannot replace it",
        ),
    ],
)
def test_an_archive_the_engine_cannot_unpack_is_a_bad_request(why: str, message: str) -> None:
    err = translate(engine_error(f"Error processing tar file(exit status 1): {why}"))
    assert isinstance(err, InvalidRequest) and message in err.message


def test_other_unpack_failures_stay_server_errors() -> None:
    err = translate(
        engine_error("Error processing tar file(exit status 1): write /x: input/output error")
    )
    assert type(err) is PaddockError and "the box engine failed" in err.message


def test_a_full_box_disk_is_said_so_without_the_hosts_paths() -> None:
    layer = "/var/lib/paddock/engine/200000.200000/overlay2/" + "ab" * 32
    err = translate(engine_error(f"open {layer}/merged/proc/meminfo: no space left on device"))
    assert err.code == "invalid_state" and "the box's disk is full" in err.message
    assert "/var/lib/paddock" not in err.message


def test_a_full_engine_disk_is_not_blamed_on_the_box() -> None:
    err = translate(engine_error("write /var/lib/paddock/engine/tmp/x: no space left on device"))
    assert err.code == "invalid_state" and "engine's disk is full" in err.message


def test_a_push_into_a_full_box_is_said_so() -> None:
    err = translate(
        engine_error("Error processing tar file(exit status 1): write /x: no space left on device")
    )
    assert err.code == "invalid_state" and "the box's disk is full" in err.message
