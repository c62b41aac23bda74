"""The userns seccomp profile: containers-common's base, plus four calls always allowed and
the key calls answered ENOSYS."""

from __future__ import annotations

import json
from pathlib import Path

from paddockd.runtime import seccomp

BASE = {
    "defaultAction": "SCMP_ACT_ERRNO",
    "defaultErrnoRet": 38,
    "syscalls": [
        {"names": ["read", "keyctl"], "action": "SCMP_ACT_ALLOW"},
        {
            "names": ["sethostname", "setns"],
            "action": "SCMP_ACT_ALLOW",
            "includes": {"caps": ["CAP_SYS_ADMIN"]},
        },
        {
            "names": ["sethostname", "setns"],
            "action": "SCMP_ACT_ERRNO",
            "errnoRet": 1,
            "excludes": {"caps": ["CAP_SYS_ADMIN"]},
        },
        {"names": ["chroot"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1},
    ],
}


def test_derive_allows_the_four_calls_unconditionally_and_keeps_the_rest() -> None:
    profile = seccomp.derive(BASE)
    assert profile["defaultErrnoRet"] == 38  # unknown calls: ENOSYS, which runc tolerates
    rules = profile["syscalls"]
    denied = {n for r in rules if r["action"] != "SCMP_ACT_ALLOW" for n in r["names"]}
    assert not denied & set(seccomp.ALWAYS_ALLOWED)
    assert {"names": seccomp.ALWAYS_ALLOWED, "action": "SCMP_ACT_ALLOW", "args": []} in rules
    assert {"names": ["read"], "action": "SCMP_ACT_ALLOW"} in rules


def test_the_key_calls_are_answered_as_a_kernel_without_keys() -> None:
    rules = seccomp.derive(BASE)["syscalls"]
    allowed = {n for r in rules if r["action"] == "SCMP_ACT_ALLOW" for n in r["names"]}
    assert not allowed & {"keyctl", "add_key", "request_key"}
    assert rules[-1] == {
        "names": ["keyctl", "add_key", "request_key"],
        "action": "SCMP_ACT_ERRNO",
        "errnoRet": 38,  # ENOSYS: runc (Docker in the box) goes on without a keyring
        "args": [],
    }


def test_missing_base_means_no_profile(tmp_path: Path) -> None:
    assert seccomp.load(tmp_path / "none.json") is None
    (tmp_path / "b.json").write_text(json.dumps(BASE))
    assert (
        json.loads(seccomp.load(tmp_path / "b.json") or "{}")["defaultAction"] == "SCMP_ACT_ERRNO"
    )
