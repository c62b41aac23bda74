// Hostile archives against the pull extractor, in memory: each aims at a sentinel beside the
// destination; nothing there may change and no link left under the destination may lead out.
// Run twice: through /proc/self/fd descriptors (Linux) and by checked paths (elsewhere).
import assert from "node:assert/strict";
import {
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, beforeEach, describe, test } from "node:test";

import { Conflict, InvalidRequest } from "../../src/errors.js";
import { extract, useDescriptors } from "../../src/pull.js";
import { END } from "../../src/tar.js";
import { assertContained, member, pieces } from "./helpers.js";

for (const descriptors of [true, false]) {
  describe(`pull extraction (${descriptors ? "descriptors" : "checked paths"})`, () => {
    let root = "";
    let dest: string;
    const sentinel = () => readFileSync(join(root, "outside/sentinel"), "utf8");

    before(() => useDescriptors(descriptors));
    after(() => useDescriptors(true));
    const fresh = () => {
      if (root) rmSync(root, { recursive: true, force: true });
      root = mkdtempSync(join(tmpdir(), "paddock-pull-"));
      mkdirSync(join(root, "outside"));
      writeFileSync(join(root, "outside/sentinel"), "untouched");
      dest = join(root, "dest");
    };
    beforeEach(fresh);
    after(() => rmSync(root, { recursive: true, force: true }));

    const pull = (members: Buffer[], options: { force?: boolean } = {}) =>
      extract(pieces(Buffer.concat([...members, END]), 1000), "top", dest, options);

    const refused = async (members: Buffer[], why: RegExp, options: { force?: boolean } = {}) => {
      await assert.rejects(
        pull(members, options),
        (e) => e instanceof InvalidRequest && why.test(e.message),
      );
      assert.equal(sentinel(), "untouched");
      if (lstatSync(dest, { throwIfNoEntry: false })) assertContained(dest);
      fresh();
    };

    test("a plain tree lands whole: files, modes (no setuid), times, links, hard links", async () => {
      await pull([
        member({ name: "top", type: "dir", mode: 0o755 }),
        member({ name: "top/a.txt", mode: 0o4755 }, Buffer.from("hello")),
        member({ name: "top/sub/deep.txt" }, Buffer.from("deep")), // its folder is not in the archive
        member({ name: "top/sub/link", type: "symlink", linkname: "../a.txt" }),
        member({ name: "top/hard", type: "link", linkname: "top/a.txt" }),
        member({ name: "top/ro", type: "dir", mode: 0o555 }),
        member({ name: "top/ro/f" }, Buffer.from("in a read-only folder")),
      ]);
      assert.equal(readFileSync(join(dest, "sub/link"), "utf8"), "hello");
      assert.equal(readFileSync(join(dest, "sub/deep.txt"), "utf8"), "deep");
      assert.equal(readFileSync(join(dest, "ro/f"), "utf8"), "in a read-only folder");
      const a = statSync(join(dest, "a.txt"));
      assert.equal(a.mode & 0o7777, 0o755);
      assert.equal(a.mtimeMs, 1_700_000_000_000);
      assert.equal(statSync(join(dest, "hard")).ino, a.ino);
      assert.equal(statSync(join(dest, "ro")).mode & 0o777, 0o555);
      assertContained(dest);
    });

    test("absolute and .. names, and members outside the pulled folder", async () => {
      await refused(
        [member({ name: "/etc/evil" }, Buffer.from("x"))],
        /absolute or malformed path/,
      );
      await refused(
        [member({ name: "top/../outside/sentinel" }, Buffer.from("x"))],
        /it leaves the destination/,
      );
      await refused([member({ name: "other/x" }, Buffer.from("x"))], /outside top/);
    });

    test("a symlink out, absolute or relative", async () => {
      await refused(
        [member({ name: "top/l", type: "symlink", linkname: join(root, "outside") })],
        /points outside the destination/,
      );
      await refused(
        [member({ name: "top/l", type: "symlink", linkname: "../outside/sentinel" })],
        /points outside the destination/,
      );
    });

    test("the chain b1 -> .., b2 -> b1/.., …: each link passes a lexical check alone", async () => {
      const d4 = "top/d0/d1/d2/d3/d4";
      const chain = [
        member({ name: `${d4}/f` }, Buffer.from("ok")),
        member({ name: `${d4}/b1`, type: "symlink", linkname: ".." }),
      ];
      for (let n = 2; n <= 7; n++)
        chain.push(member({ name: `${d4}/b${n}`, type: "symlink", linkname: `b${n - 1}/..` }));
      chain.push(
        member({ name: `${d4}/host_etc`, type: "symlink", linkname: "b7/outside/sentinel" }),
      );
      await refused(
        chain,
        /refusing symlink top\/d0\/d1\/d2\/d3\/d4\/b6 -> b5\/\.\.: it points outside/,
      );
    });

    test("a link that leaves only through a link written after it is removed at the end", async () => {
      await refused(
        [
          member({ name: "top/s/t", type: "dir", mode: 0o755 }),
          member({ name: "top/s/t/l", type: "symlink", linkname: "../c/../../outside" }), // lexically top/outside
          member({ name: "top/s/c", type: "symlink", linkname: ".." }), // now s/c is top, and l leaves
        ],
        /refusing symlink dest\/s\/t\/l -> \.\.\/c\/\.\.\/\.\.\/outside: it points outside the destination, through links written after it/,
      );
    });

    test("never writes through a symlink, one in the archive or one already on disk", async () => {
      await refused(
        [
          member({ name: "top/l", type: "symlink", linkname: "sub" }),
          member({ name: "top/sub", type: "dir" }),
          member({ name: "top/l/x" }, Buffer.from("x")),
        ],
        /it goes through the symlink/,
      );
      // An earlier pull's link (or the user's): with force, the pull goes on, but not through it.
      mkdirSync(dest);
      symlinkSync(join(root, "outside"), join(dest, "out"));
      await assert.rejects(
        pull([member({ name: "top/out/sentinel" }, Buffer.from("overwritten"))], { force: true }),
        /it goes through the symlink/,
      );
      assert.equal(sentinel(), "untouched");
    });

    test("devices and fifos, hard links to what the pull did not write, a link as the top", async () => {
      await refused([member({ name: "top/null", type: "char" })], /a character device/);
      await refused([member({ name: "top/sda", type: "block" })], /a block device/);
      await refused([member({ name: "top/pipe", type: "fifo" })], /a fifo/);
      await refused(
        [member({ name: "top/h", type: "link", linkname: "/etc/passwd" })],
        /hard link to \/etc\/passwd, outside the destination/,
      );
      await refused(
        [member({ name: "top/h", type: "link", linkname: "top/never" })],
        /not a file this pull wrote/,
      );
      await refused(
        [member({ name: "top", type: "symlink", linkname: "." })],
        /it is a link in the box/,
      );
    });

    test("names too deep or too long", async () => {
      await refused(
        [member({ name: "top/" + "d/".repeat(300) + "f" }, Buffer.from("x"))],
        /nested deeper than 256/,
      );
      await refused(
        [member({ name: "top/" + "n".repeat(256) }, Buffer.from("x"))],
        /a name longer than 255 bytes/,
      );
    });

    test("an existing target is a Conflict without force, overwritten with it", async () => {
      await pull([member({ name: "top/a" }, Buffer.from("one"))]);
      await assert.rejects(pull([member({ name: "top/a" }, Buffer.from("two"))]), Conflict);
      await pull([member({ name: "top/a" }, Buffer.from("two"))], { force: true });
      assert.equal(readFileSync(join(dest, "a"), "utf8"), "two");
    });
  });
}
