/** Exec output framing (`application/vnd.paddock.frames`): one byte of kind, four bytes of
 * big-endian length, the payload — as `paddock.wire.frames` writes it on the server. */

import { errorFromBody } from "./errors.js";
import type { ExecEvent } from "./types.js";

export const MEDIA_TYPE = "application/vnd.paddock.frames";
export const STDOUT = 1;
export const STDERR = 2;
export const EXIT = 3; // payload: {"exit_code": int}
export const ERROR = 4; // payload: {"error": {"code", "message"}}
const HEADER = 5;

export interface Frame {
  kind: number;
  payload: Buffer;
}

/** Incremental decoder: feed it bytes as they arrive, it returns the whole frames among them. */
export class FrameDecoder {
  private buf: Buffer = Buffer.alloc(0);

  feed(data: Buffer): Frame[] {
    this.buf = this.buf.length ? Buffer.concat([this.buf, data]) : data;
    const frames: Frame[] = [];
    let at = 0;
    while (this.buf.length - at >= HEADER) {
      const end = at + HEADER + this.buf.readUInt32BE(at + 1);
      if (this.buf.length < end) break;
      frames.push({ kind: this.buf[at]!, payload: this.buf.subarray(at + HEADER, end) });
      at = end;
    }
    this.buf = this.buf.subarray(at);
    return frames;
  }

  /** Bytes of a frame begun but not finished. */
  get pending(): number {
    return this.buf.length;
  }
}

/** An exec's frames as events, for every transport (HTTP stream, WebSocket session): keeps the
 * exit code, and throws the server's error frame as the error it names. */
export class ExecReader {
  exitCode: number | null = null;
  private readonly decoder = new FrameDecoder();

  feed(data: Buffer): ExecEvent[] {
    const events: ExecEvent[] = [];
    for (const { kind, payload } of this.decoder.feed(data)) {
      if (kind === STDOUT) events.push({ type: "stdout", data: payload });
      else if (kind === STDERR) events.push({ type: "stderr", data: payload });
      else if (kind === EXIT) {
        this.exitCode = Number(JSON.parse(payload.toString("utf8")).exit_code);
        events.push({ type: "exit", exitCode: this.exitCode });
      } else if (kind === ERROR) throw errorFromBody(500, JSON.parse(payload.toString("utf8")));
    }
    return events;
  }
}

export function encodeFrame(kind: number, payload: Buffer): Buffer {
  const header = Buffer.alloc(HEADER);
  header[0] = kind;
  header.writeUInt32BE(payload.length, 1);
  return Buffer.concat([header, payload]);
}
