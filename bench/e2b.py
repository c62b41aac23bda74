"""The E2B-compatible API's overhead against Paddock's own Python SDK, same server, same run:
create a box and run `true`; write and read back 10 MB (e2b `files.write`/`files.read` vs
`push`/`pull`). Issue #18 asks for at most 1.3x and 1.5x.

    PYTHONPATH=src /opt/paddock/venv/bin/python -m bench.e2b [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tests.harness import Server, free_port

SIZE = 10 << 20


def _median(fn: Callable[[], None], rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    rounds = parser.parse_args().rounds
    work = Path(tempfile.mkdtemp(prefix="paddock-bench-e2b-"))
    srv = Server(work / "srv")
    dead = f"http://127.0.0.1:{free_port()}"
    os.environ.update(
        E2B_API_URL=srv.url + "/e2b",
        E2B_SANDBOX_URL=srv.url + "/e2b/sandbox",
        E2B_DOMAIN="paddock.invalid",
        E2B_API_KEY=srv.token,
        E2B_HTTP_VERSION="1.1",
        HTTPS_PROXY=dead,
        HTTP_PROXY=dead,
        NO_PROXY="127.0.0.1,localhost",
    )
    import e2b

    blob = os.urandom(SIZE)
    local = work / "blob.bin"
    local.write_bytes(blob)
    try:
        with srv.client() as c:

            def native_create() -> None:
                box = c.create_box()
                c.exec(box.id, ["true"])
                c.delete_box(box.id, force=True)

            def e2b_create() -> None:
                sbx = e2b.Sandbox.create()
                sbx.commands.run("true")
                sbx.kill()

            create = (_median(native_create, rounds), _median(e2b_create, rounds))

            box = c.create_box()
            sbx = e2b.Sandbox.connect(box.id)

            def native_files() -> None:
                c.push(box.id, [local], "/tmp/")
                c.pull(box.id, "/tmp/blob.bin", work / "back.bin", force=True)

            def e2b_files() -> None:
                sbx.files.write("/tmp/e/blob.bin", blob)
                assert len(sbx.files.read("/tmp/e/blob.bin", format="bytes")) == SIZE

            files = (_median(native_files, rounds), _median(e2b_files, rounds))
            c.delete_box(box.id, force=True)
    finally:
        srv.close()
    print(f"{'case':<32}{'paddock':>10}{'e2b':>10}{'ratio':>8}{'target':>8}")
    for name, (native, via), target in (
        ("create + run true", create, 1.3),
        ("write + read 10 MB", files, 1.5),
    ):
        print(f"{name:<32}{native:>9.2f}s{via:>9.2f}s{via / native:>8.2f}{target:>8.1f}")


if __name__ == "__main__":
    main()
