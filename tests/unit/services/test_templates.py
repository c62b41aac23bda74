"""Templates on fakes: a Dockerfile read into steps run in a build box (commands, files from
the context where COPY puts them, ENV/USER/WORKDIR/CMD kept for the boxes made from it),
the build box gone after, bad Dockerfiles refused with their line, boxes made from a
template with its defaults, and templates kept to their owners."""

from __future__ import annotations

import asyncio
import io
import tarfile
import time
from collections.abc import AsyncIterator

import pytest

from paddockd.domain.accounts import User
from paddockd.domain.dockerfile import plan
from paddockd.domain.errors import InvalidRequest, NotFound
from paddockd.domain.templates import Defaults
from paddockd.runtime.base import Placement
from paddockd.services.templates import BuildOptions, Given

from ..conftest import People, World

pytestmark = pytest.mark.anyio

DOCKERFILE = """\
FROM paddock-box
ARG WHO=world
ENV GREETING="hello $WHO" TOOLS=/opt/tools
COPY --chown=abc:abc notes/ /config/notes/
COPY tool.sh $TOOLS/
WORKDIR /config/app
RUN echo "$GREETING" > greeting.txt
USER abc
EXPOSE 8080
CMD ["python3", "-m", "http.server", "8080"]
"""


@pytest.fixture(autouse=True)
def copies(world: World) -> None:
    world.runtime.copies = True  # templates are disk copies (reflinks on a real engine)


def context(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


async def body(data: bytes) -> AsyncIterator[bytes]:
    yield data


async def built(world: World, name: str, files: dict[str, bytes], **kw: object) -> None:
    templates = world.services.templates
    await templates.build(name, body(context(files)), BuildOptions(**kw), Given())  # type: ignore[arg-type]
    await ended(world, name)


async def ended(world: World, name: str, caller: User | None = None) -> None:
    """Until the template's build has ended (by a deadline, not a count of sleeps: the
    unit tests run beside the integration tests, on a loaded machine)."""
    deadline = time.monotonic() + 30
    while (await world.services.templates.find(name, caller)).status == "building":
        assert time.monotonic() < deadline, f"the build of {name} did not end"
        await asyncio.sleep(0.01)


async def test_a_dockerfile_runs_in_a_build_box_and_gives_its_boxes_what_it_set(
    world: World,
) -> None:
    files = {"Dockerfile": DOCKERFILE.encode(), "notes/a.txt": b"A", "tool.sh": b"echo t"}
    await built(world, "web", files, build_args=(("WHO", "paddock"),))
    t = await world.services.templates.find("web")
    assert t.status == "ready", t.message
    assert dict(t.env) == {"GREETING": "hello paddock", "TOOLS": "/opt/tools"}
    assert (t.user, t.workdir) == ("abc", "/config/app")
    assert t.start_cmd == "'python3' '-m' 'http.server' '8080'"
    # Each step ran in the build box as the Dockerfile said, and the box is gone.
    run = next(s for s in world.runtime.execs if "greeting.txt" in " ".join(s.cmd))
    assert run.user == "root" and run.workdir == "/config/app"
    assert run.env["GREETING"] == "hello paddock" and run.env["WHO"] == "paddock"
    assert [b.name for b in await world.boxes.listed()] == []
    log = [e async for e in world.services.templates.follow("web", live=False)]
    steps = [str(e["data"]) for e in log if e.get("stream") == "step"]
    assert steps[0].startswith("step 1/4: COPY --chown=abc:abc notes/")
    end = {"seq": log[-1]["seq"], "at": log[-1]["at"], "status": "ready"}
    assert log[-1] == {**end, "message": "template web is ready"}
    # A box from it: its files are a copy of the template's disk, its commands get the
    # environment, user and folder the Dockerfile set.
    box = await world.boxes.create("site", None, None, None, template="web")
    assert box.template == t.id and world.runtime.saved  # made from a copy
    await world.boxes.run("site", ["env"])
    spec = world.runtime.execs[-1]
    assert spec.env["GREETING"] == "hello paddock"
    assert (spec.user, spec.workdir) == ("abc", "/config/app")


async def test_copy_puts_files_where_dockers_rules_say(world: World) -> None:
    files = {
        "Dockerfile": b"FROM paddock-box\nCOPY app /srv/app\nCOPY one.txt /etc/renamed\n"
        b"COPY *.cfg /etc/cfgs/\n",
        "app/main.py": b"print(1)",
        "app/lib/x.py": b"x",
        "one.txt": b"1",
        "a.cfg": b"a",
        "b.cfg": b"b",
    }
    tars: list[bytes] = []
    put = world.runtime.put_archive

    async def recorded(
        cid: str,
        path: str,
        owner: tuple[int, int],
        chunks: AsyncIterator[bytes],
        place: Placement | None = None,
    ) -> str:
        data = b"".join([c async for c in chunks])
        tars.append(data)
        return await put(cid, path, owner, body(data), place)

    world.runtime.put_archive = recorded  # type: ignore[method-assign]
    await built(world, "copies", files)
    assert (await world.services.templates.find("copies")).status == "ready"
    pushed: dict[str, tuple[int, int]] = {}
    for data in tars:
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            pushed.update({"/" + m.name: (m.uid, m.gid) for m in tar})
    for path in ("/srv/app/main.py", "/srv/app/lib/x.py", "/etc/renamed", "/etc/cfgs/a.cfg"):
        assert pushed.get(path) == (0, 0), (path, sorted(pushed))
    assert "/etc/cfgs/b.cfg" in pushed and "/srv/app/app/main.py" not in pushed


@pytest.mark.parametrize(
    ("dockerfile", "said"),
    [
        ("RUN true\n", "before FROM"),
        ("FROM ubuntu:24.04\n", "paddock-box or on a template"),
        ("FROM paddock-box\nFROM paddock-box\n", "a template has one stage"),
        ('FROM paddock-box\nENTRYPOINT ["x"]\n', "line 2: ENTRYPOINT is not supported"),
        ("FROM paddock-box\nADD https://example.com/x /x\n", "from a URL"),
        ("FROM paddock-box\nCOPY ../secret /x\n", "paths inside the build's context"),
        ("FROM paddock-box\nRUN --mount=type=cache,target=/r true\n", "RUN takes no options"),
        ("FROM paddock-box\nCOPY nothing.txt /x\n", "no such file in the context"),
        ("FROM paddock-box\nRUN <<EOF\necho\nEOF\n", "heredoc"),
    ],
)
async def test_what_a_template_cannot_take_is_refused_with_its_line(
    world: World, dockerfile: str, said: str
) -> None:
    files = {"Dockerfile": dockerfile.encode()}
    try:
        await built(world, "bad", files)
    except InvalidRequest as exc:
        assert said in exc.message
        return
    t = await world.services.templates.find("bad")
    assert t.status == "failed" and said in (t.message or ""), t.message


async def test_a_failing_step_fails_the_build_and_leaves_no_box(world: World) -> None:
    files = {"Dockerfile": b'FROM paddock-box\nRUN ["fail"]\n'}  # the fake exits 3 for it
    await built(world, "broken", files)
    t = await world.services.templates.find("broken")
    assert t.status == "failed" and "line 2: the command exited with 3" in (t.message or "")
    assert await world.boxes.listed() == []


async def test_templates_are_their_owners_and_shared_ones_everyones(
    world: World, people: People
) -> None:
    templates = world.services.templates
    files = {"Dockerfile": b"FROM paddock-box\nRUN true\n"}
    await templates.build("bobs", body(context(files)), BuildOptions(), Given(), people.bob)
    await templates.build("adas", body(context(files)), BuildOptions(), Given(), people.owner)
    await ended(world, "bobs", people.bob)
    await ended(world, "adas", people.owner)
    with pytest.raises(NotFound):
        await templates.find("bobs", people.carol)
    with pytest.raises(NotFound):
        await world.boxes.create("x", None, None, None, template="adas", caller=people.bob)
    await templates.share("adas", True, people.owner)
    box = await world.boxes.create("x", None, None, None, template="adas", caller=people.bob)
    assert box.owner_id == people.bob.id
    with pytest.raises(NotFound):
        await templates.delete("adas", people.bob)  # shared to use, not to delete


async def test_a_box_template_carries_its_defaults(world: World) -> None:
    await world.boxes.create("prepared", None, None, None)
    made = await world.services.templates.from_box(
        "prep",
        "prepared",
        None,
        Given((("MODE", "ci"),), "sleep 1", Defaults(type="small", ttl=600, network="deny-all")),
    )
    assert made.status == "ready" and made.disk
    box = await world.boxes.create("fromit", None, None, None, template="prep")
    assert (box.type, box.ttl, box.network.mode) == ("small", 600, "deny-all")
    assert dict(box.env) == {"MODE": "ci"} and box.start_cmd == "sleep 1"


def test_plan_reads_env_with_the_base_images_path() -> None:
    steps = plan("FROM paddock-box\nENV PATH=/opt/x/bin:$PATH\n", base_env={"PATH": "/usr/bin"})
    assert dict(steps.final.env) == {"PATH": "/opt/x/bin:/usr/bin"}


def test_a_new_workdir_is_made_by_root_from_a_folder_that_exists() -> None:
    steps = plan("FROM paddock-box\nUSER abc\nWORKDIR /opt/new\nRUN pwd\n")
    mkdir, run = steps.steps
    assert mkdir.argv == ("mkdir", "-p", "/opt/new")
    assert (mkdir.state.user, mkdir.state.workdir) == ("root", "/")
    assert (run.state.user, run.state.workdir) == ("abc", "/opt/new")


async def test_from_builds_on_a_template_whatever_from_says_and_a_rebuild_keeps_it(
    world: World,
) -> None:
    await built(world, "first", {"Dockerfile": b"FROM paddock-box\nENV FIRST=1\n"})
    await built(world, "second", {"Dockerfile": b"FROM paddock-box\nRUN true\n"}, base="first")
    templates = world.services.templates
    first, second = await templates.find("first"), await templates.find("second")
    assert second.base == first.id and dict(second.env) == {"FIRST": "1"}
    await templates.rebuild("second")
    await ended(world, "second")
    again = await templates.find("second")
    assert again.status == "ready" and again.base == first.id
    with pytest.raises(InvalidRequest, match="FROM nope"):
        await templates.build("third", body(context({"Dockerfile": b"FROM paddock-box\n"})),
                              BuildOptions(base="nope"), Given())  # fmt: skip


async def test_a_user_has_at_most_so_many_templates(
    world: World, people: People, monkeypatch: pytest.MonkeyPatch
) -> None:
    from paddockd.services import templates as module

    monkeypatch.setattr(module, "MAX_TEMPLATES", 2)
    svc = world.services.templates
    await world.boxes.create("bobs", None, None, None, caller=people.bob)
    for name in ("one", "two"):
        await svc.from_box(name, "bobs", None, Given(), people.bob)
    with pytest.raises(InvalidRequest, match="2 templates, the most"):
        await svc.from_box("three", "bobs", None, Given(), people.bob)
    ctx = body(context({"Dockerfile": b"FROM paddock-box\n"}))
    with pytest.raises(InvalidRequest, match="2 templates, the most"):
        await svc.build("three", ctx, BuildOptions(), Given(), people.bob)
    # Another user's count is theirs; building one of yours again replaces it.
    await world.boxes.create("carols", None, None, None, caller=people.carol)
    await svc.from_box("one", "carols", None, Given(), people.carol)
    again = body(context({"Dockerfile": b"FROM paddock-box\n"}))
    await svc.build("two", again, BuildOptions(), Given(), people.bob)
