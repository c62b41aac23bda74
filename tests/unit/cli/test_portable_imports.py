"""The client installs on a laptop (`pip install` of the client alone): no server
dependency and no Unix-only terminal module may be needed to import any CLI or SDK
module; those load only on the interactive-terminal path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[3] / "src"

PROBE = """
import importlib, pkgutil, sys

class Refuse:
    blocked = {"termios", "fcntl", "tty", "pty", "paddockd", "fastapi", "docker", "sqlalchemy"}
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.blocked:
            raise ImportError(f"{name} is not available here")
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


def test_every_client_module_imports_without_unix_terminal_modules_or_the_server() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(SRC)},
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) > 20
