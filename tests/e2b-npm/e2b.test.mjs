// The official `e2b` npm SDK, unmodified, against a live paddockd and real boxes (docs/e2b.md).
// Run by tests/integration/test_e2b_npm.py, which gives the test server's URLs and a token
// in E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY, and E2B_DOMAIN=paddock.invalid, so no call
// can leave for E2B's cloud (.invalid never resolves).
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { randomUUID } from "node:crypto";
import { request } from "node:http";

import {
  AuthenticationError,
  CommandExitError,
  NotFoundError,
  Sandbox,
  Secret,
  Volume,
} from "e2b";

for (const name of ["E2B_API_URL", "E2B_SANDBOX_URL", "E2B_API_KEY"]) {
  // Fail, never skip: without these the SDK would aim at e2b.app.
  assert.ok(process.env[name], `${name} is not set: run through test_e2b_npm.py`);
}
assert.equal(process.env.E2B_DOMAIN, "paddock.invalid");

const run = randomUUID().slice(0, 8);
let sbx;

before(async () => {
  sbx = await Sandbox.create({ metadata: { suite: "npm", run }, envs: { GREETING: "hi" } });
});

after(async () => {
  await sbx?.kill();
});

test("create, info and list by metadata", async () => {
  const info = await sbx.getInfo();
  assert.equal(info.sandboxId, sbx.sandboxId);
  assert.deepEqual(info.metadata, { suite: "npm", run });
  assert.equal(info.state, "running");
  const listed = await Sandbox.list({ query: { metadata: { run } } }).nextItems();
  assert.deepEqual(
    listed.map((s) => s.sandboxId),
    [sbx.sandboxId],
  );
  const none = await Sandbox.list({ query: { metadata: { run: "nope" } } }).nextItems();
  assert.deepEqual(none, []);
  assert.equal(await sbx.isRunning(), true);
});

test("commands in the foreground", async () => {
  const r = await sbx.commands.run("echo $GREETING; echo oops >&2; whoami");
  assert.equal(r.stdout, "hi\nabc\n");
  assert.equal(r.stderr, "oops\n");
  assert.equal(r.exitCode, 0);
  await assert.rejects(sbx.commands.run("exit 3"), (err) => {
    assert.ok(err instanceof CommandExitError);
    assert.equal(err.exitCode, 3);
    return true;
  });
  assert.equal((await sbx.commands.run("echo $X", { envs: { X: "y" } })).stdout, "y\n");
  assert.equal((await sbx.commands.run("whoami", { user: "root" })).stdout, "root\n");
  const seen = [];
  await sbx.commands.run("echo a; echo b", { onStdout: (d) => seen.push(d) });
  assert.equal(seen.join(""), "a\nb\n");
});

test("background commands, stdin and kill", async () => {
  const cat = await sbx.commands.run("cat", { background: true, stdin: true });
  await sbx.commands.sendStdin(cat.pid, "hello\n");
  assert.ok((await sbx.commands.list()).some((p) => p.pid === cat.pid));
  await sbx.commands.closeStdin(cat.pid);
  assert.equal((await cat.wait()).stdout, "hello\n");

  const sleeper = await sbx.commands.run("sleep 600", { background: true });
  assert.equal(await sbx.commands.kill(sleeper.pid), true);
  await assert.rejects(sleeper.wait(), CommandExitError);
  assert.ok(!(await sbx.commands.list()).some((p) => p.pid === sleeper.pid));
});

test("files: write, read and list", async () => {
  await sbx.files.write("notes/a.txt", "hello");
  assert.equal(await sbx.files.read("notes/a.txt"), "hello");
  const blob = Uint8Array.from({ length: 25600 }, (_, i) => i % 256);
  await sbx.files.write("/tmp/blob.bin", blob.buffer);
  assert.deepEqual(await sbx.files.read("/tmp/blob.bin", { format: "bytes" }), blob);
  await sbx.files.write([
    { path: "many/f0.txt", data: "n0" },
    { path: "many/f1.txt", data: "n1" },
  ]);
  const names = (await sbx.files.list("many")).map((e) => e.name).sort();
  assert.deepEqual(names, ["f0.txt", "f1.txt"]);
  const [entry] = await sbx.files.list("notes");
  assert.equal(entry.path, "/config/notes/a.txt");
  assert.equal(entry.type, "file");
  assert.equal(entry.size, 5);
  await assert.rejects(sbx.files.read("nope.txt"), NotFoundError);
});

test("watching a folder streams its events", async () => {
  await sbx.files.makeDir("watched");
  const events = [];
  const handle = await sbx.files.watchDir("watched", (ev) => events.push(ev), { recursive: true });
  try {
    await sbx.files.write("watched/new.txt", "x");
    await sbx.commands.run("mkdir -p ~/watched/sub && echo y > ~/watched/sub/deep.txt");
    await sbx.commands.run("mv ~/watched/new.txt ~/watched/renamed.txt && rm ~/watched/renamed.txt");
    const want = [
      ["new.txt", "create"],
      ["new.txt", "write"],
      ["sub/deep.txt", "create"],
      ["new.txt", "rename"],
      ["renamed.txt", "create"],
      ["renamed.txt", "remove"],
    ];
    const deadline = Date.now() + 10000;
    const seen = () => want.every(([n, t]) => events.some((e) => e.name === n && e.type === t));
    while (!seen() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    assert.ok(seen(), JSON.stringify(events));
    assert.equal(await watchersInBox(), 1);
  } finally {
    await handle.stop();
  }
  // The stream closed, its watcher in the box ends.
  const deadline = Date.now() + 10000;
  while ((await watchersInBox()) !== 0 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 200));
  }
  assert.equal(await watchersInBox(), 0);
});

async function watchersInBox() {
  // The in-box watcher runs `python3 -c <its text>`, which names inotify_init1.
  const r = await sbx.commands.run("pgrep -c -f 'inotify_init[1]' || true", { user: "root" });
  return Number(r.stdout.trim());
}

// A GET to this server's address, named as `host` (fetch cannot set Host).
function getAs(host) {
  const api = new URL(process.env.E2B_API_URL);
  return new Promise((resolve, reject) => {
    const req = request(
      { hostname: api.hostname, port: api.port, path: "/", headers: { host } },
      (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode));
      },
    );
    req.on("error", reject);
    req.end();
  });
}

test("a sandbox's port through getHost", async () => {
  const host = sbx.getHost(8000);
  const apiPort = new URL(process.env.E2B_API_URL).port;
  assert.equal(host, `8000-${sbx.sandboxId}.localhost:${apiPort}`);
  await sbx.commands.run("python3 -m http.server 8000 -d /tmp", { background: true });
  const deadline = Date.now() + 30_000;
  let status = await getAs(host);
  while (status !== 200 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 300));
    status = await getAs(host);
  }
  assert.equal(status, 200);
});

test("pause and resume keep the files", async () => {
  const box = await Sandbox.create({ timeoutMs: 120000 });
  try {
    await box.files.write("keep.txt", "kept");
    await box.pause();
    assert.equal((await box.getInfo()).state, "paused");
    const again = await Sandbox.connect(box.sandboxId);
    assert.equal(await again.files.read("keep.txt"), "kept");
    assert.equal((await again.getInfo()).state, "running");
  } finally {
    await box.kill();
  }
  await assert.rejects(Sandbox.connect(box.sandboxId), NotFoundError);
});

test("secrets are kept, never shown, and destroyed", async () => {
  const name = `npm-${run}`;
  const made = await Secret.create(name, "npm-secret-value", { metadata: { a: "b" } });
  try {
    assert.equal(made.version, 1);
    assert.equal((await Secret.update(name, "next-value")).version, 2);
    assert.deepEqual((await Secret.getInfo(made.secretId)).metadata, { a: "b" });
  } finally {
    await Secret.destroy(name);
  }
  await assert.rejects(Secret.getInfo(name));
});

test("a volume's files through its content API", async () => {
  const vol = await Volume.create(`npmvol-${run}`);
  try {
    await vol.writeFile("/d/f.txt", "from npm", { force: true });
    assert.equal(await vol.readFile("/d/f.txt"), "from npm");
    assert.deepEqual((await vol.list("/d")).map((e) => e.name), ["f.txt"]);
    await vol.remove("/d");
    assert.equal(await vol.exists("/d"), false);
  } finally {
    await Volume.destroy(vol.volumeId);
  }
});

test("a key that is not a valid token is refused", async () => {
  await assert.rejects(
    Sandbox.list({ apiKey: "pdk_wrong" }).nextItems(),
    AuthenticationError,
  );
  await assert.rejects(Sandbox.create({ apiKey: "pdk_wrong" }), AuthenticationError);
  await assert.rejects(
    Sandbox.connect(sbx.sandboxId, { apiKey: "e2b_" + "0".repeat(40) }),
    AuthenticationError,
  );
});
