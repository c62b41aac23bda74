// Where the client finds its server, token and `current` box: as the CLI does.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";

import { Client, configPath, DEFAULT_URL, InvalidRequest, loadConfig } from "@paddock/sdk";

const dir = mkdtempSync(join(tmpdir(), "paddock-config-"));
const file = join(dir, "config.json");
after(() => rmSync(dir, { recursive: true, force: true }));

test("the config file's place: PADDOCK_CONFIG, else XDG_CONFIG_HOME, else ~/.config", () => {
  assert.equal(configPath({ PADDOCK_CONFIG: "/x/c.json" }), "/x/c.json");
  assert.equal(configPath({ XDG_CONFIG_HOME: "/xdg" }), "/xdg/paddock/config.json");
  assert.equal(configPath({}), join(homedir(), ".config/paddock/config.json"));
});

test("the environment wins over the file; no file means the defaults", () => {
  writeFileSync(
    file,
    JSON.stringify({ url: "http://file:1", token: "file-token", current: "box1" }),
  );
  assert.deepEqual(loadConfig({ PADDOCK_CONFIG: file }), {
    url: "http://file:1",
    token: "file-token",
    current: "box1",
  });
  assert.deepEqual(
    loadConfig({ PADDOCK_CONFIG: file, PADDOCK_URL: "http://env:2", PADDOCK_TOKEN: "env-token" }),
    {
      url: "http://env:2",
      token: "env-token",
      current: "box1",
    },
  );
  assert.deepEqual(loadConfig({ PADDOCK_CONFIG: join(dir, "missing.json") }), {
    url: DEFAULT_URL,
    token: undefined,
    current: undefined,
  });
  writeFileSync(join(dir, "broken.json"), "{not json");
  assert.equal(loadConfig({ PADDOCK_CONFIG: join(dir, "broken.json") }).url, DEFAULT_URL);
});

test("Client: arguments, else the config; `current` is the CLI's current box", async () => {
  const requests: { path: string; auth: string | undefined }[] = [];
  const server = createServer((req, res) => {
    requests.push({ path: req.url!, auth: req.headers.authorization });
    res.end(JSON.stringify({ id: "1", name: "x" }));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const saved = { ...process.env };
  try {
    delete process.env.PADDOCK_URL;
    delete process.env.PADDOCK_TOKEN;
    process.env.PADDOCK_CONFIG = file;
    writeFileSync(file, JSON.stringify({ url, token: "from-file", current: "my-box" }));
    const c = new Client();
    assert.equal(c.url, url);
    await c.getBox("current");
    await c.getBox("other box");
    c.close();
    const explicit = new Client({ url: `${url}/`, token: "explicit" });
    await explicit.getBox("b");
    explicit.close();
    assert.deepEqual(requests, [
      { path: "/v1/boxes/my-box", auth: "Bearer from-file" },
      { path: "/v1/boxes/other%20box", auth: "Bearer from-file" },
      { path: "/v1/boxes/b", auth: "Bearer explicit" },
    ]);
    writeFileSync(file, JSON.stringify({ url }));
    const none = new Client();
    await assert.rejects(
      none.getBox("current"),
      (e) => e instanceof InvalidRequest && /no current box/.test(e.message),
    );
    await assert.rejects(none.getBox("a/b"), InvalidRequest);
    none.close();
  } finally {
    process.env = saved;
    server.close();
  }
});
