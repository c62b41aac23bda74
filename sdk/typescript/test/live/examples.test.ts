// The examples in examples/ (which docs/sdk-typescript.md shows verbatim, see
// test/unit/docs.test.ts) run against the live server, each in a small project folder, and
// leave no box behind (test files run one at a time, --test-concurrency=1 in package.json, so the
// boxes of other tests do not count as an example's).
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";
import { promisify } from "node:util";

import { Client } from "@paddock/sdk";

import { ROOT } from "../unit/helpers.js";

const run = promisify(execFile);
const live = Boolean(process.env.PADDOCK_URL && process.env.PADDOCK_TOKEN);
const examples = readdirSync(join(ROOT, "examples"))
  .filter((f) => f.endsWith(".ts"))
  .sort();

/** What each example must print (besides exiting 0), and files it must leave. */
const expected: Record<string, { stdout: RegExp[]; files?: string[] }> = {
  "quickstart.ts": {
    stdout: [/^0 Makefile\nmain\.c\n/m, /pulled into .*dist/],
    files: ["dist/app"],
  },
  "stream.ts": { stdout: [/^1\n2\n3\nexit code 0\n/, /invalid_state - /] },
  "snapshots.ts": { stdout: [/^v1\n\nv2\n/] },
  "network.ts": { stdout: [/^refused\n/, /dns refused example\.com/, /mode: 'deny-all'/] },
  "desktop.ts": {
    stdout: [/watch it in a browser: http.*\/desktop\//],
    files: ["before.png", "after.png"],
  },
};

describe(
  "examples",
  { skip: !live && "set PADDOCK_URL and PADDOCK_TOKEN to run against a live paddockd" },
  () => {
    test("every example has expectations here", () => {
      assert.deepEqual(examples, Object.keys(expected).sort());
    });

    for (const name of examples) {
      test(name, async () => {
        const project = mkdtempSync(join(tmpdir(), "paddock-ts-example-"));
        writeFileSync(join(project, "main.c"), "int main(void) { return 0; }\n");
        writeFileSync(
          join(project, "Makefile"),
          "build:\n\tmkdir -p dist && cc -o dist/app main.c\n",
        );
        const c = new Client();
        const before = new Set((await c.listBoxes()).map((b) => b.name));
        try {
          const script = join(ROOT, "build/examples", name.replace(/\.ts$/, ".js"));
          const { stdout } = await run(process.execPath, [script], {
            cwd: project,
            timeout: 90_000,
          }).catch((err) => {
            throw new Error(`${name} failed:\n${err.stdout}\n${err.stderr}`);
          });
          for (const pattern of expected[name]!.stdout) assert.match(stdout, pattern);
          for (const file of expected[name]!.files ?? [])
            assert.ok(existsSync(join(project, file)), file);
          if (name === "desktop.ts") {
            assert.equal(readFileSync(join(project, "after.png")).subarray(1, 4).toString(), "PNG");
          }
          const left = (await c.listBoxes()).filter((b) => !before.has(b.name));
          assert.deepEqual(
            left.map((b) => b.name),
            [],
            "the example left boxes behind",
          );
        } finally {
          c.close();
          rmSync(project, { recursive: true, force: true });
        }
      });
    }
  },
);
