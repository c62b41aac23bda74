/** The HTTP/1.1 transport: node:http(s) with a keep-alive pool, timeouts, a safe retry, and API
 * errors turned into the error tree. The client builds requests; this module only sends them. */

import * as http from "node:http";
import * as https from "node:https";
import type { Socket } from "node:net";
import type { Readable } from "node:stream";

import { ConnectionFailed, errorFromBody, type PaddockError } from "./errors.js";
import { VERSION } from "./version.js";

export interface Request {
  method: "GET" | "POST" | "PUT" | "DELETE";
  path: string;
  /** A list is the parameter repeated (`allow=a&allow=b`). */
  query?: Record<string, string | readonly string[] | undefined>;
  json?: unknown;
  /** A raw body: bytes, or a stream of them (sent chunked, never retried). */
  body?: Buffer | AsyncIterable<Buffer>;
  contentType?: string;
  /** How long the answer may take: `default` is the client's timeout for the headers and
   * between chunks of the body; `slow` at least SLOW_MS (the server writes or starts a box's
   * files first: a snapshot of a large box takes minutes); `stream` the client's timeout until
   * the headers, then none (exec output, logs, archives); `none` none at all (a command run to
   * completion). */
  wait?: "default" | "slow" | "stream" | "none";
}

// Idempotent methods (RFC 9110 §9.2.2) may be sent again when a kept-alive connection turns
// out to have been closed by the server just before we used it; a POST may not.
const IDEMPOTENT = new Set(["GET", "PUT", "DELETE"]);
const STALE = new Set(["ECONNRESET", "EPIPE", "ECONNABORTED"]);
// uvicorn closes idle connections after 5 s; dropping ours after 4 s makes the race with that
// close (a request sent on a connection the server is closing) rare, the retry handles the rest.
const IDLE_SOCKET_MS = 4000;
const FREED = Symbol("paddock.freed"); // when a kept-alive socket last went back to the pool
export const SLOW_MS = 900_000; // as the Python SDK's SLOW_SECONDS

export class Transport {
  readonly url: string;
  readonly token: string | undefined;
  readonly timeout: number;
  private readonly base: URL;
  private readonly agent: http.Agent;
  private readonly send: typeof http.request;

  private readonly idle: number;

  constructor(url: string, token: string | undefined, timeout: number, idle = IDLE_SOCKET_MS) {
    this.url = url.replace(/\/+$/, "");
    this.token = token;
    this.timeout = timeout;
    this.base = new URL(this.url);
    const tls = this.base.protocol === "https:";
    if (!tls && this.base.protocol !== "http:") {
      throw new ConnectionFailed(`the server URL must be http:// or https://, not ${this.url}`);
    }
    this.idle = idle;
    const options = { keepAlive: true, timeout: idle, scheduling: "lifo" as const };
    this.agent = tls ? new https.Agent(options) : new http.Agent(options);
    this.agent.on("free", (socket: Socket & { [FREED]?: number }) => {
      socket[FREED] = Date.now();
    });
    this.send = tls ? https.request : http.request;
  }

  close(): void {
    this.agent.destroy();
  }

  /** Send `req`; the answer once its headers are in. A status >= 400 is thrown as the
   * matching PaddockError (its JSON body read first). */
  async open(req: Request): Promise<http.IncomingMessage> {
    for (let attempt = 0; ; attempt++) {
      try {
        const res = await this.attempt(req);
        if ((res.statusCode ?? 0) >= 400) throw await this.error(res, req.path);
        return res;
      } catch (err) {
        const retry =
          attempt === 0 &&
          err instanceof StaleConnection &&
          IDEMPOTENT.has(req.method) &&
          !isStream(req.body);
        if (retry) continue;
        throw err instanceof StaleConnection ? err.failure : err;
      }
    }
  }

  /** Send `req` and read the whole answer. */
  async read(req: Request): Promise<Buffer> {
    return readAll(await this.open(req));
  }

  /** Send `req` and parse its JSON answer (undefined for an empty one, as after a 204). */
  async call<T>(req: Request): Promise<T> {
    const body = await this.read(req);
    return (body.length ? JSON.parse(body.toString("utf8")) : undefined) as T;
  }

  private target(req: Request): URL {
    const url = new URL(this.base.pathname.replace(/\/$/, "") + req.path, this.base);
    for (const [key, value] of Object.entries(req.query ?? {})) {
      if (typeof value === "string") url.searchParams.set(key, value);
      else for (const each of value ?? []) url.searchParams.append(key, each);
    }
    return url;
  }

  private headers(req: Request, payload: Buffer | AsyncIterable<Buffer> | undefined) {
    const headers: Record<string, string> = {
      Accept: "application/json",
      "User-Agent": `paddock-typescript/${VERSION}`,
    };
    if (this.token) headers.Authorization = `Bearer ${this.token}`;
    if (req.contentType) headers["Content-Type"] = req.contentType;
    else if (req.json !== undefined) headers["Content-Type"] = "application/json";
    if (Buffer.isBuffer(payload)) headers["Content-Length"] = String(payload.length);
    return headers;
  }

  /** Drop pooled connections idle for longer than `idle`. Their timers do that, unless the
   * event loop was blocked (a long synchronous call in the program): then a connection the server
   * closed meanwhile is still in the pool, and a POST sent on it would fail, unretried. Stale
   * sockets are the oldest, at the head of the pool, which the agent skips once destroyed. */
  private pruneIdle(): void {
    const now = Date.now();
    for (const sockets of Object.values(this.agent.freeSockets)) {
      for (const socket of (sockets ?? []) as (Socket & { [FREED]?: number })[]) {
        if (now - (socket[FREED] ?? now) >= this.idle) socket.destroy();
      }
    }
  }

  private attempt(req: Request): Promise<http.IncomingMessage> {
    this.pruneIdle();
    const url = this.target(req);
    const payload = req.json !== undefined ? Buffer.from(JSON.stringify(req.json)) : req.body;
    const wait = req.wait ?? "default";
    const limit =
      wait === "none" ? 0 : wait === "slow" ? Math.max(this.timeout, SLOW_MS) : this.timeout;
    return new Promise((resolve, reject) => {
      const request = this.send(url, {
        method: req.method,
        agent: this.agent,
        headers: this.headers(req, payload),
        // Idle time allowed on the socket while this request holds it (0: no limit).
        timeout: limit,
      });
      const where = `${req.method} ${url.pathname}`;
      request.on("timeout", () => {
        request.destroy(
          new ConnectionFailed(`no answer from ${this.url} in ${limit} ms (${where})`),
        );
      });
      request.on("error", (err: NodeJS.ErrnoException) => {
        if (err instanceof ConnectionFailed) return reject(err);
        const failure = new ConnectionFailed(
          `cannot reach the Paddock server at ${this.url}: ${err.message}`,
          { cause: err },
        );
        // Nothing of the answer arrived on a connection we reused: the server had closed it.
        reject(
          request.reusedSocket && STALE.has(err.code ?? "")
            ? new StaleConnection(failure)
            : failure,
        );
      });
      request.on("response", (res) => {
        if (wait === "stream") request.setTimeout(0);
        resolve(res);
      });
      if (payload === undefined) request.end();
      else if (Buffer.isBuffer(payload)) request.end(payload);
      else void pump(payload, request);
    });
  }

  private async error(res: http.IncomingMessage, path: string): Promise<PaddockError> {
    const status = res.statusCode ?? 0;
    const text = (await readAll(res)).toString("utf8");
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      // Not JSON (a proxy's error page): errorFromBody shows its start.
    }
    return errorFromBody(status, parsed, { server: this.url, path });
  }
}

class StaleConnection extends Error {
  constructor(readonly failure: ConnectionFailed) {
    super(failure.message);
  }
}

function isStream(body: Request["body"]): boolean {
  return body !== undefined && !Buffer.isBuffer(body);
}

/** Write a streamed body with backpressure; a failure of the source aborts the request. */
async function pump(source: AsyncIterable<Buffer>, request: http.ClientRequest): Promise<void> {
  try {
    for await (const chunk of source) {
      if (request.destroyed) return;
      if (!request.write(chunk)) {
        await new Promise<void>((resolve) => {
          const done = () => {
            request.off("drain", done);
            request.off("close", done);
            resolve();
          };
          request.on("drain", done);
          request.on("close", done);
        });
      }
    }
    request.end();
  } catch (err) {
    request.destroy(err instanceof Error ? err : new Error(String(err)));
  }
}

export async function readAll(res: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  try {
    for await (const chunk of res) chunks.push(chunk as Buffer);
  } catch (err) {
    throw asConnectionFailed(err);
  }
  return Buffer.concat(chunks);
}

/** Chunks of a streamed answer; a connection lost midway is a ConnectionFailed. Leaving the loop
 * early closes the connection (the server then ends what it was streaming). */
export async function* chunks(res: http.IncomingMessage): AsyncGenerator<Buffer> {
  try {
    for await (const chunk of res) yield chunk as Buffer;
  } catch (err) {
    throw asConnectionFailed(err);
  } finally {
    if (!res.complete) res.destroy();
  }
}

function asConnectionFailed(err: unknown): unknown {
  if (err instanceof ConnectionFailed || !(err instanceof Error)) return err;
  return new ConnectionFailed(`the connection to the server broke: ${err.message}`, { cause: err });
}

/** The events of a server-sent event stream whose data is JSON (comments skipped). */
export async function* sse(
  res: http.IncomingMessage,
): AsyncGenerator<{ event: string; data: unknown }> {
  let buf = "";
  const decoder = new TextDecoder();
  for await (const chunk of chunks(res)) {
    buf += decoder.decode(chunk, { stream: true });
    const events = buf.split("\n\n");
    buf = events.pop()!;
    for (const block of events) {
      let event = "message";
      let data: unknown;
      for (const line of block.split("\n")) {
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? "" : line.slice(colon + 1).trim();
        if (field === "event") event = value;
        else if (field === "data") data = JSON.parse(value);
      }
      if (data !== undefined) yield { event, data };
    }
  }
}

/** Objects of a newline-delimited JSON stream; an `{"error": ...}` object is thrown. */
export async function* ndjson(res: http.IncomingMessage): AsyncGenerator<Record<string, unknown>> {
  let buf = "";
  const decoder = new TextDecoder();
  for await (const chunk of chunks(res)) {
    buf += decoder.decode(chunk, { stream: true });
    const lines = buf.split("\n");
    buf = lines.pop()!;
    for (const line of lines) {
      if (!line.trim()) continue;
      const event = JSON.parse(line) as Record<string, unknown>;
      if ("error" in event) throw errorFromBody(500, event);
      yield event;
    }
  }
}
