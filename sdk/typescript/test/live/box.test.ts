// The SDK against a live paddockd and a real box (run by tests/integration/test_sdk_typescript.py,
// which starts a server of its own and sets PADDOCK_URL / PADDOCK_TOKEN). One box serves every
// test, in order; what a test creates besides it, it deletes.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import {
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
  chmodSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join, sep } from "node:path";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";

import {
  AuthenticationFailed,
  Client,
  Conflict,
  ConnectionFailed,
  type ExecEvent,
  InvalidRequest,
  InvalidState,
  NotFound,
  PaddockError,
} from "@paddock/sdk";

const live = Boolean(process.env.PADDOCK_URL && process.env.PADDOCK_TOKEN);
const id = randomBytes(3).toString("hex");
const BOX = `ts-${id}`;
const FORK = `ts-fork-${id}`;

describe(
  "a live box",
  { skip: !live && "set PADDOCK_URL and PADDOCK_TOKEN to run against a live paddockd" },
  () => {
    let c: Client;
    let tmp: string;

    before(async () => {
      c = new Client();
      tmp = mkdtempSync(join(tmpdir(), "paddock-ts-live-"));
      const box = await c.createBox({ name: BOX, ttl: 900 });
      assert.equal(box.state, "running");
    });

    after(async () => {
      for (const name of [FORK, BOX])
        await c.deleteBox(name, { force: true }).catch(() => undefined);
      c.close();
      rmSync(tmp, { recursive: true, force: true });
    });

    test("server: health, status, box types", async () => {
      assert.equal((await c.health()).status, "ok");
      const status = await c.status();
      assert.equal(status.engine.reachable, true);
      const types = await c.boxTypes();
      assert.ok(types.types.some((t) => t.name === types.default));
      assert.ok((await c.listBoxes()).some((b) => b.name === BOX));
      assert.equal((await c.getBox(BOX)).name, BOX);
    });

    test("exec, waited: exit code, stdout and stderr apart, a non-zero exit", async () => {
      assert.deepEqual(await c.exec(BOX, ["sh", "-c", "echo out; echo err >&2; exit 3"]), {
        exit_code: 3,
        stdout: "out\n",
        stderr: "err\n",
      });
      assert.deepEqual(await c.exec(BOX, "true"), { exit_code: 0, stdout: "", stderr: "" });
      const r = await c.exec(BOX, ["sh", "-c", 'echo "$FOO"; pwd; id -un'], {
        env: { FOO: "bar" },
        workdir: "/tmp",
        user: "root",
      });
      assert.equal(r.stdout, "bar\n/tmp\nroot\n");
    });

    test("exec, streamed: output arrives while the command runs, the exit code last", async () => {
      const start = performance.now();
      const events: [number, ExecEvent][] = [];
      const stream = c.execStream(
        BOX,
        "for i in 1 2 3; do echo $i; sleep 0.3; done; echo done >&2; exit 4",
      );
      for await (const event of stream) events.push([performance.now() - start, event]);
      const text = events.map(([, e]) =>
        e.type === "exit" ? `exit ${e.exitCode}` : `${e.type} ${e.data.toString().trim()}`,
      );
      assert.deepEqual(text, ["stdout 1", "stdout 2", "stdout 3", "stderr done", "exit 4"]);
      assert.equal(stream.exitCode, 4);
      const [firstAt] = events[0]!;
      const [endAt] = events[events.length - 1]!;
      assert.ok(
        endAt - firstAt > 600,
        `the first line came ${firstAt} ms in, the end ${endAt} ms in`,
      );
    });

    test("a command silent for longer than the client's timeout, and a connection left idle", async () => {
      const quick = new Client({ timeout: 1000 });
      try {
        assert.equal((await quick.exec(BOX, "sleep 2; echo late")).stdout, "late\n");
        // Idle past uvicorn's keep-alive timeout (5 s), with the event loop blocked (a long
        // synchronous call in the program) so no timer ran: the POST that follows must not be
        // sent on the connection the server closed meanwhile (a POST is never sent twice).
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5500);
        assert.equal((await quick.exec(BOX, "true")).exit_code, 0);
      } finally {
        quick.close();
      }
    });

    test("push a folder and pull it back identical; .paddockignore; one file", async () => {
      const src = join(tmp, "project");
      mkdirSync(join(src, "sub/deeper"), { recursive: true });
      writeFileSync(join(src, "a.txt"), "hello\n");
      chmodSync(join(src, "a.txt"), 0o755);
      writeFileSync(join(src, "empty"), "");
      writeFileSync(join(src, "sub/bin.dat"), randomBytes(3 * 1024 * 1024 + 7));
      writeFileSync(join(src, "ünïcode.txt"), "ü\n");
      const long = join(src, "l".repeat(80), "m".repeat(80));
      mkdirSync(long, { recursive: true });
      writeFileSync(join(long, "n".repeat(120)), "long\n");
      symlinkSync("../a.txt", join(src, "sub/link"));
      writeFileSync(join(src, ".paddockignore"), "*.log\n/build/\n");
      writeFileSync(join(src, "debug.log"), "left out");
      mkdirSync(join(src, "build"));
      writeFileSync(join(src, "build/out"), "left out");

      let sent = 0;
      const pushed = await c.push(BOX, src, "/config/project", { onProgress: (n) => (sent += n) });
      assert.equal(pushed.path, "/config/project");
      assert.equal(
        sent,
        ["a.txt", "sub/bin.dat", "ünïcode.txt", ".paddockignore"]
          .map((f) => join(src, f))
          .concat(join(long, "n".repeat(120)))
          .reduce((sum, f) => sum + lstatSync(f).size, 0),
      );
      const st = await c.stat(BOX, "/config/project/a.txt");
      assert.equal(st.exists, true);
      const owner = await c.exec(BOX, "stat -c %U:%a /config/project/a.txt; ls /config/project");
      assert.match(owner.stdout, /^abc:755\n/);
      assert.doesNotMatch(owner.stdout, /debug\.log|build/);

      const dest = join(tmp, "back");
      mkdirSync(dest);
      const target = await c.pull(BOX, "/config/project", dest);
      assert.equal(target, join(dest, "project"));
      rmSync(join(src, "debug.log"));
      rmSync(join(src, "build"), { recursive: true });
      assert.deepEqual(tree(target), tree(src));
      await assert.rejects(c.pull(BOX, "/config/project", dest), Conflict);

      // One file: it becomes the destination, or lands in it when that is a folder.
      await c.push(BOX, join(src, "a.txt"), "/config/renamed.txt");
      await c.push(BOX, join(src, "a.txt"), "/config/project/sub");
      const files = await c.exec(BOX, "cat /config/renamed.txt /config/project/sub/a.txt");
      assert.equal(files.stdout, "hello\nhello\n");

      // docker cp's rules, as the Python SDK: a folder into an existing folder lands in it
      // under its name; `SRC/.` is SRC's contents; the same both ways.
      const folder = join(tmp, "tree");
      mkdirSync(folder);
      writeFileSync(join(folder, "one"), "1\n");
      writeFileSync(join(folder, "two"), "2\n");
      const nested = await c.push(BOX, folder, "/config/project");
      assert.equal(nested.path, "/config/project/tree");
      const merged = await c.push(BOX, folder + "/.", "/config/merged");
      assert.equal(merged.path, "/config/merged");
      const seen = await c.exec(BOX, "ls /config/merged /config/project/tree");
      assert.equal(seen.stdout, "/config/merged:\none\ntwo\n\n/config/project/tree:\none\ntwo\n");
      const again = join(tmp, "again");
      mkdirSync(again);
      assert.equal(await c.pull(BOX, "/config/merged", again), join(again, "merged"));
      assert.equal(await c.pull(BOX, "/config/merged/.", again), again);
      assert.deepEqual(readdirSync(again).sort(), ["merged", "one", "two"]);
    });

    test("list a folder; download a file as it is and a folder as a tar without escapes", async () => {
      await c.exec(
        BOX,
        "mkdir -p /config/dl/sub && printf 'one\\n' > /config/dl/sub/f && " +
          "ln -s ../sub/f /config/dl/sub/inside && ln -s /etc/passwd /config/dl/passwd",
      );
      const listing = await c.listFiles(BOX, "/config/dl");
      assert.deepEqual(
        listing.entries.map((e) => [e.name, e.type, e.target ?? null]),
        [
          ["passwd", "symlink", "/etc/passwd"],
          ["sub", "dir", null],
        ],
      );
      await assert.rejects(c.listFiles(BOX, "/config/dl/nope"), NotFound);
      const file = await c.download(BOX, "/config/dl/sub/f", join(tmp, "f"));
      assert.equal(readFileSync(file, "utf8"), "one\n");
      await assert.rejects(c.download(BOX, "/config/dl/sub/f", file), Conflict);
      const tar = await c.download(BOX, "/config/dl", join(tmp, "dl.tar"), { archive: "tar" });
      const names = await c.exec(BOX, "true"); // the box is still fine after a download
      assert.equal(names.exit_code, 0);
      // A tar's member names sit in its 512-byte headers: the link that leads out is not there.
      const data = readFileSync(tar);
      assert.ok(data.includes("dl/sub/inside") && data.includes("dl/sub/f"));
      assert.ok(!data.includes("dl/passwd"));
    });

    test("a hostile pull: the chain b1 -> .., b2 -> b1/.., …, host_etc does not escape", async () => {
      const ups = "../".repeat(tmp.split(sep).length - 1);
      const made = await c.exec(
        BOX,
        "set -e; mkdir -p /config/evil/d0/d1/d2/d3/d4; cd /config/evil/d0/d1/d2/d3/d4; " +
          "ln -s .. b1; for n in 2 3 4 5 6 7; do ln -s b$((n - 1))/.. b$n; done; " +
          `ln -s b7/outside/sentinel host; ln -s b7/${ups}etc host_etc; echo ok > /config/evil/f; ` +
          "mkdir -p /config/fifo; mkfifo /config/fifo/pipe",
        { user: "root" },
      );
      assert.equal(made.exit_code, 0, made.stderr);
      mkdirSync(join(tmp, "outside"));
      writeFileSync(join(tmp, "outside/sentinel"), "untouched");
      const dest = join(tmp, "dest");
      mkdirSync(dest);
      // Kept as links, as the box has them; the pull writes nothing through them.
      await c.pull(BOX, "/config/evil", dest);
      const deep = join(dest, "evil/d0/d1/d2/d3/d4");
      for (const name of ["b6", "b7", "host", "host_etc"]) {
        assert.ok(lstatSync(join(deep, name)).isSymbolicLink(), name);
      }
      assert.equal(readFileSync(join(tmp, "outside/sentinel"), "utf8"), "untouched");
      await assert.rejects(
        c.pull(BOX, "/config/fifo", join(tmp, "dest-fifo")),
        (e) => e instanceof InvalidRequest && /a fifo/.test(e.message),
      );
      assert.equal(lstatSync(join(tmp, "dest-fifo"), { throwIfNoEntry: false }), undefined);
    });

    test("network: set, get, an invalid policy changes nothing, log, suggest", async () => {
      const allow = ["198.18.0.0/15", "example.com"];
      const set = await c.setNetwork(BOX, "allowlist", allow);
      assert.equal(set.mode, "allowlist");
      assert.deepEqual(await c.getNetwork(BOX), set);
      await assert.rejects(c.setNetwork(BOX, "allowlist", ["not an address!"]), InvalidRequest);
      assert.deepEqual(await c.getNetwork(BOX), set);
      await c.exec(BOX, "getent hosts refused.invalid || true");
      let events = await c.networkLog(BOX);
      for (let i = 0; i < 30 && !events.some((e) => e.name.startsWith("refused.invalid")); i++) {
        await sleep(100);
        events = await c.networkLog(BOX);
      }
      const refused = events.find((e) => e.name.startsWith("refused.invalid"));
      assert.equal(refused?.verdict, "refused");
      for await (const event of c.followNetworkLog(BOX, { limit: 1 })) {
        assert.equal(event.time, events[events.length - 1]!.time);
        break; // leaving the loop closes the stream
      }
      const suggestion = await c.suggestNetwork(BOX);
      assert.ok(Array.isArray(suggestion.allow) && suggestion.based_on >= 1);
      await c.setNetwork(BOX, "allow-all");
    });

    test("snapshot, restore, fork", async () => {
      await c.exec(BOX, "echo one > /config/state.txt");
      const extra = await c.snapshotBox(BOX);
      const snap = await c.snapshotBox(BOX, "one");
      assert.equal(snap.label, "one");
      await c.exec(BOX, "echo two > /config/state.txt");
      assert.ok((await c.listSnapshots(BOX)).some((s) => s.label === "one"));
      await c.deleteSnapshot(BOX, extra.id);
      const restored = await c.restoreBox(BOX, "one");
      assert.equal(restored.state, "running");
      assert.equal((await c.exec(BOX, "cat /config/state.txt")).stdout, "one\n");
      const fork = await c.forkBox(BOX, { name: FORK });
      assert.equal(fork.name, FORK);
      await c.exec(BOX, "echo three > /config/state.txt");
      assert.equal((await c.exec(FORK, "cat /config/state.txt")).stdout, "one\n");
      await c.deleteBox(FORK, { force: true });
      const many = await c.forkBoxes(BOX, 2, { namePrefix: FORK });
      assert.deepEqual(
        many.map((b) => b.name),
        [`${FORK}-1`, `${FORK}-2`],
      );
      for (const b of many) {
        assert.equal((await c.exec(b.name, "cat /config/state.txt")).stdout, "three\n");
        await c.deleteBox(b.name, { force: true });
      }
    });

    test("desktop: a PNG screenshot, input, a link, a program on the desktop", async () => {
      const png = await c.screenshot(BOX);
      assert.deepEqual([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
      await c.desktopClick(BOX, 20, 20);
      await c.desktopType(BOX, "hello");
      await c.desktopKey(BOX, "Escape");
      const shown = await c.execDesktop(BOX, ["sh", "-c", "echo $DISPLAY"], { wait: true });
      assert.equal(shown.stdout.trim(), ":1");
      const link = await c.desktopLink(BOX, { view_only: true });
      assert.ok(link.url.includes(`/desktop/`) && link.view_only);
    });

    test("an interactive session: stdin in, output out, a TTY of the asked size", async () => {
      const session = await c.execSession(BOX, ["cat"]);
      session.send("hello over a websocket\n");
      session.closeStdin();
      let out = "";
      for await (const e of session) if (e.type === "stdout") out += e.data.toString();
      assert.equal(out, "hello over a websocket\n");
      assert.equal(session.exitCode, 0);
      const tty = await c.execSession(BOX, ["stty", "size"], { tty: true, cols: 100, rows: 30 });
      let size = "";
      for await (const e of tty) if (e.type === "stdout") size += e.data.toString();
      assert.equal(size.trim(), "30 100");
    });

    test("errors are typed", async () => {
      await assert.rejects(c.getBox("no-such-box"), (e) => {
        assert.ok(e instanceof NotFound && e instanceof PaddockError);
        assert.equal(e.code, "not_found");
        assert.equal(e.status, 404);
        return true;
      });
      await assert.rejects(c.exec("no-such-box", "true"), NotFound);
      await assert.rejects(c.createBox({ name: "Bad Name!" }), InvalidRequest);
      await assert.rejects(c.createBox({ name: "abc123" }), InvalidRequest); // hex alone reads as an id
      await assert.rejects(c.createBox({ name: BOX }), Conflict);
      const wrong = new Client({ url: c.url, token: "wrong" });
      await assert.rejects(wrong.listBoxes(), AuthenticationFailed);
      wrong.close();
      const nobody = new Client({ url: "http://127.0.0.1:1", token: "x" });
      await assert.rejects(nobody.listBoxes(), ConnectionFailed);
      nobody.close();
      await assert.rejects(c.getRun("no-such-run"), NotFound);
    });

    test("drives, credentials, agents, runs", async () => {
      const drive = `tsd-${id}`;
      assert.equal((await c.createDrive(drive)).name, drive);
      assert.ok((await c.listDrives()).some((d) => d.name === drive));
      await c.deleteDrive(drive);
      assert.equal((await c.setCredential("anthropic", `sk-test-${id}`)).configured, true);
      assert.ok(
        (await c.listCredentials()).some((p) => p.provider === "anthropic" && p.configured),
      );
      assert.deepEqual(await c.attachCredential(BOX, "anthropic"), ["anthropic"]);
      assert.deepEqual(await c.boxCredentials(BOX), ["anthropic"]);
      assert.deepEqual(await c.detachCredential(BOX, "anthropic"), []);
      await c.deleteCredential("anthropic");
      assert.ok((await c.listAgents()).length > 0);
      assert.deepEqual(await c.listRuns(BOX), []);
    });

    test("extend, stop (exec is then InvalidState), resume", async () => {
      assert.equal((await c.extendBox(BOX, 1200)).ttl, 1200);
      assert.equal((await c.stopBox(BOX)).state, "stopped");
      await assert.rejects(c.exec(BOX, "true"), InvalidState);
      assert.equal((await c.resumeBox(BOX)).state, "running");
      assert.equal((await c.exec(BOX, "cat /config/state.txt")).stdout, "three\n");
    });

    test("templates: build from a Dockerfile, a box from it", async () => {
      const dir = mkdtempSync(join(tmpdir(), "paddock-tpl-"));
      writeFileSync(join(dir, "hello.txt"), "from the context\n");
      writeFileSync(
        join(dir, "Dockerfile"),
        "FROM paddock-box\nCOPY hello.txt /etc/hello\nENV TPL=ts\n",
      );
      const name = `ts-tpl-${id}`;
      const started = await c.buildTemplate(name, dir, { network: "deny-all" });
      assert.equal(started.status, "building");
      const events = [];
      for await (const event of c.followTemplateBuild(name)) events.push(event);
      const last = events.at(-1);
      assert.ok(last && "status" in last && last.status === "ready", JSON.stringify(events));
      assert.ok((await c.listTemplates()).some((t) => t.name === name && t.status === "ready"));
      const made = await c.createBox({ name: `${name}-box`, template: name });
      try {
        const r = await c.exec(made.name, ["sh", "-c", "cat /etc/hello; echo $TPL"]);
        assert.equal(r.stdout, "from the context\nts\n");
      } finally {
        await c.deleteBox(made.name, { force: true });
        await c.deleteTemplate(name);
        rmSync(dir, { recursive: true });
      }
    });

    test("delete: the box is gone", async () => {
      await c.deleteBox(BOX, { force: true });
      await assert.rejects(c.getBox(BOX), NotFound);
    });
  },
);

/** Every path under `root`: its type, mode, and content or link target. */
function tree(root: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (rel: string) => {
    for (const name of readdirSync(join(root, rel)).sort()) {
      const path = join(root, rel, name);
      const key = rel ? `${rel}/${name}` : name;
      const st = lstatSync(path);
      const mode = (st.mode & 0o777).toString(8);
      if (st.isSymbolicLink()) out[key] = `link -> ${readlinkSync(path)}`;
      else if (st.isDirectory()) {
        out[key] = `dir ${mode}`;
        walk(key);
      } else
        out[key] =
          `file ${mode} ${Math.floor(st.mtimeMs / 1000)} ${readFileSync(path).toString("base64")}`;
    }
  };
  walk("");
  return out;
}
