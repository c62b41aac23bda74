// Hostile archives against the pull extractor, in memory: each aims at a sentinel beside the
// destination; nothing there may change, and a refused pull leaves the destination as it was.
// Links are kept as links, wherever they point; nothing is written through one.
// Run twice: through /proc/self/fd descriptors (Linux) and by checked paths (elsewhere).
import assert from "node:assert/strict";
import {
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
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
import { member, pieces } from "./helpers.js";

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

    type Options = { force?: boolean; merge?: boolean; exclude?: string[] };
    const pull = (members: Buffer[], options: Options = {}) =>
      extract(pieces(Buffer.concat([...members, END]), 1000), "top", dest, options);

    const refused = async (members: Buffer[], why: RegExp, options: Options = {}) => {
      await assert.rejects(
        pull(members, options),
        (e) => e instanceof InvalidRequest && why.test(e.message),
      );
      assert.equal(sentinel(), "untouched");
      assert.deepEqual(readdirSync(root).sort(), ["outside"]); // nothing of it, nothing aside
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
      assert.deepEqual(readdirSync(root).sort(), ["dest", "outside"]);
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

    test("links are kept as links wherever they point: a venv, node_modules/.bin, the chain", async () => {
      const d4 = "top/d0/d1/d2/d3/d4";
      const chain = [member({ name: `${d4}/b1`, type: "symlink", linkname: ".." })];
      for (let n = 2; n <= 7; n++)
        chain.push(member({ name: `${d4}/b${n}`, type: "symlink", linkname: `b${n - 1}/..` }));
      await pull([
        member({ name: "top/.venv/bin/python3", type: "symlink", linkname: "/usr/bin/python3" }),
        member({ name: "top/node_modules/.bin/mocha", type: "symlink", linkname: "../m/x.js" }),
        member({ name: "top/out", type: "symlink", linkname: join(root, "outside") }),
        ...chain,
        member({ name: `${d4}/host`, type: "symlink", linkname: "b7/outside/sentinel" }),
      ]);
      assert.equal(readlinkSync(join(dest, ".venv/bin/python3")), "/usr/bin/python3");
      assert.equal(readlinkSync(join(dest, "node_modules/.bin/mocha")), "../m/x.js");
      assert.equal(readlinkSync(join(dest, "d0/d1/d2/d3/d4/host")), "b7/outside/sentinel");
      assert.equal(sentinel(), "untouched");
    });

    test("a refused pull leaves an existing destination as it was", async () => {
      mkdirSync(dest);
      writeFileSync(join(dest, "mine.txt"), "mine");
      await assert.rejects(
        pull(
          [
            member({ name: "top/a/f" }, Buffer.from("x")),
            member({ name: "top/pipe", type: "fifo" }),
          ],
          { force: true },
        ),
        /a fifo/,
      );
      assert.deepEqual(readdirSync(dest), ["mine.txt"]);
      assert.deepEqual(readdirSync(root).sort(), ["dest", "outside"]);
    });

    test("a merge checks every conflict before it moves anything", async () => {
      mkdirSync(join(dest, "sub"), { recursive: true });
      writeFileSync(join(dest, "sub/z.txt"), "mine");
      await assert.rejects(
        pull(
          [
            member({ name: "top/a.txt" }, Buffer.from("a")),
            member({ name: "top/sub/z.txt" }, Buffer.from("theirs")),
          ],
          { merge: true },
        ),
        (e) => e instanceof Conflict && /z\.txt already exists/.test(e.message),
      );
      assert.deepEqual(readdirSync(dest), ["sub"]);
    });

    test("exclude leaves out what matches, by gitignore rules", async () => {
      await pull(
        [
          member({ name: "top/.venv/bin/python3", type: "symlink", linkname: "/usr/bin/python3" }),
          member({ name: "top/src/app.py" }, Buffer.from("print()")),
          member({ name: "top/src/app.pyc" }, Buffer.from("junk")),
        ],
        { exclude: [".venv/", "*.pyc"] },
      );
      assert.deepEqual(readdirSync(dest, { recursive: true }).sort(), ["src", "src/app.py"]);
    });

    test("a name sent twice is refused", async () => {
      await assert.rejects(
        pull([
          member({ name: "top/f" }, Buffer.from("x")),
          member({ name: "top/f", type: "symlink", linkname: "g" }),
        ]),
        /twice/,
      );
      assert.deepEqual(readdirSync(root).sort(), ["outside"]);
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
      // An earlier pull's link (or the user's): with force it is replaced, never entered.
      mkdirSync(dest);
      symlinkSync(join(root, "outside"), join(dest, "out"));
      await pull([member({ name: "top/out/sentinel" }, Buffer.from("overwritten"))], {
        force: true,
      });
      assert.equal(sentinel(), "untouched");
      assert.equal(lstatSync(join(dest, "out")).isDirectory(), true);
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
