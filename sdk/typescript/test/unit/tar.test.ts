// The tar format both ways: what push writes, the reader reads back (ustar, PAX, GNU long
// names), and a broken archive is an InvalidRequest, never a hang or a crash.
import assert from "node:assert/strict";
import { test } from "node:test";

import { InvalidRequest } from "../../src/errors.js";
import { BLOCK, END, encodeHeader, type TarHeader, TarReader } from "../../src/tar.js";
import { fixChecksum, member, pieces } from "./helpers.js";

async function readAll(archive: Buffer, pieceSize?: number) {
  const reader = new TarReader(pieces(archive, pieceSize));
  const out: (TarHeader & { data: string })[] = [];
  for (let h = await reader.next(); h; h = await reader.next()) {
    const parts: Buffer[] = [];
    for await (const p of reader.content()) parts.push(p);
    out.push({ ...h, data: Buffer.concat(parts).toString("utf8") });
  }
  return out;
}

test("what the writer writes, the reader reads back, in chunks of any size", async () => {
  const long = `${"d".repeat(120)}/${"e".repeat(90)}/${"f".repeat(150)}.txt`;
  const archive = Buffer.concat([
    member({ name: "top", type: "dir", mode: 0o755 }),
    member({ name: "top/a.txt", mode: 0o600 }, Buffer.from("hello")),
    member({ name: "top/ünï.txt" }, Buffer.from("ü")),
    member({ name: `top/${long}` }, Buffer.from("long")),
    member({ name: "top/link", type: "symlink", linkname: `../${"x".repeat(150)}` }),
    member({ name: "top/hard", type: "link", linkname: "top/a.txt" }),
    END,
  ]);
  for (const size of [1, 7, 512, 100_000]) {
    const got = await readAll(archive, size);
    assert.deepEqual(
      got.map((m) => [m.name, m.type, m.data, m.linkname]),
      [
        ["top", "dir", "", ""],
        ["top/a.txt", "file", "hello", ""],
        ["top/ünï.txt", "file", "ü", ""],
        [`top/${long}`, "file", "long", ""],
        ["top/link", "symlink", "", `../${"x".repeat(150)}`],
        ["top/hard", "link", "", "top/a.txt"],
      ],
    );
    assert.equal(got[1]!.mode, 0o600);
    assert.equal(got[1]!.mtime, 1_700_000_000);
  }
});

test("a name that fits ustar's prefix field needs no PAX header", () => {
  const name = `${"p".repeat(120)}/${"n".repeat(90)}`;
  assert.equal(
    encodeHeader({
      name,
      type: "file",
      mode: 0o644,
      uid: 0,
      gid: 0,
      size: 0,
      mtime: 0,
      linkname: "",
    }).length,
    BLOCK,
  );
});

test("GNU long names (type L) are read", async () => {
  const name = "top/" + "g".repeat(200);
  const longName = Buffer.from(name + "\0");
  const gnu = member({ name: "././@LongLink", size: longName.length }, longName);
  gnu[156] = "L".charCodeAt(0);
  fixChecksum(gnu);
  const archive = Buffer.concat([gnu, member({ name: name.slice(0, 100) }, Buffer.from("x")), END]);
  const got = await readAll(archive);
  assert.equal(got[0]!.name, name);
});

test("a bad checksum, a truncated archive and a truncated file are broken archives", async () => {
  const good = member({ name: "top/a" }, Buffer.from("data"));
  const bad = Buffer.from(good);
  bad[0] = "X".charCodeAt(0);
  await assert.rejects(
    readAll(Buffer.concat([bad, END])),
    (e) => e instanceof InvalidRequest && /checksum/.test(e.message),
  );
  await assert.rejects(readAll(good.subarray(0, 300)), /broken archive: it ends inside a header/);
  await assert.rejects(readAll(good.subarray(0, 514)), /broken archive: it ends inside a file/);
});

test("an archive that simply stops after a member (no end blocks) ends cleanly", async () => {
  const got = await readAll(member({ name: "top/a" }, Buffer.from("data")));
  assert.equal(got.length, 1);
});
