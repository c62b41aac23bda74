/** Push: walk local files once into a plan, then stream it as a tar archive in ~1 MiB pieces
 * (memory stays flat for any tree). Same rules as the Python SDK's `plan_push`/`tar_stream`. */

import type { Stats } from "node:fs";
import { lstat, open, readdir, readFile, readlink } from "node:fs/promises";
import { basename, join, resolve } from "node:path";

import { InvalidRequest, NotFound } from "./errors.js";
import { IgnoreSpec } from "./ignore.js";
import { END, encodeHeader, padding, type TarHeader } from "./tar.js";

export const IGNORE_FILE = ".paddockignore";
const PIECE = 1024 * 1024;

export interface PlanEntry {
  local: string;
  arcname: string;
  stat: Stats;
}

export interface PushPlan {
  entries: PlanEntry[];
  totalBytes: number;
}

/** Walk each [local path, name] once: the path goes in under that name, or, for a folder
 * with the name "", as its contents (where things land is `placement.ts`'s call). A
 * folder's `.paddockignore` and `excludes` (gitignore syntax) leave paths out. */
export async function planPush(items: [string, string][], excludes: string[]): Promise<PushPlan> {
  const plan: PushPlan = { entries: [], totalBytes: 0 };
  for (const [src, name] of items) {
    let st: Stats;
    try {
      st = await lstat(src);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") {
        throw new NotFound(`no such file or directory: ${src}`);
      }
      throw err;
    }
    const base = name || (st.isDirectory() ? "" : basename(resolve(src)));
    if (!st.isDirectory()) {
      add(plan, src, base, st);
      continue;
    }
    const patterns = [...excludes];
    const ignoreFile = join(src, IGNORE_FILE);
    if ((await lstat(ignoreFile).catch(() => undefined))?.isFile()) {
      patterns.push(...(await readFile(ignoreFile, "utf8")).split(/\r?\n/));
    }
    const spec = new IgnoreSpec(patterns);
    if (base) add(plan, src, base, st);
    await walk(plan, src, base, spec);
  }
  return plan;
}

async function walk(plan: PushPlan, root: string, base: string, spec: IgnoreSpec): Promise<void> {
  const stack = [""];
  while (stack.length) {
    const relDir = stack.pop()!;
    let names: string[];
    try {
      names = (await readdir(join(root, relDir))).sort();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "EACCES") {
        throw new InvalidRequest(`cannot read ${join(root, relDir)}: permission denied`);
      }
      throw err;
    }
    for (const name of names) {
      const rel = relDir ? `${relDir}/${name}` : name;
      const local = join(root, rel);
      const st = await lstat(local);
      if (!spec.empty && spec.matches(rel + (st.isDirectory() ? "/" : ""))) continue;
      add(plan, local, base ? `${base}/${rel}` : rel, st);
      if (st.isDirectory()) stack.push(rel);
    }
  }
}

function add(plan: PushPlan, local: string, arcname: string, st: Stats): void {
  plan.entries.push({ local, arcname, stat: st });
  if (st.isFile()) plan.totalBytes += st.size;
}

/** The plan as a tar stream, in pieces of about 1 MiB (a tree of small files does not become
 * thousands of tiny HTTP chunks). Entries are owned by `uid:gid` in the box; sockets and devices
 * are left out. A file that shrinks while it is read is padded with zeros, one that grows is
 * cut at the size it had: the archive stays well-formed either way. */
export async function* tarStream(
  plan: PushPlan,
  uid: number,
  gid: number,
  onProgress?: (bytes: number) => void,
): AsyncGenerator<Buffer> {
  let pending: Buffer[] = [];
  let size = 0;
  const out = function* (piece: Buffer): Generator<Buffer> {
    pending.push(piece);
    size += piece.length;
    if (size >= PIECE) {
      yield Buffer.concat(pending);
      pending = [];
      size = 0;
    }
  };
  for (const entry of plan.entries) {
    const header = await headerOf(entry, uid, gid);
    if (!header) continue;
    yield* out(encodeHeader(header));
    if (header.type !== "file") continue;
    let left = header.size;
    const file = await open(entry.local, "r");
    try {
      while (left > 0) {
        const { buffer, bytesRead } = await file.read({
          buffer: Buffer.alloc(Math.min(PIECE, left)),
        });
        if (bytesRead === 0) break;
        left -= bytesRead;
        yield* out(buffer.subarray(0, bytesRead));
        onProgress?.(bytesRead);
      }
    } finally {
      await file.close();
    }
    if (left > 0) yield* out(Buffer.alloc(left));
    yield* out(Buffer.alloc(padding(header.size)));
  }
  yield Buffer.concat([...pending, END]);
}

async function headerOf(entry: PlanEntry, uid: number, gid: number): Promise<TarHeader | null> {
  const st = entry.stat;
  const common = {
    name: entry.arcname,
    mode: st.mode & 0o7777,
    uid,
    gid,
    size: 0,
    mtime: Math.floor(st.mtimeMs / 1000),
    linkname: "",
  };
  if (st.isDirectory()) return { ...common, type: "dir" };
  if (st.isSymbolicLink())
    return { ...common, type: "symlink", linkname: await readlink(entry.local) };
  if (st.isFile()) return { ...common, type: "file", size: st.size };
  if (st.isFIFO()) return { ...common, type: "fifo" };
  return null; // sockets, devices: nothing a project needs
}
