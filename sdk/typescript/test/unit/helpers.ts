// Archives made in memory for the tar and pull tests.
import { join } from "node:path";
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
