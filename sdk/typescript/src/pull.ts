/** Pull: a tar stream from a box, written below one folder and nowhere else.
 *
 * A box is untrusted, so its archive is hostile input. The rules are the Python SDK's
 * (`paddock._archive.extract_stream`): absolute and `..` member names and names sent twice are
 * refused; hard links may only point at files this pull wrote; devices and fifos are refused;
 * folders are opened without following links, so nothing is ever written through a symlink (one
 * in the archive or one left by an earlier pull). Symlinks are kept as links, wherever they
 * point, as `docker cp` keeps them. The pull is written aside, under a fresh name beside the
 * target, and moved into place when whole: the first refusal fails it and leaves the target as
 * it was.
 *
 * On Linux each folder is held as a file descriptor opened with O_NOFOLLOW and every name is
 * reached through `/proc/self/fd/N/name`, which the kernel resolves from that descriptor (the
 * `*at` calls' guarantee, which node:fs lacks). Elsewhere each folder's path is checked
 * component by component with lstat, as the Python SDK does on Windows.
 */

import { randomBytes } from "node:crypto";
import { constants, existsSync, type Stats } from "node:fs";
import {
  chmod,
  link,
  lstat,
  mkdir,
  open,
  readdir,
  rename,
  rmdir,
  stat,
  symlink,
  unlink,
  utimes,
} from "node:fs/promises";
import type { FileHandle } from "node:fs/promises";
import { basename, dirname, join } from "node:path";

import { Conflict, InvalidRequest, NotFound, PaddockError } from "./errors.js";
import { IgnoreSpec } from "./ignore.js";
import { type TarHeader, TarReader } from "./tar.js";

const MAX_DEPTH = 256; // folders a member may sit in; no project is deeper, a hostile tar may be
const NAME_MAX = 255; // bytes in one name (NAME_MAX on Linux and macOS)
const LINK_MAX = 4095; // bytes in a link's target (PATH_MAX less its NUL)
const DIR_FLAGS = constants.O_RDONLY | (constants.O_DIRECTORY ?? 0) | (constants.O_NOFOLLOW ?? 0);
const FILE_FLAGS =
  constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | (constants.O_NOFOLLOW ?? 0);
const SPECIAL: Partial<Record<TarHeader["type"], string>> = {
  char: "a character device",
  block: "a block device",
  fifo: "a fifo",
};

/** Whether folders are reached through descriptors (`/proc/self/fd`); tests turn it off to
 * exercise the path-checking fallback on Linux too. */
let anchored = process.platform === "linux" && existsSync("/proc/self/fd");
export function useDescriptors(on: boolean): void {
  anchored = on && process.platform === "linux";
}

/** A path as a list of names relative to the folder that holds the target: `[top]` is the target
 * itself (or the folder it is written aside in), `[top, "a", "b"]` is `target/a/b`. */
type Parts = readonly string[];
const key = (parts: Parts): string => parts.join("/");

/** Why one member is refused; `Extraction.add` names the member. */
class Refusal extends Error {}

/** One folder of the destination, reached without following a link. */
class Dir {
  constructor(
    readonly path: string,
    private handle: FileHandle | null,
  ) {}

  static async open(path: string, flags: number): Promise<Dir> {
    if (anchored) return new Dir(path, await open(path, flags));
    if (!(await stat(path)).isDirectory())
      throw Object.assign(new Error(path), { code: "ENOTDIR" });
    return new Dir(path, null);
  }

  /** The path that names `name` in this folder (through the descriptor when there is one). */
  at(name: string): string {
    return this.handle ? `/proc/self/fd/${this.handle.fd}/${name}` : join(this.path, name);
  }

  async lstat(name: string): Promise<Stats | null> {
    try {
      return await lstat(this.at(name));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
      throw err;
    }
  }

  async names(): Promise<string[]> {
    return (await readdir(this.handle ? `/proc/self/fd/${this.handle.fd}` : this.path)).sort();
  }

  /** The subfolder `name`; rejects when it is missing, a link, or not a folder. */
  async child(name: string): Promise<Dir> {
    const path = join(this.path, name);
    if (this.handle) return new Dir(path, await open(this.at(name), DIR_FLAGS));
    if (!(await lstat(path)).isDirectory())
      throw Object.assign(new Error(path), { code: "ENOTDIR" });
    return new Dir(path, null);
  }

  /** Set this folder's mode and time. */
  async stamp(mode: number, mtime: number): Promise<void> {
    if (this.handle) await stampHandle(this.handle, mode, mtime);
    else await stampPath(this.path, mode, mtime);
  }

  async close(): Promise<void> {
    const handle = this.handle;
    this.handle = null;
    await handle?.close();
  }
}

// Mode bits are kept, setuid/setgid/sticky are not: the box does not get to plant them.
async function stampHandle(handle: FileHandle, mode: number, mtime: number): Promise<void> {
  await handle.chmod(mode & 0o777);
  if (Number.isFinite(mtime)) await handle.utimes(mtime, mtime).catch(() => undefined);
}

async function stampPath(path: string, mode: number, mtime: number): Promise<void> {
  await chmod(path, mode & 0o777);
  if (Number.isFinite(mtime)) await utimes(path, mtime, mtime).catch(() => undefined);
}

/** The folder that holds the target, and the walks inside it, opening folders without following
 * links. */
class Destination {
  private constructor(readonly base: Dir) {}

  static async open(parent: string): Promise<Destination> {
    try {
      // The user's own path: links in it are theirs to follow.
      return new Destination(await Dir.open(parent, DIR_FLAGS & ~(constants.O_NOFOLLOW ?? 0)));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT")
        throw new NotFound(`no such folder: ${parent}`);
      throw err;
    }
  }

  close(): Promise<void> {
    return this.base.close();
  }

  local(parts: Parts): string {
    return join(this.base.path, ...parts);
  }

  /** The folder at `parts` (the caller closes it unless it is `base`). `create` makes missing
   * folders, as tar does when an archive omits them. */
  async openDir(parts: Parts, create = false): Promise<Dir> {
    let d = this.base;
    try {
      for (let i = 0; i < parts.length; i++) {
        const name = parts[i]!;
        if (create && (await d.lstat(name)) === null) await mkdir(d.at(name), 0o700);
        let child: Dir;
        try {
          child = await d.child(name);
        } catch {
          throw await this.whyNotADir(d, name, parts.slice(0, i + 1));
        }
        if (d !== this.base) await d.close();
        d = child;
      }
      return d;
    } catch (err) {
      if (d !== this.base) await d.close();
      throw err;
    }
  }

  release(d: Dir): Promise<void> {
    return d === this.base ? Promise.resolve() : d.close();
  }

  private async whyNotADir(d: Dir, name: string, parts: Parts): Promise<Error> {
    const st = await d.lstat(name);
    if (st?.isSymbolicLink())
      return new Refusal(`it goes through the symlink ${this.local(parts)}`);
    if (st) return new Refusal(`${this.local(parts)} is not a folder`);
    return Object.assign(new Error(`no such folder: ${this.local(parts)}`), { code: "ENOENT" });
  }
}

function splitMember(name: string): string[] {
  if (name.startsWith("/") || name.includes("\\") || name.includes("\0")) {
    throw new Refusal("absolute or malformed path");
  }
  const parts = name.split("/").filter((p) => p !== "" && p !== ".");
  if (!parts.length || parts.includes("..")) throw new Refusal("it leaves the destination");
  if (parts.length > MAX_DEPTH) throw new Refusal(`nested deeper than ${MAX_DEPTH} folders`);
  if (parts.some((p) => Buffer.byteLength(p) > NAME_MAX)) {
    throw new Refusal(`a name longer than ${NAME_MAX} bytes`);
  }
  return parts;
}

/** One pull: members are written one by one under `[top]`, a fresh folder no one else writes in,
 * refusing anything that could put something outside it. Links are kept as links, wherever they
 * point; nothing is ever written through one. */
class Extraction {
  private readonly files = new Set<string>(); // regular files this pull wrote: hard link sources
  private readonly dirs: [Parts, number, number][] = [];
  private parent: [string, Dir] | null = null; // the last member's folder, kept open

  constructor(
    private readonly dest: Destination,
    private readonly top: string,
    private readonly rootName: string,
    private readonly skip: IgnoreSpec | null,
  ) {}

  async add(reader: TarReader, member: TarHeader): Promise<void> {
    try {
      const parts = this.parts(member.name);
      const below = parts.slice(1).join("/") + (member.type === "dir" ? "/" : "");
      if (parts.length > 1 && this.skip?.matches(below)) return;
      const folder = await this.folder(parts.slice(0, -1));
      this.check(parts, member);
      if (member.type !== "dir" && (await folder.lstat(parts[parts.length - 1]!)) !== null) {
        throw new Conflict(`the box sent ${member.name} twice`);
      }
      await this.write(folder, parts, reader, member);
    } catch (err) {
      if (err instanceof Refusal) {
        const what = member.type === "symlink" ? "symlink" : "archive member";
        const arrow = member.type === "symlink" ? ` -> ${member.linkname}` : "";
        throw new InvalidRequest(`refusing ${what} ${member.name}${arrow}: ${err.message}`);
      }
      if (err instanceof PaddockError) throw err;
      const reason = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
      throw new PaddockError(`cannot write ${member.name}: ${reason}`, { cause: err });
    }
  }

  private parts(name: string): Parts {
    const parts = splitMember(name);
    if (parts[0] !== this.rootName) throw new Refusal(`outside ${this.rootName}`);
    return [this.top, ...parts.slice(1)];
  }

  private async folder(parts: Parts): Promise<Dir> {
    if (this.parent?.[0] !== key(parts)) {
      const opened = await this.dest.openDir(parts, true);
      await this.close();
      this.parent = [key(parts), opened];
    }
    return this.parent![1];
  }

  private check(parts: Parts, member: TarHeader): void {
    const special = SPECIAL[member.type];
    if (special) throw new Refusal(`${special}; pull writes only files, folders and links`);
    const isLink = member.type === "symlink" || member.type === "link";
    if (isLink && parts.length === 1) {
      throw new Refusal("it is a link in the box; pull the path it points to");
    }
    if (member.type === "symlink") {
      const target = member.linkname;
      if (!target || target.includes("\0") || Buffer.byteLength(target) > LINK_MAX) {
        throw new Refusal("an empty, malformed or overlong link target");
      }
    } else if (member.type === "other") throw new Refusal("not a file, folder or link");
  }

  private async write(
    folder: Dir,
    parts: Parts,
    reader: TarReader,
    member: TarHeader,
  ): Promise<void> {
    const name = parts[parts.length - 1]!;
    if (member.type === "dir") {
      if ((await folder.lstat(name)) === null) await mkdir(folder.at(name), 0o700);
      this.dirs.push([parts, member.mode, member.mtime]);
    } else if (member.type === "symlink") {
      await symlink(member.linkname, folder.at(name));
    } else if (member.type === "link") {
      await this.hardLink(folder, parts, member.linkname);
    } else {
      await writeFile(folder, name, reader, member);
      this.files.add(key(parts));
    }
  }

  private async hardLink(folder: Dir, parts: Parts, linkname: string): Promise<void> {
    let source: Parts;
    try {
      source = this.parts(linkname);
    } catch {
      throw new Refusal(`hard link to ${linkname}, outside the destination`);
    }
    if (!this.files.has(key(source))) {
      throw new Refusal(`hard link to ${linkname}, which is not a file this pull wrote`);
    }
    const src = await this.dest.openDir(source.slice(0, -1));
    try {
      const name = source[source.length - 1]!;
      const st = await src.lstat(name);
      if (!st?.isFile()) throw new Refusal(`hard link to ${linkname}, which is no longer a file`);
      // link(2) on Linux does not follow a link given as its source: it links what was checked.
      await link(src.at(name), folder.at(parts[parts.length - 1]!));
    } finally {
      await this.dest.release(src);
    }
    this.files.add(key(parts));
  }

  /** Last, deepest first: a read-only folder must not stop its own extraction. */
  async stampDirs(): Promise<void> {
    for (const [parts, mode, mtime] of [...this.dirs].reverse()) {
      const d = await this.dest.openDir(parts);
      try {
        await d.stamp(mode, mtime);
      } finally {
        await this.dest.release(d);
      }
    }
  }

  async close(): Promise<void> {
    const parent = this.parent;
    this.parent = null;
    if (parent) await this.dest.release(parent[1]);
  }
}

async function writeFile(
  folder: Dir,
  name: string,
  reader: TarReader,
  member: TarHeader,
): Promise<void> {
  const file = await open(folder.at(name), FILE_FLAGS, 0o600);
  try {
    for await (const piece of reader.content()) await file.write(piece);
    await stampHandle(file, member.mode, member.mtime);
  } finally {
    await file.close();
  }
}

export interface ExtractOptions {
  force?: boolean;
  /** `target` is an existing folder the contents go into (`SRC/.`); it keeps its own mode. */
  merge?: boolean;
  /** gitignore patterns, matched below the pulled folder (`node_modules/`, `*.pyc`). */
  exclude?: readonly string[];
  onProgress?: ((bytes: number) => void) | undefined;
}

/** Extract a tar stream whose first component is `rootName` as `target`.
 *
 * A member that would be written outside `target` or through a link, a device or a fifo fails
 * the pull with InvalidRequest naming it; links are kept as the box has them. All is written
 * aside and moved into place once whole, so a failed pull leaves `target` as it was. Throws
 * Conflict before reading when `target` exists and neither `force` nor `merge` is set; with
 * `merge`, a file already there is a Conflict (without `force`) before anything moves. */
export async function extract(
  chunks: AsyncIterable<Buffer>,
  rootName: string,
  target: string,
  options: ExtractOptions = {},
): Promise<void> {
  const force = options.force ?? false;
  const merge = options.merge ?? false;
  if (!force && !merge && (await lstat(target).catch(() => null))) {
    throw new Conflict(`${target} already exists; use force to overwrite`);
  }
  const dest = await Destination.open(dirname(target));
  const aside = `.${basename(target).slice(0, 200)}.pull-${randomBytes(4).toString("hex")}`;
  try {
    const skip = options.exclude?.length ? new IgnoreSpec(options.exclude) : null;
    const job = new Extraction(dest, aside, rootName, skip);
    try {
      const reader = new TarReader(counted(chunks, options.onProgress));
      for (let member = await reader.next(); member; member = await reader.next()) {
        await job.add(reader, member);
      }
    } finally {
      await job.close();
    }
    if ((await dest.base.lstat(aside)) === null) {
      throw new InvalidRequest("the box sent an empty archive");
    }
    await job.stampDirs();
    await new Settle(force, merge).move(dest.base, aside, dest.base, basename(target), true);
  } finally {
    await remove(dest.base, aside).catch(() => undefined); // never in place of the pull's error
    await dest.close();
  }
}

/** Moves a finished pull from aside into place: all of it at once where the target is new; into
 * an existing folder, every conflict checked before anything moves. */
class Settle {
  constructor(
    private readonly force: boolean,
    private readonly merge: boolean,
  ) {}

  async move(src: Dir, name: string, dst: Dir, to: string, top = false): Promise<void> {
    const there = await dst.lstat(to);
    if (there === null) {
      await rename(src.at(name), dst.at(to));
      return;
    }
    if (top) await this.check(src, name, dst, to, there);
    const here = (await src.lstat(name))!;
    if (here.isDirectory() && there.isDirectory()) {
      await both(src, name, dst, to, async (inner, into) => {
        for (const child of await inner.names()) await this.move(inner, child, into, child);
        // A folder merged into keeps its own mode.
        if (!(top && this.merge)) await into.stamp(here.mode, here.mtimeMs / 1000);
      });
      return;
    }
    await remove(dst, to);
    await rename(src.at(name), dst.at(to));
  }

  private async check(src: Dir, name: string, dst: Dir, to: string, there: Stats): Promise<void> {
    const here = (await src.lstat(name))!;
    if (here.isDirectory() && there.isDirectory()) {
      await both(src, name, dst, to, async (inner, into) => {
        for (const child of await inner.names()) {
          const found = await into.lstat(child);
          if (found) await this.check(inner, child, into, child, found);
        }
      });
      return;
    }
    const where = join(dst.path, to);
    if (there.isDirectory()) {
      throw new Conflict(`${where} is a directory; it would be replaced by a file`);
    }
    if (!this.force) throw new Conflict(`${where} already exists; use force to overwrite`);
  }
}

/** `fn` with the folders `src/name` and `dst/to` open, closed again after it. */
async function both(
  src: Dir,
  name: string,
  dst: Dir,
  to: string,
  fn: (inner: Dir, into: Dir) => Promise<void>,
): Promise<void> {
  const inner = await src.child(name);
  try {
    const into = await dst.child(to);
    try {
      await fn(inner, into);
    } finally {
      await into.close();
    }
  } finally {
    await inner.close();
  }
}

/** Delete `name` in `folder` and all below it, following no link. */
async function remove(folder: Dir, name: string): Promise<void> {
  const st = await folder.lstat(name);
  if (st === null) return;
  if (!st.isDirectory()) {
    await unlink(folder.at(name));
    return;
  }
  const inner = await folder.child(name);
  try {
    await inner.stamp(0o700, st.mtimeMs / 1000); // a read-only folder from the box is still emptied
    for (const child of await inner.names()) await remove(inner, child);
  } finally {
    await inner.close();
  }
  await rmdir(folder.at(name));
}

async function* counted(
  chunks: AsyncIterable<Buffer>,
  onProgress: ((bytes: number) => void) | undefined,
): AsyncGenerator<Buffer> {
  for await (const chunk of chunks) {
    onProgress?.(chunk.length);
    yield chunk;
  }
}
