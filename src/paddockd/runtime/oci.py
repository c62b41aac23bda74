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
bundle=.; pidfile=""; prev=""
for a in "$@"; do
    case "$prev" in --bundle|-b) bundle="$a" ;; --pid-file) pidfile="$a" ;; esac
    case "$a" in
        --bundle=*) bundle="${{a#--bundle=}}" ;;
        --pid-file=*) pidfile="${{a#--pid-file=}}" ;;
    esac
    prev="$a"
done
{python} -m paddockd.runtime.oci before "$bundle/config.json" || exit 1
{runc} "$@" || exit $?
exec {python} -m paddockd.runtime.oci after "$bundle/config.json" "$pidfile"
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


def cgroup_mounts(mountinfo: str) -> list[tuple[set[str], str, str]]:
    """(controllers, root within the hierarchy, mount point) of each cgroup v1 mount."""
    mounts = []
    for line in mountinfo.splitlines():
        fields = line.split()
        if " - cgroup " not in line or len(fields) < 10:
            continue
        root, point = fields[3], fields[4]
        options = line.split(" - cgroup ", 1)[1].split()[-1].split(",")
        mounts.append(({o for o in options if o not in ("rw", "ro")}, root, point))
    return mounts


def box_cgroup_dirs(proc_cgroup: str, mounts: list[tuple[set[str], str, str]]) -> list[Path]:
    """Host directories of a process's cgroups. Its paths are relative to each hierarchy's
    root, which need not be where this host mounted it (the host may itself sit in a
    sub-cgroup), so each is mapped through the mount's root."""
    dirs = []
    for line in proc_cgroup.splitlines():
        _, controllers, path = line.split(":", 2)
        wanted = set(controllers.split(",")) if controllers else set()
        for options, root, point in mounts:
            if (
                wanted
                and wanted <= options
                and (path == root or path.startswith(root.rstrip("/") + "/"))
            ):
                rel = path[len(root.rstrip("/")) :].lstrip("/")
                dirs.append(Path(point) / rel)
                break
    return dirs


def after_create(config: Path, pid_file: Path) -> list[Path]:
    spec = json.loads(config.read_text())
    linux = spec.get("linux", {})
    uid = _host_root(linux.get("uidMappings", []))
    gid = _host_root(linux.get("gidMappings", []))
    if uid is None or gid is None:
        return []  # not a user-namespaced box: nothing to hand over
    pid = int(pid_file.read_text().strip())
    mounts = cgroup_mounts(Path("/proc/self/mountinfo").read_text())
    handed = []
    for box_dir in box_cgroup_dirs(Path(f"/proc/{pid}/cgroup").read_text(), mounts):
        if not box_dir.is_dir() or box_dir in handed:
            continue
        os.chown(box_dir, uid, gid)
        for name in DELEGATED_FILES:
            if (box_dir / name).exists():
                os.chown(box_dir / name, uid, gid)
        handed.append(box_dir)
    return handed


def main(argv: list[str]) -> int:
    if argv[:1] == ["before"] and len(argv) == 2:
        before_create(Path(argv[1]))
    elif argv[:1] == ["after"] and len(argv) == 3:
        after_create(Path(argv[1]), Path(argv[2]))
    else:
        print(
            "usage: python -m paddockd.runtime.oci before CONFIG | after CONFIG PIDFILE",
            file=sys.stderr,
        )
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
