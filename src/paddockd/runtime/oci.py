"""The `userns` profile's OCI runtime: runc, plus each box's own identity and cgroup
delegation on `create`.

dockerd calls the wrapper written by `wrapper_script` for every runtime operation; all but
`create` and `delete` go straight to runc. On `create`:
1. the box's cgroup v1 hierarchies are mounted read-write instead of read-only;
2. where the kernel allows (`probe`), the box takes an identity of its own
   (runtime/identity.py): a user namespace made for it, owned by the first uid of its own
   range and mapped onto that range, which runc joins instead of making one on the
   engine's shared range; its root and data binds are idmapped to match
   (runtime/rootmap.py);
3. once runc has made them, the box's cgroup *directories* (and their
   `cgroup.procs`/`tasks`) are handed to the box's mapped root, so Docker in the box can
   make child cgroups. The box's own limit files stay owned by host root: a box cannot
   raise its own memory or CPU limit. This is the delegation LXC and Sysbox do.
On `delete`, once runc has forgotten the container, its root's mount goes and its
identity is free again: that part is the wrapper's own shell (`_DELETE`), which the engine
runs on every stop, too often to pay an interpreter's start.

Stdlib only, and nothing of paddockd's beyond the modules named here: this runs for every
box start, on the engine's clock.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
from pathlib import Path
from typing import Any, NamedTuple

from .identity import RANGE, Identities
from .idmount import Userns, clone_idmapped, mount, unmount
from .rootmap import idmap_box, release

DELEGATED_FILES = ("cgroup.procs", "tasks", "cgroup.clone_children")
# The box's disks' rate cap in MB/s, from its spec's environment (paddockd sets it).
IO_RATE = "PADDOCK_DISK_MBPS"
_IOPS_PER_MB = 20
_LOOP_MAJOR = 7
# runc's options that take a value, before and after its command.
_GLOBAL_VALUES = {"--root", "--log", "--log-format", "--criu", "--rootless"}
_COMMAND_VALUES = {"--bundle", "-b", "--console-socket", "--pid-file", "--preserve-fds"}


_STAGING = Path("/run/paddock/roots")


class Settings(NamedTuple):
    """What paddockd tells the wrapper when it writes it. `identities`: where box
    identities are kept (None: the kernel cannot idmap, every box on the engine's range);
    `data`: folders whose binds hold a box's own data even when read-only (the
    engine's data root), idmapped with its root as every writable bind is."""

    runc: str = "runc"
    identities: Path | None = None
    staging: Path = _STAGING
    data: tuple[Path, ...] = ()

    def args(self) -> list[str]:
        out = ["--runc", self.runc, "--staging", str(self.staging)]
        if self.identities is not None:
            out += ["--identities", str(self.identities)]
        for d in self.data:
            out += ["--data", str(d)]
        return out

    @classmethod
    def parse(cls, argv: list[str]) -> tuple[Settings, list[str]]:
        """The settings before `--`, and runc's arguments after it."""
        if "--" not in argv:
            raise ValueError("no -- before runc's arguments")
        cut = argv.index("--")
        mine, rest = argv[:cut], argv[cut + 1 :]
        values: dict[str, list[str]] = {}
        for flag, value in zip(mine[::2], mine[1::2], strict=True):
            values.setdefault(flag, []).append(value)
        return (
            cls(
                runc=values.get("--runc", ["runc"])[-1],
                identities=Path(values["--identities"][-1]) if "--identities" in values else None,
                staging=Path(values.get("--staging", [str(_STAGING)])[-1]),
                data=tuple(Path(v) for v in values.get("--data", [])),
            ),
            rest,
        )


def wrapper_script(python: str, settings: Settings | None = None) -> str:
    settings = settings or Settings()
    hook = " ".join([*_interpreter(python), *map(_quoted, settings.args())])
    runc = _quoted(settings.runc)
    delete = ""
    if settings.identities is not None:
        delete = _DELETE.format(
            runc=runc, staging=_quoted(str(settings.staging)), ids=_quoted(str(settings.identities))
        )
    return f"""#!/bin/sh
# Paddock's OCI runtime (profile userns): runc, with each box's own identity and cgroup
# delegation on create. Written by paddockd; see paddockd/runtime/oci.py.
cmd=""; skip=""; root=""
for a in "$@"; do
    if [ -n "$skip" ]; then [ "$skip" = root ] && root="$a"; skip=""; continue; fi
    case "$a" in
        --root) skip=root ;;
        --root=*) root="${{a#--root=}}" ;;
        --log|--log-format|--criu|--rootless) skip=1 ;;
        -*) ;;
        *) cmd="$a"; break ;;
    esac
done
for cid in "$@"; do :; done
case "$cid" in ""|.*|*[!A-Za-z0-9_.-]*) cid="" ;; esac
case "$cmd" in
    create) exec {hook} -- "$@" ;;{delete}
esac
exec {runc} "$@"
"""


# A delete, in the shell: an interpreter's start was most of a box's stop (40 ms of
# 150). Work beyond runc's is only for a box that holds an identity (its staging folder
# is there; the engine deletes each container twice), once runc has forgotten it: its
# root's mount goes (rmdir, never a recursive removal: a mount still there stays whole),
# and its identity's slot is freed under the slots' lock (identity.py takes it to claim).
_DELETE = """
    delete)
        [ -n "$cid" ] && [ -d {staging}/"$cid" ] || exec {runc} "$@"
        {runc} "$@"; code=$?
        if [ -z "$root" ] || [ ! -e "$root/$cid/state.json" ]; then
            for entry in {staging}/"$cid"/*; do
                [ -e "$entry" ] || continue
                umount -l "$entry" 2>/dev/null; rmdir "$entry" 2>/dev/null || rm -f "$entry"
            done
            rmdir {staging}/"$cid" 2>/dev/null
            [ -d {ids} ] && {{ flock 9 && for slot in {ids}/[0-9]*; do
                owner=""; [ -f "$slot" ] && read -r owner < "$slot"
                [ "$owner" = "$cid" ] && rm -f "$slot"
            done; }} 9<{ids}
        fi
        exit $code ;;"""


def _interpreter(python: str) -> list[str]:
    """The command line that runs `main`: isolated (no PYTHON* variables, no user site,
    not the working folder on the path) and without `site`, whose start-up is a tenth of
    this program's run; the folder holding paddockd is put on the path by hand."""
    source = str(Path(__file__).resolve().parents[2])
    if _quoted(source) != source:  # a path the shell would need quoted: the plain way
        return [python, "-m", "paddockd.runtime.oci"]
    boot = f"import sys; sys.path.insert(0, {source!r}); from paddockd.runtime.oci import main"
    return [python, "-I", "-S", "-c", f'"{boot}; sys.exit(main(sys.argv[1:]))"']


def _quoted(word: str) -> str:
    return word if word and all(c.isalnum() or c in "/._-=" for c in word) else repr(word)


class Call(NamedTuple):
    """One runc invocation as the shim made it."""

    argv: list[str]
    command: str
    options: dict[str, str]
    root: Path | None
    cid: str

    @classmethod
    def parse(cls, argv: list[str]) -> Call:
        options: dict[str, str] = {}
        command, cid, i = "", "", 0
        while i < len(argv):
            a = argv[i]
            flag, eq, inline = a.partition("=")
            if a.startswith("-"):
                takes = _COMMAND_VALUES if command else _GLOBAL_VALUES
                if eq:
                    options[flag] = inline
                elif a in takes and i + 1 < len(argv):
                    options[a] = argv[i + 1]
                    i += 1
            elif not command:
                command = a
            else:
                cid = a
            i += 1
        root = options.get("--root")
        return cls(argv, command, options, Path(root) if root else None, cid)

    @property
    def bundle(self) -> Path:
        return Path(self.options.get("--bundle") or self.options.get("-b") or ".")


class _RuncFailed(Exception):
    def __init__(self, code: int) -> None:
        self.code = code


def _runc(settings: Settings, call: Call) -> int:
    # Every descriptor is passed on: runc's --preserve-fds hands the shim's extra ones on;
    # every descriptor of this process's own is close-on-exec. A spawn, not `subprocess`:
    # importing that costs a tenth of this program's run, on every box start.
    argv = [settings.runc, *call.argv]
    pid = os.posix_spawnp(argv[0], argv, os.environ)
    while True:
        try:
            return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        except InterruptedError:  # pragma: no cover - PEP 475 retries already
            continue


def create(settings: Settings, call: Call) -> int:
    config = call.bundle / "config.json"
    spec = json.loads(config.read_text())
    _cgroups_writable(spec)
    _throttle_disks(spec)
    linux = spec.setdefault("linux", {})
    canonical = _host_root(linux.get("uidMappings", []))
    if settings.identities is None or canonical is None:
        config.write_text(json.dumps(spec))
        code = _runc(settings, call)
        if code == 0:
            _after(spec, call)
        return code
    ids = Identities(settings.identities, call.root)
    try:
        with ids.take(call.cid) as base, Userns([(0, base, RANGE)], owner=base) as own:
            mapping = [{"containerID": 0, "hostID": base, "size": RANGE}]
            linux["uidMappings"] = mapping
            linux["gidMappings"] = mapping
            linux["namespaces"] = [
                {**ns, "path": own.path} if ns.get("type") == "user" else ns
                for ns in linux.get("namespaces", [])
            ]
            staged = idmap_box(spec, base, canonical, settings.staging / call.cid, settings.data)
            try:
                config.write_text(json.dumps(spec))
                code = _runc(settings, call)
                if code != 0:
                    release(settings.staging / call.cid)
                    raise _RuncFailed(code)
                _after(spec, call, canonical)
            finally:
                staged.detach()
    except _RuncFailed as failed:
        return failed.code
    return 0


def probe() -> str | None:
    """Why boxes cannot have identities of their own on this kernel; None when they can.
    Tries what `create` does, on folders of its own: a user namespace owned by another
    uid, idmapped XFS/ext4 and tmpfs mounts, and an overlay on idmapped layers."""
    import tempfile  # the probe's alone: a box start need not import it

    with tempfile.TemporaryDirectory(prefix="paddock-probe-") as tmp:
        base = Path(tmp)
        made: list[Path] = []
        try:
            with Userns([(0, 0x70000000, RANGE)], owner=0x70000000):
                pass
            for name in ("disk", "mem", "l", "u", "m", "il", "iu"):
                (base / name).mkdir()
            mount("tmpfs", base / "mem", "tmpfs", "size=64k")
            made.append(base / "mem")
            with Userns([(0, 0, 1), (200000, 0x70000000, RANGE)]) as view:
                view.release()
                (base / "mem" / "t").mkdir()
                clone_idmapped(base / "mem", base / "disk", view)  # tmpfs (Linux 6.3)
                made.append(base / "disk")
                for d in ("l", "u/u", "u/w"):
                    (base / d).mkdir(exist_ok=True)
                    os.chown(base / d, 200000, 200000)
                clone_idmapped(base / "l", base / "il", view)
                made.append(base / "il")
                clone_idmapped(base / "u", base / "iu", view)
                made.append(base / "iu")
                mount(
                    "overlay",
                    base / "m",
                    "overlay",
                    f"lowerdir={base}/il,upperdir={base}/iu/u,workdir={base}/iu/w",
                )
                made.append(base / "m")
                if (base / "m").stat().st_uid != 0x70000000:
                    return "an overlay on idmapped layers does not show their owners"
                (base / "m" / "written").mkdir()  # read-only if the work folder failed
        except OSError as exc:
            return str(exc)
        finally:
            for target in reversed(made):
                with contextlib.suppress(OSError):
                    unmount(target, lazy=True)
    return None


def _throttle_disks(spec: dict[str, Any]) -> None:
    """Cap the box's own disks (its layer and volumes, each a loop device of its own) at its
    rate: runc writes the caps into the box's blkio cgroup, which the loop driver charges
    the box's I/O to. The host disk behind them is every box's."""
    rate = next(
        (
            int(e.split("=", 1)[1])
            for e in spec.get("process", {}).get("env", [])
            if e.startswith(IO_RATE + "=")
        ),
        0,
    )
    if rate <= 0:
        return
    paths = [Path(spec["root"]["path"]).parent]
    paths += [Path(m["source"]) for m in spec.get("mounts", []) if m.get("type") == "bind"]
    devices = set()
    for path in paths:
        with contextlib.suppress(OSError):
            dev = os.stat(path).st_dev
            if os.major(dev) == _LOOP_MAJOR:
                devices.add((os.major(dev), os.minor(dev)))
    io = spec.setdefault("linux", {}).setdefault("resources", {}).setdefault("blockIO", {})
    for key, value in (
        ("throttleReadBpsDevice", rate << 20),
        ("throttleWriteBpsDevice", rate << 20),
        ("throttleReadIOPSDevice", rate * _IOPS_PER_MB),
        ("throttleWriteIOPSDevice", rate * _IOPS_PER_MB),
    ):
        io[key] = [
            *io.get(key, []),
            *({"major": a, "minor": b, "rate": value} for a, b in sorted(devices)),
        ]


def _cgroups_writable(spec: dict[str, Any]) -> None:
    for mount_ in spec.get("mounts", []):
        if mount_.get("type") == "cgroup" or mount_.get("destination") == "/sys/fs/cgroup":
            mount_["options"] = ["rw" if o == "ro" else o for o in mount_.get("options", [])]


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


def _after(spec: dict[str, Any], call: Call, canonical: int | None = None) -> None:
    pid_file = call.options.get("--pid-file")
    if pid_file:
        hand_cgroups(spec, Path(pid_file))
        if canonical is not None:
            hand_stdio(spec, Path(pid_file), canonical)


def hand_stdio(spec: dict[str, Any], pid_file: Path, canonical: int) -> None:
    """The engine made the box's stdio pipes for its one remap's root: a box on its own
    range could not open /proc/1/fd/1 (its own log) without them being its own."""
    uid = _host_root(spec.get("linux", {}).get("uidMappings", []))
    if uid is None:
        return
    pid = int(pid_file.read_text().strip())
    for fd in (0, 1, 2):
        link = f"/proc/{pid}/fd/{fd}"
        with contextlib.suppress(OSError):
            info = os.stat(link)
            if stat.S_ISFIFO(info.st_mode) and info.st_uid == canonical:
                os.chown(link, uid, uid)


# All boxes together weigh as a quarter of one host process for the CPU: when boxes keep
# every CPU they may use busy, the engine, paddockd and runc (every other box's exec and
# start) still get the CPU first; among themselves boxes share as their types say.
BOXES_CPU_SHARES = 256


def weigh_boxes(box_cpu_dir: Path) -> None:
    parent = box_cpu_dir.parent / "cpu.shares"
    with contextlib.suppress(OSError):
        if parent.read_text().strip() != str(BOXES_CPU_SHARES):
            parent.write_text(f"{BOXES_CPU_SHARES}\n")


def hand_cgroups(spec: dict[str, Any], pid_file: Path) -> list[Path]:
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
        if (box_dir / "cpu.shares").exists():
            weigh_boxes(box_dir)
        os.chown(box_dir, uid, gid)
        for name in DELEGATED_FILES:
            if (box_dir / name).exists():
                os.chown(box_dir / name, uid, gid)
        handed.append(box_dir)
    return handed


def main(argv: list[str]) -> int:
    if argv == ["probe"]:
        why = probe()
        print(why or "ok")
        return 0 if why is None else 1
    try:
        settings, rest = Settings.parse(argv)
    except ValueError as exc:
        print(f"paddock-runc: {exc}", file=sys.stderr)
        return 2
    call = Call.parse(rest)
    try:
        if call.command == "create":
            return create(settings, call)
        return _runc(settings, call)
    except (OSError, ValueError) as exc:
        # runc's own way of failing: the engine shows this line to whoever started the box.
        print(f"paddock-runc: {call.command} {call.cid[:12]}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
