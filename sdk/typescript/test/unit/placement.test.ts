// docker cp's placement rules, the table the Python SDK checks too (spec/placement_cases.json):
// both SDKs land every push and pull alike.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, test } from "node:test";

import { InvalidRequest, NotFound, type PaddockError } from "../../src/errors.js";
import { type Dest, type Kind, land, parentOf, type Source } from "../../src/placement.js";

interface SourceCase {
  path: string;
  name: string;
  kind: Kind;
}
interface DestCase {
  path: string;
  kind: Kind | null;
  parent: Kind | null;
}
type Landed = { path: string; merge: boolean };

const CASES = JSON.parse(
  readFileSync(new URL("../../../../../spec/placement_cases.json", import.meta.url), "utf8"),
) as {
  where: string;
  lands: { source: SourceCase; dest: DestCase; landing: Landed }[];
  refused: { source: SourceCase; dest: DestCase; error: string; message: string }[];
  several: {
    sources: SourceCase[];
    into_missing: DestCase;
    into_folder: DestCase;
    expected: Landed[];
    onto_file: [DestCase, string, string];
    missing_parent: [DestCase, string, string];
  };
  parents: [string, string][];
};
const ERRORS: Record<string, new (message: string) => PaddockError> = { InvalidRequest, NotFound };

const src = (c: SourceCase): Source => ({ ...c, local: false });
const box = (c: DestCase): Dest => ({ ...c, local: false, where: CASES.where });

function refuses(fn: () => unknown, error: string, message: string): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof ERRORS[error]!, `${String(err)} is not ${error}`);
    assert.ok((err as Error).message.includes(message), (err as Error).message);
    return true;
  });
}

describe("placement (docker cp's rules)", () => {
  test("where each copy lands", () => {
    for (const c of CASES.lands) assert.deepEqual(land(src(c.source), box(c.dest)), c.landing);
  });

  test("what is refused, and why", () => {
    for (const c of CASES.refused) {
      refuses(() => land(src(c.source), box(c.dest)), c.error, c.message);
    }
  });

  test("the folder that holds a path", () => {
    for (const [p, parent] of CASES.parents) assert.equal(parentOf(p, false), parent);
  });
});
