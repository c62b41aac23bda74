"""install.sh refuses bad options before it changes anything, and `--uninstall` asks
first: without a terminal it needs --yes, and --dry-run names every step and does none.
(A real uninstall would remove the installation this suite runs on.)"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
INSTALL = ROOT / "install.sh"


def install(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(INSTALL), *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )


def fingerprint() -> str:
    """What an uninstall would change: the programs, units, settings, engine files, rules."""
    seen = []
    for path in (
        "/usr/local/bin/paddock",
        "/usr/local/bin/paddockd",
        "/opt/paddock/bin/paddock-supervise",
        "/etc/paddock/paddockd.toml",
        "/var/lib/paddock/engine.xfs",
    ):
        p = Path(path)
        if not p.exists():
            seen.append(f"{path}: missing")
            continue
        # The engine's filesystem image changes with every write through its loop device.
        seen.append(f"{path}: {p.stat().st_size if p.suffix == '.xfs' else p.stat().st_mtime}")
    # Only Paddock's own table: the engine adds and drops its tables as networks come and go.
    tables = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True).stdout
    seen.append(str("table inet paddock" in tables.splitlines()))
    return hashlib.sha256("\n".join(seen).encode()).hexdigest()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--hostname", "https://paddock.example.com"], "without a scheme"),
        (["--hostname", "paddock.example.com/x"], "without a port or path"),
        (["--hostname", "10.1.2.3"], "is an IP address"),
        (["--hostname", "not_a host"], "is not a hostname"),
        (["--hostname", "paddock.example.com", "--tls", "selfsigned"], "--tls is acme or internal"),
        (["--purge"], "go with --uninstall"),
        (["--uninstall", "--hostname", "paddock.example.com"], "takes no --hostname"),
        (["--frobnicate"], "unknown option"),
    ],
)
def test_bad_options_are_refused_before_anything_changes(args: list[str], message: str) -> None:
    before = fingerprint()
    done = install(*args)
    assert done.returncode != 0 and message in done.stderr, done.stderr
    assert fingerprint() == before


def test_uninstall_without_a_terminal_needs_yes_and_dry_run_changes_nothing() -> None:
    before = fingerprint()
    refused = install("--uninstall")
    assert refused.returncode != 0 and "add --yes to confirm" in refused.stderr
    assert "every box, snapshot and drive" in refused.stdout  # the plan is shown first
    dry = install("--uninstall", "--purge", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    for step in (
        "rm -rf --one-file-system -- /var/lib/paddock/engine",
        "rm -rf --one-file-system -- /opt/paddock",
        "nft delete table inet paddock",
        "rm -rf --one-file-system -- /var/lib/paddock\n",
        "userdel paddock",
    ):
        assert step in dry.stdout, (step, dry.stdout)
    assert "nothing was changed" in dry.stdout
    assert fingerprint() == before


UNITS = sorted((ROOT / "deploy" / "systemd").glob("*.service"))


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_systemd_units_are_valid_start_at_boot_and_restart(tmp_path: Path) -> None:
    """This machine has no running systemd; its unit checker still reads every setting and
    refuses what systemd would (unknown keys, bad values, missing programs)."""
    assert {u.name for u in UNITS} == {
        "paddock-caddy.service",
        "paddock-engine.service",
        "paddockd.service",
    }
    for unit in UNITS:
        shutil.copy(unit, tmp_path / unit.name)
        text = unit.read_text()
        assert "WantedBy=multi-user.target" in text and "\nRestart=" in text, unit.name
    checked = subprocess.run(
        ["systemd-analyze", "verify", *(str(tmp_path / u.name) for u in UNITS)],
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0 and checked.stderr == "", checked.stderr
    # install.sh enables all three (Caddy's only with --hostname).
    script = INSTALL.read_text()
    assert "enable --now lxcfs.service paddock-engine.service paddockd.service" in script
    assert "systemctl enable paddock-caddy.service" in script
