/** Where a copy lands: docker cp's rules, the same for push (into a box) and pull (out of it),
 * and the same as the Python SDK's `_placement.py` (a shared table of cases checks both). Only
 * paths are decided here; what is on each side is looked up by the caller (a stat in the box,
 * the local file system here). */

import { lstat, stat } from "node:fs/promises";
import path, { posix } from "node:path";

import { InvalidRequest, NotFound, PaddockError } from "./errors.js";

export type Kind = "file" | "dir";

/** SRC: `path` as written, the `name` it goes in under when copied whole, its `kind`. */
export interface Source {
  path: string;
  name: string;
  kind: Kind;
  local: boolean;
}

/** DEST: `path` as written (a trailing / says "a folder"), what is there now (`kind`, links
 * followed; null: nothing) and, when nothing is, what its `parent` is. `where` ends messages
 * about the box side (" in box NAME"). */
export interface Dest {
  path: string;
  kind: Kind | null;
  parent: Kind | null;
  local: boolean;
  where: string;
}

/** Where SRC goes: `path` is what SRC becomes, or with `merge` the existing folder that SRC's
 * contents go into. */
export interface Landing {
  path: string;
  merge: boolean;
}

type Flavor = typeof posix;

function flavor(local: boolean): Flavor {
  return local ? path : posix;
}

function seps(paths: Flavor): string[] {
  return paths.sep === "\\" ? ["\\", "/"] : ["/"];
}

function endsInSep(p: string, paths: Flavor): boolean {
  return seps(paths).some((s) => p.endsWith(s));
}

/** `SRC/.` (and `.` itself) means what is in SRC, not SRC. */
export function isContents(p: string, local: boolean): boolean {
  return p === "." || seps(flavor(local)).some((s) => p.endsWith(s + "."));
}

/** `p` without trailing separators (a root stays itself). */
function strip(p: string, paths: Flavor): string {
  let end = p.length;
  while (end > 1 && seps(paths).includes(p[end - 1]!)) end--;
  const stripped = p.slice(0, end);
  // A Windows drive root ("C:\") keeps its separator.
  return paths.sep === "\\" && /^[A-Za-z]:$/.test(stripped) ? p.slice(0, 3) : stripped;
}

/** The folder that holds `p` ("." for a bare name). */
export function parentOf(p: string, local: boolean): string {
  const paths = flavor(local);
  return paths.dirname(strip(p, paths)) || ".";
}

function checkParent(dest: Dest): void {
  const parent = parentOf(dest.path, dest.local);
  if (dest.parent === null) throw new NotFound(`no such folder${dest.where}: ${parent}`);
  if (dest.parent !== "dir") throw new InvalidRequest(`${parent}${dest.where} is not a folder`);
}

/** SRC itself, or why it cannot be copied whatever DEST is. */
export function checkSource(src: Source): Source {
  if (isContents(src.path, src.local) && src.kind !== "dir") {
    throw new InvalidRequest(`${src.path} is not a folder: only a folder has contents to copy`);
  }
  return src;
}

/** The landing of one SRC at DEST, or the error that explains why there is none. */
export function land(src: Source, dest: Dest): Landing {
  const paths = flavor(dest.local);
  const shown = `${dest.path}${dest.where}`;
  const contents = isContents(checkSource(src).path, src.local);
  if (dest.kind === "dir") {
    if (contents) return { path: dest.path, merge: true };
    return { path: paths.join(dest.path, src.name), merge: false };
  }
  const wantsFolder = endsInSep(dest.path, paths);
  if (dest.kind === "file") {
    if (src.kind === "dir") {
      throw new InvalidRequest(`cannot copy the folder ${src.path} onto the file ${shown}`);
    }
    if (wantsFolder) throw new InvalidRequest(`${shown} is not a folder`);
    return { path: dest.path, merge: false };
  }
  if (wantsFolder && src.kind === "file") {
    throw new NotFound(`no such folder${dest.where}: ${dest.path} (DEST ends in /)`);
  }
  checkParent(dest);
  return { path: strip(dest.path, paths), merge: false };
}

// -- the local side -----------------------------------------------------------------------

/** A local SRC. A link is copied as a link (it is a "file" here). */
export async function localSource(p: string): Promise<Source> {
  let st;
  try {
    st = await lstat(p);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT") throw new NotFound(`no such file or directory: ${p}`);
    if (code === "ENOTDIR") throw new InvalidRequest(`${p}: ${parentOf(p, true)} is not a folder`);
    throw new PaddockError(`cannot read ${p}: ${code ?? (err as Error).message}`);
  }
  const name = path.basename(path.resolve(p)) || "root";
  return { path: p, name, kind: st.isDirectory() ? "dir" : "file", local: true };
}

/** What is at a local path, links followed (null: nothing). */
export async function localKind(p: string): Promise<Kind | null> {
  try {
    return (await stat(p)).isDirectory() ? "dir" : "file";
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return null;
    throw new PaddockError(`cannot look at ${p}: ${code ?? (err as Error).message}`);
  }
}

/** A local DEST, looked up (links followed). */
export async function localDest(p: string): Promise<Dest> {
  const kind = await localKind(p);
  const parent = kind !== null ? "dir" : await localKind(parentOf(p, true));
  return { path: p, kind, parent, local: true, where: "" };
}
