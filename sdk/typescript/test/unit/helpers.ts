// Archives made in memory for the tar and pull tests.
import assert from "node:assert/strict";
import { lstatSync, readdirSync, realpathSync } from "node:fs";
import { join, sep } from "node:path";
import { fileURLToPath } from "node:url";

import { BLOCK, encodeHeader, padding, type TarHeader } from "../../src/tar.js";

export function member(h: Partial<TarHeader> & { name: string }, data = Buffer.alloc(0)): Buffer {
  const header: TarHeader = {
    type: "file",
    mode: 0o644,
    uid: 1000,
    gid: 1000,
    size: data.length,
    mtime: 1_700_000_000,
    linkname: "",
    ...h,
  };
  return Buffer.concat([encodeHeader(header), data, Buffer.alloc(padding(data.length))]);
}

export async function* pieces(data: Buffer, size = 7): AsyncGenerator<Buffer> {
  for (let i = 0; i < data.length; i += size) yield data.subarray(i, i + size);
}

export function fixChecksum(block: Buffer): void {
  block.fill(0x20, 148, 156);
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += block[i]!;
  block.write(sum.toString(8).padStart(6, "0") + "\0 ", 148, 8, "latin1");
}

/** The package's folder (tests run compiled, from build/test/…). */
export const ROOT = fileURLToPath(new URL("../../../", import.meta.url));
/** The repository's folder. */
export const REPO = join(ROOT, "../..");

/** Every symlink under `dest` resolves inside it. */
export function assertContained(dest: string): void {
  const top = realpathSync(dest);
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      const st = lstatSync(path);
      if (st.isSymbolicLink()) {
        let resolved: string;
        try {
          resolved = realpathSync(path);
        } catch {
          continue; // dangling inside: harmless
        }
        assert.ok(resolved === top || resolved.startsWith(top + sep), `${path} -> ${resolved}`);
      } else if (st.isDirectory()) walk(path);
    }
  };
  walk(dest);
}
