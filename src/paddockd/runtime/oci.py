"""The `userns` profile's OCI runtime: runc, plus cgroup delegation on `create`.

dockerd calls the wrapper written by `wrapper_script` for every runtime operation; all but
`create` go straight to runc. On `create` it (1) mounts the box's cgroup v1 hierarchies
read-write instead of read-only, then, once runc has made them, (2) hands the box's cgroup
*directories* (and their `cgroup.procs`/`tasks`) to the box's mapped root, so Docker in
the box can make child cgroups. The box's own limit files stay owned by host root: a box
cannot raise its own memory or CPU limit. This is the delegation LXC and Sysbox do.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
DELEGATED_FILES = ("cgroup.procs", "tasks", "cgroup.clone_children")


def wrapper_script(python: str, runc: str = "runc") -> str:
    return f"""#!/bin/sh
# Paddock's OCI runtime (profile userns): runc, with cgroup delegation on create.
# Written by paddockd; see paddockd/runtime/oci.py.
cmd=""; skip=""
for a in "$@"; do
    if [ -n "$skip" ]; then skip=""; continue; fi
    case "$a" in
        --root|--log|--log-format|--criu) skip=1 ;;
        -*) ;;
        *) cmd="$a"; break ;;
    esac
done
[ "$cmd" = create ] || exec {runc} "$@"
bundle=.; prev=""
for a in "$@"; do
    case "$prev" in --bundle|-b) bundle="$a" ;; esac
    case "$a" in --bundle=*) bundle="${{a#--bundle=}}" ;; esac
    prev="$a"
done
{python} -m paddockd.runtime.oci before "$bundle/config.json" || exit 1
{runc} "$@" || exit $?
exec {python} -m paddockd.runtime.oci after "$bundle/config.json"
"""


def before_create(config: Path) -> None:
    spec = json.loads(config.read_text())
    for mount in spec.get("mounts", []):
        if mount.get("type") == "cgroup" or mount.get("destination") == "/sys/fs/cgroup":
            mount["options"] = ["rw" if o == "ro" else o for o in mount.get("options", [])]
    config.write_text(json.dumps(spec))


def _host_root(mappings: list[dict[str, int]]) -> int | None:
    for m in mappings:
        if m.get("containerID") == 0:
            return int(m["hostID"])
    return None


def after_create(config: Path, cgroup_root: Path = CGROUP_ROOT) -> list[Path]:
    spec = json.loads(config.read_text())
    linux = spec.get("linux", {})
    uid = _host_root(linux.get("uidMappings", []))
    gid = _host_root(linux.get("gidMappings", []))
    path = str(linux.get("cgroupsPath", "")).lstrip("/")
    if uid is None or gid is None or not path or ":" in path:
        return []  # not a user-namespaced box, or a systemd-style path: nothing to hand over
    handed = []
    for hierarchy in sorted(cgroup_root.iterdir()):
        box_dir = hierarchy / path
        if hierarchy.is_symlink() or not box_dir.is_dir():
            continue
        os.chown(box_dir, uid, gid)
        for name in DELEGATED_FILES:
            if (box_dir / name).exists():
                os.chown(box_dir / name, uid, gid)
        handed.append(box_dir)
    return handed


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("before", "after"):
        print("usage: python -m paddockd.runtime.oci before|after CONFIG_JSON", file=sys.stderr)
        return 2
    (before_create if argv[0] == "before" else after_create)(Path(argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
