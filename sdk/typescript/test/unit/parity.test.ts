// Parity with the API: every operation in spec/openapi.json has a Client method, and every public
// Client method sends an operation (operations.json is the map, checked both ways here). Also
// the Python SDK's error tree and the package's version.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import * as sdk from "@paddock/sdk";

import { REPO, ROOT } from "./helpers.js";

interface ParityMap {
  operations: Record<string, string[]>;
  not_in_sdk: Record<string, string>;
  not_in_spec: Record<string, string>;
}

const spec = JSON.parse(readFileSync(join(REPO, "spec/openapi.json"), "utf8")) as {
  paths: Record<string, Record<string, { operationId: string }>>;
};
const map = JSON.parse(readFileSync(join(ROOT, "operations.json"), "utf8")) as ParityMap;
const specOperations = Object.entries(spec.paths).flatMap(([path, methods]) =>
  Object.entries(methods).map(([method, op]) => ({
    key: `${method.toUpperCase()} ${path}`,
    id: op.operationId,
  })),
);
const methods = Object.getOwnPropertyNames(sdk.Client.prototype).filter(
  (name) => name !== "constructor",
);

test("every operation in the spec has a Client method", () => {
  const missing = specOperations.filter(
    (op) => !(op.key in map.operations) && !(op.key in map.not_in_sdk),
  );
  assert.deepEqual(missing, [], "add these to operations.json and give each a method");
});

test("every operation in the map is in the spec (none renamed or removed)", () => {
  const keys = new Set(specOperations.map((op) => op.key));
  assert.deepEqual(
    [...Object.keys(map.operations), ...Object.keys(map.not_in_sdk)].filter(
      (key) => !keys.has(key),
    ),
    [],
  );
});

test("every method the map names exists on Client", () => {
  const named = [...Object.values(map.operations).flat(), ...Object.keys(map.not_in_spec)];
  assert.deepEqual(
    named.filter((name) => !methods.includes(name)),
    [],
  );
});

test("every public Client method is in the map", () => {
  const named = new Set([...Object.values(map.operations).flat(), ...Object.keys(map.not_in_spec)]);
  assert.deepEqual(
    methods.filter((name) => !named.has(name)),
    [],
  );
});

test("the error tree mirrors the Python SDK's: same classes, same codes, same parents", () => {
  const python = readFileSync(join(REPO, "src/paddock/wire/errors.py"), "utf8");
  const classes = [
    ...python.matchAll(/^class (\w+)\((\w+)\):\n(?:\s+"""[^]*?"""\n)?\s+code = "(\w+)"/gm),
  ];
  assert.ok(classes.length >= 12, "the Python error classes were not found");
  const exported = sdk as unknown as Record<string, typeof sdk.PaddockError>;
  for (const [, name, parent, code] of classes) {
    const cls = exported[name!];
    assert.ok(cls, `${name} is not exported`);
    assert.equal(cls.code, code, `${name}.code`);
    assert.equal(
      Object.getPrototypeOf(cls),
      exported[parent === "Exception" ? "Error" : parent!] ?? Error,
      `${name}'s parent`,
    );
  }
});

test("errorFromBody maps codes, and unknown codes by status", () => {
  const body = (code: string) => ({ error: { code, message: "m", details: { x: 1 } } });
  assert.ok(sdk.errorFromBody(404, body("not_found")) instanceof sdk.NotFound);
  assert.ok(sdk.errorFromBody(413, body("payload_too_large")) instanceof sdk.InvalidRequest);
  assert.ok(sdk.errorFromBody(503, body("isolation_failed")) instanceof sdk.IsolationFailed);
  assert.ok(sdk.errorFromBody(409, body("something_new")) instanceof sdk.Conflict);
  assert.ok(sdk.errorFromBody(418, body("something_new")) instanceof sdk.InvalidRequest);
  assert.ok(sdk.errorFromBody(500, "oops") instanceof sdk.ServerError);
  const e = sdk.errorFromBody(409, body("invalid_state"));
  assert.equal(e.code, "invalid_state");
  assert.equal(e.name, "InvalidState");
  assert.deepEqual(e.details, { x: 1 });
});

test("an answer that is not Paddock's names the URL, as the Python SDK does", () => {
  const where = { server: "http://example.test", path: "/v1/status" };
  assert.equal(
    sdk.errorFromBody(404, "", where).message,
    "http://example.test does not look like a Paddock server (HTTP 404 for /v1/status)",
  );
  assert.equal(
    sdk.errorFromBody(502, "<html>\n  Bad   Gateway</html>", { path: "/v1/boxes" }).message,
    "server answered HTTP 502 for /v1/boxes: <html> Bad Gateway</html>",
  );
});

test("VERSION is package.json's", () => {
  const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string };
  assert.equal(sdk.VERSION, pkg.version);
});
