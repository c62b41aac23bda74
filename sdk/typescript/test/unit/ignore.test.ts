// .paddockignore / exclude patterns match as gitignore does: the cases the Python SDK's pathspec
// is checked against too (spec/ignore_cases.json; a path ending in / is a folder).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { IgnoreSpec } from "../../src/ignore.js";

interface Case {
  patterns: string[];
  path: string;
  excluded: boolean;
}

const { cases } = JSON.parse(
  readFileSync(new URL("../../../../../spec/ignore_cases.json", import.meta.url), "utf8"),
) as { cases: Case[] };

test("the shared table is there", () => assert.ok(cases.length >= 20));

for (const { patterns, path, excluded } of cases) {
  test(`${JSON.stringify(patterns)} ${excluded ? "excludes" : "keeps"} ${path}`, () => {
    assert.equal(new IgnoreSpec(patterns).matches(path), excluded);
  });
}
