"""The client installs on a laptop (`pip install` of the client alone): no server
dependency, no Unix-only terminal module and no Windows-only console module may be needed
to import any CLI or SDK module; those load only on the interactive-terminal path, on the
platform that has them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[3] / "src"

PROBE = """
import importlib, pkgutil, sys

class Refuse:  # as a platform without them: ModuleNotFoundError, which stdlib modules expect
    blocked = {"paddockd", "fastapi", "docker", "sqlalchemy"} | set(sys.argv[1].split(","))
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Refuse())
import paddock, paddock.cli
names = ["paddock"] + [
    m.name for pkg in (paddock, paddock.cli)
    for m in pkgutil.iter_modules(pkg.__path__, pkg.__name__ + ".")
]
for name in names:
    importlib.import_module(name)
print(len(names))
"""


UNIX_ONLY = "termios,fcntl,tty,pty"
WINDOWS_ONLY = "msvcrt,winreg,_winapi,ctypes"  # ctypes: only the Windows console loads it


@pytest.mark.parametrize(
    "refused",
    [UNIX_ONLY, WINDOWS_ONLY, f"{UNIX_ONLY},{WINDOWS_ONLY}"],
    ids=["windows", "unix", "neither"],
)
def test_every_client_module_imports_without_platform_terminal_modules_or_the_server(
    refused: str,
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, refused],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(SRC)},
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) > 20


def test_paddockd_in_a_client_only_install_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib.util

    from paddockd import __main__ as server

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "fastapi" else real(name)
    )
    monkeypatch.setattr(sys, "argv", ["paddockd", "serve"])
    with pytest.raises(SystemExit) as ended:
        server.run()
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert "client only (no fastapi)" in err and "paddock[server]" in err and err[-1] == "\n"
