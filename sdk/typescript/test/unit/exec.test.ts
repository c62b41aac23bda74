// Streamed exec against a fake server: frames split anywhere, an error frame, a cut stream.
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, test } from "node:test";

import { Client, ConnectionFailed, type ExecEvent, InvalidState } from "@paddock/sdk";

import { encodeFrame, ERROR, EXIT, STDERR, STDOUT } from "../../src/frames.js";

let server: Server;
let client: Client;
let answer: Buffer;
const bodies: unknown[] = [];

before(async () => {
  server = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on("data", (c: Buffer) => parts.push(c));
    req.on("end", async () => {
      bodies.push(JSON.parse(Buffer.concat(parts).toString()));
      res.writeHead(200, { "Content-Type": "application/vnd.paddock.frames" });
      for (const byte of answer) {
        res.write(Buffer.from([byte])); // one byte at a time: frames split everywhere
        await new Promise((r) => setImmediate(r));
      }
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  client = new Client({
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    token: "t",
  });
});
after(() => {
  client.close();
  server.close();
});

const json = (obj: unknown) => Buffer.from(JSON.stringify(obj));

test("events in order, the exit code last; exec() collects them", async () => {
  answer = Buffer.concat([
    encodeFrame(STDOUT, Buffer.from("out1 ")),
    encodeFrame(STDERR, Buffer.from("err")),
    encodeFrame(STDOUT, Buffer.from([0xff, 0x00, 0x41])),
    encodeFrame(EXIT, json({ exit_code: 7 })),
  ]);
  const stream = client.execStream("b", ["printf", "x"], {
    env: { A: "1" },
    workdir: "/tmp",
    user: "root",
  });
  const events: ExecEvent[] = [];
  for await (const e of stream) events.push(e);
  assert.deepEqual(
    events.map((e) => (e.type === "exit" ? ["exit", e.exitCode] : [e.type, [...e.data]])),
    [
      ["stdout", [...Buffer.from("out1 ")]],
      ["stderr", [...Buffer.from("err")]],
      ["stdout", [0xff, 0, 0x41]],
      ["exit", 7],
    ],
  );
  assert.equal(stream.exitCode, 7);
  assert.deepEqual(bodies.pop(), {
    cmd: ["printf", "x"],
    env: { A: "1" },
    workdir: "/tmp",
    user: "root",
  });
  const result = await client.exec("b", "echo hi");
  assert.deepEqual(result, { exit_code: 7, stdout: "out1 \ufffd\0A", stderr: "err" });
  assert.deepEqual(bodies.pop(), { cmd: ["/bin/bash", "-lc", "echo hi"], env: {} });
});

test("an error frame is thrown as its error class", async () => {
  answer = Buffer.concat([
    encodeFrame(STDOUT, Buffer.from("partial")),
    encodeFrame(ERROR, json({ error: { code: "invalid_state", message: "the box stopped" } })),
  ]);
  await assert.rejects(
    client.exec("b", "true"),
    (e) => e instanceof InvalidState && e.message === "the box stopped",
  );
});

test("a stream cut before the exit code is ConnectionFailed", async () => {
  answer = encodeFrame(STDOUT, Buffer.from("partial"));
  await assert.rejects(client.exec("b", "true"), ConnectionFailed);
});
