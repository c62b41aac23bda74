/** The tar format, both ways: headers for push (ustar, with a PAX header for what ustar cannot
 * hold) and a streaming reader for pull (ustar, PAX and GNU long names). Only the format lives
 * here; what may be written where is `pull.ts`'s business. */

import { InvalidRequest } from "./errors.js";

export const BLOCK = 512;

export type EntryType =
  | "file"
  | "dir"
  | "symlink"
  | "link" // a hard link to an earlier member
  | "char"
  | "block"
  | "fifo"
  | "other";

export interface TarHeader {
  name: string;
  type: EntryType;
  mode: number;
  uid: number;
  gid: number;
  size: number;
  mtime: number; // seconds
  linkname: string;
}

const TYPES: Record<string, EntryType> = {
  "0": "file",
  "\0": "file",
  "7": "file", // contiguous file: a plain file everywhere that matters
  "1": "link",
  "2": "symlink",
  "3": "char",
  "4": "block",
  "5": "dir",
  "6": "fifo",
};
const FLAGS: Partial<Record<EntryType, string>> = {
  file: "0",
  link: "1",
  symlink: "2",
  char: "3",
  block: "4",
  dir: "5",
  fifo: "6",
};
const MAX_OCTAL_SIZE = 0o77777777777; // 11 octal digits: 8 GiB - 1

// -- writing ------------------------------------------------------------------------------

/** The header block(s) of one member: a PAX extended header first when a name, link target or
 * size does not fit ustar's fields (or is not ASCII). */
export function encodeHeader(h: TarHeader): Buffer {
  const pax: Record<string, string> = {};
  let name = h.name;
  let prefix = "";
  if (!fitsUstar(name, 100)) {
    const split = splitName(name);
    if (split) [prefix, name] = split;
    else {
      pax.path = h.name;
      name = asciiStub(h.name, 100);
    }
  }
  let linkname = h.linkname;
  if (!fitsUstar(linkname, 100)) {
    pax.linkpath = linkname;
    linkname = asciiStub(linkname, 100);
  }
  let size = h.type === "file" ? h.size : 0;
  if (size > MAX_OCTAL_SIZE) {
    pax.size = String(size);
    size = 0;
  }
  const block = ustar({ ...h, name, linkname, size }, prefix, FLAGS[h.type] ?? "0");
  if (Object.keys(pax).length === 0) return block;
  const records = Buffer.from(
    Object.entries(pax)
      .map(([k, v]) => paxRecord(k, v))
      .join(""),
  );
  const paxName = asciiStub(`PaxHeader/${h.name.split("/").filter(Boolean).pop() ?? ""}`, 100);
  const paxHeader = ustar(
    {
      name: paxName,
      type: "file",
      mode: 0o644,
      uid: 0,
      gid: 0,
      size: records.length,
      mtime: h.mtime,
      linkname: "",
    },
    "",
    "x",
  );
  return Buffer.concat([paxHeader, records, Buffer.alloc(padding(records.length)), block]);
}

/** The two zero blocks that end an archive. */
export const END = Buffer.alloc(2 * BLOCK);

export function padding(size: number): number {
  return (BLOCK - (size % BLOCK)) % BLOCK;
}

function fitsUstar(text: string, max: number): boolean {
  return Buffer.byteLength(text) <= max && /^[\x20-\x7e]*$/.test(text);
}

/** ustar's name split: up to 155 bytes of leading folders in `prefix`, the rest in `name`. */
function splitName(path: string): [string, string] | undefined {
  if (!/^[\x20-\x7e]*$/.test(path)) return undefined;
  for (let i = path.indexOf("/"); i !== -1; i = path.indexOf("/", i + 1)) {
    const prefix = path.slice(0, i);
    const rest = path.slice(i + 1);
    if (prefix.length <= 155 && rest.length > 0 && rest.length <= 100) return [prefix, rest];
  }
  return undefined;
}

function asciiStub(text: string, max: number): string {
  return text.replace(/[^\x20-\x7e]/g, "_").slice(0, max);
}

function paxRecord(key: string, value: string): string {
  // "LEN key=value\n", where LEN counts the whole record, its own digits included.
  const body = ` ${key}=${value}\n`;
  const bytes = Buffer.byteLength(body);
  let len = bytes + 1;
  while (len !== bytes + String(len).length) len = bytes + String(len).length;
  return `${len}${body}`;
}

function ustar(h: TarHeader, prefix: string, flag: string): Buffer {
  const b = Buffer.alloc(BLOCK);
  b.write(h.name, 0, 100, "utf8");
  octal(b, 100, 8, h.mode & 0o7777);
  octal(b, 108, 8, h.uid);
  octal(b, 116, 8, h.gid);
  octal(b, 124, 12, h.size);
  octal(b, 136, 12, Math.max(0, Math.min(Math.floor(h.mtime), MAX_OCTAL_SIZE)));
  b.write(flag, 156, 1, "latin1");
  b.write(h.linkname, 157, 100, "utf8");
  b.write("ustar\x0000", 257, 8, "latin1");
  b.write(prefix, 345, 155, "utf8");
  b.fill(0x20, 148, 156); // the checksum is computed with its own field as spaces
  let sum = 0;
  for (const byte of b) sum += byte;
  b.write(sum.toString(8).padStart(6, "0") + "\0 ", 148, 8, "latin1");
  return b;
}

function octal(b: Buffer, at: number, width: number, value: number): void {
  b.write(value.toString(8).padStart(width - 1, "0") + "\0", at, width, "latin1");
}

// -- reading ------------------------------------------------------------------------------

/** Reads members one at a time from a stream of chunks: `next()` gives the next header,
 * `content()` that member's bytes (anything left unread is skipped by the following `next()`). */
export class TarReader {
  private buf: Buffer = Buffer.alloc(0);
  private left = 0; // bytes of the current member's data not read yet
  private pad = 0; // zero padding after it
  private ended = false;
  private global: Record<string, string> = {};
  private readonly source: AsyncIterator<Buffer>;

  constructor(source: AsyncIterable<Buffer>) {
    this.source = source[Symbol.asyncIterator]();
  }

  /** The next member, or null at the end of the archive. */
  async next(): Promise<TarHeader | null> {
    await this.skip(this.left + this.pad);
    this.left = this.pad = 0;
    let pax: Record<string, string> = {};
    let longName: string | undefined;
    let longLink: string | undefined;
    for (;;) {
      const block = await this.take(BLOCK, true);
      if (block === null || block.every((byte) => byte === 0)) return null;
      verifyChecksum(block);
      const flag = String.fromCharCode(block[156]!);
      const size = number(block, 124, 12);
      if (flag === "x" || flag === "g" || flag === "L" || flag === "K") {
        if (size > 1024 * 1024) throw broken("an extended header over 1 MiB");
        const data = await this.take(size, false);
        await this.skip(padding(size));
        if (flag === "x") pax = { ...pax, ...parsePax(data!) };
        else if (flag === "g") this.global = { ...this.global, ...parsePax(data!) };
        else if (flag === "L") longName = cString(data!, 0, data!.length);
        else longLink = cString(data!, 0, data!.length);
        continue;
      }
      const fields = { ...this.global, ...pax };
      const magic = block.toString("latin1", 257, 263);
      const prefix = magic === "ustar\0" ? cString(block, 345, 155) : "";
      const base = cString(block, 0, 100);
      const header: TarHeader = {
        name: fields.path ?? longName ?? (prefix ? `${prefix}/${base}` : base),
        type: TYPES[flag] ?? "other",
        mode: number(block, 100, 8),
        uid: fields.uid !== undefined ? Number(fields.uid) : number(block, 108, 8),
        gid: fields.gid !== undefined ? Number(fields.gid) : number(block, 116, 8),
        size: fields.size !== undefined ? Number(fields.size) : size,
        mtime: fields.mtime !== undefined ? Number(fields.mtime) : number(block, 136, 12),
        linkname: fields.linkpath ?? longLink ?? cString(block, 157, 100),
      };
      if (!Number.isSafeInteger(header.size) || header.size < 0) throw broken("a bad size");
      // Only files carry data; a link's or a folder's size field is not read (as tarfile does).
      this.left = header.type === "file" || header.type === "other" ? header.size : 0;
      this.pad = padding(this.left);
      return header;
    }
  }

  /** The current member's data, in the chunks it arrives in. */
  async *content(): AsyncGenerator<Buffer> {
    while (this.left > 0) {
      if (this.buf.length === 0 && !(await this.fill())) throw broken("it ends inside a file");
      const piece = this.buf.subarray(0, Math.min(this.left, this.buf.length));
      this.buf = this.buf.subarray(piece.length);
      this.left -= piece.length;
      yield piece;
    }
  }

  private async fill(): Promise<boolean> {
    if (this.ended) return false;
    const { value, done } = await this.source.next();
    if (done) {
      this.ended = true;
      return false;
    }
    this.buf = this.buf.length ? Buffer.concat([this.buf, value]) : value;
    return true;
  }

  /** Exactly `n` bytes; null at a clean end when `endOk`, else a broken archive. */
  private async take(n: number, endOk: boolean): Promise<Buffer | null> {
    while (this.buf.length < n) {
      if (!(await this.fill())) {
        if (endOk && this.buf.length === 0) return null;
        throw broken("it ends inside a header");
      }
    }
    const out = this.buf.subarray(0, n);
    this.buf = this.buf.subarray(n);
    return out;
  }

  private async skip(n: number): Promise<void> {
    while (n > 0) {
      if (this.buf.length === 0 && !(await this.fill())) throw broken("it ends inside a file");
      const k = Math.min(n, this.buf.length);
      this.buf = this.buf.subarray(k);
      n -= k;
    }
  }
}

function broken(why: string): InvalidRequest {
  return new InvalidRequest(`the box sent a broken archive: ${why}`);
}

function cString(b: Buffer, at: number, width: number): string {
  const end = b.indexOf(0, at);
  return b.toString("utf8", at, end === -1 || end > at + width ? at + width : end);
}

/** A numeric field: octal text, or GNU's base-256 (high bit set) for large values. */
function number(b: Buffer, at: number, width: number): number {
  if (b[at]! & 0x80) {
    let value = b[at]! & 0x7f;
    for (let i = 1; i < width; i++) value = value * 256 + b[at + i]!;
    return value;
  }
  const text = b
    .toString("latin1", at, at + width)
    .replace(/[\0 ]+$/, "")
    .trim();
  if (!/^[0-7]*$/.test(text)) throw broken(`a bad number field ${JSON.stringify(text)}`);
  return text ? parseInt(text, 8) : 0;
}

function verifyChecksum(block: Buffer): void {
  const stored = number(block, 148, 8);
  let unsigned = 0;
  let signed = 0;
  for (let i = 0; i < BLOCK; i++) {
    const byte = i >= 148 && i < 156 ? 0x20 : block[i]!;
    unsigned += byte;
    signed += byte > 127 ? byte - 256 : byte;
  }
  if (stored !== unsigned && stored !== signed) throw broken("a header checksum does not match");
}

function parsePax(data: Buffer): Record<string, string> {
  const out: Record<string, string> = {};
  let at = 0;
  while (at < data.length) {
    const space = data.indexOf(0x20, at);
    if (space === -1) break;
    const len = parseInt(data.toString("latin1", at, space), 10);
    if (!(len > 0) || at + len > data.length) throw broken("a bad PAX record");
    const record = data.toString("utf8", space + 1, at + len - 1); // without the "\n"
    const eq = record.indexOf("=");
    if (eq > 0) out[record.slice(0, eq)] = record.slice(eq + 1);
    at += len;
  }
  return out;
}
