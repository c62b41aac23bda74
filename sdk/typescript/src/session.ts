/** An interactive exec over the WebSocket `/v1/boxes/{ref}/exec/ws`: stdin in, the same frames
 * as the streamed exec out, TTY and resize. Node 20 has no WebSocket client that can send the
 * bearer header, so this one needs the optional peer dependency `ws`. */

import type { WebSocket as WsSocket } from "ws";

import { ConnectionFailed, errorFromBody, PaddockError } from "./errors.js";
import { ExecReader } from "./frames.js";
import type { ExecEvent } from "./types.js";

type Message = { data: Buffer } | { end: true } | { error: unknown };

export class ExecSession implements AsyncIterable<ExecEvent> {
  /** The command's exit code, once the iteration has seen it. */
  exitCode: number | null = null;
  private readonly reader = new ExecReader();
  private readonly queue: Message[] = [];
  private wake: (() => void) | null = null;

  private constructor(private readonly ws: WsSocket) {
    ws.on("message", (data: Buffer, isBinary: boolean) => {
      if (isBinary) this.push({ data });
    });
    ws.on("close", () => this.push({ end: true }));
    ws.on("error", (error) => this.push({ error }));
  }

  /** Connect and send the request; resolves once the server accepted the connection. */
  static async open(url: string, token: string | undefined, request: object): Promise<ExecSession> {
    let WebSocket: typeof WsSocket;
    try {
      ({ WebSocket } = await import("ws"));
    } catch {
      throw new PaddockError(
        "execSession needs the `ws` package (npm install ws): Node has no WebSocket client " +
          "that can send the API token",
      );
    }
    const ws = new WebSocket(url, {
      headers: token ? { Authorization: `Bearer ${token}` } : {},
      maxPayload: 0,
    });
    await new Promise<void>((resolve, reject) => {
      ws.once("open", () => resolve());
      ws.once("unexpected-response", (_req, res) => {
        const body: Buffer[] = [];
        res.on("data", (chunk: Buffer) => body.push(chunk));
        res.on("end", () => {
          let parsed: unknown = Buffer.concat(body).toString("utf8");
          try {
            parsed = JSON.parse(parsed as string);
          } catch {
            // Not JSON: shown as it is.
          }
          reject(errorFromBody(res.statusCode ?? 0, parsed));
        });
      });
      ws.once("error", (err) =>
        reject(
          new ConnectionFailed(`cannot open a session at ${url}: ${err.message}`, { cause: err }),
        ),
      );
    });
    const session = new ExecSession(ws);
    ws.send(JSON.stringify(request));
    return session;
  }

  /** Bytes (or text) to the command's stdin. */
  send(data: Buffer | string): void {
    this.ws.send(typeof data === "string" ? Buffer.from(data) : data, { binary: true });
  }

  /** End of input: the command reads EOF. */
  closeStdin(): void {
    this.ws.send(JSON.stringify({ type: "eof" }));
  }

  /** New terminal size (with `tty`). */
  resize(cols: number, rows: number): void {
    this.ws.send(JSON.stringify({ type: "resize", cols, rows }));
  }

  close(): void {
    this.ws.close();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<ExecEvent> {
    try {
      for (;;) {
        const message = this.queue.shift();
        if (!message) {
          await new Promise<void>((resolve) => (this.wake = resolve));
          continue;
        }
        if ("end" in message) return;
        if ("error" in message) {
          const err = message.error as Error;
          throw new ConnectionFailed(`the session broke: ${err.message}`, { cause: err });
        }
        for (const event of this.reader.feed(message.data)) {
          this.exitCode = this.reader.exitCode;
          yield event;
        }
      }
    } finally {
      this.close();
    }
  }

  private push(message: Message): void {
    this.queue.push(message);
    const wake = this.wake;
    this.wake = null;
    wake?.();
  }
}
