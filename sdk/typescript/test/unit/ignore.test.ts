// .paddockignore / exclude patterns match as gitignore (and the Python SDK's pathspec) do.
import assert from "node:assert/strict";
import { test } from "node:test";

import { IgnoreSpec } from "../../src/ignore.js";

const cases: [string[], string, boolean][] = [
  [["*.log"], "a.log", true],
  [["*.log"], "deep/er/a.log", true],
  [["*.log"], "a.log.txt", false],
  [["node_modules/"], "node_modules/", true],
  [["node_modules/"], "pkg/node_modules/", true],
  [["node_modules/"], "node_modules", false], // a file of that name: only folders match
  [["/build"], "build/", true],
  [["/build"], "src/build/", false],
  [["docs/*.md"], "docs/a.md", true],
  [["docs/*.md"], "docs/x/a.md", false],
  [["docs/*.md"], "x/docs/a.md", false],
  [["**/cache"], "a/b/cache/", true],
  [["a/**/z"], "a/z", true],
  [["a/**/z"], "a/b/c/z", true],
  [["a/**"], "a/b/c", true],
  [["*.log", "!keep.log"], "keep.log", false],
  [["*.log", "!keep.log"], "other.log", true],
  [["f?o"], "foo", true],
  [["f?o"], "f/o", false],
  [["[ab].txt"], "b.txt", true],
  [["[!ab].txt"], "c.txt", true],
  [["[!ab].txt"], "a.txt", false],
  [["# comment", "", "\\#hash"], "#hash", true],
  [["trailing   "], "trailing", true],
  [["secret"], "secret/inner/file", true],
];

for (const [patterns, path, excluded] of cases) {
  test(`${JSON.stringify(patterns)} ${excluded ? "excludes" : "keeps"} ${path}`, () => {
    assert.equal(new IgnoreSpec(patterns).matches(path), excluded);
  });
}
