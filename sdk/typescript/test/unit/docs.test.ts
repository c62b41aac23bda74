// docs/sdk-typescript.md shows the examples verbatim: every `ts` block in it is one of
// examples/*.ts, and every example is shown. The examples themselves are compiled against the
// package's types (tsconfig.test.json) and run against a live server (test/live/examples.test.ts).
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { REPO, ROOT } from "./helpers.js";

test("every ts block of docs/sdk-typescript.md is an example file, and every example is shown", () => {
  const doc = readFileSync(join(REPO, "docs/sdk-typescript.md"), "utf8");
  const blocks = [...doc.matchAll(/^```ts\n([^]*?)^```$/gm)].map((m) => m[1]!);
  const dir = join(ROOT, "examples");
  const examples = new Map(
    readdirSync(dir)
      .filter((f) => f.endsWith(".ts"))
      .map((f) => [readFileSync(join(dir, f), "utf8"), f]),
  );
  const strays = blocks.filter((b) => !examples.has(b));
  assert.deepEqual(
    strays,
    [],
    "a ts block that is not an example file (copy it into examples/, or fix it)",
  );
  const shown = new Set(blocks);
  assert.deepEqual(
    [...examples].filter(([text]) => !shown.has(text)).map(([, f]) => f),
    [],
    "examples not in the doc",
  );
});
