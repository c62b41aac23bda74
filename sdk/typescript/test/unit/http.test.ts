// The transport against a real node:http server on loopback: bodies by status, timeouts,
// streams, and the retry on a kept-alive connection the server dropped (idempotent only).
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, test } from "node:test";

import {
  AuthenticationFailed,
  ConnectionFailed,
  InvalidState,
  ServerError,
} from "../../src/errors.js";
import { chunks, Transport } from "../../src/http.js";

let server: Server;
let url: string;
const seen = new Map<string, number>(); // requests per path

type Handler = (req: IncomingMessage, res: ServerResponse, count: number) => void;
const routes: Record<string, Handler> = {
  "/json": (_req, res) => res.end(JSON.stringify({ ok: true })),
  "/empty": (_req, res) => res.writeHead(204).end(),
  "/silent": () => undefined, // never answers
  "/slow-stream": (_req, res) => {
    res.writeHead(200).flushHeaders(); // headers at once, as Starlette sends them
    let n = 0;
    const tick = setInterval(() => {
      res.write(`${n}\n`);
      if (++n === 3) {
        clearInterval(tick);
        res.end();
      }
    }, 400);
  },
  "/state": (_req, res) =>
    res.writeHead(409, { "Content-Type": "application/json" }).end(
      JSON.stringify({
        error: { code: "invalid_state", message: "box is stopped", details: { box: "b" } },
      }),
    ),
  "/teapot": (_req, res) => res.writeHead(401).end("no"),
  "/proxy": (_req, res) => res.writeHead(502).end("<html>bad gateway</html>"),
  // The first request on a connection is answered; the next one on it finds it closed, as when
  // the server's keep-alive timer fires just as the client reuses the connection.
  "/flaky": (req, res, count) => {
    if (count % 2 === 0) req.socket.destroy();
    else res.end(JSON.stringify({ count }));
  },
};

before(async () => {
  server = createServer((req, res) => {
    const path = new URL(req.url!, "http://x").pathname;
    const count = (seen.get(path) ?? 0) + 1;
    seen.set(path, count);
    req.resume();
    routes[path]!(req, res, count);
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => {
  server.closeAllConnections();
  server.close();
});

test("JSON, and a 204 read at once (no waiting for a body that never comes)", async () => {
  const t = new Transport(url, "tok", 5000);
  assert.deepEqual(await t.call({ method: "GET", path: "/json" }), { ok: true });
  const start = performance.now();
  assert.equal(await t.call({ method: "DELETE", path: "/empty" }), undefined);
  assert.ok(performance.now() - start < 1000);
  t.close();
});

test("API errors become the error tree; other error bodies a ServerError or by status", async () => {
  const t = new Transport(url, "tok", 5000);
  await assert.rejects(t.call({ method: "GET", path: "/state" }), (e) => {
    assert.ok(e instanceof InvalidState);
    assert.equal(e.message, "box is stopped");
    assert.deepEqual(e.details, { box: "b" });
    assert.equal(e.status, 409);
    return true;
  });
  await assert.rejects(t.call({ method: "GET", path: "/teapot" }), ServerError); // no JSON body
  await assert.rejects(
    t.call({ method: "GET", path: "/proxy" }),
    /HTTP 502 for \/proxy: <html>bad gateway/,
  );
  t.close();
});

test("a server that does not answer: ConnectionFailed after the timeout", async () => {
  const t = new Transport(url, undefined, 300);
  const start = performance.now();
  await assert.rejects(
    t.call({ method: "GET", path: "/silent" }),
    (e) => e instanceof ConnectionFailed && /no answer/.test(e.message),
  );
  assert.ok(performance.now() - start < 2000);
  t.close();
});

test("a stream may pause longer than the timeout once it started", async () => {
  const t = new Transport(url, undefined, 300);
  const got: string[] = [];
  for await (const c of chunks(
    await t.open({ method: "GET", path: "/slow-stream", wait: "stream" }),
  ))
    got.push(c.toString());
  assert.equal(got.join(""), "0\n1\n2\n");
  // Without `stream`, the same pause is a timeout.
  await assert.rejects(t.read({ method: "GET", path: "/slow-stream" }), ConnectionFailed);
  t.close();
});

test("a dropped kept-alive connection: GET is sent again, POST is not", async () => {
  const t = new Transport(url, undefined, 5000);
  seen.delete("/flaky");
  assert.deepEqual(await t.call({ method: "GET", path: "/flaky" }), { count: 1 });
  assert.deepEqual(await t.call({ method: "GET", path: "/flaky" }), { count: 3 }); // 2 was dropped
  // The POST goes on the kept connection too, finds it dropped, and is not sent again: the
  // server may have acted on it.
  await assert.rejects(t.call({ method: "POST", path: "/flaky", json: {} }), ConnectionFailed);
  assert.equal(seen.get("/flaky"), 4);
  t.close();
});

test("a POST after the event loop was blocked past the server's keep-alive timeout", async () => {
  // A bare HTTP/1.1 responder in another process closes connections idle for 400 ms (with a
  // FIN, as uvicorn does after 5 s); the client's idle limit is 300 ms. The program then blocks
  // its event loop for 1 s (a long synchronous call), so no timer of its own could drop the
  // pooled connection, and the server's FIN is still unread when the POST is sent.
  const code = `const s = require("node:net").createServer((sock) => {
    sock.setTimeout(400, () => sock.end());
    sock.on("data", (d) => d.includes("\\r\\n\\r\\n") && sock.write("HTTP/1.1 200 OK\\r\\ncontent-length: 2\\r\\n\\r\\n{}"));
  }); s.listen(0, "127.0.0.1", () => console.log(s.address().port));`;
  const child = spawn(process.execPath, ["-e", code], { stdio: ["ignore", "pipe", "inherit"] });
  try {
    const [port] = (await once(child.stdout!, "data")) as [Buffer];
    const t = new Transport(`http://127.0.0.1:${port.toString().trim()}`, undefined, 5000, 300);
    await t.call({ method: "GET", path: "/" });
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1000);
    assert.deepEqual(await t.call({ method: "POST", path: "/", json: {} }), {});
    t.close();
  } finally {
    child.kill();
  }
});

test("nobody listening: ConnectionFailed", async () => {
  const t = new Transport("http://127.0.0.1:1", undefined, 2000);
  await assert.rejects(
    t.call({ method: "GET", path: "/json" }),
    (e) => e instanceof ConnectionFailed && /cannot reach/.test(e.message),
  );
  t.close();
});

test("a wrong token is AuthenticationFailed", async () => {
  routes["/auth"] = (req, res) =>
    req.headers.authorization === "Bearer right"
      ? res.end("{}")
      : res.writeHead(401).end(
          JSON.stringify({
            error: { code: "unauthorized", message: "the API token was not accepted" },
          }),
        );
  const t = new Transport(url, "wrong", 2000);
  await assert.rejects(t.call({ method: "GET", path: "/auth" }), AuthenticationFailed);
  t.close();
});
